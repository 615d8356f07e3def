"""server.storage.db: the Database handle, its units of work and the SQLite set-up."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from server.storage import Database, GameStart, PlayerRecord, repository, upgrade_to_head
from server.storage.db import async_url, migrations_directory
from tests.support import dbutil

ADA = PlayerRecord("p1", "Ada", "ab" * 32, datetime(2026, 11, 30, tzinfo=UTC))


class Boom(Exception):
    pass


async def test_transaction_commits_when_the_block_ends(database: Database) -> None:
    async with database.transaction() as conn:
        await repository.insert_player(conn, ADA)
    async with database.connection() as conn:
        assert await repository.get_player(conn, "p1") == ADA


async def test_transaction_rolls_back_when_the_block_raises(database: Database) -> None:
    with pytest.raises(Boom):
        async with database.transaction() as conn:
            await repository.insert_player(conn, ADA)
            raise Boom
    async with database.connection() as conn:
        assert await repository.get_player(conn, "p1") is None


async def test_connection_never_commits(database: Database) -> None:
    async with database.connection() as conn:
        await repository.insert_player(conn, ADA)
        assert await repository.get_player(conn, "p1") == ADA
    async with database.connection() as conn:
        assert await repository.get_player(conn, "p1") is None


async def test_database_usable_after_an_integrity_error(database: Database) -> None:
    async with database.transaction() as conn:
        await repository.insert_player(conn, ADA)
    with pytest.raises(IntegrityError):
        async with database.transaction() as conn:
            await repository.insert_player(conn, ADA)
    async with database.connection() as conn:
        assert await repository.get_player(conn, "p1") == ADA


async def test_dispose_then_reuse(database: Database) -> None:
    await database.dispose()
    async with database.connection() as conn:
        assert await repository.count_games(conn) == 0


# SQLite -------------------------------------------------------------------------------------------------


async def sqlite_pragmas(database: Database) -> dict[str, object]:
    async with database.connection() as conn:
        return {
            name: (await conn.exec_driver_sql(f"PRAGMA {name}")).scalar()
            for name in (
                "journal_mode",
                "synchronous",
                "foreign_keys",
                "busy_timeout",
                "wal_autocheckpoint",
                "journal_size_limit",
            )
        }


async def test_sqlite_pragmas_set_on_every_connection(tmp_path: Path) -> None:
    database = Database.create(dbutil.sqlite_url(tmp_path / "e.db"))
    try:
        assert database.is_sqlite
        assert await sqlite_pragmas(database) == {
            "journal_mode": "wal",
            "synchronous": 2,  # FULL
            "foreign_keys": 1,
            "busy_timeout": 5000,
            "wal_autocheckpoint": 10_000,
            "journal_size_limit": 64 * 2**20,
        }
    finally:
        await database.dispose()


async def test_sqlite_synchronous_setting(tmp_path: Path) -> None:
    database = Database.create(dbutil.sqlite_url(tmp_path / "e.db"), sqlite_synchronous="normal")
    try:
        assert (await sqlite_pragmas(database))["synchronous"] == 1
    finally:
        await database.dispose()


def test_sqlite_synchronous_unknown_raises(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sqlite_synchronous"):
        Database.create(dbutil.sqlite_url(tmp_path / "e.db"), sqlite_synchronous="FULL; DROP TABLE x")


async def test_sqlite_foreign_keys_enforced(tmp_path: Path) -> None:
    url = await asyncio.to_thread(dbutil.migrated_sqlite_url, tmp_path)
    database = Database.create(url)
    try:
        with pytest.raises(IntegrityError, match="FOREIGN KEY"):
            async with database.transaction() as conn:
                game = GameStart("g", "no-such-player", "EO1-C8-AAAAAFA", 8, None, datetime.now(UTC))
                await repository.insert_game(conn, game)
    finally:
        await database.dispose()


async def test_sqlite_parent_directory_created(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "e.db"
    database = Database.create(dbutil.sqlite_url(path))
    try:
        async with database.connection() as conn:
            assert await conn.scalar(text("SELECT 1")) == 1
    finally:
        await database.dispose()
    assert path.is_file()


def test_upgrade_to_head_creates_the_parent_directory(tmp_path: Path) -> None:
    path = tmp_path / "run" / "eightoff.db"
    upgrade_to_head(dbutil.sqlite_url(path))
    assert path.is_file()


async def test_sqlite_write_transactions_take_the_write_lock_first(tmp_path: Path) -> None:
    # BEGIN IMMEDIATE: a second writer waits for the first (busy_timeout) instead of failing on a lock
    # upgrade; a reader is never blocked (WAL).
    url = await asyncio.to_thread(dbutil.migrated_sqlite_url, tmp_path)
    database = Database.create(url)
    try:
        async with database.transaction() as first:
            await repository.insert_player(first, ADA)
            async with database.connection() as reader:
                assert await repository.get_player(reader, "p1") is None
            second = asyncio.create_task(count_players_in_a_transaction(database))
            await asyncio.sleep(0.1)  # the behaviour under test: time passes and the second writer waits
            assert not second.done()
        assert await second == 1
    finally:
        await database.dispose()


async def test_sqlite_write_alone_holds_the_write_lock_for_its_statement_only(tmp_path: Path) -> None:
    """Still in the block, the statement is committed and the lock free: another connection takes it
    at once (no busy wait) and sees the row; in a `transaction()` block it cannot."""
    url = await asyncio.to_thread(dbutil.migrated_sqlite_url, tmp_path)
    database = Database.create(url)
    other = sqlite3.connect(tmp_path / "eightoff.db", isolation_level=None, timeout=0)
    try:
        async with database.write_alone() as conn:
            await repository.insert_player(conn, ADA)
            other.execute("BEGIN IMMEDIATE")
            assert other.execute("SELECT id FROM players").fetchall() == [("p1",)]
            other.execute("ROLLBACK")
        async with database.transaction() as conn:
            await conn.execute(text("DELETE FROM players"))
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
    finally:
        other.close()
        await database.dispose()


async def count_players_in_a_transaction(database: Database) -> int:
    async with database.transaction() as conn:
        count = await conn.scalar(text("SELECT count(*) FROM players"))
    return int(count or 0)


# PostgreSQL ---------------------------------------------------------------------------------------------


async def test_postgres_application_name_and_backend(postgres_url: str) -> None:
    database = Database.create(postgres_url)
    try:
        assert not database.is_sqlite
        async with database.connection() as conn:
            assert await conn.scalar(text("SELECT current_setting('application_name')")) == "eightoff"
    finally:
        await database.dispose()


# URLs and migrations ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///run/e.db", "sqlite+aiosqlite:///run/e.db"),
        ("sqlite+aiosqlite:///run/e.db", "sqlite+aiosqlite:///run/e.db"),
        ("postgresql://u:p%40ss@h:5432/db", "postgresql+asyncpg://u:p%40ss@h:5432/db"),
        ("postgresql+asyncpg://u@h/db", "postgresql+asyncpg://u@h/db"),
    ],
)
def test_async_url_picks_the_async_driver(url: str, expected: str) -> None:
    assert async_url(url).render_as_string(hide_password=False) == expected


def test_migrations_directory_holds_env_py() -> None:
    assert (migrations_directory() / "env.py").is_file()
    assert (migrations_directory() / "script.py.mako").is_file()


async def test_upgrade_to_head_refuses_to_block_an_event_loop(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"asyncio\.to_thread"):
        upgrade_to_head(dbutil.sqlite_url(tmp_path / "e.db"))
