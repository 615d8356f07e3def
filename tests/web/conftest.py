"""A real server on a free loopback port (SQLite in a temporary file), and Debian's Chromium."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from server.app import App
from tests.support import serverutil

HERE = Path(__file__).parent
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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The browser tests run on the session's event loop, where its one Chromium lives (launching one
    per test cost about a second of CPU each)."""
    session_loop = pytest.mark.asyncio(loop_scope="session")
    for item in items:
        if item.path.parent == HERE and item.get_closest_marker("asyncio") is not None:
            item.add_marker(session_loop, append=False)


@pytest_asyncio.fixture(loop_scope="session")
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


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def _browser() -> AsyncIterator[Any]:
    """One headless Chromium for the session (each test has contexts of its own: `chromium`)."""
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


class Contexts:
    """The session's Chromium as one test sees it: the contexts it opens (``new_context``, as on a
    Playwright ``Browser``) are its own, closed when it ends, so no page outlives its test."""

    def __init__(self, browser: Any) -> None:
        self._browser = browser
        self._opened: list[Any] = []

    async def new_context(self, **options: Any) -> Any:
        context = await self._browser.new_context(**options)
        self._opened.append(context)
        return context

    async def close(self) -> None:
        for context in self._opened:
            await context.close()


@pytest_asyncio.fixture(loop_scope="session")
async def chromium(site: str, _browser: Any) -> AsyncIterator[Contexts]:
    """The test's contexts of the session's Chromium; it depends on ``site`` so that its pages close
    before the server shuts down."""
    contexts = Contexts(_browser)
    try:
        yield contexts
    finally:
        await contexts.close()
