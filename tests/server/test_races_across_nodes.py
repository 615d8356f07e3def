"""Races whose seats are on several nodes or workers (docs/races.md, Across nodes), with real
processes and real connections: two nodes on PostgreSQL + Redis, a node killed (SIGKILL) under a
running race, and ``eightoff serve --workers 2`` on SQLite with the supervisor's relay.

Each node keeps a copy of a race it has a follower or a seat's game of; the database row is the
race's authority, fenced by its revision; a copy's ``v`` is its own (a follower keeps the stream of
the node it is connected to).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from engine import Deal, Foundation, Game, Move
from server.app import App
from server.clock import utc_now
from server.play.race.registry import SWEEP_GRACE, SWEEP_INTERVAL
from server.storage import Database, races, ratings
from server.storage.records import RaceRecord
from solver import solve_deal
from tests.server.conftest import RACE_SETTINGS
from tests.server.test_races import Standings, follow_until, racer_address
from tests.server.test_workers import Node, one_client_per_worker
from tests.support import dbutil, serverutil
from tests.support.waiting import eventually
from tests.support.wire import move_fields
from tests.support.wsclient import SUBPROTOCOLS, WsClient, player

ROOT = Path(__file__).parents[2]


def not_home(deal: Deal) -> Move:
    """A first move of ``deal`` that puts no card home (so that the places below are known)."""
    return next(move for move in Game(deal).legal_moves if not isinstance(move.target, Foundation))


async def follow_to_the_end(client: WsClient, copy: Standings, racer: str) -> list[int]:
    """Apply the client's race diffs (each v + 1 of the last) until the race is over: the moves of
    ``racer``'s row in each diff that carried it."""
    seen: list[int] = []
    while copy.race["state"] != "finished":
        push = await client.next_push()
        if push["type"] == "race_diff":
            copy.apply(push)
            seen += [row["moves"] for row in push["rows"] if row["player"]["id"] == racer]
    return seen


def final(copy: Standings) -> dict[int, tuple[object, ...]]:
    return {
        seat: (row["player"]["id"], row["place"], row["status"], row["cards_home"], row["moves"], row["game"])
        for seat, row in copy.rows.items()
    }


async def race_to_a_win(
    ann: WsClient, bo: WsClient, spectators: list[WsClient]
) -> dict[int, tuple[object, ...]]:
    """Ann makes a race, Bo joins by its code, the spectators watch, both ready at once and Ann starts;
    Ann moves once, then Bo plays the solver's line to a win. Every follower keeps its copy from its
    node's snapshot and diffs in order and sees each of Bo's moves; all end with the same places.
    The final rows."""
    assert ann.player is not None and bo.player is not None
    ann_copy = Standings(await ann.request("race_create", seats=2, time_limit=600))
    race_id, code = ann_copy.race["race"], ann_copy.race["code"]
    bo_copy = Standings(await bo.request("race_join", code=code))
    watching = [Standings(await spectator.request("race_watch", race=race_id)) for spectator in spectators]
    everyone = [(ann, ann_copy), (bo, bo_copy), *zip(spectators, watching, strict=True)]
    readies = await asyncio.gather(*(racer.request("race_ready", race=race_id) for racer in (ann, bo)))
    assert [reply["type"] for reply in readies] == ["ok", "ok"], readies
    for client, copy in everyone:
        await follow_until(
            client, copy, lambda s: len(s.rows) == 2 and all(r["ready"] for r in s.rows.values())
        )
    assert (await ann.request("race_start", race=race_id))["type"] == "ok"
    for client, copy in everyone:
        await follow_until(client, copy, lambda s: s.race["state"] == "running")
    assert len({copy.race["deal"] for _, copy in everyone}) == 1  # one deal
    assert (
        len({tuple(row["game"] for row in copy.rows.values()) for _, copy in everyone}) == 1
    )  # one game each
    deal = Deal.from_code(ann_copy.race["deal"])
    ann_game, bo_game = ann_copy.of(ann)["game"], bo_copy.of(bo)["game"]
    assert (await ann.request("resume", game=ann_game))["v"] == 0
    assert (await ann.request("move", game=ann_game, **move_fields(not_home(deal))))["type"] == "ack"
    for client, copy in everyone:  # Ann's move reaches every copy, hers or not
        await follow_until(client, copy, lambda s: s.of(ann)["moves"] == 1)
    assert (await bo.request("resume", game=bo_game))["v"] == 0
    solution = list(solve_deal(deal).moves)
    for v, move in enumerate(solution):
        reply = await bo.request("move", game=bo_game, v=v, **move_fields(move))
        assert reply["type"] == "ack", reply
    for client, copy in everyone:
        seen = await follow_to_the_end(client, copy, bo.player["id"])
        assert seen == sorted(seen) and sorted(set(seen)) == list(range(1, len(solution) + 1)), seen
    results = [final(copy) for _, copy in everyone]
    assert all(result == results[0] for result in results), results  # consistent standings
    places = {row[0]: row[1:5] for row in results[0].values()}
    assert places[bo.player["id"]] == (1, "won", 52, len(solution))
    assert places[ann.player["id"]] == (2, "playing", 0, 1)
    return results[0]


async def close_all(*clients: WsClient) -> None:
    for client in clients:
        await client.close()


async def stored_race(database: Database, race_id: str) -> RaceRecord:
    async with database.connection() as conn:
        record = await races.load_race(conn, race_id)
    assert record is not None
    return record


# ------------------------------------------------------------------------- two nodes, PostgreSQL + Redis


async def test_a_race_with_a_seat_on_each_node_is_played_to_a_win(two_race_nodes: tuple[App, App]) -> None:
    node_a, node_b = two_race_nodes
    url_a, url_b = serverutil.ws_url(node_a), serverutil.ws_url(node_b)
    ann = await player(url_a, name="ann-on-a")
    bo = await player(url_b, SUBPROTOCOLS[1], name="bo-on-b")
    spectators = [
        await player(url_a, name="spec-on-a"),
        await player(url_b, SUBPROTOCOLS[1], name="spec-on-b"),
    ]
    await race_to_a_win(ann, bo, spectators)
    await close_all(ann, bo, *spectators)


async def test_joins_and_readies_from_both_nodes_at_once_are_all_stored(
    two_race_nodes: tuple[App, App],
) -> None:
    """Two players join one race at once, one on each node, then every seat says ready at once: the
    copies' writes meet the race's fence, and the one that lost reads the race and writes again, so
    no join and no ready is lost (the loser's room is not let go, nor its player told stale)."""
    node_a, node_b = two_race_nodes
    url_a, url_b = serverutil.ws_url(node_a), serverutil.ws_url(node_b)
    for trial in range(5):
        ann, cy = await player(url_a, name=f"ann-{trial}"), await player(url_a, name=f"cy-{trial}")
        dee = await player(url_b, name=f"dee-{trial}")
        made = await ann.request("race_create", seats=3)
        joined = await asyncio.gather(*(c.request("race_join", code=made["code"]) for c in (cy, dee)))
        assert [reply["type"] for reply in joined] == ["race", "race"], joined
        readies = await asyncio.gather(*(c.request("race_ready", race=made["race"]) for c in (ann, cy, dee)))
        assert [reply["type"] for reply in readies] == ["ok"] * 3, readies
        record = await stored_race(node_a.database, made["race"])
        assert sorted(seat.player_name for seat in record.seated) == sorted(
            f"{name}-{trial}" for name in ("ann", "cy", "dee")
        )
        assert all(seat.ready for seat in record.seated), record.seated
        copy = Standings(made)
        await follow_until(ann, copy, lambda s: len(s.rows) == 3 and all(r["ready"] for r in s.rows.values()))
        await close_all(ann, cy, dee)


class ServerProcess:
    """``eightoff serve`` (one process) in a subprocess, on PostgreSQL and Redis."""

    def __init__(self, database_url: str, redis_url: str, log: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("EIGHTOFF_")}
        with log.open("wb") as stderr:
            self.process = subprocess.Popen(
                [
                    *(sys.executable, "-m", "server", "serve", "--port", "0", "--node", "node-killed"),
                    *("--database-url", database_url, "--redis-url", redis_url),
                    *("--race-countdown", str(RACE_SETTINGS["race_countdown"])),
                    *("--rate-per-second", "100000", "--rate-burst", "100000"),
                    *("--trusted-proxies", "127.0.0.1"),  # racers on networks of their own: rated
                    *("--established-networks", "off"),  # two newcomers' race rates
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=stderr,
                stdin=subprocess.DEVNULL,
                text=True,
            )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert "serving ws://" in line, f"no banner: {line!r}\n{log.read_text()}"
        self.url = line.split()[-1]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)


@pytest.fixture
def postgres_and_redis() -> Iterator[tuple[str, str]]:
    server_url = dbutil.require_postgres_server_url()
    redis_url = os.environ.get("EIGHTOFF_TEST_REDIS_URL")
    if not redis_url:
        pytest.skip("EIGHTOFF_TEST_REDIS_URL is not set (CI sets it)")
    database_url = dbutil.create_postgres_database(server_url)
    try:
        yield database_url, redis_url
    finally:
        dbutil.drop_postgres_database(server_url, database_url)


async def a_running_race(url: str, time_limit: int) -> tuple[WsClient, WsClient, Standings]:
    """Ann and Bo (each on a network of its own) in a 2-seat race on the node at ``url``, past its
    reveal: their clients and Ann's copy of the race."""
    ann = await player(url, forwarded_for=racer_address(0), name="ann")
    bo = await player(url, forwarded_for=racer_address(1), name="bo")
    made = Standings(await ann.request("race_create", seats=2, time_limit=time_limit))
    race_id = made.race["race"]
    await bo.request("race_join", code=made.race["code"])
    for racer in (ann, bo):
        assert (await racer.request("race_ready", race=race_id))["type"] == "ok"
    assert (await ann.request("race_start", race=race_id))["type"] == "ok"
    await follow_until(ann, made, lambda s: s.race["state"] == "running")
    return ann, bo, made


async def test_a_race_whose_node_is_killed_ends_at_its_time_limit_on_another_node(
    postgres_and_redis: tuple[str, str], tmp_path: Path
) -> None:
    """The node that holds a running race is killed (SIGKILL: no goodbye) and nobody follows the race
    anywhere else: another node's sweep takes it up once its time limit is past, ends it on the seats'
    stored games, and it is rated once."""
    database_url, redis_url = postgres_and_redis
    killed = ServerProcess(database_url, redis_url, tmp_path / "killed.log")
    try:
        ann, bo, made = await a_running_race(killed.url, time_limit=30)
        race_id = made.race["race"]
        deal = Deal.from_code(made.race["deal"])
        game = made.of(ann)["game"]
        assert (await ann.request("resume", game=game))["v"] == 0
        assert (await ann.request("move", game=game, **move_fields(not_home(deal))))["type"] == "ack"
        killed.kill()
        await close_all(ann, bo)
    finally:
        killed.kill()
    async with serverutil.running_app(
        database_url, redis_url=redis_url, node="node-sweeper", established_networks=None
    ) as survivor:
        assert survivor.races.room(race_id) is None  # not due yet: not taken up at start
        # The survivor's race clock (the sweep's and the race's own) is moved on to the time limit
        # rather than waited for (30 s at least): the sweep's grace and interval still run in real
        # time, and what is stored is what the time limit's tick made.
        due = (await stored_race(survivor.database, race_id)).ends_at
        assert due is not None
        offset = due - utc_now()
        survivor.races.clock = lambda: utc_now() + offset
        ends_at = made.race["ends_at"]
        await eventually(
            lambda: _finished(survivor, race_id), f"the race (ending at {ends_at}) is finished", timeout=60
        )
        record = await stored_race(survivor.database, race_id)
        assert record.finished_at is not None and record.ends_at is not None
        assert record.finished_at >= record.ends_at  # at its time limit, not before
        late = (record.finished_at - record.ends_at).total_seconds()
        assert late < SWEEP_GRACE + 2 * SWEEP_INTERVAL + 5, late  # a sweep or two after it was due
        print(f"\nthe race of the killed node ended {late:.2f} s after its time limit (swept)")
        places = {seat.player_name: (seat.place, seat.moves) for seat in record.seated}
        assert places == {"ann": (2, 1), "bo": (1, 0)}  # no card home either: fewer moves first
        async with survivor.database.connection() as conn:
            rated = await ratings.load_race_rating_changes(conn, race_id)
            stored = await ratings.load_ratings(conn, 8, [seat.player_id for seat in record.seated])
        assert rated is not None and len(rated.changes) == 2
        assert [rating.races for rating in stored.values()] == [1, 1]  # rated once


async def test_a_race_whose_node_dies_between_the_win_and_the_finish_ends_at_the_next_sweep(
    postgres_and_redis: tuple[str, str], tmp_path: Path
) -> None:
    """The node that holds a running race stores a seat's winning move and is killed (SIGKILL) before
    the race's finishing write: the test holds that write back with a lock on the race's row (the
    game's commit takes none), so the node dies with the win stored and the race running, its time
    limit ten minutes away. Another node's sweep finds the race decided by its seats' stored games
    and ends it within seconds, the winner first, rated once."""
    database_url, redis_url = postgres_and_redis
    killed = ServerProcess(database_url, redis_url, tmp_path / "killed.log")
    locker = create_async_engine(database_url)
    try:
        ann, bo, made = await a_running_race(killed.url, time_limit=600)
        race_id = made.race["race"]
        game = made.of(ann)["game"]
        *line, last = solve_deal(Deal.from_code(made.race["deal"])).moves
        for v, move in enumerate(line):
            assert (await ann.request("move", game=game, **move_fields(move), v=v))["type"] == "ack"
        async with locker.connect() as lock:
            await lock.execute(text("SELECT 1 FROM races WHERE id = :id FOR UPDATE"), {"id": race_id})
            assert (await ann.request("move", game=game, **move_fields(last), v=len(line)))["type"] == "ack"
            await asyncio.sleep(0.5)  # the room has proposed the finish; its write waits for the lock
            killed.kill()
            await lock.rollback()
        for client in (ann, bo):  # the node is gone: no close handshake to wait for
            client.ws.transport.abort()
    finally:
        killed.kill()
        await locker.dispose()
    async with serverutil.running_app(
        database_url, redis_url=redis_url, node="node-sweeper", established_networks=None
    ) as survivor:
        up_at = utc_now()
        died_with = await stored_race(survivor.database, race_id)
        assert died_with.state == "running"  # the case this test is about: the finish never written
        await eventually(lambda: _finished(survivor, race_id), "the decided race is finished", timeout=20)
        record = await stored_race(survivor.database, race_id)
        assert record.finished_at is not None and record.ends_at is not None
        took = (record.finished_at - up_at).total_seconds()
        assert took < SWEEP_GRACE + 2 * SWEEP_INTERVAL + 3, took  # a sweep or two, not the time limit
        assert (record.ends_at - record.finished_at).total_seconds() > 500
        print(f"\nthe race decided on the killed node was finished {took:.2f} s after a node came up")
        places = {seat.player_name: (seat.place, seat.status) for seat in record.seated}
        assert places == {"ann": (1, "won"), "bo": (2, "playing")}
        async with survivor.database.connection() as conn:
            rated = await ratings.load_race_rating_changes(conn, race_id)
        assert rated is not None and len(rated.changes) == 2


async def _finished(app: App, race_id: str) -> bool:
    return (await stored_race(app.database, race_id)).state == "finished"


# ------------------------------------------------------------------------- --workers 2, SQLite + relay


@pytest.fixture
def race_workers(tmp_path: Path) -> Iterator[Node]:
    running = Node(
        f"sqlite+aiosqlite:///{tmp_path / 'eightoff.db'}",
        tmp_path / "stderr.log",
        *("--race-countdown", str(RACE_SETTINGS["race_countdown"])),
    )
    yield running
    running.stop()


async def test_a_race_with_a_seat_on_each_worker_is_played_to_a_win(race_workers: Node) -> None:
    """``--workers 2`` on SQLite: the copies on the two workers keep in step through the supervisor's
    relay, and a spectator on each worker sees the same race."""
    racers = await one_client_per_worker(race_workers.url)
    (_, ann), (_, bo) = sorted(racers.items())
    watchers = await one_client_per_worker(race_workers.url)
    await race_to_a_win(ann, bo, list(watchers.values()))
    await close_all(ann, bo, *watchers.values())
    assert "Traceback" not in race_workers.stderr(), race_workers.stderr()
