"""A real server on a free loopback port, on SQLite always and on PostgreSQL when CI provides one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import dbutil
import pytest
import serverutil

from server.app import App
from server.config import Settings


@pytest.fixture(params=dbutil.BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database (not migrated: the server migrates it on start, as in production)."""
    with dbutil.fresh_database(request.param, tmp_path, migrate=False) as url:
        yield url


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(host="127.0.0.1", port=0, database_url=database_url, sqlite_synchronous="NORMAL")


@pytest.fixture
async def app(database_url: str) -> AsyncIterator[App]:
    async with serverutil.running_app(database_url, sqlite_synchronous="NORMAL") as app:
        yield app


@pytest.fixture
def url(app: App) -> str:
    return serverutil.ws_url(app)
