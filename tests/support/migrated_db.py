"""Fixtures of a migrated, empty database on each backend, shared by the storage and leaderboard
suites (their conftests import them): a new SQLite file per test, one PostgreSQL database per session
(when ``EIGHTOFF_TEST_POSTGRES_URL`` is set) with its tables emptied before each test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from server.storage import Database
from tests.support import dbutil


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """This session's PostgreSQL database, upgraded to head."""
    with dbutil.postgres_database(dbutil.require_postgres_server_url()) as url:
        yield url


@pytest.fixture(params=dbutil.BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database upgraded to head: a new SQLite file, or the session's PostgreSQL database."""
    if request.param == "sqlite":
        return dbutil.migrated_sqlite_url(tmp_path)
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    """An empty, migrated `Database`, disposed after the test (SQLite without fsync: tests only)."""
    db = Database.create(database_url, sqlite_synchronous="OFF")
    try:
        async with db.transaction() as conn:
            await dbutil.clear_tables(conn)
        yield db
    finally:
        await db.dispose()
