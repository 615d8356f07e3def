"""A real server on a free loopback port (SQLite in a temporary file), and Debian's Chromium."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from server.app import App
from tests.support import serverutil

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
async def web_app(tmp_path: Path) -> AsyncIterator[App]:
    """The server at its default limits: every browser and client of a test comes from 127.0.0.1, as
    players behind one NAT address do (test_page_loads.py)."""
    database_url = f"sqlite+aiosqlite:///{tmp_path}/db.sqlite3"
    async with serverutil.running_app(database_url, sqlite_synchronous="NORMAL", shutdown_grace=2.0) as app:
        yield app


@pytest.fixture
def site(web_app: App) -> str:
    """The base URL of the browser client."""
    return f"http://127.0.0.1:{web_app.port}"


@pytest.fixture
async def chromium(site: str) -> AsyncIterator[object]:
    """A headless Chromium; it depends on ``site`` so that it closes before the server shuts down."""
    if not CHROMIUM.exists():
        pytest.skip(f"Debian chromium is not installed at {CHROMIUM}; .ci/run installs it")
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            await browser.close()
