"""The phone, in a real Chromium with a touch screen against the real server: the
board fits the screen in portrait and landscape, every card is a comfortable target (a covered card
shows a strip of at least 30 px), and the leaderboards, the live games and the profile are one tap
away (tabs), in portrait and landscape; a tap still sends a card home.

Bad input tried: a C2 deal (7-card columns, the fewest cells: the narrowest top row) turned from
portrait to landscape mid-game, and each tab tapped while a game is on.
"""

from __future__ import annotations

from typing import Any

from playwright.async_api import Page, ViewportSize, expect

from engine import Game, Move
from tests.web.pages import deal, expect_board, gesture_deal, open_client, screenshot, settled, top_card

PORTRAIT: ViewportSize = {"width": 390, "height": 844}
LANDSCAPE: ViewportSize = {"width": 844, "height": 390}
MIN_STRIP = 30
C2 = "EO1-C2-AAAAAFA"

MEASURE = """() => {
  const board = document.querySelector("#board").getBoundingClientRect();
  const strips = [];
  for (const column of document.querySelectorAll("#tableau [data-pile]")) {
    const cards = [...column.querySelectorAll("[data-card]")].map((card) => card.getBoundingClientRect());
    for (let i = 0; i + 1 < cards.length; i += 1) strips.push(cards[i + 1].top - cards[i].top);
  }
  const card = document.querySelector("#board [data-card]").getBoundingClientRect();
  return {bottom: board.bottom, right: board.right, left: board.left, strips, cardWidth: card.width,
          height: window.innerHeight, width: document.documentElement.scrollWidth,
          viewport: window.innerWidth};
}"""


async def check_fit(page: Page) -> dict[str, Any]:
    await settled(page)
    fit: dict[str, Any] = await page.evaluate(MEASURE)
    assert fit["width"] <= fit["viewport"], fit  # no sideways scrolling
    assert fit["left"] >= 0 and fit["right"] <= fit["viewport"], fit
    assert fit["bottom"] <= fit["height"], fit  # the whole board on the screen
    assert min(fit["strips"]) >= MIN_STRIP, fit
    assert fit["cardWidth"] >= 40, fit
    return fit


async def check_tabs(page: Page) -> None:
    """Each section one tap away, on the screen at once; back to the board."""
    for tab, shown in (
        ("boards", "#profile"),
        ("boards", "#leaderboard-form"),
        ("games", "#live-games"),
        ("games", "#my-games"),
        ("new", "#new-game"),
    ):
        await page.locator(f'#tabs [data-tab="{tab}"]').tap()
        await expect(page.locator(shown)).to_be_in_viewport()
        await expect(page.locator("#board")).to_be_hidden()
    await page.locator('#tabs [data-tab="table"]').tap()
    await expect(page.locator("#board")).to_be_in_viewport()


async def test_the_board_fits_a_phone_and_the_rest_is_one_tap_away(chromium: Any, site: str) -> None:
    errors: list[str] = []
    mirror, ace_column, _ = gesture_deal()
    context = await chromium.new_context(
        viewport=PORTRAIT, has_touch=True, is_mobile=True, device_scale_factor=2
    )
    page = await open_client(context, site, errors)
    await deal(page, mirror.deal.code())
    await expect(page.locator("#board")).to_have_attribute("data-fit", "tall")
    await check_fit(page)
    await screenshot(page, "phone-portrait.png")
    await check_tabs(page)
    await page.locator('#tabs [data-tab="boards"]').tap()
    await expect(page.locator("#profile")).to_have_attribute("data-loaded", "true")
    await screenshot(page, "phone-leaderboards.png")
    await page.locator('#tabs [data-tab="table"]').tap()

    await page.set_viewport_size(LANDSCAPE)
    await expect(page.locator("#board")).to_have_attribute("data-fit", "wide")  # resized: fitted again
    await check_fit(page)
    await top_card(page, ace_column).tap()
    ace = str(mirror.layout().columns[int(ace_column[1:]) - 1][-1])
    mirror.play(Move.parse(f"{ace_column}-f{ace[1]}"))
    await expect_board(page, mirror)
    await check_fit(page)
    await screenshot(page, "phone-landscape.png")
    await check_tabs(page)

    # A C2 deal, the longest opening columns, dealt in landscape and turned to portrait.
    await deal(page, C2, leaving="keep")
    await expect_board(page, Game.from_code(C2))
    await check_fit(page)
    await page.set_viewport_size(PORTRAIT)
    await expect(page.locator("#board")).to_have_attribute("data-fit", "tall")
    await check_fit(page)
    await context.close()
    assert errors == []
