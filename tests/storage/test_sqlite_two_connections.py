"""The two ways the server writes one SQLite file, the writer thread's own ``sqlite3`` connection
(`SqliteBackend`) and the async engine's pool (`Database`), never refuse each other's locks.

A CI run once failed two server tests with ``database is locked``: a connection's first statement,
``PRAGMA journal_mode=WAL``, turned a freshly migrated file (then in rollback-journal mode) into a
write-ahead log, and SQLite takes the write lock for that from within a read transaction, where it
calls no busy handler: whichever connection opened while another held the write lock failed at
once, whatever the busy timeout. The migrations now leave the file in write-ahead-log mode, so a
connection's first statement only reads, and every write waits for the lock (docs/durability.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from server.storage import ActionRecord, Database, repository, upgrade_to_head
from server.storage.commit_backends import AddPlayer, AppendActions, SqlAlchemyBackend, SqliteBackend
from server.storage.db import sqlite_file
from server.storage.records import PlayerRecord
from server.storage.tables import players
from tests.support import dbutil

NOW = dt.datetime(2026, 12, 3, 11, 0, tzinfo=dt.UTC)
#: Fresh databases opened by both paths at once in the stress test (each round about 20 ms).
ROUNDS = 40
#: Engine writes (and as many reads) started with the writer's first batch: the pool opens a
#: connection for each.
ENGINE_WRITES = 3
PLAYER_SQL = "INSERT INTO players (id, name, token_hash, created_at) VALUES (?1, ?1, ?1, '2026-12-03')"
GAME_SQL = (
    "INSERT INTO games (id, player_id, code, cells, status, started_at) "
    "VALUES (?, ?, 'EO1-C8-AAAAAFA', 8, 'playing', '2026-12-03')"
)


def journal_mode_in_header(path: Path) -> tuple[int, int]:
    """The file format's write and read versions (bytes 18 and 19): 2 in write-ahead-log mode."""
    header = path.read_bytes()[:20]
    return header[18], header[19]


def new_player(id_: str) -> PlayerRecord:
    return PlayerRecord(id_, id_, f"hash-{id_}", NOW)


@contextlib.asynccontextmanager
async def both_paths(path: Path) -> AsyncIterator[tuple[Database, SqliteBackend]]:
    """The engine and the writer on ``path``, neither connected yet, as a server starts them."""
    database = Database.create(dbutil.sqlite_url(path), sqlite_synchronous="NORMAL", timeout=30)
    engine = SqlAlchemyBackend(database, asyncio.get_running_loop())
    writer = SqliteBackend(path, engine, synchronous="NORMAL")
    try:
        yield database, writer
    finally:
        await asyncio.to_thread(writer.close)
        await database.dispose()


async def fresh_file(directory: Path, name: str = "eightoff.db") -> Path:
    """A new migrated database file (the first one of a session runs the migrations: off the loop)."""
    path = sqlite_file(await asyncio.to_thread(dbutil.migrated_sqlite_url, directory, name))
    assert path is not None
    return path


async def count_players(database: Database) -> int:
    async with database.connection() as conn:
        return (await conn.execute(select(func.count()).select_from(players))).scalar_one()


def test_the_migrations_leave_the_file_in_write_ahead_log_mode(tmp_path: Path) -> None:
    """The journal mode is settled once, before any server connection opens the file, not by whichever
    of them opens it first."""
    url = dbutil.sqlite_url(tmp_path / "new.db")
    upgrade_to_head(url)
    assert journal_mode_in_header(tmp_path / "new.db") == (2, 2)
    copy = sqlite_file(dbutil.migrated_sqlite_url(tmp_path, "copy.db"))  # the tests' databases too
    assert copy is not None and journal_mode_in_header(copy) == (2, 2)


async def test_the_writer_opens_its_connection_while_another_holds_the_write_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CI failure, made certain: another connection (the engine's, mid-write) holds the write lock
    when the writer thread opens its connection for its first batch. The batch waits for the lock,
    then commits."""
    path = await fresh_file(tmp_path)
    opened = threading.Event()  # the writer's connection is open (or failed to open)
    real_connect = SqliteBackend._connect

    def connect_and_tell(backend: SqliteBackend) -> sqlite3.Connection:
        try:
            return real_connect(backend)
        finally:
            opened.set()

    monkeypatch.setattr(SqliteBackend, "_connect", connect_and_tell)
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        holder.execute(PLAYER_SQL, ["p"])
        holder.execute(GAME_SQL, ["g", "p"])
        async with both_paths(path) as (database, writer):
            appended = asyncio.get_running_loop().run_in_executor(
                None, writer.commit, [AppendActions([ActionRecord("g", 1, "t1-c5")])]
            )
            await asyncio.to_thread(opened.wait)
            holder.execute("COMMIT")
            await appended  # raised `database is locked` when the file was not yet a write-ahead log
            async with database.connection() as conn:
                stored = await repository.load_game(conn, "g")
            assert stored is not None and stored.actions == ("t1-c5",)
    finally:
        holder.close()


async def test_the_engine_opens_its_connections_while_another_holds_the_write_lock(tmp_path: Path) -> None:
    """The other way round: the engine's first connection reads while another connection (the writer
    thread's, mid-commit) holds the write lock, and writes once it is let go."""
    path = await fresh_file(tmp_path)
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        holder.execute(PLAYER_SQL, ["held"])
        async with both_paths(path) as (database, _):
            assert await count_players(database) == 0  # a reader neither waits nor fails
            holder.execute("COMMIT")
            await write_player(database, "engine")
            assert await count_players(database) == 2
    finally:
        holder.close()


async def write_player(database: Database, id_: str) -> None:
    async with database.transaction() as conn:
        await repository.insert_player(conn, new_player(id_))


async def test_both_paths_open_a_fresh_database_at_once_and_every_write_is_stored(tmp_path: Path) -> None:
    """Stress: on each of ``ROUNDS`` fresh databases, the writer's first batch (a new player, as a
    server's first ``hello``), the engine's first writes and reads all start together."""
    for round_ in range(ROUNDS):
        path = await fresh_file(tmp_path, f"round-{round_}.db")
        async with both_paths(path) as (database, writer):
            await asyncio.gather(
                asyncio.to_thread(writer.commit, [AddPlayer(new_player("by-writer"))]),
                *(write_player(database, f"by-engine-{index}") for index in range(ENGINE_WRITES)),
                *(count_players(database) for _ in range(ENGINE_WRITES)),
            )
            assert await count_players(database) == ENGINE_WRITES + 1, f"round {round_}"
