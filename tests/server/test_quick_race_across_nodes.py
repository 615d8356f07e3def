"""Quick match's one pool for the deployment (docs/races.md, Quick match): players waiting on
different nodes or workers are matched with each other, by the same rules as on one.

Real servers and connections: two nodes on PostgreSQL + Redis, ``eightoff serve --workers 2`` on
SQLite (real processes, the supervisor's relay), and two servers in this process on one database
(SQLite or PostgreSQL) whose buses are the two ends of one relay, as a supervisor's workers' are:
there the tests drive both pools' rounds at once (the claim race), put a dead process's wait in the
pool, and leave or disconnect from one node while the wait is held on the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from engine import Deal
from server.app import App
from server.config import Settings
from server.play.bus import RelayBus
from server.play.race.quick_match import QuickMatch
from server.storage import Database, quick_waits
from server.storage.records import QuickWait
from server.storage.tables import quick_waits as quick_waits_table
from server.storage.tables import race_seats
from solver import solve_deal
from tests.server.conftest import RACE_SETTINGS, _two_nodes
from tests.server.test_races import Standings, follow_until
from tests.server.test_races_across_nodes import final, follow_to_the_end, not_home
from tests.server.test_workers import Node, one_client_per_worker
from tests.support import serverutil
from tests.support.waiting import eventually
from tests.support.wire import move_fields
from tests.support.wsclient import SUBPROTOCOLS, WsClient, player

QUICK: dict[str, Any] = {**RACE_SETTINGS, "quick_match_enough": 2}


def pool(app: App) -> QuickMatch:
    return app.services.handler.quick_match


def waits_on(app: App, client: WsClient) -> bool:
    assert client.player is not None
    return pool(app).is_waiting(client.player["id"])


async def formed(client: WsClient) -> Standings:
    """The ``race`` snapshot pushed to a waiting client when its quick race is formed."""
    return Standings(await client.next_push())


async def rows(database: Database) -> list[QuickWait]:
    async with database.connection() as conn:
        return await quick_waits.live_waits(conn, dt.datetime.min.replace(tzinfo=dt.UTC))


async def close_all(*clients: WsClient) -> None:
    for client in clients:
        await client.close()


async def no_push(client: WsClient, seconds: float) -> None:
    """Nothing is pushed to ``client`` for ``seconds`` (it keeps waiting)."""
    with pytest.raises(TimeoutError):
        pushed = await client.next_push(timeout=seconds)
        raise AssertionError(f"pushed {pushed}")


async def race_it_to_a_win(first: WsClient, second: WsClient) -> None:
    """Both are pushed one quick race of C8 (whose empty cells always take a first move that puts no
    card home); it runs, ``first`` moves once and ``second`` plays the solver's
    line to a win; each sees both players' moves and the same end, ``second`` first."""
    assert first.player is not None and second.player is not None
    copies = [await formed(client) for client in (first, second)]
    assert copies[0].race["race"] == copies[1].race["race"]
    assert (copies[0].race["seats"], copies[0].race["public"]) == (2, True)
    everyone = list(zip((first, second), copies, strict=True))
    for client, copy in everyone:
        assert {row["player"]["id"] for row in copy.rows.values()} == {
            first.player["id"],
            second.player["id"],
        }
        await follow_until(client, copy, lambda s: s.race["state"] == "running")
    deal = Deal.from_code(copies[0].race["deal"])
    games = [copy.of(client)["game"] for client, copy in everyone]
    assert (await first.request("resume", game=games[0]))["v"] == 0
    assert (await first.request("move", game=games[0], **move_fields(not_home(deal))))["type"] == "ack"
    for client, copy in everyone:
        await follow_until(client, copy, lambda s: s.of(first)["moves"] == 1)
    assert (await second.request("resume", game=games[1]))["v"] == 0
    solution = list(solve_deal(deal).moves)
    for v, move in enumerate(solution):
        assert (await second.request("move", game=games[1], v=v, **move_fields(move)))["type"] == "ack"
    for client, copy in everyone:
        await follow_to_the_end(client, copy, second.player["id"])
    results = [final(copy) for _, copy in everyone]
    assert results[0] == results[1]
    places = {row[0]: row[1:5] for row in results[0].values()}
    assert places[second.player["id"]] == (1, "won", 52, len(solution))
    assert places[first.player["id"]] == (2, "playing", 0, 1)


@contextlib.asynccontextmanager
async def relayed_pair(database_url: str, **settings: Any) -> AsyncIterator[tuple[App, App]]:
    """Two servers on one database, their buses the two ends of one relay (a supervisor's workers,
    without the supervisor in between)."""
    left, right = socket.socketpair()
    common = {"host": "127.0.0.1", "port": 0, "database_url": database_url, **settings}
    node_a = await App.start(Settings(**common, node="node-a"), bus=RelayBus(left))
    try:
        node_b = await App.start(Settings(**common, node="node-b"), bus=RelayBus(right))
        try:
            yield node_a, node_b
        finally:
            await node_b.shutdown()
    finally:
        await node_a.shutdown()


@pytest.fixture
async def pair(database_url: str) -> AsyncIterator[tuple[App, App]]:
    """Two servers on one database (SQLite or PostgreSQL), relayed; two players make a quick race."""
    async with relayed_pair(database_url, **QUICK) as nodes:
        yield nodes


# ------------------------------------------------------------------------- two nodes, PostgreSQL + Redis


@pytest.fixture
async def two_quick_nodes() -> AsyncIterator[tuple[App, App]]:
    async with _two_nodes({"node": "node-a", **QUICK}, {"node": "node-b", **QUICK}) as nodes:
        yield nodes


async def test_a_player_on_each_node_gets_one_quick_race_and_plays_it(
    two_quick_nodes: tuple[App, App],
) -> None:
    """Over Redis: a player waiting on node A and one on node B are matched (enough: 2); the node
    that claims the race tells the other on the bus, each pushes its own player the snapshot, and
    both play the race to its end."""
    node_a, node_b = two_quick_nodes
    ann = await player(serverutil.ws_url(node_a), name="ann-on-a")
    bo = await player(serverutil.ws_url(node_b), SUBPROTOCOLS[1], name="bo-on-b")
    assert (await ann.request("quick_race", cells=8))["type"] == "ok"
    assert (await bo.request("quick_race", cells=8))["type"] == "ok"
    await race_it_to_a_win(ann, bo)
    assert not waits_on(node_a, ann) and not waits_on(node_b, bo)
    await eventually(lambda: _no_rows(node_a.database), "the claimed waits' rows are gone")
    await close_all(ann, bo)


async def _no_rows(database: Database) -> bool:
    return not await rows(database)


# ------------------------------------------------------------------------- --workers 2, SQLite + relay


@pytest.fixture
def quick_workers(tmp_path: Path) -> Iterator[Node]:
    running = Node(
        f"sqlite+aiosqlite:///{tmp_path / 'eightoff.db'}",
        tmp_path / "stderr.log",
        *("--race-countdown", str(RACE_SETTINGS["race_countdown"]), "--quick-match-enough", "2"),
    )
    yield running
    running.stop()


async def test_a_player_on_each_worker_gets_one_quick_race_and_plays_it(quick_workers: Node) -> None:
    """``--workers 2`` on SQLite: the two workers' pools are one table, and the seating goes through
    the supervisor's relay."""
    clients = await one_client_per_worker(quick_workers.url)
    (_, ann), (_, bo) = sorted(clients.items())
    assert (await ann.request("quick_race", cells=8))["type"] == "ok"
    assert (await bo.request("quick_race", cells=8))["type"] == "ok"
    await race_it_to_a_win(ann, bo)
    await close_all(ann, bo)
    assert "Traceback" not in quick_workers.stderr(), quick_workers.stderr()


# ------------------------------------------------------------------------- two servers, one relay


async def test_players_waiting_on_two_servers_of_one_database_are_matched(pair: tuple[App, App]) -> None:
    """The relayed pair on SQLite (one writer for two processes) and on PostgreSQL."""
    node_a, node_b = pair
    ann = await player(serverutil.ws_url(node_a), name="ann")
    bo = await player(serverutil.ws_url(node_b), name="bo")
    for client in (ann, bo):
        assert (await client.request("quick_race", cells=8))["type"] == "ok"
    await race_it_to_a_win(bo, ann)
    await close_all(ann, bo)


async def test_two_pools_forming_at_once_seat_no_player_twice(database_url: str) -> None:
    """Seven players wait, in turn on one server and the other, in three variants (four needed at
    once: nobody races yet, the clocks held still); then both servers' clocks pass the wait limit
    and both run a round at the same moment. They read the same pool and form the same three
    races, and each claims the races that seat one of its own waits: every claim but one per race
    is lost and rolled back. Every player is pushed one race snapshot, and is seated once."""
    settings = {**RACE_SETTINGS, "quick_match_enough": 4, "quick_match_wait": 2.0}
    async with relayed_pair(database_url, **settings) as (node_a, node_b):
        nodes = (node_a, node_b)
        for trial in range(4):
            start = dt.datetime.now(dt.UTC)
            clock = HeldClock(start)
            for node in nodes:
                pool(node).clock = clock
            clients: list[WsClient] = []
            for index, cells in enumerate((8, 4, 2, 8, 4, 2, 8)):
                node = nodes[index % 2]
                client = await player(serverutil.ws_url(node), name=f"t{trial}-p{index}")
                assert (await client.request("quick_race", cells=cells))["type"] == "ok"
                clients.append(client)
            await asyncio.sleep(0.2)  # the timers' rounds, woken: still nobody races
            assert all(waits_on(nodes[i % 2], c) for i, c in enumerate(clients))
            clock.now = start + dt.timedelta(seconds=2.5)
            await asyncio.gather(pool(node_a).tick(), pool(node_b).tick())
            copies = [await formed(client) for client in clients]
            races = {copy.race["race"]: copy.race["cells"] for copy in copies}
            assert sorted(races.values()) == [2, 4, 8], races
            for client, copy in zip(clients, copies, strict=True):
                assert copy.of(client)["ready"], copy.rows
            assert sorted(len(copy.rows) for copy in copies) == [2, 2, 2, 2, 3, 3, 3]
            ids = [client.player["id"] for client in clients if client.player is not None]
            async with node_a.database.connection() as conn:
                seated = await conn.execute(
                    select(race_seats.c.player_id, func.count())
                    .where(race_seats.c.player_id.in_(ids))
                    .group_by(race_seats.c.player_id)
                )
                counts = {row[0]: row[1] for row in seated}
            assert counts == dict.fromkeys(ids, 1), counts  # in no race twice, in no other race
            for client in clients:
                await no_push_of_another_race(client, races)
            await close_all(*clients)
            await eventually(lambda: _no_rows(node_a.database), "every claimed row is followed and gone")


class HeldClock:
    """A clock that stands still until moved (both servers' pools read one)."""

    def __init__(self, now: dt.datetime) -> None:
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now


async def no_push_of_another_race(client: WsClient, races: dict[str, int]) -> None:
    """Whatever else comes is about the races formed (their diffs), never a second snapshot."""
    with contextlib.suppress(TimeoutError):
        while True:
            pushed = await client.next_push(timeout=0.3)
            assert pushed["type"] != "race" and pushed.get("race") in races, pushed


async def test_a_dead_process_s_wait_is_swept_not_raced(pair: tuple[App, App], database_url: str) -> None:
    """A wait whose process died without a goodbye (its row past its expiry, the oldest of all) is no
    wait: a player who would race it at once (enough: 2, wait limit 1 s) keeps waiting, the row is
    swept, and the next player to come races the live one."""
    node_a, node_b = pair
    ghost = await player(serverutil.ws_url(node_a), name="ghost")
    assert ghost.player is not None
    await ghost.close()
    now = dt.datetime.now(dt.UTC)
    dead = QuickWait(
        "dead-wait",
        ghost.player["id"],
        "ghost",
        False,
        8,
        1000.0,
        now - dt.timedelta(minutes=5),
        "node-dead/0123456789ab",
        now - dt.timedelta(seconds=1),
    )
    async with node_a.database.transaction() as conn:
        await quick_waits.add_wait(conn, dead)
    live = await player(serverutil.ws_url(node_b), name="live")
    assert (await live.request("quick_race", cells=8))["type"] == "ok"
    await eventually(lambda: _row_gone(node_a.database, "dead-wait"), "the dead process's wait is swept")
    await no_push(live, 1.5)
    assert waits_on(node_b, live)
    later = await player(serverutil.ws_url(node_a), name="later")
    assert (await later.request("quick_race", cells=8))["type"] == "ok"
    copies = [await formed(client) for client in (live, later)]
    assert copies[0].race["race"] == copies[1].race["race"]
    assert ghost.player["id"] not in {row["player"]["id"] for row in copies[0].rows.values()}
    await close_all(live, later)


async def _row_gone(database: Database, wait_id: str) -> bool:
    async with database.connection() as conn:
        found = await conn.scalar(
            select(quick_waits_table.c.wait_id).where(quick_waits_table.c.wait_id == wait_id)
        )
    return found is None


async def test_leaving_and_disconnecting_count_on_every_node(pair: tuple[App, App]) -> None:
    """Ann waits on node A. Her second connection, on node B, may not wait too (one wait per player
    in the deployment) and takes her out of the pool with quick_race_leave; node A lets go of her
    wait. Cy then waits on A and disconnects. Bo, on B, then finds nobody to race (enough: 2), and
    races Dee, who comes to A."""
    node_a, node_b = pair
    url_a, url_b = serverutil.ws_url(node_a), serverutil.ws_url(node_b)
    ann = await player(url_a, name="ann")
    assert (await ann.request("quick_race", cells=8))["type"] == "ok"
    ann_on_b = await player(url_b, token=ann.token)
    twice = await ann_on_b.request("quick_race", cells=8)
    assert twice["code"] == "illegal_move" and "already" in twice["message"], twice
    assert (await ann_on_b.request("quick_race_leave"))["type"] == "ok"
    assert (await ann_on_b.request("quick_race_leave"))["code"] == "not_found"
    await eventually(lambda: not waits_on(node_a, ann), "node A lets go of the wait left on node B")
    cy = await player(url_a, name="cy")
    assert (await cy.request("quick_race", cells=8))["type"] == "ok"
    await cy.close()
    await eventually(lambda: _no_rows(node_a.database), "the disconnected player's wait is gone")
    bo = await player(url_b, name="bo")
    assert (await bo.request("quick_race", cells=8))["type"] == "ok"
    await no_push(bo, 1.5)
    assert waits_on(node_b, bo)
    dee = await player(url_a, name="dee")
    assert (await dee.request("quick_race", cells=8))["type"] == "ok"
    copies = [await formed(client) for client in (bo, dee)]
    assert copies[0].race["race"] == copies[1].race["race"]
    for client in (ann, ann_on_b):
        await no_push(client, 0.2)
    await close_all(ann, ann_on_b, bo, dee)


async def test_a_stopping_server_takes_its_waits_out_of_the_pool(database_url: str) -> None:
    """A server that stops gracefully deletes its waits' rows (a killed one's expire)."""
    async with serverutil.running_app(database_url, **QUICK) as app:
        client = await player(serverutil.ws_url(app))
        assert (await client.request("quick_race", cells=8))["type"] == "ok"
        assert [row.holder for row in await rows(app.database)] == [pool(app).holder]
    database = Database.create(database_url)
    try:
        assert await rows(database) == []
    finally:
        await database.dispose()
        await client.close()
