"""The browser client shows the race rating board of a variant and a profile's ratings, as the
protocol's replies give them; in a real Chromium against the real server, with ratings stored as a
finished race stores them (through the server's commit pipeline).

Bad input tried: a variant nobody raced rated (the board says so, rather than showing an empty
table), and a player with no rating (the profile says "not rated yet").
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from playwright.async_api import expect

from server.app import App
from server.play.race.ratings import Placement, rated_race
from server.storage import ratings as stored_ratings
from server.storage.committer import StoreRatings
from tests.support import serverutil
from tests.support.wsclient import WsClient, player
from tests.web.pages import open_client

DESKTOP = {"width": 1280, "height": 860}
NOW = dt.datetime(2026, 12, 2, 5, 0, tzinfo=dt.UTC)


async def test_the_rating_board_and_the_profile_show_the_ratings(
    chromium: Any, site: str, web_app: App
) -> None:
    errors: list[str] = []
    context = await chromium.new_context(viewport=DESKTOP)
    page = await open_client(context, site, errors, name="Ann")
    await page.click("#leaderboards-toggle")
    profile = page.locator("#profile")
    await expect(profile).to_have_attribute("data-loaded", "true")
    await expect(profile.locator('[data-field="ratings"]')).to_have_text("not rated yet")
    ann = await page.locator("#player-name").get_attribute("data-player-id")
    assert ann is not None

    url = serverutil.ws_url(web_app)
    bo: WsClient = await player(url, name="Bo")
    assert bo.player is not None
    seats = [Placement(ann, 1), Placement(bo.player["id"], 2)]
    for race_id in ("race-1", "race-2"):
        async with web_app.database.connection() as conn:
            current = await stored_ratings.load_ratings(conn, 4, [ann, bo.player["id"]])
        await web_app.services.committer.stored(StoreRatings(rated_race(race_id, 4, seats, current, NOW)))
    page_reply = await bo.request("leaderboard", board="rating", cells=4)
    own = await bo.request("profile", player=ann)
    await bo.close()

    await page.select_option("#board-kind", "rating")
    await expect(page.locator("#board-period")).to_be_hidden()
    await expect(page.locator("#board-order")).to_have_value("rating")
    await page.select_option("#board-cells", "2")
    table = page.locator("#leaderboard-table")
    await expect(table).to_have_attribute("data-board", "rating")
    await expect(page.locator("#leaderboard-empty")).to_have_text("No rated race in this variant yet.")
    await page.select_option("#board-cells", "4")
    rows = table.locator("tbody tr")
    await expect(rows).to_have_count(2)
    for index, row in enumerate(page_reply["rows"]):
        shown = rows.nth(index)
        await expect(shown).to_have_attribute("data-player-id", row["player"]["id"])
        await expect(shown).to_have_attribute("data-rank", str(row["rank"]))
        await expect(shown.locator('[data-col="rating"]')).to_have_text(str(row["rating"]))
        await expect(shown.locator('[data-col="races"]')).to_have_text("2")
    await expect(rows.nth(0)).to_have_attribute("aria-current", "true")  # Ann won both

    await rows.nth(0).click()  # a row opens its player's profile: Ann's own, read afresh
    (c4,) = own["ratings"]
    await expect(profile.locator('[data-field="ratings"]')).to_have_text(f"C4 {c4['rating']} (2 races)")
    assert errors == []
