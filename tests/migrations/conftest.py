"""Fixtures for migration tests: an empty database per test, on SQLite and (when configured) PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import dbutil


@pytest.fixture(params=dbutil.BACKENDS)
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a new database with no table at all (PostgreSQL ones are dropped afterwards)."""
    with dbutil.fresh_database(request.param, tmp_path, migrate=False) as url:
        yield url
