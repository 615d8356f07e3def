"""Players' acks while the leaderboard pruner deletes a backlog of closed buckets, against calm.

Run from the project root::

    .venv/bin/python -m bench.bench_prune                        (SQLite, 200,000 games' backlog)
    .venv/bin/python -m bench.bench_prune --games 50000 --window 5   (smaller, quicker)
    .venv/bin/python -m bench.bench_prune --backend postgresql \\
        --postgres-url postgresql+asyncpg://postgres@127.0.0.1:5432/test

**The backlog.** bench_leaderboard's world (``--games`` finished games of 50,000 players over 60 days
ending on Thursday 2026-12-03), loaded and upgraded the same way: the migrations build every day and
week bucket's summary rows from ``games``, most of them in buckets the pruner deletes. SQLite: a file
in a temporary directory; PostgreSQL: a fresh database next to ``--postgres-url``'s, dropped at the end.

**The server.** A real ``eightoff serve`` on that database, with its defaults (SQLite: WAL,
``synchronous=FULL``, group commit, an ``ack`` only after its commit; bench_load's limits raised out
of the way), run through ``bench.pruning_server``: its pruner waits for SIGUSR1, then prunes once, its
clock at bench_leaderboard's (2026-12-03 18:00 UTC; the same buckets whatever the date of the run).

**The players.** ``--players`` connections (100) in this process, each with a game, paced to
``--rate`` actions a second in all (2,000; a fixed phase per connection, one in flight), ``move`` /
``undo`` in turn, each committed before its ack. After a warm-up, every ack's round trip is recorded
with the instant its action was sent, and each falls in a window by that instant: ``calm`` the
``--window`` seconds before the prune, ``pruning`` from the pruner's start to its end (the instants
it reports), ``after`` the ``--window`` seconds after it. It prints each window's acks, p50, p99 and
max, their ratios to calm's (the same players, server and database, in the same run), the pruner's
delete transactions (count, rows, and the mean and longest of the times it measured, `Pruned`: on
SQLite the lock is held within them; a wait for the lock and a checkpoint count too), the load
average beside each window, and the slowest acks with the window and the wall-clock instant each was
sent at (to set beside a server's log: a max is one moment, and on a shared machine often not the
server's). Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import msgpack  # type: ignore[import-untyped]
from sqlalchemy import func, select
from websockets.asyncio.client import ClientConnection, connect

from bench.bench_leaderboard import (
    REBUILD_FROM,
    World,
    analyze,
    load_at,
    load_postgres,
    load_sqlite,
    postgres_database,
    sqlite_database,
)
from bench.bench_load import CODE, SUBPROTOCOL, percentile, start_target, stop_process
from bench.echo_server import raise_nofile_limit
from protocol.limits import MAX_GAME_ACTIONS
from server.ops.runtime import fast_event_loop
from server.storage import Database
from server.storage.tables import board_bests, player_stats

WARMUP = 2.0  # seconds of play before the calm window
REPORT_TIMEOUT = 1800.0  # seconds the prune may take before the bench gives up
ACTIONS_PER_GAME = MAX_GAME_ACTIONS - MAX_GAME_ACTIONS % 2  # even: the game is back at its deal
CONNECT_CONCURRENCY = 32


# --------------------------------------------------------------------------- the players


@dataclass
class Acks:
    """Every ack of the run: when its action was sent (``time.monotonic()``) and its round trip."""

    sent: array.array[float] = field(default_factory=lambda: array.array("d"))
    took: array.array[float] = field(default_factory=lambda: array.array("d"))
    errors: list[str] = field(default_factory=list)

    def between(self, start: float, end: float) -> list[float]:
        """The round trips (seconds, sorted) of the actions sent from ``start`` to ``end``."""
        return sorted(took for sent, took in zip(self.sent, self.took, strict=True) if start <= sent < end)


async def _player(url: str, index: int, gate: asyncio.Semaphore) -> tuple[ClientConnection, str]:
    """Connect, hello (a new guest), new_game: a player with a game (untimed)."""
    async with gate:
        ws = await connect(url, subprotocols=[SUBPROTOCOL], compression=None, ping_interval=None)
        await ws.send(msgpack.packb({"type": "hello", "protocol": 1, "id": 1, "name": f"bench-{index}"}))
        await ws.recv()
        return ws, await _new_game(ws)


async def _new_game(ws: ClientConnection) -> str:
    await ws.send(msgpack.packb({"type": "new_game", "id": 2, "code": CODE}))
    snapshot = msgpack.unpackb(await ws.recv())
    if not isinstance(snapshot.get("game"), str):
        raise RuntimeError(f"new_game refused: {snapshot}")
    return str(snapshot["game"])


async def _play(
    ws: ClientConnection, game: str, interval: float, phase: float, acks: Acks, stop: asyncio.Event
) -> None:
    """``move t1→c5`` and ``undo`` in turn, one every ``interval`` seconds (``phase`` into the first),
    until ``stop``; a new game (untimed) before one reaches the bound on a game's length."""
    slot = time.monotonic() + phase * interval
    turn = played = 0
    while not stop.is_set():
        if played == ACTIONS_PER_GAME:
            await ws.send(msgpack.packb({"type": "resign", "id": 5, "game": game}))
            await ws.recv()
            game, played = await _new_game(ws), 0
        now = time.monotonic()
        if slot > now:
            await asyncio.sleep(slot - now)
        slot = max(slot + interval, time.monotonic() - interval)  # late: no burst to catch up
        if turn == 0:
            frame = {"type": "move", "id": 3, "game": game, "from": "t1", "to": "c5"}
        else:
            frame = {"type": "undo", "id": 4, "game": game}
        sent = time.monotonic()
        await ws.send(msgpack.packb(frame))
        reply = msgpack.unpackb(await ws.recv())
        took = time.monotonic() - sent
        if reply.get("type") != "ack":
            acks.errors.append(repr(reply)[:200])
            return
        acks.sent.append(sent)
        acks.took.append(took)
        turn ^= 1
        played += 1


# --------------------------------------------------------------------------- one run


@dataclass(frozen=True)
class Window:
    name: str
    start: float
    end: float
    load: str  # the load average at its end


@dataclass
class Run:
    backend: str
    windows: list[Window]
    acks: Acks
    pruned: dict[str, Any]
    rows_before: tuple[int, int]
    rows_after: tuple[int, int]


def _load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


async def _drive(
    url: str, server_pid: int, report: Path, args: argparse.Namespace
) -> tuple[list[Window], Acks]:
    """The players play; after the warm-up and the calm window the server is told to prune; the run
    ends ``--window`` seconds after the pruner's report."""
    gate = asyncio.Semaphore(CONNECT_CONCURRENCY)
    players = await asyncio.gather(*(_player(url, index, gate) for index in range(args.players)))
    acks, stop = Acks(), asyncio.Event()
    interval = args.players / args.rate
    tasks = [
        asyncio.create_task(_play(ws, game, interval, index / args.players, acks, stop))
        for index, (ws, game) in enumerate(players)
    ]
    try:
        await asyncio.sleep(WARMUP)
        calm_start = time.monotonic()
        await asyncio.sleep(args.window)
        windows = [Window("calm", calm_start, time.monotonic(), _load_average())]
        os.kill(server_pid, signal.SIGUSR1)
        deadline = time.monotonic() + REPORT_TIMEOUT
        while not report.exists():
            if time.monotonic() > deadline or any(task.done() for task in tasks):
                raise RuntimeError(f"no prune report; the players' first error: {acks.errors[:1]}")
            await asyncio.sleep(0.2)
        pruned = json.loads(report.read_text())
        windows.append(Window("pruning", pruned["started"], pruned["ended"], _load_average()))
        await asyncio.sleep(max(0.0, pruned["ended"] + args.window - time.monotonic()))
        windows.append(Window("after", pruned["ended"], pruned["ended"] + args.window, _load_average()))
    finally:
        stop.set()
        await asyncio.wait(tasks, timeout=10)
        await asyncio.gather(*(ws.close() for ws, _ in players), return_exceptions=True)
    return windows, acks


async def _summary_rows(url: str) -> tuple[int, int]:
    database = Database.create(url)
    try:
        async with database.connection() as conn:
            bests = await conn.scalar(select(func.count()).select_from(board_bests))
            stats = await conn.scalar(select(func.count()).select_from(player_stats))
    finally:
        await database.dispose()
    return int(bests or 0), int(stats or 0)


def run_backend(backend: str, args: argparse.Namespace, root: Path) -> Run:
    world = World(args.games, 50_000, 1_000, 60)
    with _backlog(backend, world, args) as url:
        rows_before = asyncio.run(_summary_rows(url))
        report = root / f"{backend}-pruned.json"
        launcher = f"{sys.executable} -m bench.pruning_server {report}"
        target = start_target("server", root / backend, launcher, database_url=url)
        try:
            with asyncio.Runner(loop_factory=fast_event_loop()) as runner:
                windows, acks = runner.run(_drive(target.url, target.process.pid, report, args))
        finally:
            stop_process(target.process)
        rows_after = asyncio.run(_summary_rows(url))
    return Run(backend, windows, acks, json.loads(report.read_text()), rows_before, rows_after)


@contextmanager
def _backlog(backend: str, world: World, args: argparse.Namespace) -> Iterator[str]:
    """A database with ``world``'s finished games and every bucket's summaries; yields its URL."""
    print(f"== {backend}: loading {world.games:,} games and building their summaries …", file=sys.stderr)
    if backend == "sqlite":
        with sqlite_database() as (url, path):
            load_at(url, REBUILD_FROM, lambda: load_sqlite(path, world))
            asyncio.run(analyze(url))
            yield url
        return
    with postgres_database(args.postgres_url) as url:
        load_at(url, REBUILD_FROM, lambda: asyncio.run(load_postgres(url, world)))
        asyncio.run(analyze(url))
        yield url


# --------------------------------------------------------------------------- report


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def report(run: Run, args: argparse.Namespace) -> None:
    database = "SQLite (WAL, synchronous=FULL)" if run.backend == "sqlite" else "PostgreSQL"
    print(
        f"\n{database}: {args.players} players, {args.rate:,.0f} actions/s offered, move/undo acks; "
        f"backlog of {args.games:,} games over 60 days; {os.cpu_count()} CPUs"
    )
    columns = ("seconds", "acks", "acks/s", "p50 ms", "p99 ms", "max ms")
    print(f"{'window':10}" + "".join(f"{column:>9}" for column in columns) + "  load average")
    timings: dict[str, tuple[float, float, float]] = {}
    for window in run.windows:
        took = run.acks.between(window.start, window.end)
        seconds = window.end - window.start
        p50, p99, most = percentile(took, 0.5), percentile(took, 0.99), took[-1] if took else float("nan")
        timings[window.name] = (p50, p99, most)
        print(
            f"{window.name:10}{seconds:>9.1f}{len(took):>9,}{len(took) / seconds:>9,.0f}{_ms(p50):>9}"
            f"{_ms(p99):>9}{_ms(most):>9}  {window.load}"
        )
    calm = timings["calm"]
    for name in ("pruning", "after"):
        ratios = " / ".join(f"{value / base:.2f}" for value, base in zip(timings[name], calm, strict=True))
        print(f"{name} / calm: p50 / p99 / max {ratios}")
    pruned = run.pruned
    if "error" in pruned:
        print(f"the prune failed: {pruned['error']}")
    else:
        transactions = max(pruned["transactions"], 1)
        print(
            f"pruner: {pruned['buckets']} buckets, {pruned['board_rows']:,} board_bests and "
            f"{pruned['stats_rows']:,} player_stats rows in {pruned['transactions']:,} transactions "
            f"over {pruned['ended'] - pruned['started']:.1f} s; they took {_ms(pruned['seconds'])} ms "
            f"in all, {pruned['seconds'] / transactions * 1000:.2f} ms each on average, the longest "
            f"{_ms(pruned['longest'])} ms"
        )
    print("slowest acks: " + ", ".join(_slowest(run)))
    (bests, stats), (bests_after, stats_after) = run.rows_before, run.rows_after
    print(f"summary rows: board_bests {bests:,} → {bests_after:,}, player_stats {stats:,} → {stats_after:,}")
    if run.acks.errors:
        print(f"errors: {len(run.acks.errors)}, the first: {run.acks.errors[0]}")


def _slowest(run: Run, count: int = 5) -> list[str]:
    """The ``count`` slowest acks: each round trip, the window its action was sent in, how far into it,
    and the wall-clock time it was sent (to set beside a server's log)."""
    to_wall = time.time() - time.monotonic()
    slowest = sorted(zip(run.acks.took, run.acks.sent, strict=True), reverse=True)[:count]
    described = []
    for took, sent in slowest:
        window = next((w for w in run.windows if w.start <= sent < w.end), None)
        where = f"{window.name} +{sent - window.start:.1f} s" if window else "outside the windows"
        wall = time.strftime("%H:%M:%S", time.localtime(sent + to_wall)) + f"{(sent + to_wall) % 1:.3f}"[1:]
        described.append(f"{_ms(took)} ms ({where}, sent at {wall})")
    return described


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench_prune", description=__doc__.split("\n")[0])
    parser.add_argument("--games", type=int, default=200_000, help="finished games of the backlog")
    parser.add_argument("--players", type=int, default=100, help="connections playing, one game each")
    parser.add_argument("--rate", type=float, default=2000.0, help="actions a second offered, all players")
    parser.add_argument("--window", type=float, default=15.0, help="seconds of the calm and after windows")
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="sqlite")
    parser.add_argument("--postgres-url", default=os.environ.get("EIGHTOFF_TEST_POSTGRES_URL"))
    args = parser.parse_args(argv)
    if args.backend != "sqlite" and not args.postgres_url:
        parser.error("PostgreSQL needs --postgres-url (or EIGHTOFF_TEST_POSTGRES_URL)")
    if args.games < 1 or args.players < 1 or args.rate <= 0 or args.window <= 0:
        parser.error("--games, --players, --rate and --window must be positive")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    raise_nofile_limit()
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    with tempfile.TemporaryDirectory(prefix="eightoff-bench-prune-") as directory:
        runs = [run_backend(backend, args, Path(directory)) for backend in backends]
    for run in runs:
        report(run, args)
    print(f"\ncommand: python -m bench.bench_prune {' '.join(sys.argv[1:])}".rstrip())


if __name__ == "__main__":
    main()
