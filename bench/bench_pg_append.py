"""PostgreSQL append micro-benchmark: the CPU per action row of a group commit, in the server's process
(SQLAlchemy + asyncpg on the event loop) and in the PostgreSQL backend that serves it, variant by variant.

Each variant gets a database of its own on the server of ``--postgres-url`` (``bench_load_<pid>_<k>``,
migrated by the real migrations, dropped at the end), with one player and ``--games`` games (100) being
played; then commits of ``--batch`` action rows (5 and 51: what the pipeline commits at bench_load
N = 100 at 2,000 actions/s and at 8,000/s or saturated), each row the next version of a distinct game,
go through `server.storage.Database.transaction` as `SqlAlchemyBackend` commits them. A row in
``PROGRESS_EVERY`` carries the game's figures (an UPDATE of its row in the same commit).

Variants change one thing each:

- ``executemany``: the INSERT of `repository.INSERT_ACTIONS` with one parameter set per row, which
  asyncpg binds and executes once per row in the backend (the server's statement before this bench).
- ``unnest``: `repository.append_actions` as it is: the rows as three arrays, one statement.
- ``unnest, no pre-ping``: the same through an engine without ``pool_pre_ping``: the server's engine
  pings each connection it checks out, and SQLAlchemy's asyncpg ping is BEGIN, an empty query and a
  ROLLBACK, three round trips before every commit.

Warm-up commits first, then ``--rounds`` rounds of ``--commits`` commits, the variants taking turns
within each round. It prints, per variant and batch size, the medians over the rounds of the client's
CPU per row (``time.process_time``: this process, the event loop's SQLAlchemy and asyncpg work), the
backends' CPU per row (``utime + stime`` of the backends connected to the variant's database, from
``/proc``: PostgreSQL must run on this machine), their total and its ratio to ``executemany`` (the
baseline, measured in the same run), and a commit's wall-clock time. CPU time does not depend on the
machine's load as wall-clock time does; the backend's includes its ``fdatasync`` (``synchronous_commit``
as the server is set).

Run: ``.venv/bin/python -m bench.bench_pg_append --postgres-url postgresql://postgres@127.0.0.1/test``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from bench.bench_load import (
    PostgresWatch,
    cpu_by_process,
    cpu_spent,
    describe_postgres,
    plain_dsn,
    postgres_database,
    postgres_processes,
)
from server.storage import Database, repository, upgrade_to_head
from server.storage.db import async_url
from server.storage.records import ActionRecord, GameFigures, GameStart, PlayerRecord

PROGRESS_EVERY = 200  # one row in this many carries the game's figures (the server: every 10 s a game)
WARMUP_COMMITS = 50

Commit = Callable[[Database, Sequence[ActionRecord]], Awaitable[None]]


async def _executemany(database: Database, rows: Sequence[ActionRecord]) -> None:
    async with database.transaction() as conn:
        await conn.execute(
            repository.INSERT_ACTIONS, [{"game_id": r.game_id, "v": r.v, "action": r.action} for r in rows]
        )
        await repository.record_figures(conn, rows)


async def _append(database: Database, rows: Sequence[ActionRecord]) -> None:
    async with database.transaction() as conn:
        await repository.append_actions(conn, rows)


def _pinged(url: str) -> Database:
    return Database.create(url)  # the server's engine: pool_pre_ping on


def _unpinged(url: str) -> Database:
    return Database(create_async_engine(async_url(url)))


@dataclass(frozen=True)
class Variant:
    name: str
    commit: Commit
    open: Callable[[str], Database]


VARIANTS = (
    Variant("executemany", _executemany, _pinged),
    Variant("unnest", _append, _pinged),
    Variant("unnest, no pre-ping", _append, _unpinged),
)


@dataclass
class Figures:
    client: list[float] = field(default_factory=list)  # µs per row, one per round
    backend: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)  # ms per commit


@dataclass
class Games:
    """The games being played and their next versions."""

    count: int
    versions: list[int] = field(default_factory=list)
    turn: int = 0

    def rows(self, batch: int) -> list[ActionRecord]:
        if not self.versions:
            self.versions = [0] * self.count
        rows = []
        for _ in range(batch):
            game, self.turn = self.turn % self.count, self.turn + 1
            self.versions[game] += 1
            v = self.versions[game]
            progress = GameFigures(v, v, 0, datetime.now(UTC)) if v % PROGRESS_EVERY == 0 else None
            rows.append(ActionRecord(f"g{game}", v, "t1-c5" if v % 2 else "undo", figures=progress))
        return rows


async def _set_up(database: Database, games: int) -> None:
    now = datetime.now(UTC)
    async with database.transaction() as conn:
        await repository.insert_player(conn, PlayerRecord("p", "bench", "0" * 64, now))
        for game in range(games):
            await repository.insert_game(conn, GameStart(f"g{game}", "p", "EO1-C8-AAAAAFA", 8, None, now))


@dataclass
class Subject:
    """One variant at one batch size: its database, its games, its backends."""

    variant: Variant
    batch: int
    database: Database
    games: Games
    backends: tuple[int, ...] = ()
    figures: Figures = field(default_factory=Figures)


async def _round(subject: Subject, commits: int) -> None:
    batches = [subject.games.rows(subject.batch) for _ in range(commits)]
    backends = cpu_by_process(subject.backends)
    client, wall = time.process_time(), time.perf_counter()
    for rows in batches:
        await subject.variant.commit(subject.database, rows)
    client, wall = time.process_time() - client, time.perf_counter() - wall
    backend = cpu_spent(backends, cpu_by_process(subject.backends))
    rows_done = commits * subject.batch
    subject.figures.client.append(client / rows_done * 1e6)
    subject.figures.backend.append(backend / rows_done * 1e6)
    subject.figures.wall.append(wall / commits * 1e3)


async def _measure(subjects: Sequence[tuple[Subject, str]], args: argparse.Namespace) -> None:
    for subject, url in subjects:
        await _set_up(subject.database, args.games)
        for _ in range(WARMUP_COMMITS):
            await subject.variant.commit(subject.database, subject.games.rows(subject.batch))
        name = make_url(url).database
        assert name is not None
        found = await postgres_processes(PostgresWatch(plain_dsn(args.postgres_url), name))
        subject.backends = found.backends
    for round_number in range(args.rounds):
        for subject, _ in subjects:
            await _round(subject, args.commits)
        print(f"round {round_number + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    for subject, _ in subjects:
        await subject.database.dispose()


@contextlib.contextmanager
def _databases(server_url: str, count: int) -> Iterator[list[str]]:
    with contextlib.ExitStack() as stack:
        urls = [stack.enter_context(postgres_database(server_url)) for _ in range(count)]
        for url in urls:
            upgrade_to_head(url)
        yield urls


def report(subjects: Sequence[Subject], args: argparse.Namespace, command: str) -> None:
    print()
    print(f"PostgreSQL appends: CPU per action row, median of {args.rounds} rounds of {args.commits} commits")
    print(describe_postgres(args.postgres_url))
    print()
    print("| batch | variant | client µs/row | backend µs/row | total µs/row | ratio | commit ms |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for batch in args.batch:
        rows = [subject for subject in subjects if subject.batch == batch]
        base = next(s for s in rows if s.variant.name == "executemany")
        base_total = statistics.median(_totals(base.figures))
        for subject in rows:
            figures = subject.figures
            total = statistics.median(_totals(figures))
            ratio = total / base_total if base_total else float("nan")
            print(
                f"| {batch} | {subject.variant.name} | {statistics.median(figures.client):.1f} | "
                f"{statistics.median(figures.backend):.1f} | {total:.1f} | {ratio:.2f} | "
                f"{statistics.median(figures.wall):.2f} |"
            )
    print()
    print("client: this process (SQLAlchemy and asyncpg on the event loop); backend: the PostgreSQL backends")
    print("connected to the variant's database (their fdatasync included); ratio: total over executemany's.")
    print(f"command: `{command}`")


def _totals(figures: Figures) -> list[float]:
    return [client + backend for client, backend in zip(figures.client, figures.backend, strict=True)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_pg_append", description=__doc__.split("\n", 1)[0])
    parser.add_argument("--postgres-url", required=True, help="a PostgreSQL server on this machine")
    parser.add_argument("--batch", type=int, nargs="+", default=[5, 51], help="rows per commit (5 51)")
    parser.add_argument("--games", type=int, default=100, help="games being played (100)")
    parser.add_argument("--rounds", type=int, default=5, help="measured rounds (5)")
    parser.add_argument("--commits", type=int, default=400, help="commits per round and variant (400)")
    args = parser.parse_args(argv)
    if min(args.batch) < 1 or args.games < 1 or args.rounds < 1 or args.commits < 1:
        parser.error("--batch, --games, --rounds and --commits must be at least 1")
    command = " ".join(
        [".venv/bin/python -m bench.bench_pg_append", *(sys.argv[1:] if argv is None else argv)]
    )
    plan = [(variant, batch) for batch in args.batch for variant in VARIANTS]
    with _databases(args.postgres_url, len(plan)) as urls:
        subjects = [
            Subject(variant, batch, variant.open(url), Games(args.games))
            for (variant, batch), url in zip(plan, urls, strict=True)
        ]
        asyncio.run(_measure(list(zip(subjects, urls, strict=True)), args))
    report(subjects, args, command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
