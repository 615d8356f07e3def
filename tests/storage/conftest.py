"""Fixtures for storage tests: a migrated database per test, on SQLite and (when configured) PostgreSQL.

SQLite: a new file in the test's tmp_path, upgraded to head. PostgreSQL: one database for the session,
upgraded to head once, emptied before each test and dropped at the end.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import dbutil
import pytest

from server.storage import Database


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The URL of this session's PostgreSQL database, upgraded to head."""
    with dbutil.postgres_database(dbutil.require_postgres_server_url()) as url:
        yield url


@pytest.fixture(params=dbutil.BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a database upgraded to head, once per backend."""
    if request.param == "sqlite":
        return dbutil.migrated_sqlite_url(tmp_path)
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    """An empty, migrated `Database`, disposed after the test."""
    db = Database.create(database_url)
    try:
        async with db.transaction() as conn:
            await dbutil.clear_tables(conn)
        yield db
    finally:
        await db.dispose()
