"""A real server for the client library's tests (SQLite: the server's own behaviour on PostgreSQL is
tested in tests/server), and winnable deals with their solver lines."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine import Deal
from server.app import App
from server.services.winnable import winnable_deals
from solver import solve_deal
from tests.support import dbutil, serverutil


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[App]:
    url = dbutil.sqlite_url(tmp_path / "client.db")
    async with serverutil.running_app(url, sqlite_synchronous="NORMAL") as app:
        yield app


@pytest.fixture
def url(app: App) -> str:
    return serverutil.ws_url(app)


def winnable_code(index: int = 0, cells: int = 8) -> str:
    return winnable_deals(cells)[index].code()


def winning_line(code: str) -> list[tuple[str, str, int]]:
    """The solver's winning line of ``code`` as (from, to, n) moves, found without the server."""
    return [
        (move.source.symbol(), move.target.symbol(), move.count)
        for move in solve_deal(Deal.from_code(code)).moves
    ]
