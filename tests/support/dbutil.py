"""Databases for tests: fresh SQLite files and fresh PostgreSQL databases, made by the real migrations.

Import it as ``from tests.support import dbutil``.

PostgreSQL tests run only when ``EIGHTOFF_TEST_POSTGRES_URL`` names a server (CI sets it, e.g.
``postgresql+asyncpg://postgres@127.0.0.1:5432/test``). That database is used only as the maintenance
connection: each helper creates a uniquely named database next to it (AUTOCOMMIT, as CREATE DATABASE can't
run in a transaction) and drops it afterwards, even when connections to it are still open.

A migrated database is a copy of a template migrated once per test session (a copy takes about a third
of a second, the migrations twice that), and databases are dropped by a background thread (a drop takes
most of a second, and no test waits on it); the session's end drops what is left (`drop_what_is_left`).

The synchronous helpers run their own event loop (``asyncio.run``) and so must be called outside one:
from synchronous fixtures, or through ``asyncio.to_thread`` from async code. The ``*_async`` variants are
for async fixtures.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import pytest
from sqlalchemy import delete, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine
from sqlalchemy.pool import NullPool

from server.storage import upgrade_to_head
from server.storage.db import async_url
from server.storage.tables import Base

#: Every stored action of a SQLite file, for a plain ``sqlite3`` connection: ``actions`` and the
#: journal not yet compacted into it (`server.storage.repository.STORED_ACTIONS`).
SQLITE_STORED_ACTIONS: Final = (
    "(SELECT game_id, v, action FROM actions UNION ALL SELECT game_id, v, action FROM action_journal)"
)
POSTGRES_URL_VARIABLE: Final = "EIGHTOFF_TEST_POSTGRES_URL"
POSTGRES_SKIP_REASON: Final = "EIGHTOFF_TEST_POSTGRES_URL is not set (CI sets it)"
BACKENDS: Final = ("sqlite", "postgresql")
#: A test of a module whose ``database_url`` runs on both backends, run on SQLite alone: for a test
#: whose subject is not the database (metering, the protocol, the rules of a guard whose counts the
#: storage tests check on both), which a PostgreSQL run would only repeat at a second's cost.
SQLITE_ONLY: Final = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
DATABASE_PREFIX: Final = "eightoff_test"


def postgres_server_url() -> str | None:
    """The PostgreSQL server URL for tests, or None when ``EIGHTOFF_TEST_POSTGRES_URL`` is unset."""
    return os.environ.get(POSTGRES_URL_VARIABLE) or None


def require_postgres_server_url() -> str:
    """The PostgreSQL server URL for tests; skips the calling test when it is not set."""
    url = postgres_server_url()
    if url is None:
        pytest.skip(POSTGRES_SKIP_REASON)
    return url


def sqlite_url(path: Path) -> str:
    """The aiosqlite URL of a database file."""
    return f"sqlite+aiosqlite:///{path}"


def migrated_sqlite_url(directory: Path, name: str = "eightoff.db") -> str:
    """A new SQLite database file in ``directory``, at the head migration (a copy of a file migrated
    once per session); returns its URL."""
    shutil.copyfile(_migrated_sqlite_template(), directory / name)
    return sqlite_url(directory / name)


@functools.cache
def _migrated_sqlite_template() -> Path:
    """This session's SQLite file upgraded to head, checkpointed: the file alone is the database."""
    path = Path(tempfile.mkdtemp(prefix="eightoff-template-")) / "eightoff.db"
    upgrade_to_head(sqlite_url(path))
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def _database_url(server_url: str, database: str) -> str:
    return async_url(server_url).set(database=database).render_as_string(hide_password=False)


async def create_postgres_database_async(
    server_url: str, *, prefix: str = DATABASE_PREFIX, template: str | None = None
) -> str:
    """Create a uniquely named database on the server of ``server_url``, empty or a copy of the
    database ``template``; returns its URL."""
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:12]}"
    copy_of = f' TEMPLATE "{template}"' if template else ""
    await _execute_outside_transaction(server_url, f'CREATE DATABASE "{name}"{copy_of}')
    return _database_url(server_url, name)


async def drop_postgres_database_async(server_url: str, database_url: str) -> None:
    """Drop the database of ``database_url``, closing any connection still open on it."""
    name = make_url(database_url).database
    if not name or not name.startswith(DATABASE_PREFIX):
        raise ValueError(f"refusing to drop {name!r}: not a test database")
    await _execute_outside_transaction(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _execute_outside_transaction(server_url: str, statement: str) -> None:
    """Run one statement in autocommit mode (CREATE and DROP DATABASE refuse a transaction)."""
    engine = create_async_engine(async_url(server_url), isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            await conn.execute(text(statement))
    finally:
        await engine.dispose()


def create_postgres_database(
    server_url: str, *, prefix: str = DATABASE_PREFIX, template: str | None = None
) -> str:
    """Synchronous `create_postgres_database_async`."""
    return asyncio.run(create_postgres_database_async(server_url, prefix=prefix, template=template))


def drop_postgres_database(server_url: str, database_url: str) -> None:
    """Synchronous `drop_postgres_database_async`."""
    asyncio.run(drop_postgres_database_async(server_url, database_url))


@functools.cache
def _migrated_template(server_url: str) -> str:
    """The name of this session's database upgraded to head, which migrated databases copy. Nothing
    stays connected to it (a copy needs its template idle)."""
    url = create_postgres_database(server_url, prefix=f"{DATABASE_PREFIX}_template")
    upgrade_to_head(url)
    _dropped_at_the_end.append((server_url, url))
    name = make_url(url).database
    assert name
    return name


#: One thread drops databases while the tests go on; the templates go last, once every copy is gone.
_dropper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="drop-test-database")
_drops: list[Future[None]] = []
_dropped_at_the_end: list[tuple[str, str]] = []


def drop_later(server_url: str, database_url: str) -> None:
    """Drop the database of ``database_url`` in the background (see `drop_what_is_left`)."""
    _drops.append(_dropper.submit(drop_postgres_database, server_url, database_url))


def drop_what_is_left() -> None:
    """Wait for the background drops, then drop the templates, the SQLite one too (the session's
    end calls this)."""
    for drop in _drops:
        drop.result()
    _drops.clear()
    for server_url, url in _dropped_at_the_end:
        drop_postgres_database(server_url, url)
    _dropped_at_the_end.clear()
    _migrated_template.cache_clear()
    if _migrated_sqlite_template.cache_info().currsize:
        shutil.rmtree(_migrated_sqlite_template().parent, ignore_errors=True)
        _migrated_sqlite_template.cache_clear()


@contextmanager
def postgres_database(server_url: str, *, migrate: bool = True) -> Iterator[str]:
    """A fresh PostgreSQL database (at head unless ``migrate`` is False), dropped after the caller."""
    template = _migrated_template(server_url) if migrate else None
    url = create_postgres_database(server_url, template=template)
    try:
        yield url
    finally:
        drop_later(server_url, url)


@contextmanager
def fresh_database(backend: str, directory: Path, *, migrate: bool = True) -> Iterator[str]:
    """A fresh database of ``backend`` (one of `BACKENDS`); yields its URL.

    SQLite gets a file in ``directory``; PostgreSQL a new database, dropped on exit (the calling test is
    skipped when ``EIGHTOFF_TEST_POSTGRES_URL`` is unset).
    """
    if backend == "sqlite":
        yield migrated_sqlite_url(directory) if migrate else sqlite_url(directory / "eightoff.db")
    elif backend == "postgresql":
        with postgres_database(require_postgres_server_url(), migrate=migrate) as url:
            yield url
    else:
        raise ValueError(f"unknown backend {backend!r}: expected one of {BACKENDS}")


async def clear_tables(conn: AsyncConnection) -> None:
    """Delete every row of the server's tables (not alembic's), dependents first."""
    for table in reversed(Base.metadata.sorted_tables):
        await conn.execute(delete(table))
