"""Shared deals are sealed, over real WebSocket connections: nobody who can still
play today's daily sees another player's moves on it, live or finished (``watch`` is refused, ``live``
marks it sealed), until they have finished it themselves or its UTC day is over; other games are
unaffected. See docs/fair-play.md."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from engine import Game
from server import dispatch as requests
from server.errors import ErrorCode, Refusal
from server.services.fair_play import FairPlay
from server.storage import Database, GameDaily, GameStart, PlayerRecord, repository
from tests.support import dbutil, serverutil
from tests.support.wsclient import WsClient, player

FREE_CODE = "EO1-C8-AAAAAFA"


async def play_one(client: WsClient, snapshot: dict[str, Any], moves_before: int = 0) -> dict[str, Any]:
    """Play a legal move of the game of ``snapshot``, after ``moves_before`` already played this way."""
    game = Game.from_code(snapshot["code"])
    for _ in range(moves_before + 1):
        move = min(game.legal_moves, key=str)
        game.play(move)
    fields = {"from": move.source.symbol(), "to": move.target.symbol(), "n": move.count}
    ack = await client.request("move", game=snapshot["game"], **fields)
    assert ack["type"] == "ack", ack
    return ack


async def started(client: WsClient, **fields: Any) -> dict[str, Any]:
    """A new game with one move played."""
    snapshot = await client.request("new_game", **fields)
    assert snapshot["type"] == "snapshot", snapshot
    await play_one(client, snapshot)
    return snapshot


async def resign(client: WsClient, game: str) -> None:
    assert (await client.request("resign", game=game))["type"] == "game_over"


def assert_sealed(reply: dict[str, Any], game: str, opens: str | None) -> None:
    assert reply["type"] == "error" and reply["code"] == "forbidden", reply
    assert game in reply["message"] and "sealed" in reply["message"], reply
    if opens is not None:
        assert opens in reply["message"], reply


def midnight_after(day: dt.date) -> str:
    return f"{(day + dt.timedelta(days=1)).isoformat()}T00:00:00.000Z"


async def live_sealed(client: WsClient) -> dict[str, bool]:
    """Each listed game: sealed to ``client`` or not (every entry keeps its code: a daily's is public)."""
    page = await client.request("live", limit=100)
    assert page["type"] == "live", page
    assert all(entry["sealed"] is True for entry in page["games"] if "sealed" in entry), page
    return {entry["game"]: "sealed" in entry for entry in page["games"]}


async def test_the_daily_is_sealed_to_whoever_has_not_finished_it(url: str) -> None:
    """B cannot watch A's daily game live nor once finished, and ``live`` marks it sealed to B (not to
    A), while A's free game is watchable and not sealed; once B has finished the daily, it opens."""
    ann, bob = await player(url, name="Ann"), await player(url, name="Bob")
    today = dt.datetime.now(dt.UTC).date()
    daily = await started(ann, daily=True)
    free = await started(ann, code=FREE_CODE)

    assert_sealed(await bob.request("watch", game=daily["game"]), daily["game"], midnight_after(today))
    assert await live_sealed(bob) == {daily["game"]: True, free["game"]: False}
    assert await live_sealed(ann) == {daily["game"]: False, free["game"]: False}
    assert (await bob.request("watch", game=free["game"]))["type"] == "snapshot"
    assert (await ann.request("watch", game=daily["game"]))["type"] == "snapshot", "one's own game"

    await resign(ann, daily["game"])  # finished: still sealed
    assert_sealed(await bob.request("watch", game=daily["game"]), daily["game"], midnight_after(today))

    mine = await started(bob, daily=True)  # playing it is not finishing it
    assert mine["code"] == daily["code"]
    assert_sealed(await bob.request("watch", game=daily["game"]), daily["game"], None)
    await resign(bob, mine["game"])
    opened = await bob.request("watch", game=daily["game"])
    assert opened["type"] == "snapshot" and opened["status"] == "resigned" and opened["v"] == 1
    await asyncio.gather(ann.close(), bob.close())


async def test_a_live_daily_game_opens_once_the_watcher_finishes_the_daily(url: str) -> None:
    """A finished daily opens the games still being played on it, diffs included; a daily of another
    variant stays sealed."""
    ann, bob = await player(url, name="Ann"), await player(url, name="Bob")
    daily8 = await started(ann, daily=True)
    daily4 = await started(ann, daily=True, cells=4)
    mine = await started(bob, daily=True)
    await resign(bob, mine["game"])

    assert await live_sealed(bob) == {daily8["game"]: False, daily4["game"]: True}
    assert_sealed(await bob.request("watch", game=daily4["game"]), daily4["game"], "(4 cells)")
    watched = await bob.request("watch", game=daily8["game"])
    assert watched["type"] == "snapshot" and watched["v"] == 1
    await play_one(ann, daily8, moves_before=1)
    diff = await bob.next_push()
    assert diff["type"] == "diff" and diff["game"] == daily8["game"] and diff["v"] == 2
    await asyncio.gather(ann.close(), bob.close())


async def test_a_finished_daily_cannot_be_played_again_for_the_board(url: str) -> None:
    """One finished game of a daily each (the finished may watch everyone's): a second daily new_game
    of that variant is refused; another variant, and the same deal as a free game, are not."""
    ann = await player(url, name="Ann")
    first = await started(ann, daily=True)
    await resign(ann, first["game"])
    refused = await ann.request("new_game", daily=True)
    assert refused["type"] == "error" and refused["code"] == "forbidden", refused
    assert "you have finished the daily" in refused["message"], refused
    assert (await ann.request("new_game", daily=True, cells=4))["type"] == "snapshot"
    again = await ann.request("new_game", code=first["code"])
    assert again["type"] == "snapshot" and again["code"] == first["code"]
    await ann.close()


async def test_the_end_of_the_day_opens_the_daily(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """At the next UTC midnight yesterday's daily opens to anyone without an unfinished game of it;
    whoever still plays it (it still counts on yesterday's board) waits until they finish. (``live``
    looks back two days here, so that today's games are still listed at the faked midnight.)"""
    async with serverutil.running_app(database_url, live_window_minutes=2 * 24 * 60) as app:
        await _day_ends(serverutil.ws_url(app), monkeypatch)


async def _day_ends(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ann, bob, cid = (
        await player(url, name="Ann"),
        await player(url, name="Bob"),
        await player(url, name="Cid"),
    )
    today = dt.datetime.now(dt.UTC).date()
    daily = await started(ann, daily=True)
    bobs = await started(bob, daily=True)
    assert_sealed(await cid.request("watch", game=daily["game"]), daily["game"], midnight_after(today))

    midnight = dt.datetime.combine(today + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)
    monkeypatch.setattr(requests, "utc_now", lambda: midnight)
    assert (await cid.request("watch", game=daily["game"]))["type"] == "snapshot"
    assert (await live_sealed(cid))[daily["game"]] is False
    assert_sealed(await bob.request("watch", game=daily["game"]), daily["game"], None)
    assert (await live_sealed(bob))[daily["game"]] is True
    await resign(bob, bobs["game"])
    assert (await bob.request("watch", game=daily["game"]))["type"] == "snapshot"
    await asyncio.gather(ann.close(), bob.close(), cid.close())


async def test_a_refused_watch_is_not_counted_and_bad_ids_are_still_not_found(url: str) -> None:
    """A sealed game refused is not followed (no diffs come, no watch slot is taken); an unknown game
    id is not_found as before, a malformed one bad_request."""
    ann, bob = await player(url, name="Ann"), await player(url, name="Bob")
    daily = await started(ann, daily=True)
    assert_sealed(await bob.request("watch", game=daily["game"]), daily["game"], None)
    await play_one(ann, daily, moves_before=1)
    assert bob.pushed.empty()
    with pytest.raises(TimeoutError):
        await bob.next_push(timeout=0.3)
    assert (await bob.request("watch", game="no-such-game"))["code"] == "not_found"
    assert (await bob.request("watch", game="bad id!"))["code"] == "bad_request"
    await asyncio.gather(ann.close(), bob.close())


async def test_what_daily_a_game_plays_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A game's daily never changes: watching it again (a resync after a gap) reads nothing for a free
    game, and only the viewer's standing for a daily game; an unknown game is not remembered."""
    url = await asyncio.to_thread(dbutil.migrated_sqlite_url, tmp_path)
    database = Database.create(url, sqlite_synchronous="OFF")
    t0 = dt.datetime.now(dt.UTC)
    async with database.transaction() as conn:
        for player_id in ("ann", "bob"):
            await repository.insert_player(conn, PlayerRecord(player_id, player_id, f"{player_id:0>64}", t0))
        for game_id, day in (("free", None), ("daily", t0.date())):
            await repository.insert_game(conn, GameStart(game_id, "ann", FREE_CODE, 8, day, t0))
    reads: list[str] = []
    calls = repository.game_daily

    async def counted(conn: AsyncConnection, game_id: str) -> GameDaily | None:
        reads.append(game_id)
        return await calls(conn, game_id)

    monkeypatch.setattr(repository, "game_daily", counted)
    fair_play = FairPlay(database)
    try:
        for _ in range(3):
            await fair_play.check_watch("bob", "free", t0)
            await fair_play.check_watch("bob", "nothing", t0)
            with pytest.raises(Refusal) as refused:
                await fair_play.check_watch("bob", "daily", t0)
            assert refused.value.code is ErrorCode.FORBIDDEN
        assert reads == ["free", "nothing", "daily", "nothing", "nothing"]
    finally:
        await database.dispose()
