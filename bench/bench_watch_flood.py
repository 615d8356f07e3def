"""Attack benchmark: a bystander's round trip while 4 connections watch a long finished game in a loop.

Run from the project root::

    .venv/bin/python -m bench.bench_watch_flood                 (5 s calm, then 5 s under attack)
    .venv/bin/python -m bench.bench_watch_flood --actions 46795 --duration 10

A finished game of ``--actions`` moves (default 46,795, the longest an attacker built in 60 s before
games were bounded; the bound applies to new actions, so such a game may still be stored) is written
to a fresh SQLite file, then ``eightoff serve`` starts on it as a subprocess (the working tree's code,
as in ``bench_load``). A bystander plays move/undo round trips on its own game (100 a second), first
alone (calm), then while 4 other connections each send ``watch`` of the long game, wait for its
snapshot and send it again, as fast as the default rate limit lets them (200 a second each: the
server's default limits apply). It prints the bystander's p50 / p99 round trip in both phases, their
ratio (the calm phase is the same-run baseline) and the watches served per second. The attack starts
half a second before its phase is measured, so the one replay of the long game (in a worker thread)
falls before it.

Only loopback traffic; the server is stopped when the run ends. This is not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import msgpack  # type: ignore[import-untyped]
from websockets.asyncio.client import ClientConnection, connect

from bench.bench_load import CODE, SUBPROTOCOL, start_target, stop_process
from bench.bystander import paced_round_trips
from server.storage import Database, GameResult, GameStart, PlayerRecord, repository, upgrade_to_head

LONG_GAME = "long-finished-game"
ATTACKERS = 4
RATE_PER_SECOND = 200  # the server's default limit per connection, which the attackers keep to
BYSTANDER_RATE = 100  # round trips a second, well within the limit
DEFAULT_LIMITS = f"--rate-per-second {RATE_PER_SECOND} --rate-burst {2 * RATE_PER_SECOND}"


async def store_long_game(url: str, actions: int) -> None:
    """A resigned game of ``actions`` moves (t1→c5, c5→t1, …), written straight to the database."""
    await asyncio.to_thread(upgrade_to_head, url)
    database = Database.create(url, sqlite_synchronous="OFF")
    now = dt.datetime.now(dt.UTC)
    rows = [(LONG_GAME, v, "t1-c5" if v % 2 else "c5-t1") for v in range(1, actions + 1)]
    async with database.transaction() as conn:
        await repository.insert_player(conn, PlayerRecord("long-player", "long", "2" * 64, now))
        await repository.insert_game(conn, GameStart(LONG_GAME, "long-player", CODE, 8, None, now))
        await repository.insert_actions(conn, rows)
        await repository.finish_game(conn, GameResult(LONG_GAME, "resigned", 0, actions, 0, now, 0, False))
    await database.dispose()


async def open_player(url: str) -> ClientConnection:
    ws = await connect(url, subprotocols=[SUBPROTOCOL], compression=None, max_size=None, ping_interval=None)
    await ws.send(msgpack.packb({"type": "hello", "protocol": 1, "id": 1}))
    msgpack.unpackb(await ws.recv())
    return ws


async def bystander(url: str, seconds: float) -> list[float]:
    """Round trips of move/undo on the bystander's own game for ``seconds``."""
    ws = await open_player(url)
    latencies = await paced_round_trips(ws, CODE, seconds, BYSTANDER_RATE)
    await ws.close()
    return latencies


async def attacker(url: str, stop: asyncio.Event, served: list[int]) -> None:
    ws = await open_player(url)
    frame = msgpack.packb({"type": "watch", "id": 5, "game": LONG_GAME})
    next_send = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(max(0.0, next_send - time.perf_counter()))
        next_send = max(next_send + 1 / RATE_PER_SECOND, time.perf_counter())
        await ws.send(frame)
        reply = msgpack.unpackb(await ws.recv())
        if reply.get("type") != "snapshot":
            raise RuntimeError(f"watch refused: {reply}")
        served[0] += 1
    await ws.close()


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1000


async def measure(url: str, seconds: float) -> None:
    calm = await bystander(url, seconds)
    stop = asyncio.Event()
    served = [0]
    attackers = [asyncio.create_task(attacker(url, stop, served)) for _ in range(ATTACKERS)]
    await asyncio.sleep(0.5)  # the attack is under way (and the first watch's load is past)
    before = served[0]
    attacked = await bystander(url, seconds)
    watches = served[0] - before
    stop.set()
    await asyncio.gather(*attackers)
    print(f"{'phase':<14}{'round trips':>12}{'p50 ms':>9}{'p99 ms':>9}")
    for name, values in (("calm", calm), ("watch flood", attacked)):
        print(f"{name:<14}{len(values):>12}{percentile(values, 0.5):>9.2f}{percentile(values, 0.99):>9.2f}")
    p50_ratio = percentile(attacked, 0.5) / percentile(calm, 0.5)
    p99_ratio = percentile(attacked, 0.99) / percentile(calm, 0.99)
    rate = watches / seconds
    print(f"flood / calm: p50 x{p50_ratio:.2f}, p99 x{p99_ratio:.2f}; {rate:.0f} watches/s served")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--actions", type=int, default=46_795, help="moves of the long finished game")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds of each phase")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="eightoff-watch-flood-") as directory:
        workdir = Path(directory)
        asyncio.run(store_long_game(f"sqlite+aiosqlite:///{workdir / 'bench.sqlite3'}", args.actions))
        target = start_target("server", workdir, extra=DEFAULT_LIMITS)
        try:
            print(f"a finished game of {args.actions} actions; {ATTACKERS} connections watch it in a loop")
            asyncio.run(measure(target.url, args.duration))
        finally:
            stop_process(target.process)
    print(f"command: python -m bench.bench_watch_flood --actions {args.actions} --duration {args.duration}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
