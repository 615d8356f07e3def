"""Leaderboard benchmark: query latency at a million finished games, on SQLite and on PostgreSQL.

Run from the project root::

    .venv/bin/python -m bench.bench_leaderboard                       (1,000,000 games; minutes)
    .venv/bin/python -m bench.bench_leaderboard --games 100000        (a smaller world, quicker)
    .venv/bin/python -m bench.bench_leaderboard --backend sqlite      (one backend only)
    .venv/bin/python -m bench.bench_leaderboard --games 66500 --days 4  (the 1M world's week alone)

The last makes the games of the 1M world's week and no other (the four days from Monday 2026-11-30):
its players boards of the week and of all time have the shape of the 1M world's of the week (32,500
players, most of them tied: 9,000 have one win in one game), in about a minute.

PostgreSQL runs when ``--postgres-url`` or ``EIGHTOFF_TEST_POSTGRES_URL`` names a server, e.g.
``postgresql+asyncpg://postgres@127.0.0.1:5432/test``: as the tests do, it creates a fresh database
next to that one and drops it at the end, even on failure. SQLite uses a file in a temporary
directory (WAL, the server's connection settings).

**Loading** (a bulk loader, not the API). A seeded ``random.Random`` makes ``--games`` finished games
(default 1,000,000) of ``--players`` players (50,000; a few play much more than most), on ``--codes``
deals (1,000, a third of each variant) and daily challenges, over ``--days`` UTC days (60) ending on
2026-12-03, a Thursday: about 15 % are daily games, 55 % are won. Players and games go in with
multi-row inserts (SQLite: ``executemany`` in one transaction; PostgreSQL: ``COPY``), into the schema
of revision ``--rebuild-from`` (default `REBUILD_FROM`); the upgrade to head then builds the summary
tables from ``games`` with the migrations' own SQL, as on a production database that is upgraded.
(The tests check that this backfill gives exactly the rows the server maintains game by game.) Then
``ANALYZE`` (PostgreSQL: ``VACUUM FULL ANALYZE``, so that the sizes below are those of the live rows,
not of the rows a migration deleted, then ``VACUUM``, which sets the visibility map the rewrite left
empty, as autovacuum does on a running server: index-only scans then read no table page).

**Pruning.** Everything below is measured twice on the same database in the same run: with every
bucket the migration built, then after the closed day and week buckets are pruned as the server does
at the fixed clock (`server.services.pruning.BoardPruning`: its batches, no pause; SQLite then
``VACUUM``), with the rows deleted, the transactions, their average and longest time, the summary
rows per finished game by period, and each read's p50 and p99 over those with every bucket kept.
``--no-prune`` measures the first state only.

**Sizes.** Rows of ``games`` and of each summary table, and the bytes of every table and index
(SQLite: the ``dbstat`` table; PostgreSQL: ``pg_relation_size``), with the summary rows and the
bytes of the summaries and of ``games``' indexes per finished game. Then ``--finishes`` more games
(default 1,000) are finished one transaction each through ``repository.finish_game``, the server's
path: rows the database changed per finished game (SQLite ``total_changes()``; PostgreSQL the
tables' ``n_tup_ins + n_tup_upd + n_tup_del``), and on PostgreSQL the WAL bytes per finished game.

**Measuring.** The clock is fixed at 2026-12-03 18:00 UTC. For each board (deal and variant boards
over all time, the week and the day; the daily board of the day; the players board over all time,
the week and the day) it times ``LeaderboardService.leaderboard`` (the request as the protocol
parses it, the queries, the rows as the protocol builds them; no network) for:

- page 1 (20 rows);
- a deep page: the 50th page of 20 (rows 981-1000), reached by following 49 cursors first, or the
  last page of a board with fewer rows;
- ``around`` a player drawn at random among the board's rows (limit 20), a different one each time;
- and, alone, the count that ranks the middle row of the deal, variant C8 and players boards (all
  time): the one statement whose cost grows with the rank.

``--samples`` runs each (default 200, after 10 warm-up runs), reporting p50 and p99 in milliseconds,
and the ratio of each p99 to the p99 of a baseline measured in the same run: a primary-key lookup of
one random game through the same connection pool. Then it prints the query plan of every statement a
board read runs (SQLite: ``EXPLAIN QUERY PLAN``; PostgreSQL: ``EXPLAIN (ANALYZE, BUFFERS)``), for the
largest deal board, the C8 variant board and the players board, with a row of each board's middle as
the key. Target (the issue): every p99 under 20 ms on both backends at 1,000,000 games.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg  # type: ignore[import-untyped]
from alembic import command
from sqlalchemy import func, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

import protocol
from engine import Deal, daily_deal
from server.services.pruning import PRUNE_BATCH, BoardPruning
from server.services.rankings import LeaderboardService
from server.storage import Database, GameResult, GameStart, repository, upgrade_to_head
from server.storage import leaderboards as boards
from server.storage.db import _alembic_config, async_url
from server.storage.tables import board_bests, games, player_stats, rank_buckets

SEED = 20261130
LAST_DAY = dt.date(2026, 12, 3)  # a Thursday: the week so far has 4 days
NOW = dt.datetime.combine(LAST_DAY, dt.time(18), dt.UTC)
DAILY_SHARE = 0.15
WON_SHARE = 0.55
PAGE = 20
DEEP_PAGE = 50
WARMUP = 10
DATABASE_PREFIX = "eightoff_bench"


# --------------------------------------------------------------------------- the world


@dataclass(frozen=True)
class World:
    games: int
    players: int
    codes: int
    days: int

    def player_ids(self) -> list[str]:
        return [f"p{index:07d}" for index in range(self.players)]

    def deals(self, rng: random.Random) -> list[tuple[str, int]]:
        return [
            (Deal(rng.getrandbits(35), (8, 4, 2)[index % 3]).code(), (8, 4, 2)[index % 3])
            for index in range(self.codes)
        ]

    def game_rows(self) -> Iterator[tuple[Any, ...]]:
        """(id, player_id, code, cells, daily_date, status, score, moves, undos, started_at, finished_at,
        duration_ms, won) of every game, deterministic."""
        rng = random.Random(SEED)
        deals = self.deals(rng)
        first_day = LAST_DAY - dt.timedelta(days=self.days - 1)
        dailies = {
            (first_day + dt.timedelta(days=d), cells): daily_deal(
                first_day + dt.timedelta(days=d), cells
            ).code()
            for d in range(self.days)
            for cells in (8, 4, 2)
        }
        midnight = dt.datetime.combine(first_day, dt.time(), dt.UTC)
        for index in range(self.games):
            player = f"p{int(self.players * rng.random() ** 2):07d}"  # a few players play a lot
            day_number = rng.randrange(self.days)
            finished_at = midnight + dt.timedelta(days=day_number, microseconds=rng.randrange(86_400_000_000))
            if finished_at > NOW:  # the last day ends at the clock
                finished_at -= dt.timedelta(hours=6)
            daily_date = None
            if rng.random() < DAILY_SHARE:
                cells = (8, 4, 2)[rng.randrange(3)]
                daily_date = first_day + dt.timedelta(days=day_number)
                code = dailies[daily_date, cells]
            else:
                code, cells = deals[rng.randrange(len(deals))]
            won = rng.random() < WON_SHARE
            if won:
                moves, score = rng.randrange(70, 260), 520 + 5 * rng.randrange(0, 60)
            else:
                moves, score = rng.randrange(1, 300), 5 * rng.randrange(0, 100)
            duration_ms = rng.randrange(30_000, 2_400_000)
            started_at = finished_at - dt.timedelta(milliseconds=duration_ms)
            yield (
                f"g{index:09d}",
                player,
                code,
                cells,
                daily_date,
                "won" if won else "resigned",
                score,
                moves,
                rng.randrange(0, 20),
                started_at,
                finished_at,
                duration_ms,
                won,
            )


# --------------------------------------------------------------------------- loading


def _sqlite_time(moment: dt.datetime) -> str:
    """SQLAlchemy's SQLite storage of our UTCDateTime: naive UTC with microseconds."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def _sqlite_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    daily_date = row[4].isoformat() if row[4] else None
    return (
        *row[:4],
        daily_date,
        *row[5:9],
        _sqlite_time(row[9]),
        _sqlite_time(row[10]),
        row[11],
        int(row[12]),
    )


def load_sqlite(path: Path, world: World) -> None:
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=OFF")
        connection.execute("BEGIN")
        created = _sqlite_time(NOW - dt.timedelta(days=400))
        connection.executemany(
            "INSERT INTO players (id, name, token_hash, created_at) VALUES (?, ?, ?, ?)",
            ((player, f"player {player}", f"{player:0>64}", created) for player in world.player_ids()),
        )
        connection.executemany(
            "INSERT INTO games (id, player_id, code, cells, daily_date, status, score, moves, undos, "
            "started_at, finished_at, duration_ms, won) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (_sqlite_row(row) for row in world.game_rows()),
        )
        connection.execute("COMMIT")
    finally:
        connection.close()


async def load_postgres(url: str, world: World) -> None:
    connection = await asyncpg.connect(make_url(url).set(drivername="postgresql").render_as_string(False))
    try:
        created = NOW - dt.timedelta(days=400)
        await connection.copy_records_to_table(
            "players",
            records=[
                (player, f"player {player}", f"{player:0>64}", created) for player in world.player_ids()
            ],
            columns=["id", "name", "token_hash", "created_at"],
        )
        columns = [
            "id", "player_id", "code", "cells", "daily_date", "status", "score", "moves", "undos",
            "started_at", "finished_at", "duration_ms", "won",
        ]  # fmt: skip
        rows = world.game_rows()
        while batch := [row for _, row in zip(range(100_000), rows, strict=False)]:
            await connection.copy_records_to_table("games", records=batch, columns=columns)
    finally:
        await connection.close()


#: The revision whose schema the games are loaded into by default: the one before the summaries' latest
#: rebuild, so that the upgrade to head builds them with the migration's own SQL.
REBUILD_FROM = "f1c0b3814649"


def load_at(url: str, revision: str, load: Callable[[], None]) -> tuple[float, float]:
    """Load the games into the schema of ``revision``, then upgrade to head (the migrations after it
    build the summaries from ``games``): the seconds each step took."""
    started = time.perf_counter()
    command.upgrade(_alembic_config(url), revision)
    load()
    loaded = time.perf_counter()
    upgrade_to_head(url)
    return loaded - started, time.perf_counter() - loaded


async def analyze(url: str, *, vacuum: bool = False) -> None:
    """``ANALYZE`` (SQLite, after ``VACUUM`` when ``vacuum``: the pages of pruned rows given back) or
    ``VACUUM FULL ANALYZE`` then ``VACUUM`` (PostgreSQL): the rewrite leaves the visibility map
    empty, so without the plain ``VACUUM`` that sets it (autovacuum's work on a running server) every
    index-only scan fetched each row from the table as well (a rank count over 24,675 rows: 24,675
    heap fetches, 14 ms)."""
    engine = create_async_engine(async_url(url), poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            if engine.dialect.name == "sqlite":
                if vacuum:
                    await conn.execute(text("VACUUM"))
                await conn.execute(text("ANALYZE"))
            else:
                await conn.execute(text("VACUUM FULL ANALYZE"))
                await conn.execute(text("VACUUM"))
    finally:
        await engine.dispose()


async def prune(url: str) -> str:
    """Prune the closed buckets as the server does at `NOW` (`BoardPruning`, its batches, no pause):
    the summary rows before and after, per finished game, and what it took."""
    database = Database.create(url, sqlite_synchronous="FULL")
    try:
        before = await _summary_rows(database)
        started = time.perf_counter()
        pruned = await BoardPruning(database, pause=0, clock=lambda: NOW).prune()
        seconds = time.perf_counter() - started
        after = await _summary_rows(database)
    finally:
        await database.dispose()
    finished = before[0]
    return (
        f"  pruned the buckets before the previous day and week (as the server does at "
        f"{NOW:%Y-%m-%d %H:%M} UTC): {pruned.buckets} buckets, {pruned.board_rows:,} board_bests and "
        f"{pruned.stats_rows:,} player_stats rows ({pruned.count_rows:,} rank_buckets rows) in "
        f"{pruned.transactions:,} transactions of at most {PRUNE_BATCH} rows, "
        f"{seconds:.1f} s, a transaction {pruned.seconds / max(pruned.transactions, 1) * 1000:.2f} ms on "
        f"average, the longest {pruned.longest * 1000:.1f} ms (load average "
        f"{_load_average()})\n  summary rows per finished game: {sum(before[1:]) / finished:.2f} before, "
        f"{sum(after[1:]) / finished:.2f} after (board_bests {after[1] / finished:.2f}, player_stats "
        f"{after[2] / finished:.2f}, rank_buckets {after[3] / finished:.2f})"
    )


def _kind(scope: str) -> str:
    """all / daily / day / week: the period of a summary row's scope."""
    scope = scope.removeprefix("B/")
    if scope.startswith("Y/"):
        return "daily"
    return {"a": "all", "d": "day", "w": "week"}[scope.split("/")[-1][0]]


async def rows_by_period(url: str) -> str:
    """The summary rows per finished game by the period of their bucket (daily: the daily boards)."""
    database = Database.create(url)
    try:
        counts = dict.fromkeys(("all", "daily", "day", "week"), 0)
        async with database.connection() as conn:
            finished = await conn.scalar(select(func.count()).where(games.c.finished_at.is_not(None)))
            for table in (board_bests, player_stats, rank_buckets):
                grouped = await conn.execute(select(table.c.scope, func.count()).group_by(table.c.scope))
                for scope, count in grouped:
                    counts[_kind(scope)] += count
    finally:
        await database.dispose()
    per_game = max(int(finished or 0), 1)
    return "  summary rows per finished game by period: " + ", ".join(
        f"{kind} {count / per_game:.2f}" for kind, count in counts.items()
    )


async def _summary_rows(database: Database) -> tuple[int, int, int, int]:
    """(finished games, board_bests rows, player_stats rows, rank_buckets rows)."""
    async with database.connection() as conn:
        finished = await conn.scalar(select(func.count()).where(games.c.finished_at.is_not(None)))
        counts = [
            await conn.scalar(select(func.count()).select_from(table))
            for table in (board_bests, player_stats, rank_buckets)
        ]
    return int(finished or 0), *(int(count or 0) for count in counts)  # type: ignore[return-value]


# --------------------------------------------------------------------------- measuring


@dataclass
class Board:
    name: str
    fields: dict[str, Any]
    kind: str  # games | wins
    scope: str


def boards_to_measure(busiest_code: str) -> list[Board]:
    today = LAST_DAY
    result = []
    for period in ("all", "week", "day"):
        bucket = boards.period_bucket(period, today)
        result.append(
            Board(f"deal {period}", {"board": "deal", "code": busiest_code, "period": period}, "games",
                  boards.deal_scope(busiest_code, "moves", bucket))
        )  # fmt: skip
        result.append(
            Board(f"variant C8 {period}", {"board": "variant", "cells": 8, "period": period}, "games",
                  boards.variant_scope(8, "moves", bucket))
        )  # fmt: skip
    result.append(Board("daily C8 today", {"board": "daily"}, "games", boards.daily_scope(today, 8, "moves")))
    for period in ("all", "week", "day"):
        bucket = boards.period_bucket(period, today)  # type: ignore[arg-type]
        result.append(
            Board(
                f"players {period}",
                {"board": "players", "period": period},
                "wins",
                boards.player_scope(bucket),
            )
        )
    return result


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def timed(call: Callable[[], Awaitable[Any]], samples: int) -> list[float]:
    for _ in range(WARMUP):
        await call()
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        await call()
        times.append((time.perf_counter() - started) * 1000)
    return times


Result = tuple[str, str, float, float, int]  # board, read, p50, p99, rows on the board


async def measure(url: str, world: World, samples: int) -> tuple[list[Result], list[str]]:
    database = Database.create(url)
    service = LeaderboardService(database, clock=lambda: NOW)
    rng = random.Random(SEED + 1)

    async def ask(**fields: Any) -> dict[str, Any]:
        request = protocol.parse_client_message({"type": "leaderboard", **fields})
        assert isinstance(request, protocol.LeaderboardRequest)
        return (await service.leaderboard(request)).to_wire()

    results: list[Result] = []
    plans: list[str] = []
    try:
        async with database.connection() as conn:
            busiest_deal = select(games.c.code).group_by(games.c.code)
            busiest = (
                await conn.execute(busiest_deal.order_by(func.count().desc(), games.c.code).limit(1))
            ).one()[0]
            sizes = [
                await conn.scalar(select(func.count()).select_from(table))
                for table in (games, board_bests, player_stats)
            ]
        print(
            f"  {sizes[0]:,} games; summaries: {sizes[1]:,} board_bests rows, "
            f"{sizes[2]:,} player_stats rows; busiest deal {busiest}"
        )

        lookups = iter([f"g{rng.randrange(world.games):09d}" for _ in range(samples + WARMUP)])

        async def baseline() -> None:
            async with database.connection() as conn:
                (await conn.execute(select(games).where(games.c.id == next(lookups)))).one()

        results.append(
            ("baseline: one game by primary key", "", *_p50_p99(await timed(baseline, samples)), 1)
        )
        for board in boards_to_measure(busiest):
            results += await _measure_board(board, ask, database, rng, samples)
        async with database.connection() as conn:
            for board in boards_to_measure(busiest):
                if board.name in ("deal all", "variant C8 all", "players all"):
                    results += await _rank_count_and_plans(conn, board, samples, plans)
    finally:
        await database.dispose()
    return results, plans


async def _measure_board(
    board: Board,
    ask: Callable[..., Awaitable[dict[str, Any]]],
    database: Database,
    rng: random.Random,
    samples: int,
) -> list[Result]:
    """Page 1, a deep page and around a random player, of one board."""
    table = board_bests if board.kind == "games" else player_stats
    async with database.connection() as conn:
        members = list(await conn.scalars(select(table.c.player_id).where(table.c.scope == board.scope)))
    size = len(members)
    first_page = _p50_p99(await timed(lambda: ask(**board.fields, limit=PAGE), samples))
    reply, page_number = await ask(**board.fields, limit=PAGE), 1
    deep_fields = {**board.fields, "limit": PAGE}
    while "next" in reply and page_number < DEEP_PAGE:
        deep_fields["after"] = reply["next"]
        reply, page_number = await ask(**deep_fields), page_number + 1
    label = f"page {page_number}" + (f" (ranks {reply['rows'][0]['rank']}..)" if page_number > 1 else "")
    deep_page = _p50_p99(await timed(lambda: ask(**deep_fields), samples))
    if members:
        picks = iter([rng.choice(members) for _ in range(samples + WARMUP)])
        around = _p50_p99(await timed(lambda: ask(**board.fields, limit=PAGE, around=next(picks)), samples))
    else:  # a board this small a data set left empty: nobody to stand around
        around = (float("nan"), float("nan"))
    return [
        (board.name, "page 1", *first_page, size),
        (board.name, label, *deep_page, size),
        (board.name, "around a random player", *around, size),
    ]


async def _rank_count_and_plans(conn: Any, board: Board, samples: int, plans: list[str]) -> list[Result]:
    """Time the rank count of the board's middle row alone, and add the plans of its statements."""
    middle = await _middle_key(conn, board)
    if middle is None:
        return []
    key, player, size = middle
    statements = boards.statements(board.kind, board.scope, key, player, limit=PAGE)  # type: ignore[arg-type]
    rank = statements["rank of a row"]

    async def count() -> None:
        (await conn.execute(rank)).one()

    smaller = (await conn.execute(rank)).one()[0]
    timing = _p50_p99(await timed(count, samples))
    plans.append(f"-- {board.name} (scope {board.scope!r}), key of the middle row")
    for name, statement in statements.items():
        plans.append(f"   {name}:")
        plans.extend(
            f"      {line}"
            for line in await boards.explain(conn, statement, analyze=True)
            if not _is_plan_detail(line)
        )
    return [(board.name, f"rank count alone ({smaller:,} smaller)", *timing, size)]


def _is_plan_detail(line: str) -> bool:
    """PostgreSQL plan lines left out of the report: buffers, planning and memoize bookkeeping."""
    return line.strip().startswith(("Buffers:", "Planning:", "Cache Key:", "Cache Mode:", "Hits:"))


def _p50_p99(times: list[float]) -> tuple[float, float]:
    return statistics.median(times), percentile(times, 0.99)


async def _middle_key(conn: Any, board: Board) -> tuple[tuple[Any, ...], str, int] | None:
    """The key and player of the board's middle row, and the board's size."""
    if board.kind == "games":
        count = await conn.scalar(
            select(func.count()).select_from(board_bests).where(board_bests.c.scope == board.scope)
        )
        row = (
            await conn.execute(
                select(
                    board_bests.c.sort_key,
                    board_bests.c.finished_at,
                    board_bests.c.game_id,
                    board_bests.c.player_id,
                )
                .where(board_bests.c.scope == board.scope)
                .order_by(board_bests.c.sort_key, board_bests.c.finished_at, board_bests.c.game_id)
                .offset(count // 2)
                .limit(1)
            )
        ).first()
        return None if row is None else ((row[0], row[1], row[2]), row[3], count)
    count = await conn.scalar(
        select(func.count()).select_from(player_stats).where(player_stats.c.scope == board.scope)
    )
    row = (
        await conn.execute(
            select(player_stats.c.wins_key, player_stats.c.player_id)
            .where(player_stats.c.scope == board.scope)
            .order_by(player_stats.c.wins_key, player_stats.c.player_id)
            .offset(count // 2)
            .limit(1)
        )
    ).first()
    return None if row is None else ((row[0], row[1]), row[1], count)


# --------------------------------------------------------------------------- backends


@contextmanager
def sqlite_database() -> Iterator[tuple[str, Path]]:
    with tempfile.TemporaryDirectory(prefix="eightoff-bench-") as directory:
        path = Path(directory) / "bench.db"
        yield f"sqlite+aiosqlite:///{path}", path


@contextmanager
def postgres_database(server_url: str) -> Iterator[str]:
    name = f"{DATABASE_PREFIX}_{os.getpid()}_{random.getrandbits(40):010x}"

    async def run(statement: str) -> None:
        engine = create_async_engine(async_url(server_url), isolation_level="AUTOCOMMIT", poolclass=NullPool)
        try:
            async with engine.connect() as conn:
                await conn.execute(text(statement))
        finally:
            await engine.dispose()

    asyncio.run(run(f'CREATE DATABASE "{name}"'))
    try:
        yield async_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@dataclass(frozen=True)
class Options:
    samples: int
    rebuild_from: str
    finishes: int
    prune: bool = True


#: What one backend's run measured: (state, results, plans) for every state measured (all kept, pruned).
Measured = list[tuple[str, list["Result"], list[str]]]


def run_backend(backend: str, world: World, options: Options, postgres_url: str | None) -> Measured:
    print(f"\n== {backend}: loading {world.games:,} games of {world.players:,} players …", flush=True)
    if backend == "sqlite":
        with sqlite_database() as (url, path):
            return _load_and_measure(url, world, options, lambda: load_sqlite(path, world), path)
    assert postgres_url is not None
    with postgres_database(postgres_url) as url:
        return _load_and_measure(url, world, options, lambda: asyncio.run(load_postgres(url, world)), None)


def _load_and_measure(
    url: str, world: World, options: Options, load: Callable[[], None], path: Path | None
) -> Measured:
    """Measure the boards with every bucket kept, then (unless ``--no-prune``) once more after the
    pruning, on the same database in the same run: the two tables' ratios are comparable."""
    loading, building = load_at(url, options.rebuild_from, load)
    print(
        f"  games loaded at revision {options.rebuild_from} in {loading:.1f} s; upgraded to head "
        f"(summaries built by the migrations) in {building:.1f} s (load average {_load_average()})",
        flush=True,
    )
    measured: Measured = [
        ("every bucket kept", *_analyze_and_measure(url, world, options, path, vacuum=False))
    ]
    if options.prune:
        print(asyncio.run(prune(url)), flush=True)
        measured.append(("pruned", *_analyze_and_measure(url, world, options, path, vacuum=True)))
    if options.finishes:
        print(asyncio.run(finish_probe(url, world, options.finishes)), flush=True)
    return measured


def _analyze_and_measure(
    url: str, world: World, options: Options, path: Path | None, *, vacuum: bool
) -> tuple[list[Result], list[str]]:
    started = time.perf_counter()
    asyncio.run(analyze(url, vacuum=vacuum))
    size = f", file {path.stat().st_size / 2**20:,.0f} MiB" if path is not None else ""
    print(f"  ANALYZE {time.perf_counter() - started:.1f} s{size}", flush=True)
    print("\n".join(asyncio.run(sizes(url))), flush=True)
    print(asyncio.run(rows_by_period(url)), flush=True)
    return asyncio.run(measure(url, world, options.samples))


def _load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


# --------------------------------------------------------------------------- sizes and writes

_SUMMARY_TABLES = ("board_bests", "player_stats", "rank_buckets")
_SQLITE_SIZES = """
SELECT d.name, COALESCE(m.tbl_name, d.name), SUM(d.pgsize)
FROM dbstat AS d LEFT JOIN sqlite_master AS m ON m.name = d.name
GROUP BY d.name ORDER BY 3 DESC
"""
_POSTGRES_SIZES = """
SELECT c.relname, COALESCE(t.relname, c.relname), pg_relation_size(c.oid)
FROM pg_class AS c
LEFT JOIN pg_index AS i ON i.indexrelid = c.oid
LEFT JOIN pg_class AS t ON t.oid = i.indrelid
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'i')
ORDER BY 3 DESC
"""


async def sizes(url: str) -> list[str]:
    """Rows of games and of the summaries, bytes of every table and index, and both per finished game."""
    engine = create_async_engine(async_url(url), poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            query = _SQLITE_SIZES if engine.dialect.name == "sqlite" else _POSTGRES_SIZES
            result: list[Any] = list((await conn.exec_driver_sql(query)).all())
            relations = [(str(row[0]), str(row[1]), int(row[2])) for row in result]
            finished_games = select(func.count()).where(games.c.finished_at.is_not(None))
            finished = int(await conn.scalar(finished_games) or 0)
            rows = {
                table: int((await conn.exec_driver_sql(f"SELECT count(*) FROM {table}")).scalar() or 0)
                for table in _SUMMARY_TABLES
            }
    finally:
        await engine.dispose()
    per_game = max(finished, 1)
    lines = [f"  {finished:,} finished games; relations of games and the summaries, bytes:"]
    for name, table, size in relations:
        if table in ("games", *_SUMMARY_TABLES) and size:
            kind = "table" if name == table else "index"
            lines.append(f"    {name:52} {kind:6} {size / 2**20:>10,.1f} MiB {size / per_game:>8,.1f} B/game")
    summary_rows = sum(rows.values())
    summary_bytes = sum(size for _, table, size in relations if table in _SUMMARY_TABLES)
    games_indexes = sum(size for name, table, size in relations if table == "games" and name != "games")
    lines.append(
        "  summary rows: "
        + ", ".join(f"{table} {count:,}" for table, count in rows.items())
        + f"; {summary_rows / per_game:.2f} per finished game; summaries {summary_bytes / 2**20:,.1f} MiB "
        f"({summary_bytes / per_game:,.0f} B/game), games' indexes {games_indexes / 2**20:,.1f} MiB "
        f"({games_indexes / per_game:,.0f} B/game)"
    )
    return lines


_POSTGRES_CHANGES = "SELECT COALESCE(SUM(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_xact_user_tables"


async def finish_probe(url: str, world: World, count: int) -> str:
    """Finish ``count`` more games through ``repository.finish_game``, one transaction each: the rows
    the database changed per finish (the game's own row included) and the time of a finish."""
    database = Database.create(url, sqlite_synchronous="OFF")
    rng = random.Random(SEED + 2)
    sqlite_db = database.is_sqlite
    changed = 0
    times = []
    try:
        async with database.engine.connect() as conn:
            for index in range(count):
                game_id, player = f"probe{index:06d}", f"p{rng.randrange(world.players):07d}"
                code = Deal(rng.getrandbits(35), (8, 4, 2)[index % 3]).code()
                async with conn.begin():
                    await repository.insert_game(
                        conn, GameStart(game_id, player, code, (8, 4, 2)[index % 3], None, NOW)
                    )
                won = rng.random() < WON_SHARE
                result = GameResult(
                    game_id, "won" if won else "resigned", rng.randrange(0, 700, 5), rng.randrange(60, 300),
                    0, NOW + dt.timedelta(seconds=index), rng.randrange(30_000, 2_400_000), won,
                )  # fmt: skip
                started = time.perf_counter()
                async with conn.begin():
                    before = await _changes(conn, sqlite_db)
                    assert await repository.finish_game(conn, result)
                    changed += await _changes(conn, sqlite_db) - before
                times.append((time.perf_counter() - started) * 1000)
    finally:
        await database.dispose()
    p50, p99 = _p50_p99(times)
    return (
        f"  {count:,} more games finished through repository.finish_game: {changed / count:.2f} rows "
        f"changed per finish (the game's row included); a finish p50 {p50:.2f} / p99 {p99:.2f} ms "
        f"(load average {_load_average()})"
    )


async def _changes(conn: Any, sqlite_db: bool) -> int:
    query = "SELECT total_changes()" if sqlite_db else _POSTGRES_CHANGES
    return int((await conn.exec_driver_sql(query)).scalar() or 0)


def _print_table(
    backend: str,
    state: str,
    results: list[Result],
    kept: list[Result] | None,
    samples: int,
    world: World,
) -> None:
    """One backend's timings in one state; beside those after the pruning, their p50 and p99 over those
    of the same read with every bucket kept (the reads come in the same order)."""
    base_p99 = results[0][3]
    print(
        f"\n{backend}, {state}: {world.games:,} games, {samples} samples each, times in ms "
        f"(load average at the end {_load_average()})"
    )
    versus = f"{'p50/kept':>10}{'p99/kept':>10}" if kept else ""
    print(f"{'board':20}{'read':32}{'rows':>9}{'p50':>9}{'p99':>9}{'p99/base':>10}{versus}")
    for index, (name, what, p50, p99, size) in enumerate(results):
        line = f"{name:20}{what:32}{size:>9,}{p50:>9.2f}{p99:>9.2f}{p99 / base_p99:>10.1f}"
        if kept and index < len(kept) and kept[index][0] == name:
            line += f"{p50 / kept[index][2]:>10.2f}{p99 / kept[index][3]:>10.2f}"
        print(line)
    worst = max(p99 for _, _, _, p99, _ in results[1:])
    print(f"worst p99 {worst:.2f} ms: {'within' if worst < 20 else 'OVER'} the 20 ms target")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--games", type=int, default=1_000_000)
    parser.add_argument("--players", type=int, default=50_000)
    parser.add_argument("--codes", type=int, default=1_000)
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument(
        "--rebuild-from",
        default=REBUILD_FROM,
        help="the revision whose schema the games are loaded into; the upgrade to head builds the summaries",
    )
    parser.add_argument("--finishes", type=int, default=1000, help="games finished one by one at the end")
    parser.add_argument(
        "--no-prune",
        dest="prune",
        action="store_false",
        help="keep every closed day and week bucket (the server prunes those older than the previous one)",
    )
    parser.add_argument("--postgres-url", default=os.environ.get("EIGHTOFF_TEST_POSTGRES_URL"))
    args = parser.parse_args(argv)
    world = World(args.games, args.players, args.codes, args.days)
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    if "postgresql" in backends and not args.postgres_url:
        print("PostgreSQL skipped: no --postgres-url and EIGHTOFF_TEST_POSTGRES_URL is not set")
        backends.remove("postgresql")
    started = time.perf_counter()
    tables = {}
    for backend in backends:
        options = Options(args.samples, args.rebuild_from, args.finishes, args.prune)
        tables[backend] = run_backend(backend, world, options, args.postgres_url)
    for backend, states in tables.items():
        kept = states[0][1]
        for state, results, _plans in states:
            _print_table(backend, state, results, None if results is kept else kept, args.samples, world)
    for backend, states in tables.items():
        print(f"\n{backend}: query plans ({states[-1][0]})")
        print("\n".join(states[-1][2]))
    print(f"\ncommand: python -m bench.bench_leaderboard {' '.join(sys.argv[1:])}".rstrip())
    print(f"total run {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
