"""The game page ``/g/GAME_ID`` in Debian Chromium: a won game stepped through with
the buttons, the slider and the keyboard, each position compared with the engine's; reached from the
win screen, a leaderboard row and the profile; a live game followed on the same page; a sealed daily game,
an unknown id and a malformed one each give a clear page. Screenshots for desktop and phone."""

from __future__ import annotations

import re
from typing import Any

from playwright.async_api import Page, expect

from engine import UNDO, Game, Move
from server.app import App
from tests.support import serverutil
from tests.support.wire import WINNING_LINE
from tests.support.wsclient import WsClient, player
from tests.web.pages import deal, expect_board, open_client, screenshot, top_card

DESKTOP = {"width": 1280, "height": 860}
PHONE = {"width": 390, "height": 844}
CODE = "EO1-C8-AAAAAFA"


def position(code: str, log: tuple[Any, ...], v: int) -> Game:
    """The engine's game at version ``v`` of ``log``."""
    game = Game.from_code(code)
    for action in log[:v]:
        game.play(action)
    return game


async def shows(page: Page, code: str, log: tuple[Any, ...], v: int, final: Game | None = None) -> None:
    """The replay page shows version ``v``, pile by pile as the engine has it (``final``: the whole
    game, for the status at its end)."""
    mirror = final if final is not None and v == len(log) else position(code, log, v)
    await expect_board(page, mirror, mode="replay")
    await expect(page.locator("#replay-position")).to_have_text(f"{v} / {len(log)}")
    await expect(page.locator("#replay-slider")).to_have_value(str(v))


async def send(client: WsClient, game_id: str, move: Move) -> None:
    fields: dict[str, object] = {"from": str(move.source), "to": str(move.target)}
    if move.count > 1:
        fields["n"] = move.count
    reply = await client.request("move", game=game_id, **fields)
    assert reply["type"] == "ack", reply


async def test_a_won_game_steps_by_buttons_slider_and_keys_from_the_win_screen_and_a_board(
    chromium: Any, site: str, web_app: App
) -> None:
    """Ann's other connection plays a won line (with an undo in it) but the last move, which her page
    taps; the win screen links to the game's page, which opens at the deal and steps as the engine
    plays; the deal's leaderboard row links to the same page."""
    errors: list[str] = []
    context = await chromium.new_context(viewport=DESKTOP)
    page = await open_client(context, site, errors, name="Ann")
    game_id = await deal(page, CODE)
    other = await WsClient.open(serverutil.ws_url(web_app))
    await other.hello(token=await page.evaluate("localStorage.getItem('eightoff.token')"))
    assert (await other.request("resume", game=game_id))["type"] == "snapshot"
    mirror = Game.from_code(CODE)
    first = Move.parse(WINNING_LINE[0])
    await send(other, game_id, first)
    assert (await other.request("undo", game=game_id))["type"] == "ack"
    mirror.play(first)
    mirror.play(UNDO)
    for text in WINNING_LINE[:-1]:
        await send(other, game_id, Move.parse(text))
        mirror.play(Move.parse(text))
    await other.close()
    await expect_board(page, mirror)
    last = Move.parse(WINNING_LINE[-1])
    await top_card(page, str(last.source)).click()
    mirror.play(last)
    link = page.locator("#replay-link")
    await expect(link).to_be_visible()
    await expect(link).to_have_attribute("href", f"/g/{game_id}")

    await link.click()
    await expect(page).to_have_url(f"{site}/g/{game_id}")
    await expect(page.locator("body")).to_have_attribute("data-state", "ready")
    log, n = mirror.log, len(mirror.log)
    await expect(page.locator('#game-info [data-field="owner"]')).to_have_text("Ann")
    await expect(page.locator('#game-info [data-field="result"]')).to_have_text("Won")
    await shows(page, CODE, log, 0)  # a finished game opens at its deal
    await expect(page.locator("#replay-move")).to_have_text("The deal.")
    await page.click("#replay-forward")
    await shows(page, CODE, log, 1)
    await page.click("#replay-forward")
    await shows(page, CODE, log, 2)
    await expect(page.locator("#replay-move")).to_have_text(re.compile(r"^Undo 2: "))
    await page.click("#replay-back")
    await shows(page, CODE, log, 1)
    await page.click("#replay-last")
    await shows(page, CODE, log, n, mirror)
    await expect(page.locator("#replay-forward")).to_be_disabled()
    await page.click("#replay-first")
    await shows(page, CODE, log, 0)
    await page.locator("#replay-slider").fill("57")
    await shows(page, CODE, log, 57)
    await page.locator("body").click(position={"x": 5, "y": 300})  # the keys go to the page, not the slider
    await page.keyboard.press("ArrowRight")
    await shows(page, CODE, log, 58)
    await page.keyboard.press("ArrowLeft")
    await page.keyboard.press("ArrowLeft")
    await shows(page, CODE, log, 56)
    await page.keyboard.press("End")
    await shows(page, CODE, log, n, mirror)
    await page.keyboard.press("Home")
    await shows(page, CODE, log, 0)
    await page.click("#replay-play")
    await expect(page.locator("#replay-play")).to_have_text("Pause")
    await expect(page.locator("#board")).to_have_attribute("data-v", "2")
    await page.click("#replay-play")
    await expect(page.locator("#replay-play")).to_have_text("Play")
    paused = int(await page.locator("#board").get_attribute("data-v") or "0")
    assert paused >= 2
    await page.locator("#replay-slider").fill("120")
    await shows(page, CODE, log, 120)
    await screenshot(page, "desktop-replay.png", full_page=True)

    # The deal's board lists the game; its row links to the same page.
    await page.goto(f"{site}/")
    await page.click("#leaderboards-toggle")
    await page.select_option("#board-kind", "deal")
    await page.fill("#board-code", CODE)
    await page.click("#leaderboard-show")
    row_link = page.locator(f'#leaderboard-table tbody a[data-replay="{game_id}"]')
    await expect(row_link).to_have_attribute("href", f"/g/{game_id}")
    await page.locator('#leaderboard-table tbody [data-col="player"]').first.click()  # the row: its profile
    for table in ("#profile-best", "#profile-recent"):
        profile_link = page.locator(f'{table} a[data-replay="{game_id}"]')
        await expect(profile_link).to_have_attribute("href", f"/g/{game_id}")
    await row_link.click()
    await expect(page).to_have_url(f"{site}/g/{game_id}")
    await shows(page, CODE, log, 0)
    await context.close()
    assert errors == []


async def test_a_live_game_is_followed_and_sealed_unknown_and_malformed_links_say_so(
    chromium: Any, site: str, web_app: App
) -> None:
    """On a phone (touch), Bob's game being played opens at its last move and follows his moves until
    he resigns, and the back button steps by touch. Bob's daily game is sealed to this browser's
    player (a new guest who can still play it): the page shows the server's words. An unknown id and
    a malformed one (bad input) get their own clear page."""
    errors: list[str] = []
    url = serverutil.ws_url(web_app)
    bob = await player(url, name="Bob")
    snapshot = await bob.request("new_game", code=CODE)
    game_id = snapshot["game"]
    mirror = Game.from_code(CODE)
    for text in WINNING_LINE[:3]:
        await send(bob, game_id, Move.parse(text))
        mirror.play(Move.parse(text))

    context = await chromium.new_context(
        viewport=PHONE, has_touch=True, is_mobile=True, device_scale_factor=2
    )
    page = await context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    await page.goto(f"{site}/g/{game_id}")
    await expect(page.locator("#replay-live")).to_be_visible()
    await expect(page.locator('#game-info [data-field="result"]')).to_have_text("Playing now")
    await shows(page, CODE, mirror.log, 3)
    for text in WINNING_LINE[3:5]:
        await send(bob, game_id, Move.parse(text))
        mirror.play(Move.parse(text))
        await shows(page, CODE, mirror.log, mirror.v)  # a viewer at the end follows the game
    await page.tap("#replay-back")
    await shows(page, CODE, mirror.log, 4)
    await send(bob, game_id, Move.parse(WINNING_LINE[5]))
    mirror.play(Move.parse(WINNING_LINE[5]))
    await expect(page.locator("#replay-position")).to_have_text("4 / 6")  # looking back: stays there
    await page.tap("#replay-last")
    await shows(page, CODE, mirror.log, 6)
    assert (await bob.request("resign", game=game_id))["type"] == "game_over"
    mirror.resign()
    await expect(page.locator('#game-info [data-field="result"]')).to_have_text("Resigned")
    await expect(page.locator("#replay-live")).to_be_hidden()
    await shows(page, CODE, mirror.log, 6, mirror)
    await screenshot(page, "phone-replay.png")

    daily = await bob.request("new_game", daily=True)
    await send(bob, daily["game"], min(Game.from_code(daily["code"]).legal_moves, key=str))
    await page.goto(f"{site}/g/{daily['game']}")
    await expect(page.locator("body")).to_have_attribute("data-state", "sealed")
    message = page.locator("#message")
    await expect(message).to_contain_text("This game is sealed for now.")
    await expect(message).to_contain_text(f"game {daily['game']} plays the daily of")
    await expect(message).to_contain_text("finish it first, or watch after it closes at")
    await expect(page.locator("#board")).to_be_hidden()
    await expect(page.locator("#replay-controls")).to_be_hidden()
    await screenshot(page, "phone-replay-sealed.png")

    await page.goto(f"{site}/g/NoSuchGame123")
    await expect(page.locator("body")).to_have_attribute("data-state", "missing")
    await expect(message).to_have_text("There is no game NoSuchGame123 on this server: check the link.")
    for bad in ("bad!id", "x" * 33):
        response = await page.goto(f"{site}/g/{bad}")
        assert response is not None and response.status == 400, bad
        await expect(page.locator("body")).to_have_attribute("data-state", "bad")
        await expect(message).to_contain_text("This link names no game")
        await expect(page.locator("#board")).to_be_hidden()
    await bob.close()
    await context.close()
    assert errors == []
