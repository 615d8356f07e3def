"""A/B of a leaderboard rank: the count of every row before it (A, the rating board's way) against the
``rank_buckets`` sum plus the count within the row's bucket (B), on the largest board's shape.

Run from the project root::

    .venv/bin/python -m bench.bench_rank_buckets                      (SQLite, and PostgreSQL if configured)
    .venv/bin/python -m bench.bench_rank_buckets --backend sqlite --players 50000 --filler 2000000

One scope shaped like bench_leaderboard's variant C8 all-time board at 1M games (``--players``
players, each the best of their games there: about 333,000 games drawn as bench_leaderboard draws
them), written through the triggers (which build the counts), plus ``--filler`` rows of other scopes
(a deal board each of 800 players, so that the index is not the board alone). Then, in one process
and interleaved (A, B, A, B, ... on a random player each time, the same players for both), each of:

- a game by its primary key (the same for A and B: the floor of a read, and the noise's measure);
- the rank statement alone for that player's key;
- the whole page around the player (`leaderboards._around`: rows, then the rank), as the server reads.

Prints p50 and p99 in ms and the B/A ratios, with the load average, and the mean CPU time of this
process per read (on SQLite the database's work too, and much less noisy on a busy machine than the
wall-clock times; on PostgreSQL the client's side only). PostgreSQL runs when
``--postgres-url`` or ``EIGHTOFF_TEST_POSTGRES_URL`` names a server (a database of its own, dropped).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import insert, select, text

from bench.bench_leaderboard import postgres_database, sqlite_database
from server.storage import Database, upgrade_to_head
from server.storage import leaderboards as boards
from server.storage.tables import board_bests, games, players

SCOPE = boards.variant_scope(8, "moves", "a")
FINISHED = dt.datetime(2026, 12, 3, tzinfo=dt.UTC)
CHUNK = 5000


def best_keys(players: int, games: int, rng: random.Random) -> dict[str, int]:
    """Each player's best ``moves`` key over ``games`` games drawn as bench_leaderboard draws them."""
    best: dict[str, int] = {}
    for _ in range(games):
        player = f"p{int(players * rng.random() ** 2):07d}"
        won = rng.random() < 0.55
        moves = rng.randrange(70, 260) if won else rng.randrange(1, 300)
        key = boards.game_sort_key(
            "moves", won=won, moves=moves, duration_ms=rng.randrange(30_000, 2_400_000), score=0
        )
        best[player] = min(key, best.get(player, key))
    return best


async def load(url: str, best: dict[str, int], filler: int, rng: random.Random) -> None:
    rows = [
        {
            "scope": SCOPE,
            "player_id": player,
            "sort_key": key,
            "finished_at": FINISHED,
            "game_id": f"g{player}",
        }
        for player, key in best.items()
    ]
    rows += [
        {
            "scope": f"D/EO1-C8-{index // 800:07d}/m/a",
            "player_id": f"f{index % 800:05d}",
            "sort_key": rng.randrange(1 << 41, 300 << 41),
            "finished_at": FINISHED,
            "game_id": f"f{index}",
        }
        for index in range(filler)
    ]
    people = [
        {"id": player, "name": player, "token_hash": f"{player:0>64}", "created_at": FINISHED}
        for player in best
    ]
    played = [
        {
            "id": f"g{player}",
            "player_id": player,
            "code": "EO1-C8-AAAAAFA",
            "cells": 8,
            "status": "resigned" if key & boards.LOST_BIT else "won",
            "won": not key & boards.LOST_BIT,
            "moves": key >> 41 & boards.MOVES_CAP,
            "duration_ms": key & boards.DURATION_CAP,
            "started_at": FINISHED,
            "finished_at": FINISHED,
        }
        for player, key in best.items()
    ]
    database = Database.create(url)
    try:
        for table, values in ((players, people), (games, played)):
            for first in range(0, len(values), CHUNK):
                async with database.transaction() as conn:
                    await conn.execute(insert(table), values[first : first + CHUNK])
        for first in range(0, len(rows), CHUNK):
            async with database.transaction() as conn:
                await conn.execute(insert(board_bests), rows[first : first + CHUNK])
        async with database.transaction() as conn:
            await conn.execute(text("ANALYZE"))
    finally:
        await database.dispose()
    if url.startswith("postgresql"):  # the visibility map, as autovacuum leaves it on a running server
        await _vacuum(url)


async def _vacuum(url: str) -> None:
    database = Database.create(url)
    try:
        async with database.connection() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text("VACUUM ANALYZE"))
    finally:
        await database.dispose()


async def measure(url: str, best: dict[str, int], samples: int, rng: random.Random) -> list[str]:
    counted = boards._GAME_BOARD
    counting = dataclasses.replace(counted, counted=None)
    players = rng.sample(sorted(best), min(samples, len(best)))
    database = Database.create(url)
    lines = []
    try:
        for name, read in (("baseline", _baseline), ("rank statement", _rank), ("page around", _around)):
            times: dict[str, list[float]] = {"A count": [], "B buckets": []}
            cpu: dict[str, list[float]] = {"A count": [], "B buckets": []}
            for index, player in enumerate([*players[:10], *players]):
                for label, board in (("A count", counting), ("B buckets", counted)):
                    started, started_cpu = time.perf_counter(), time.process_time()
                    async with database.connection() as conn:
                        await boards.use_one_snapshot(conn)
                        await read(conn, board, player, best[player])
                    if index >= 10:  # after a warm-up
                        times[label].append((time.perf_counter() - started) * 1000)
                        cpu[label].append((time.process_time() - started_cpu) * 1000)
            (a50, a99), (b50, b99) = (_p50_p99(times[label]) for label in times)
            a_cpu, b_cpu = (statistics.mean(cpu[label]) for label in cpu)
            lines.append(
                f"  {name:15} A count p50 {a50:6.2f} p99 {a99:6.2f} ms | "
                f"B buckets p50 {b50:6.2f} p99 {b99:6.2f} ms | B/A p50 {b50 / a50:.2f} p99 {b99 / a99:.2f}"
                f" | this process's CPU per read A {a_cpu:.2f} B {b_cpu:.2f} ms, B/A {b_cpu / a_cpu:.2f}"
            )
    finally:
        await database.dispose()
    return lines


async def _baseline(conn: Any, board: Any, player: str, key: int) -> None:
    """A game by its primary key: the floor of a read through the same path (both sides the same)."""
    await conn.execute(select(games.c.moves).where(games.c.id == f"g{player}"))


async def _rank(conn: Any, board: Any, player: str, key: int) -> None:
    await conn.execute(boards._rank_statement(board, SCOPE, (key, FINISHED, f"g{player}")))


async def _around(conn: Any, board: Any, player: str, key: int) -> None:
    """`leaderboards._around`'s two statements, the rank by ``board``'s way (rows of the same board)."""
    statement = boards._around_statement(boards._GAME_BOARD, SCOPE, player, 20)
    rows = (await conn.execute(statement)).all()
    assert rows, player
    await boards._ranks(conn, board, SCOPE, [tuple(row[:3]) for row in rows[:20]])


def _p50_p99(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def run(backend: str, url: str, options: argparse.Namespace) -> None:
    rng = random.Random(23)
    best = best_keys(options.players, options.games, rng)
    upgrade_to_head(url)
    started = time.perf_counter()
    asyncio.run(load(url, best, options.filler, rng))
    seconds = time.perf_counter() - started
    print(
        f"== {backend}: {len(best):,} players on {SCOPE}, {options.filler:,} filler rows, loaded in "
        f"{seconds:.1f} s; {options.samples} samples each, load {_load()}",
        flush=True,
    )
    for line in asyncio.run(measure(url, best, options.samples, rng)):
        print(line, flush=True)
    print(f"  (load {_load()})", flush=True)


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--players", type=int, default=50_000)
    parser.add_argument("--games", type=int, default=333_000)
    parser.add_argument("--filler", type=int, default=500_000)
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--postgres-url", default=os.environ.get("EIGHTOFF_TEST_POSTGRES_URL"))
    options = parser.parse_args(argv)
    if options.backend in ("sqlite", "both"):
        with sqlite_database() as (url, _):
            run("sqlite", url, options)
    if options.backend in ("postgresql", "both") and options.postgres_url:
        with postgres_database(options.postgres_url) as url:
            run("postgresql", url, options)


if __name__ == "__main__":
    main()
