"""The browser client's live list and a sealed daily (docs/fair-play.md): another player's game of
today's daily, which the page's player can still play, is listed "sealed" with no Watch button;
their free game keeps its button."""

from __future__ import annotations

from typing import Any

from playwright.async_api import expect

from server.app import App
from tests.support.wsclient import WsClient
from tests.web.pages import open_client


async def test_live_list_shows_a_sealed_daily_without_a_watch_button(
    chromium: Any, site: str, web_app: App
) -> None:
    errors: list[str] = []
    rival = await WsClient.open(f"ws://127.0.0.1:{web_app.port}/ws")
    await rival.hello(name="Rival")
    daily = (await rival.request("new_game", daily=True))["game"]
    free = (await rival.request("new_game", code="EO1-C8-AAAAAFA"))["game"]
    context = await chromium.new_context(viewport={"width": 1280, "height": 860})
    page = await open_client(context, site, errors, name="Zoë")

    await page.click("#refresh-live")
    sealed = page.locator(f'[data-live-game="{daily}"]')
    await expect(sealed).to_contain_text("sealed")
    await expect(sealed.locator("[data-watch]")).to_have_count(0)
    await expect(page.locator(f'[data-live-game="{free}"] [data-watch]')).to_have_count(1)
    assert errors == []
    await context.close()
    await rival.close()
