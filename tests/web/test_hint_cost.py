"""What a hint costs is said once, plainly, before the first hint of a game, in a
real Chromium against the real server and its solver, with a finger (no hover, so no tooltip).

Bad input tried: the question declined (no hint is asked of the server), a second hint of the same
game (not asked again, also after a reload), and the first hint of another game (asked again).
"""

from __future__ import annotations

import re
from typing import Any

from playwright.async_api import Page, expect

from tests.web.pages import ReplyDelay, accept_hint_cost, deal, open_client

PHONE = {"width": 390, "height": 844}
CODE = "EO1-C8-AAAAAFA"
COST = (
    "A game that used a hint ranks on no leaderboard and counts in none of your figures (played, won, "
    "best, daily streak); it still shows among your recent games."
)


async def hint_shown(page: Page) -> None:
    await expect(page.locator("#message")).to_have_text(re.compile(r"^Hint: "))


async def test_the_cost_of_a_hint_is_said_before_the_first(chromium: Any, site: str) -> None:
    errors: list[str] = []
    proxy = ReplyDelay()
    context = await chromium.new_context(viewport=PHONE, has_touch=True, is_mobile=True)
    page = await open_client(context, site, errors, route=proxy.route)
    first = await deal(page, CODE)
    dialog = page.locator("#hint-dialog")

    await page.locator("#hint").tap()
    await expect(dialog).to_be_visible()
    await expect(page.locator("#hint-cost")).to_contain_text(COST)
    await page.locator("#hint-decline").tap()
    await expect(dialog).to_be_hidden()
    await page.wait_for_timeout(300)
    assert "hint" not in proxy.sent  # declined: nothing asked, the game keeps its place
    await expect(page.locator("#message")).to_have_text("")

    await page.locator("#hint").tap()  # still the first: asked again
    await accept_hint_cost(page)
    await hint_shown(page)
    assert proxy.sent.count("hint") == 1

    await page.evaluate("document.querySelector('#message').textContent = ''")
    await page.locator("#hint").tap()  # the second hint of this game: at once
    await expect(dialog).to_be_hidden()
    await hint_shown(page)
    await page.reload()
    await expect(page.locator("#board")).to_have_attribute("data-game", first)
    await page.locator("#hint").tap()
    await expect(dialog).to_be_hidden()
    await hint_shown(page)

    await deal(page, CODE, leaving="keep")  # another game: its first hint asks again
    await page.locator("#hint").tap()
    await expect(dialog).to_be_visible()
    await page.keyboard.press("Escape")  # Esc is "no hint"
    await expect(dialog).to_be_hidden()
    await page.wait_for_timeout(300)
    assert proxy.sent.count("hint") == 3
    proxy.close()
    await context.close()
    assert errors == []
