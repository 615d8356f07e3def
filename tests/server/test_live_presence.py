"""``live`` lists the games someone is at: a game whose last connection closed (its player's, and no
spectator's) leaves the list within a second, on every node (not at the end of the 10-minute live window),
and a game dealt is listed at once."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from server.app import App
from server.play.presence import FLUSH_WAIT_SECONDS
from server.storage import LiveGame, repository
from server.storage.commit_backends import SetLiveRooms, Write
from tests.support.waiting import eventually
from tests.support.wsclient import WsClient, player

CODE = "EO1-C8-AAAAAFA"
#: What the web client promises a spectator: a closed browser's game gone this soon after it closed.
PROMPT_S = 1.0


async def listed(client: WsClient) -> list[str]:
    return [entry["game"] for entry in (await client.request("live", limit=50))["games"]]


async def gone_within(client: WsClient, game: str, closed_at: float) -> float:
    async def absent() -> bool:
        return game not in await listed(client)

    await eventually(absent, f"{game} left the live list", timeout=5)
    took = time.monotonic() - closed_at
    assert took < PROMPT_S, f"{game} stayed listed {took:.2f} s after its connection closed"
    return took


async def test_a_closed_players_game_leaves_the_list_at_once(url: str) -> None:
    owner = await player(url, name="Ann")
    lister = await player(url, name="Bob")
    game = (await owner.request("new_game", code=CODE))["game"]
    assert game in await listed(lister)  # dealt: listed by the next live, no wait
    await owner.close()
    await gone_within(lister, game, time.monotonic())
    await lister.close()


async def test_a_watched_game_stays_listed_until_its_last_spectator_leaves(url: str) -> None:
    owner = await player(url, name="Ann")
    spectator = await player(url, name="Cleo")
    lister = await player(url, name="Bob")
    game = (await owner.request("new_game", code=CODE))["game"]
    await spectator.request("watch", game=game)
    await owner.close()
    assert game in await listed(lister)  # someone is still there
    await spectator.request("unwatch", game=game)
    await gone_within(lister, game, time.monotonic())
    again = await player(url, token=owner.token)
    assert (await again.request("resume", game=game))["v"] == 0
    assert game in await listed(lister)  # back with its player
    for client in (again, spectator, lister):
        await client.close()


async def test_a_stopped_server_leaves_no_rows(app: App, url: str) -> None:
    """A process that stops holds nothing: its rows go with it (a graceful stop; a killed process's rows
    stay only while their games are within the live window)."""
    owner = await player(url, name="Ann")
    game = (await owner.request("new_game", code=CODE))["game"]
    assert await app.registry.presence.flushed()
    async with app.database.connection() as conn:
        assert [g.id for g in await live(conn)] == [game]
    await app.registry.presence.close()
    async with app.database.connection() as conn:
        assert await live(conn) == []
    await owner.close()


async def live(conn: AsyncConnection) -> list[LiveGame]:
    since = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=10)
    return await repository.live_games(conn, active_since=since, after=None, limit=10)


async def test_every_node_drops_a_game_closed_on_another(two_nodes: tuple[App, App]) -> None:
    node_a, node_b = two_nodes
    owner = await player(f"ws://127.0.0.1:{node_a.port}/ws", name="Ann")
    lister = await player(f"ws://127.0.0.1:{node_b.port}/ws", name="Bob")
    game = (await owner.request("new_game", code=CODE))["game"]
    assert await node_a.registry.presence.flushed()
    assert game in await listed(lister)  # played on node A, listed by node B
    await owner.close()
    await gone_within(lister, game, time.monotonic())
    await lister.close()


async def test_the_live_rooms_are_written_by_the_group_commit(
    app: App, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 20 (the hint flood): the presence writer's own transactions on the engine held SQLite's
    write lock for a few turns of the event loop, and the players' commits that met them waited in
    SQLite's busy handler. Its changes now go to the group commit, in the batches of the players'
    writes (on SQLite, through the writer's own connection), and ``live`` sees them as before."""
    handed: list[Write] = []
    submit = app.committer.submit

    def recording(write: Write, done: Any) -> None:
        handed.append(write)
        submit(write, done)

    monkeypatch.setattr(app.committer, "submit", recording)
    owner = await player(url, name="Ann")
    lister = await player(url, name="Bob")
    game = (await owner.request("new_game", code=CODE))["game"]
    assert game in await listed(lister)
    await owner.close()
    await gone_within(lister, game, time.monotonic())
    changes = [write.change for write in handed if isinstance(write, SetLiveRooms)]
    assert any(game in change.held for change in changes)
    assert game in changes[-1].released
    await lister.close()


async def test_live_answers_while_the_live_rooms_cannot_be_written(
    app: App, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write of the live rooms that fails (a bug, a database hiccup) delays ``live`` by at most
    FLUSH_WAIT_SECONDS and stops nothing: the writer retries and catches up."""
    presence = app.registry.presence
    real = presence._store
    failures = 0

    async def failing_twice(write: Write) -> None:
        nonlocal failures
        if failures < 2:
            failures += 1
            raise RuntimeError("a bug in storage")
        await real(write)

    monkeypatch.setattr(presence, "_store", failing_twice)
    owner = await player(url, name="Ann")
    lister = await player(url, name="Bob")
    game = (await owner.request("new_game", code=CODE))["game"]
    started = time.monotonic()
    assert game not in await listed(lister)  # not written yet: answered without it
    assert time.monotonic() - started < FLUSH_WAIT_SECONDS + 0.5

    async def back() -> bool:
        return game in await listed(lister)

    await eventually(back, "the writer caught up", timeout=5)
    assert failures == 2
    for client in (owner, lister):
        await client.close()
