"""A game in progress is left only when the player says so, and unfinished games can be abandoned from
the list, in a real Chromium against the real server, which is asked what became
of each game.

Bad input tried: "Deal" and "Resume" while a game is in progress (answered "Stay", Esc, "Keep it for
later" and "Give it up"), and a single tap on "Abandon" (it only asks; the game stays).
"""

from __future__ import annotations

import re
from typing import Any

from playwright.async_api import Page, expect

from server.app import App
from tests.support import serverutil
from tests.support.wsclient import WsClient
from tests.web.pages import deal, open_client, top_card

PHONE = {"width": 390, "height": 844}
CODE = "EO1-C8-AAAAAFA"


async def status_of(app: App, token: str, game: str) -> str:
    """What the server says of ``game``: its status, as its owner resumes it."""
    client = await WsClient.open(serverutil.ws_url(app))
    await client.hello(token=token)
    snapshot = await client.request("resume", game=game)
    await client.close()
    assert snapshot["type"] == "snapshot", snapshot
    return str(snapshot["status"])


async def shown_game(page: Page) -> str:
    game = await page.locator("#board").get_attribute("data-game")
    assert game
    return game


async def tab(page: Page, name: str) -> None:
    """A phone's sections are tabs."""
    await page.locator(f'#tabs [data-tab="{name}"]').tap()


async def deal_random(page: Page) -> None:
    await tab(page, "new")
    await page.check('input[name="deal"][value="random"]')
    await page.locator("#new-game").tap()


async def test_leaving_a_game_asks_and_the_list_abandons(chromium: Any, site: str, web_app: App) -> None:
    errors: list[str] = []
    context = await chromium.new_context(viewport=PHONE, has_touch=True, is_mobile=True)
    page = await open_client(context, site, errors)
    token = await page.evaluate("localStorage.getItem('eightoff.token')")
    first = await deal(page, CODE)
    await top_card(page, "t1").tap()  # picked up, or home: either way the game is in progress
    dialog = page.locator("#leave-dialog")

    # "Deal": asked; "Stay" and Esc leave everything as it was.
    await deal_random(page)
    await expect(dialog).to_be_visible()
    await expect(page.locator("#leave-text")).to_contain_text(f"Your game {CODE} is not finished")
    await page.locator("#leave-cancel").tap()
    await expect(dialog).to_be_hidden()
    await deal_random(page)
    await expect(dialog).to_be_visible()
    await page.keyboard.press("Escape")
    await expect(dialog).to_be_hidden()
    assert await shown_game(page) == first
    await expect(page.locator("#my-games [data-my-game]")).to_have_count(1)
    await tab(page, "games")

    # "Keep it for later": a new deal, the first game waits in the list.
    await deal_random(page)
    await page.locator("#leave-keep").tap()
    await expect(page.locator("#board")).not_to_have_attribute("data-game", first)
    second = await shown_game(page)
    await tab(page, "games")
    await expect(page.locator(f'#my-games [data-resume="{first}"]')).to_be_visible()
    assert await status_of(web_app, token, first) == "playing"

    # "Resume" of the first asks too; kept, the second waits in the list.
    await page.locator(f'#my-games [data-resume="{first}"]').tap()
    await expect(dialog).to_be_visible()
    await page.locator("#leave-keep").tap()
    await expect(page.locator("#board")).to_have_attribute("data-game", first)
    await expect(page.locator("#board")).to_be_visible()  # a game chosen: the table's tab
    await tab(page, "games")
    await expect(page.locator(f'#my-games [data-resume="{second}"]')).to_be_visible()

    # "Abandon" in the list: one tap asks, the second gives the game up.
    abandon = page.locator(f'#my-games [data-abandon="{second}"]')
    await abandon.tap()
    await expect(abandon).to_have_text("Abandon? Tap again")
    await expect(abandon).to_have_text("Abandon", timeout=5_000)  # not confirmed: it stays
    assert await status_of(web_app, token, second) == "playing"
    await abandon.tap()
    await abandon.tap()
    await expect(page.locator(f'#my-games [data-my-game="{second}"]')).to_have_count(0)
    assert await status_of(web_app, token, second) == "resigned"
    await expect(page.locator("#board")).to_have_attribute("data-game", first)  # the game shown stays

    # "Give it up": the game is resigned, and a new one dealt.
    await deal_random(page)
    await page.locator("#leave-resign").tap()
    await expect(page.locator("#board")).not_to_have_attribute("data-game", first)
    await expect(page.locator("#board")).to_have_attribute("data-status", "playing")
    assert await status_of(web_app, token, first) == "resigned"
    await expect(page.locator("#my-games [data-my-game]")).to_have_count(1)  # the new game alone
    await expect(page.locator("#my-games [data-my-game] .tag")).to_have_text(re.compile("open"))
    await context.close()
    assert errors == []
