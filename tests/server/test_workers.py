"""``eightoff serve --workers 2`` as real processes: one port, two workers (told apart by
welcome.server.node), spectators on one worker following games played on the other (through the
supervisor's relay on SQLite, through Redis on PostgreSQL), the (game, v) fence between two workers
driving one game at once, a graceful SIGTERM, and a worker's death taking the node down.
"""

from __future__ import annotations

import asyncio
import http.client
import itertools
import os
import re
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from websockets.exceptions import ConnectionClosed, InvalidStatus

from engine import UNDO, Action, Game, Move
from server import __version__
from tests.support import dbutil
from tests.support.board import ClientBoard
from tests.support.ci import unavailable
from tests.support.waiting import eventually
from tests.support.wsclient import WsClient

ROOT = Path(__file__).parents[2]
CODE = "EO1-C8-AAAAAFA"
#: Connections opened at most to reach every worker (the kernel spreads them by a hash of the
#: addresses: with two workers, 64 misses in a row happen with probability 2**-63).
MAX_CONNECT_ATTEMPTS = 64
_LISTENING = re.compile(r"worker (\S+) \(pid (\d+)\) listening on port (\d+)")


class Node:
    """``eightoff serve --workers N`` in a subprocess on a free port (or ``port``), stderr kept in a
    file."""

    def __init__(
        self, database_url: str, log: Path, *args: str, workers: int = 2, port: int = 0, cwd: Path = ROOT
    ) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("EIGHTOFF_")}
        env["TMPDIR"] = str(log.parent)  # the node's metrics directory goes here, not in the system's
        self.log = log
        with log.open("wb") as stderr:
            self.process = subprocess.Popen(
                [
                    *(
                        sys.executable,
                        "-m",
                        "server",
                        "serve",
                        "--workers",
                        str(workers),
                        "--port",
                        str(port),
                    ),
                    *("--database-url", database_url, "--sqlite-synchronous", "NORMAL"),
                    *("--rate-per-second", "100000", "--rate-burst", "100000", *args),
                ],
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=stderr,
                stdin=subprocess.DEVNULL,
                text=True,
            )
        assert self.process.stdout is not None
        first, second = self.process.stdout.readline(), self.process.stdout.readline()
        found = re.fullmatch(
            rf"eightoff {re.escape(__version__)} serving ws://127\.0\.0\.1:(\d+)/ws\n", first
        )
        assert found, f"no banner: {first!r}\n{self.stderr()}"
        self.port = int(found[1])
        assert second == f"browser client: http://127.0.0.1:{self.port}/\n"
        self.url = f"ws://127.0.0.1:{self.port}/ws"

    def stderr(self) -> str:
        return self.log.read_text()

    def worker_pids(self) -> dict[str, int]:
        """Each worker's pid by node name, from the supervisor's log; every one on the banner's port."""
        found = {node: (int(pid), int(port)) for node, pid, port in _LISTENING.findall(self.stderr())}
        assert {port for _, port in found.values()} == {self.port}, found
        return {node: pid for node, (pid, _) in found.items()}

    async def wait(self, timeout: float = 60) -> int:
        return await asyncio.to_thread(self.process.wait, timeout)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'eightoff.db'}"


@pytest.fixture
def node(sqlite_url: str, tmp_path: Path) -> Iterator[Node]:
    """Two workers on SQLite, their events relayed by the supervisor."""
    running = Node(sqlite_url, tmp_path / "stderr.log")
    yield running
    running.stop()


@pytest.fixture
def postgres_redis_node(tmp_path: Path) -> Iterator[Node]:
    """Two workers on PostgreSQL, their events through Redis. Outside CI without both servers: skipped."""
    server_url = dbutil.postgres_server_url()
    redis_url = os.environ.get("EIGHTOFF_TEST_REDIS_URL")
    if server_url is None or not redis_url:
        reason = "EIGHTOFF_TEST_POSTGRES_URL and EIGHTOFF_TEST_REDIS_URL are not both set (CI sets them)"
        unavailable(reason)
    database_url = dbutil.create_postgres_database(server_url)
    try:
        running = Node(database_url, tmp_path / "stderr.log", "--redis-url", redis_url)
        try:
            yield running
        finally:
            running.stop()
    finally:
        dbutil.drop_postgres_database(server_url, database_url)


async def clients_on_each_worker(url: str, token: str | None = None) -> AsyncIterator[tuple[str, WsClient]]:
    """Connections that said hello, one per worker (named by welcome.server.node), as they are found;
    the connections that land on a worker already found are closed."""
    seen: set[str] = set()
    for _ in range(MAX_CONNECT_ATTEMPTS):
        client = await WsClient.open(url)
        welcome = await client.hello(token=token) if token else await client.hello()
        node = welcome["server"]["node"]
        if node in seen:
            await client.close()
            continue
        seen.add(node)
        yield node, client
    raise AssertionError(f"{MAX_CONNECT_ATTEMPTS} connections reached only {sorted(seen)}")


async def one_client_per_worker(url: str, workers: int = 2, token: str | None = None) -> dict[str, WsClient]:
    clients: dict[str, WsClient] = {}
    async for node, client in clients_on_each_worker(url, token):
        clients[node] = client
        if len(clients) == workers:
            break
    return clients


# ------------------------------------------------------------------------------------------ one port


async def test_two_workers_serve_one_port_under_their_own_node_names(node: Node) -> None:
    clients = await one_client_per_worker(node.url)
    assert sorted(clients) == ["node-1-w1", "node-1-w2"]
    assert sorted(node.worker_pids()) == ["node-1-w1", "node-1-w2"]
    assert node.stderr().count("2 workers serving (node-1-w1, node-1-w2)") == 1
    for client in clients.values():
        await client.close()


async def spectator_follows_a_game_played_on_the_other_worker(node: Node) -> None:
    clients = await one_client_per_worker(node.url)
    (watcher_node, spectator), (player_node, player) = sorted(clients.items())
    game = (await player.request("new_game", code=CODE))["game"]
    board = ClientBoard(await spectator.request("watch", game=game))
    moves = [("t1", "c5"), ("c5", "t1"), ("t2", "c5")]
    for source, target in moves:
        assert (await player.request("move", game=game, **{"from": source, "to": target}))["type"] == "ack"
    for _ in moves:
        board.apply(await spectator.next_push())
    assert board.matches(await player.request("resume", game=game))
    assert (await player.request("resign", game=game))["type"] == "game_over"
    assert (await spectator.next_push())["type"] == "game_over"
    assert watcher_node != player_node
    for client in (player, spectator):
        await client.close()


async def test_a_spectator_on_one_worker_sees_a_game_played_on_the_other(node: Node) -> None:
    """Through the supervisor's relay (SQLite, no Redis)."""
    await spectator_follows_a_game_played_on_the_other_worker(node)


async def test_a_spectator_on_one_worker_sees_a_game_played_on_the_other_over_redis(
    postgres_redis_node: Node,
) -> None:
    """Through Redis, each worker a node of its own (PostgreSQL, as several machines would run)."""
    await spectator_follows_a_game_played_on_the_other_worker(postgres_redis_node)


# ------------------------------------------------------------------------------------------ the fence


async def _act(client: WsClient, action: Action, game_id: str, v: int) -> dict[str, Any]:
    """Send ``action`` as the request for version ``v`` of the game; its reply."""
    if isinstance(action, Move):
        fields: dict[str, Any] = {"from": action.source.symbol(), "to": action.target.symbol(), "v": v}
        if action.count > 1:
            fields["n"] = action.count
        return await client.request("move", game=game_id, **fields)
    return await client.request("undo", game=game_id, v=v)


def _candidates(game: Game) -> tuple[Action, Action]:
    """Two actions for the two players to race with: different moves where the position has two."""
    moves = list(game.legal_moves)
    if not moves:
        return UNDO, UNDO
    return moves[0], moves[-1]


def _stored_actions(sqlite_path: Path, game_id: str) -> dict[int, str]:
    with sqlite3.connect(sqlite_path) as conn:
        rows = conn.execute(
            f"SELECT v, action FROM {dbutil.SQLITE_STORED_ACTIONS} WHERE game_id = ? ORDER BY v", (game_id,)
        )
        return dict(rows.fetchall())


async def test_one_game_driven_from_both_workers_at_once_stores_and_acks_one_action_per_version(
    node: Node, tmp_path: Path, sqlite_url: str
) -> None:
    """Both workers' writer threads commit to one SQLite file. Each round, a connection on each worker
    sends a different action for the same version at once: exactly one is stored and acknowledged,
    the other is refused as stale (by the (game, v) fence when both got as far as committing), and
    the stored log replays (``eightoff verify``)."""
    first = await WsClient.open(node.url)
    await first.hello()
    game_id = (await first.request("new_game", code=CODE))["game"]
    await first.close()
    clients = list((await one_client_per_worker(node.url, token=first.token)).values())
    for client in clients:
        assert (await client.request("resume", game=game_id))["v"] == 0
    game = Game.from_code(CODE)
    acked: dict[int, str] = {}
    fence_refusals = 0
    rounds = 0
    while rounds < 40 or (fence_refusals == 0 and rounds < 300):
        rounds += 1
        actions = _candidates(game)
        replies = await asyncio.gather(
            *(_act(client, action, game_id, game.v) for client, action in zip(clients, actions, strict=True))
        )
        wins = [action for action, reply in zip(actions, replies, strict=True) if reply["type"] == "ack"]
        refusals = [reply for reply in replies if reply["type"] != "ack"]
        assert len(wins) == 1, replies  # one action per version: never both, never neither
        assert [reply["code"] for reply in refusals] == ["stale"], replies
        fence_refusals += "changed elsewhere" in refusals[0]["message"]  # its commit met the fence
        game.play(wins[0])
        assert next(r for r in replies if r["type"] == "ack")["v"] == game.v
        acked[game.v] = wins[0].symbol()
    assert fence_refusals > 0, "the two workers never committed the same version at once"
    for client in clients:
        await client.close()

    node.stop()
    assert node.process.returncode == 0, node.stderr()
    assert _stored_actions(tmp_path / "eightoff.db", game_id) == acked  # nothing more, nothing less
    verify = subprocess.run(
        [sys.executable, "-m", "server", "verify", "--database-url", sqlite_url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "0 mismatch(es)" in verify.stdout


# ------------------------------------------------------------------------------------------ stopping


async def _play_until_closed(client: WsClient, game_id: str, playing: asyncio.Event | None = None) -> int:
    """Play legal moves back to back until the server closes the connection; the last acked v.
    ``playing`` is set once a few actions were acked: the game is well under way."""
    game = Game.from_code(CODE)
    while True:
        if playing is not None and game.v >= 3:
            playing.set()
        action = _candidates(game)[0]
        try:
            reply = await _act(client, action, game_id, game.v)
        except ConnectionClosed:
            return game.v
        if reply["type"] != "ack":  # draining: the in-flight action was acked, later ones are refused
            assert reply["code"] == "unavailable", reply
            return game.v
        game.play(action)


async def test_sigterm_stops_every_worker_gracefully_with_in_flight_actions_acked(
    node: Node, sqlite_url: str, tmp_path: Path
) -> None:
    clients = await one_client_per_worker(node.url)
    games = {name: (await client.request("new_game", code=CODE))["game"] for name, client in clients.items()}
    playing = {name: asyncio.Event() for name in clients}
    plays = {
        name: asyncio.create_task(_play_until_closed(client, games[name], playing[name]))
        for name, client in clients.items()
    }
    await asyncio.wait_for(asyncio.gather(*(event.wait() for event in playing.values())), 30)
    node.process.send_signal(signal.SIGTERM)
    acked = {name: await asyncio.wait_for(play, 60) for name, play in plays.items()}
    for client in clients.values():
        await asyncio.wait_for(client.ws.wait_closed(), 30)
        assert client.ws.close_code == 1001
    assert await node.wait() == 0, node.stderr()
    assert all(v > 0 for v in acked.values()), acked
    for name, game_id in games.items():  # nothing acknowledged lost, nothing unacknowledged stored
        assert len(_stored_actions(tmp_path / "eightoff.db", game_id)) == acked[name]


async def test_a_worker_killed_takes_the_node_down_with_a_clear_log_line(node: Node) -> None:
    pids = node.worker_pids()
    victim, survivor = pids["node-1-w2"], pids["node-1-w1"]
    os.kill(victim, signal.SIGKILL)
    status = await node.wait()
    assert status == 1, node.stderr()
    assert (
        f"worker node-1-w2 (pid {victim}) died: killed by SIGKILL; stopping the other workers"
        in node.stderr()
    )
    with pytest.raises(ProcessLookupError):  # the survivor stopped too (and was reaped)
        os.kill(survivor, 0)


async def test_workers_whose_supervisor_is_killed_stop_too(node: Node) -> None:
    pids = node.worker_pids()
    node.process.kill()
    assert await node.wait() == -signal.SIGKILL
    # each notices its closed pipe and shuts down gracefully
    await eventually(
        lambda: not any(_is_running(pid) for pid in pids.values()), "every worker stopped", timeout=60
    )
    assert node.stderr().count("the supervisor is gone; shutting down") == 2


def _is_running(pid: int) -> bool:
    """Whether ``pid`` runs (not gone, nor a zombie: orphans are reaped by init, maybe not at once)."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return status != "Z"


# ------------------------------------------------------------------------------- one node to operators


def scrape(port: int, source: str = "127.0.0.1") -> dict[str, float]:
    """``GET /metrics`` on a new connection from ``source`` (so the kernel picks the worker afresh):
    each sample's value by its name and labels, as ``name{label="value"}``."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(source, 0))
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        assert response.status == 200
        text = response.read().decode()
    finally:
        conn.close()
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{key}="{value}"' for key, value in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


NODE_TOTALS = (
    "eightoff_connections",
    "eightoff_live_games",
    "eightoff_actions_total",
    "eightoff_action_latency_seconds_count",
    'eightoff_errors_total{code="illegal_move"}',
)
SCRAPES = 12  # all on one worker with probability 2**-11


def totals(samples: dict[str, float]) -> dict[str, float]:
    return {name: samples.get(name, 0.0) for name in NODE_TOTALS}


async def node_totals(port: int, expected: dict[str, float], timeout: float = 10.0) -> list[dict[str, float]]:
    """``SCRAPES`` scrapes' node totals, once one shows ``expected`` (a worker's latency histogram
    reaches the shared directory within a second). Each scrape comes from an address of its own
    (127.0.0.10 …): the per-address limits on new connections are not what this measures."""
    sources = (f"127.0.0.{10 + n}" for n in itertools.count())
    async with asyncio.timeout(timeout):  # a scrape every 0.2 s: each from a new address, of 245
        while totals(await asyncio.to_thread(scrape, port, next(sources))) != expected:
            await asyncio.sleep(0.2)
    return [totals(await asyncio.to_thread(scrape, port, next(sources))) for _ in range(SCRAPES)]


async def test_every_scrape_shows_the_node_summed_over_its_workers(node: Node, tmp_path: Path) -> None:
    """Issue 20, item 9: /metrics answered for whichever worker took the scrape (a player on the other
    worker was missing from it). Now every scrape shows both workers' connections, games, actions,
    latencies and errors, summed; the node's one metrics directory holds each worker's files and is
    gone once the node stopped."""
    clients = await one_client_per_worker(node.url)
    (shared,) = tmp_path.glob("eightoff-metrics-*")
    assert {name.rsplit("_", 1)[1] for name in os.listdir(shared)} == {
        f"{pid}.db" for pid in node.worker_pids().values()
    }
    (_, first), (_, second) = sorted(clients.items())
    moves = {first: 3, second: 5}
    for client, count in moves.items():
        game = (await client.request("new_game", code=CODE))["game"]
        for n in range(count):
            source, target = ("t1", "c5") if n % 2 == 0 else ("c5", "t1")
            assert (await client.request("move", game=game, **{"from": source, "to": target}))[
                "type"
            ] == "ack"
    assert (await second.request("move", game=game, **{"from": "c1", "to": "c2"}))["code"] == "illegal_move"
    expected = {
        "eightoff_connections": 2.0,
        "eightoff_live_games": 2.0,
        "eightoff_actions_total": 8.0,
        "eightoff_action_latency_seconds_count": 8.0,
        'eightoff_errors_total{code="illegal_move"}': 1.0,
    }
    assert await node_totals(node.port, expected) == [expected] * SCRAPES
    await first.close()
    # its connection and its game (followed by nobody now) are gone from the node's gauges
    expected |= {"eightoff_connections": 1.0, "eightoff_live_games": 1.0}
    assert (await node_totals(node.port, expected))[-1] == expected
    await second.close()
    node.stop()
    assert node.process.returncode == 0 and list(tmp_path.glob("eightoff-metrics-*")) == []


async def test_the_connection_caps_hold_for_the_node_not_each_worker(sqlite_url: str, tmp_path: Path) -> None:
    """Issue 20, item 9: each worker counted --max-connections-per-address on its own (up to N times
    the setting from one address); the supervisor divides it among the workers."""
    node = Node(sqlite_url, tmp_path / "stderr.log", "--max-connections-per-address", "4")
    held: list[WsClient] = []
    on_worker: Counter[str] = Counter()
    refused = 0
    try:
        for _ in range(40):  # more than enough to find both workers' shares full
            try:
                client = await WsClient.open(node.url)
            except InvalidStatus as exc:
                assert exc.response.status_code == 503
                refused += 1
                continue
            on_worker[(await client.hello())["server"]["node"]] += 1
            held.append(client)
        assert on_worker == {"node-1-w1": 2, "node-1-w2": 2} and refused == 36
        from_elsewhere = await asyncio.to_thread(scrape, node.port, "127.0.0.2")  # 127.0.0.1 is at its cap
        assert from_elsewhere["eightoff_connections"] == 4.0
    finally:
        for client in held:
            await client.close()
        node.stop()
