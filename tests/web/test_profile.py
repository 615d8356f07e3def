"""The profile shows what the protocol's `profile` reply returns: the figures, the
best won game of each variant and the recent games, each with a button that deals it again; in a real
Chromium against the real server, the reply read alongside by another client.

Bad input tried: a player with no game finished (the lists say so, rather than showing empty tables).
"""

from __future__ import annotations

from typing import Any

from playwright.async_api import Page, expect

from engine import Game, Move
from server.app import App
from tests.support import serverutil
from tests.support.wire import WINNING_LINE
from tests.support.wsclient import WsClient
from tests.web.pages import open_client

DESKTOP = {"width": 1280, "height": 860}
WON = "EO1-C8-AAAAAFA"
RESIGNED = "EO1-C4-AAAAAFA"


def duration_text(ms: int) -> str:
    return f"{ms // 60_000}:{ms // 1000 % 60:02d}"


async def play(client: WsClient, code: str, moves: list[str], *, resign: bool) -> None:
    snapshot = await client.request("new_game", code=code)
    game = Game.from_code(code)
    for text in moves:
        move = Move.parse(text)
        fields: dict[str, object] = {"from": str(move.source), "to": str(move.target)}
        if move.count > 1:
            fields["n"] = move.count
        reply = await client.request("move", game=snapshot["game"], v=game.v, **fields)
        assert reply["type"] == "ack", reply
        game.play(move)
    if resign:
        assert (await client.request("resign", game=snapshot["game"]))["type"] == "game_over"
    else:
        assert game.is_won()
        assert (await client.next_push())["type"] == "game_over"


async def expect_rows(page: Page, table: str, games: list[dict[str, Any]]) -> None:
    rows = page.locator(f"#{table} tbody tr")
    await expect(rows).to_have_count(len(games))
    for index, game in enumerate(games):
        row = rows.nth(index)
        await expect(row).to_have_attribute("data-game", game["game"])
        await expect(row).to_have_attribute("data-won", "true" if game["won"] else "false")
        await expect(row.locator('[data-col="code"]')).to_have_text(game["code"])
        await expect(row.locator('[data-col="moves"]')).to_have_text(str(game["moves"]))
        await expect(row.locator('[data-col="time"]')).to_have_text(duration_text(game["duration_ms"]))


async def test_the_profile_shows_the_reply(chromium: Any, site: str, web_app: App) -> None:
    errors: list[str] = []
    context = await chromium.new_context(viewport=DESKTOP)
    page = await open_client(context, site, errors)
    await page.click("#leaderboards-toggle")
    await expect(page.locator("#profile")).to_have_attribute("data-loaded", "true")
    await expect(page.locator("#profile-best-none")).to_be_visible()
    await expect(page.locator("#profile-recent-none")).to_be_visible()
    await page.click("#leaderboards-toggle")

    token = await page.evaluate("localStorage.getItem('eightoff.token')")
    player = await page.locator("#player-name").get_attribute("data-player-id")
    client = await WsClient.open(serverutil.ws_url(web_app))
    await client.hello(token=token)
    await play(client, WON, list(WINNING_LINE), resign=False)
    await play(client, RESIGNED, [], resign=True)
    reply = await client.request("profile", player=player)
    await client.close()
    assert len(reply["best"]) == 1 and len(reply["recent"]) == 2

    await page.click("#leaderboards-toggle")
    profile = page.locator("#profile")
    for field in ("played", "won", "best_score"):
        await expect(profile.locator(f'[data-field="{field}"]')).to_have_text(str(reply[field]))
    await expect_rows(page, "profile-best", reply["best"])
    best = reply["best"][0]
    await expect(page.locator('#profile-best [data-col="cells"]')).to_have_text(str(best["cells"]))
    await expect(page.locator('#profile-best [data-col="score"]')).to_have_text(str(best["score"]))
    await expect_rows(page, "profile-recent", reply["recent"])
    await expect(page.locator('#profile-recent [data-col="result"]')).to_have_text(["Resigned", "Won"])

    # A row's button deals that deal again.
    await page.locator(f'#profile-recent tr[data-code="{WON}"] [data-play-code]').click()
    await expect(page.locator('#game-info [data-field="code"]')).to_have_text(WON)
    await expect(page.locator("#board")).to_have_attribute("data-v", "0")
    await context.close()
    assert errors == []
