"""Fixtures of the leaderboard tests: migrated databases on SQLite always and PostgreSQL when CI has one,
and a real server on a free port for the API tests (driven with ``tests.support.wsclient``, the plain
WebSocket client of the server's own tests).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from server.app import App
from tests.support import dbutil, serverutil
from tests.support.migrated_db import database, database_url, postgres_url  # noqa: F401 (fixtures)


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
