"""A page load must not spend its address's connection budget (hardening), in a real Chromium
against a server at its default limits (20 new connections a second per address, 40 at once): a first
load and then reloads in quick succession, and five users behind one address (a school's or a café's
NAT) loading the page at once, all get in and play.

Every TCP connection the server accepts is counted at its gate: a first load opens one per file (the
HTTP side closes after each answer, so a browser cannot reuse one), 20 in all (the page, its
stylesheet, 14 modules, three samples of the clock, the WebSocket), of which only the WebSocket counts
toward the address's budget; a reload opens 5 (the page, revalidated, the clock's and the
WebSocket's), the files being cached for good under their versioned URLs. Were a reload to open 20
too, each counted, the third page load in two seconds from one address would get 503.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from playwright.async_api import Page, expect

from engine import Game, Move
from server.app import App
from server.config import Settings
from tests.web.pages import deal, expect_board, open_client, top_card

CODE = "EO1-C8-AAAAAFA"  # 8 cells, cells 5-8 empty: t1 -> c5 and back are always legal
VIEWPORT = {"width": 1280, "height": 860}
#: A reload fetches the page (revalidated: 304), three samples of the clock and the WebSocket.
RELOAD_CONNECTIONS = 5


class Accepts:
    """The TCP connections the server's gate was asked to admit, how many it refused, and how many
    turned out to be requests answered from memory (which do not count toward the budget)."""

    def __init__(self, app: App, monkeypatch: pytest.MonkeyPatch) -> None:
        self.asked = 0
        self.refused = 0
        self.from_memory = 0
        gate = app.server.gate
        admit, answered = gate.accept, gate.answered_from_memory

        def counted(peer: str, waiting: Any = None) -> str | None:
            refusal = admit(peer, waiting)
            self.asked += 1
            self.refused += refusal is not None
            return refusal

        def from_memory(peer: str) -> None:
            self.from_memory += 1
            answered(peer)

        monkeypatch.setattr(gate, "accept", counted)
        monkeypatch.setattr(gate, "answered_from_memory", from_memory)

    @property
    def counted(self) -> int:
        """The connections that counted toward the address's new-connection budget."""
        return self.asked - self.from_memory


async def play_a_move(page: Page, mirror: Game) -> None:
    """t1 -> c5, or back when c5 holds the card: the server's ack shows as the board's next version."""
    move = Move.parse("t1-c5" if mirror.layout().cells[4] is None else "c5-t1")
    await top_card(page, str(move.source)).click()
    await page.click(f'[data-pile="{move.target}"]')
    mirror.play(move)
    await expect_board(page, mirror)


async def test_the_browser_tests_run_at_the_default_limits(web_app: App) -> None:
    defaults, served = Settings(), web_app.settings
    assert served.new_connections_per_address_per_second == defaults.new_connections_per_address_per_second
    assert served.page_requests_per_address_per_second == defaults.page_requests_per_address_per_second


async def test_a_first_load_then_quick_reloads_get_in_and_play(
    chromium: Any, site: str, web_app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    accepts = Accepts(web_app, monkeypatch)
    errors: list[str] = []
    context = await chromium.new_context(viewport=VIEWPORT)
    page = await open_client(context, site, errors)
    mirror = Game.from_code(CODE)
    await deal(page, CODE)
    await play_a_move(page, mirror)
    first_load = accepts.asked
    for _ in range(5):
        before = accepts.asked
        await page.reload()
        await expect(page.locator("body")).to_have_attribute("data-connection", "open")
        await expect_board(page, mirror)  # this tab's game, resumed
        await play_a_move(page, mirror)
        assert accepts.asked - before <= RELOAD_CONNECTIONS, accepts.asked - before
    reloads = accepts.asked - first_load
    print(f"connections: first load {first_load}, 5 reloads {reloads}; {accepts.counted} counted")
    assert accepts.counted <= 2 * 6, accepts.counted  # a WebSocket a load (and a spare socket)
    assert accepts.refused == 0 and errors == []
    await context.close()


async def test_five_users_behind_one_address_load_the_page_at_once_and_play(
    chromium: Any, site: str, web_app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    accepts = Accepts(web_app, monkeypatch)
    errors: list[str] = []
    contexts = [await chromium.new_context(viewport=VIEWPORT) for _ in range(5)]
    loop = asyncio.get_running_loop()
    started = loop.time()
    pages = await asyncio.gather(
        *(open_client(context, site, errors, name=f"Player {n}") for n, context in enumerate(contexts, 1))
    )
    took = loop.time() - started
    print(f"5 first loads: {accepts.asked} connections in {took:.1f} s; {accepts.counted} counted")
    assert accepts.counted <= 2 * 5, accepts.counted  # a WebSocket a load (and a spare socket)
    for page in pages:
        mirror = Game.from_code(CODE)
        await deal(page, CODE)
        await play_a_move(page, mirror)
    assert accepts.refused == 0 and errors == []
    for context in contexts:
        await context.close()
