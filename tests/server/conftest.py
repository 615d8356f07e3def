"""A real server on a free loopback port, on SQLite always and on PostgreSQL when CI provides one."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from server.app import App
from server.config import Settings
from tests.support import dbutil, serverutil


@pytest.fixture(params=dbutil.BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database for a server: a copy of one migrated once per session, which saves each test the
    migrations (a second on PostgreSQL); the server's start finds it at head. That the server
    migrates an empty database on start is tested where it matters: test_crash, test_transport,
    test_startup and tests/migrations start from empty."""
    with dbutil.fresh_database(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def sqlite_database_url(tmp_path: Path) -> Iterator[str]:
    """A database as ``database_url`` makes, on SQLite alone: for a module that overrides
    ``database_url`` with it because what it tests is not the database (the transport's limits, bad
    frames), which a PostgreSQL run would only repeat."""
    with dbutil.fresh_database("sqlite", tmp_path) as url:
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


@pytest.fixture
async def two_nodes() -> AsyncIterator[tuple[App, App]]:
    """Two nodes on one PostgreSQL database and one Redis (skipped unless CI provides both)."""
    async with _two_nodes({"node": "node-a"}, {"node": "node-b"}) as nodes:
        yield nodes


@pytest.fixture
async def two_unnamed_nodes() -> AsyncIterator[tuple[App, App]]:
    """Two nodes as above, both left at the default node name (an operator forgetting ``--node``)."""
    async with _two_nodes({}, {}) as nodes:
        yield nodes


#: A race countdown and board delay short enough for tests (the race tests' own).
RACE_SETTINGS = {"race_countdown": 0.2, "race_board_delay": 0.3}


@pytest.fixture
async def two_race_nodes() -> AsyncIterator[tuple[App, App]]:
    """Two nodes as above, with the race tests' short countdown and board delay."""
    async with _two_nodes({"node": "node-a", **RACE_SETTINGS}, {"node": "node-b", **RACE_SETTINGS}) as nodes:
        yield nodes


@contextlib.asynccontextmanager
async def _two_nodes(
    settings_a: dict[str, Any], settings_b: dict[str, Any]
) -> AsyncIterator[tuple[App, App]]:
    server_url = dbutil.require_postgres_server_url()
    redis_url = os.environ.get("EIGHTOFF_TEST_REDIS_URL")
    if not redis_url:
        pytest.skip("EIGHTOFF_TEST_REDIS_URL is not set (CI sets it)")
    database_url = await dbutil.create_postgres_database_async(server_url)
    try:
        async with (
            serverutil.running_app(database_url, redis_url=redis_url, **settings_a) as node_a,
            serverutil.running_app(database_url, redis_url=redis_url, **settings_b) as node_b,
        ):
            yield node_a, node_b
    finally:
        await dbutil.drop_postgres_database_async(server_url, database_url)
