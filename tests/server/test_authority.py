"""What a client sees is what is stored: snapshots, acks and diffs only of committed state; one reply per
action for a connection that plays and watches; games bounded in length; finished games' positions
replayed once, off the event loop; ``live`` read from the database. One node, on both databases."""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3
import threading
from typing import Any

import pytest
from sqlalchemy import update

from engine import Game
from server.app import App
from server.play import game_room as room_module
from server.play import registry as rooms_module
from server.play.game_room import FinishedGame
from server.play.registry import GameRoomDriver
from server.play.replay import RESIGN, replay_stored
from server.storage import GameResult, GameStart, PlayerRecord, StoredGame, commit_backends, repository
from server.storage.tables import games
from tests.support.wsclient import WsClient, player

CODE = "EO1-C8-AAAAAFA"
T1_C5 = {"from": "t1", "to": "c5"}
C5_T1 = {"from": "c5", "to": "t1"}


class CommitGate:
    """Holds the next action append until ``fail()``, then fails it as a lost database would (on SQLite
    the plain driver's append on the writer thread, on PostgreSQL the insert inside the group commit)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered = asyncio.Event()
        self._release = asyncio.Event()
        self._released = threading.Event()  # the same, for the writer thread
        loop = asyncio.get_running_loop()
        real_sqlite_append = commit_backends._append
        real_insert = repository.insert_actions

        def hold_then_fail_on_thread(*args: Any) -> None:
            if self._released.is_set():
                return real_sqlite_append(*args)
            loop.call_soon_threadsafe(self.entered.set)
            self._released.wait(30)
            raise sqlite3.OperationalError("disk I/O")

        async def hold_then_fail(*args: Any, **kwargs: Any) -> None:
            if self._release.is_set():
                return await real_insert(*args, **kwargs)
            self.entered.set()
            await self._release.wait()
            raise OSError("connection lost")

        monkeypatch.setattr(commit_backends, "_append", hold_then_fail_on_thread)
        monkeypatch.setattr(repository, "insert_actions", hold_then_fail)

    def fail(self) -> None:
        self._release.set()
        self._released.set()


async def test_resume_during_a_failing_commit_shows_only_committed_state(
    app: App, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect 2: with a commit in flight, resume returned the uncommitted position (v=1, the card in its
    cell); the commit then failed and the next resume said v=1 was something else."""
    owner = await player(url)
    game = (await owner.request("new_game", code=CODE))["game"]
    other_tab = await player(url, token=owner.token)
    assert (await other_tab.request("resume", game=game))["v"] == 0

    gate = CommitGate(monkeypatch)
    await owner.send({"type": "move", "id": "m", "game": game, "v": 0, **T1_C5})
    await asyncio.wait_for(gate.entered.wait(), 10)
    resume_found_its_room = asyncio.Event()
    find = app.registry.find

    async def noting_find(game_id: str) -> GameRoomDriver | FinishedGame:
        found = await find(game_id)
        resume_found_its_room.set()  # the resume runs on until it waits (on the room, or for nothing)
        return found

    monkeypatch.setattr(app.registry, "find", noting_find)
    await other_tab.send({"type": "resume", "id": "r", "game": game})
    await asyncio.wait_for(resume_found_its_room.wait(), 10)  # it arrived while the commit is in flight
    gate.fail()

    refused = await owner.recv()
    assert refused["type"] == "error" and refused["code"] == "unavailable", refused
    snapshot = await other_tab.recv()
    assert snapshot["type"] == "snapshot" and snapshot["id"] == "r", snapshot
    assert snapshot["v"] == 0 and snapshot["cells"][4] is None, "a snapshot of what was never stored"
    retried = await owner.request("move", game=game, v=0, **T1_C5)
    assert retried["type"] == "ack" and retried["v"] == 1
    diff = await other_tab.next_push()
    assert diff["type"] == "diff" and diff["v"] == 1, "the only v=1 anyone sees is the stored one"
    for client in (owner, other_tab):
        await client.close()


async def test_a_connection_that_plays_and_watches_gets_its_ack_and_no_diff(url: str) -> None:
    """Issue 9 item 3: a connection both viewing (its own game) and watching it got ack and diff."""
    owner = await player(url)
    game = (await owner.request("new_game", code=CODE))["game"]
    assert (await owner.request("watch", game=game))["type"] == "snapshot"
    other_tab = await player(url, token=owner.token)
    await other_tab.request("resume", game=game)

    assert (await owner.request("move", game=game, v=0, **T1_C5))["type"] == "ack"
    assert (await other_tab.next_push())["v"] == 1  # the diff went out to the other connection
    assert (await owner.request("live"))["type"] == "live"  # anything pushed to owner came before this
    assert owner.pushed.empty(), f"also got {owner.pushed.get_nowait()}"
    assert (await owner.request("resign", game=game))["type"] == "game_over"
    assert (await owner.request("live"))["type"] == "live"
    assert owner.pushed.empty(), "game_over was the reply; not pushed again"
    assert (await other_tab.next_push())["type"] == "game_over"
    for client in (owner, other_tab):
        await client.close()


async def test_a_game_is_bounded_in_length_and_can_be_resigned_at_the_bound(
    app: App, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the bound every action (a move, an undo) is refused with illegal_move; resign still ends the
    game, through the fence (its row takes the next version). The bound is lowered for speed here: the
    rate limit makes 2,000 actions take ten seconds."""
    monkeypatch.setattr(room_module, "MAX_GAME_ACTIONS", 6)
    owner = await player(url)
    game = (await owner.request("new_game", code=CODE))["game"]
    for v in range(6):
        assert (await owner.request("move", game=game, v=v, **(T1_C5 if v % 2 == 0 else C5_T1)))["v"] == v + 1
    for type_, fields in (("move", T1_C5), ("undo", {}), ("tap", {"from": "t2"})):
        refused = await owner.request(type_, game=game, **fields)
        assert refused["code"] == "illegal_move" and "6 actions" in refused["message"], refused
    assert (await owner.request("resign", game=game))["type"] == "game_over"
    async with app.database.connection() as conn:
        stored = await repository.load_game(conn, game)
    assert stored is not None and stored.status == "resigned"
    assert stored.actions == ("t1-c5", "c5-t1") * 3 + (RESIGN,)
    await owner.close()


async def store_long_finished_game(app: App, actions: int) -> str:
    """A resigned game of ``actions`` moves stored directly (as one made before the bound would be)."""
    now = dt.datetime.now(dt.UTC)
    game = Game.from_code(CODE)
    notations = ["t1-c5" if v % 2 == 0 else "c5-t1" for v in range(actions)]
    async with app.database.transaction() as conn:
        await repository.insert_player(conn, PlayerRecord("long-player", "long", "1" * 64, now))
        await repository.insert_game(conn, GameStart("long-game", "long-player", CODE, 8, None, now))
        await repository.insert_actions(conn, [("long-game", v, text) for v, text in enumerate(notations, 1)])
        result = GameResult("long-game", "resigned", 0, actions, 0, now, 0, False)
        assert await repository.finish_game(conn, result)
    assert game.v == 0
    return "long-game"


async def test_watching_a_long_finished_game_replays_it_once_off_the_event_loop(
    app: App, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect 3: every watch of a finished game replayed its whole log on the event loop (230-280 ms for
    46,795 actions). Now the first watch replays it in a worker thread and later ones use the cache.
    (bench/bench_watch_flood.py measures a bystander's round trip meanwhile.)"""
    game = await store_long_finished_game(app, 10_000)
    replays: list[str] = []
    real_replay = replay_stored

    def counting_replay(stored: StoredGame) -> Game:
        replays.append(threading.current_thread().name)
        return real_replay(stored)

    monkeypatch.setattr(rooms_module, "replay_stored", counting_replay)
    watchers = [await player(url) for _ in range(4)]

    async def watch_five_times(watcher: WsClient) -> list[dict[str, Any]]:
        return [await watcher.request("watch", game=game) for _ in range(5)]

    snapshots = [s for some in await asyncio.gather(*map(watch_five_times, watchers)) for s in some]
    assert {(s["v"], s["status"], str(s["tableau"])) for s in snapshots} == {
        (10_000, "resigned", str(snapshots[0]["tableau"]))
    }
    assert len(replays) == 1, f"replayed {len(replays)} times"
    assert replays[0] != threading.main_thread().name, "replayed on the event loop's thread"
    for watcher in watchers:
        await watcher.close()


async def test_live_lists_every_recently_active_followed_game_from_the_database(app: App, url: str) -> None:
    """Live lists the unfinished games someone follows, on any node (``live_rooms``), active within
    the window: not only the games some connection of this node follows, and not a game nobody is at
    any more (a closed browser's)."""
    owner = await player(url, name="Ann")
    unfollowed = (await owner.request("new_game", code=CODE))["game"]
    assert (await owner.request("move", game=unfollowed, **T1_C5))["type"] == "ack"
    await owner.request("unwatch", game=unfollowed)  # in no room now: nobody is at this game
    followed = (await owner.request("new_game", code=CODE))["game"]
    finished = (await owner.request("new_game", code=CODE))["game"]
    await owner.request("resign", game=finished)
    idle = (await owner.request("new_game", code=CODE))["game"]  # followed, but idle too long
    async with app.database.transaction() as conn:
        long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=app.settings.live_window_minutes + 1)
        await conn.execute(update(games).where(games.c.id == idle).values(active_at=long_ago))
    spectator = await player(url)
    await spectator.request("watch", game=followed)

    page = await spectator.request("live", limit=1)
    assert [entry["game"] for entry in page["games"]] == [followed] and "next" not in page
    assert page["games"][0]["watchers"] == 1 and page["games"][0]["player"]["name"] == "Ann"
    assert (await owner.request("resume", game=unfollowed))["v"] == 1  # someone is there again
    page = await spectator.request("live", limit=1)
    assert [entry["game"] for entry in page["games"]] == [followed]  # most recently active first
    rest = await spectator.request("live", limit=1, after=page["next"])
    assert [entry["game"] for entry in rest["games"]] == [unfollowed] and "next" not in rest
    assert (rest["games"][0]["moves"], rest["games"][0]["watchers"]) == (1, 0)  # the committed figures
    refused = await spectator.request("live", after="not-a-cursor")
    assert refused["code"] == "bad_request"
    for client in (owner, spectator):
        await client.close()
