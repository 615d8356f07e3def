"""Fixtures of the leaderboard tests: migrated databases on SQLite always and PostgreSQL when CI has one,
and a real server on a free port for the API tests (driven with ``tests/wsclient.py``, the plain
WebSocket client of the server's own tests).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import dbutil
import pytest
import serverutil

from server.app import App
from server.storage import Database


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """This session's PostgreSQL database for leaderboard tests, upgraded to head."""
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
    """An empty, migrated `Database`, disposed after the test."""
    db = Database.create(database_url, sqlite_synchronous="OFF")
    try:
        async with db.transaction() as conn:
            await dbutil.clear_tables(conn)
        yield db
    finally:
        await db.dispose()


@pytest.fixture(params=dbutil.BACKENDS)
def server_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database for a server to migrate on start, as in production."""
    with dbutil.fresh_database(request.param, tmp_path, migrate=False) as url:
        yield url


@pytest.fixture
async def app(server_database_url: str) -> AsyncIterator[App]:
    async with serverutil.running_app(server_database_url, sqlite_synchronous="OFF") as app:
        yield app


@pytest.fixture
def url(app: App) -> str:
    return serverutil.ws_url(app)
