"""Playing as the seeds' app plays, in a real Chromium against a real server: a tap sends a top card
to its foundation, a double tap to its best place, cards, runs and a foundation's top card are
dragged, an illegal drop snaps back with the rule in the player's words; the timer runs, a chosen
name survives a reload, a won game shows its win screen and plays again; on a phone's screen every
one of those works by touch without scrolling sideways.

The engine plays the same actions alongside ("the mirror"), and the page must draw its layout.
"""

from __future__ import annotations

import re
from typing import Any

from playwright.async_api import Page, expect

from engine import UNDO, Game, IllegalMoveError, Move, parse_pile
from server.app import App
from tests.support import serverutil
from tests.support.wire import WINNING_LINE
from tests.support.wsclient import WsClient
from tests.web.pages import (
    card_from_top,
    centre,
    choose_name,
    deal,
    double_tap,
    expect_board,
    gesture_deal,
    goes_only_on,
    mouse_drag,
    open_client,
    pile,
    screenshot,
    top_card,
    touch_drag,
)

DESKTOP = {"width": 1280, "height": 860}
PHONE = {"width": 390, "height": 844}


def illegal_column_drop(mirror: Game) -> tuple[str, str, str]:
    """A top card and a non-empty column that refuses it for its suit or rank: (from, to, card)."""
    columns = mirror.layout().columns
    for source in range(1, 9):
        for target in range(1, 9):
            if source == target or not columns[source - 1] or not columns[target - 1]:
                continue
            try:
                mirror.copy().play(Move.parse(f"t{source}-t{target}"))
            except IllegalMoveError as refused:
                if "wrong" in str(refused):
                    return f"t{source}", f"t{target}", str(columns[source - 1][-1])
    raise AssertionError("every column takes every top card")


def double_tap_column(mirror: Game) -> tuple[str, Move]:
    """A column whose top card cannot go to its foundation but has a double-tap move."""
    for index in range(1, 9):
        source = parse_pile(f"t{index}")
        try:
            mirror.copy().play(mirror.tap_move(source))
        except IllegalMoveError:
            try:
                return f"t{index}", mirror.double_tap_move(source)
            except IllegalMoveError:
                continue
    raise AssertionError("no column for a double tap")


async def no_horizontal_scroll(page: Page) -> None:
    widths = await page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], widths


async def play_the_gestures(page: Page, mirror: Game, ace_column: str, group: str, *, touch: bool) -> None:
    """On ``gesture_deal()``'s opening, with a mouse or a finger: a tap sends the ace up; the ace is
    dragged back (a take-back) and up again; a run is dragged; an illegal drop snaps back with its
    reason; a double tap makes the server's best move."""
    drag = touch_drag if touch else mouse_drag
    ace = str(mirror.layout().columns[int(ace_column[1:]) - 1][-1])
    await (top_card(page, ace_column).tap() if touch else top_card(page, ace_column).click())
    mirror.play(Move.parse(f"{ace_column}-f{ace[1]}"))
    await expect_board(page, mirror)

    await drag(page, top_card(page, f"f{ace[1]}"), pile(page, "c5"))
    mirror.play(Move.parse(f"f{ace[1]}-c5"))
    await expect_board(page, mirror)
    await drag(page, top_card(page, "c5"), pile(page, f"f{ace[1]}"))
    mirror.play(Move.parse(f"c5-f{ace[1]}"))
    await expect_board(page, mirror)

    run = Move.parse(group)  # dragged by its lower card
    await drag(page, card_from_top(page, str(run.source), run.count), pile(page, str(run.target)))
    mirror.play(run)
    await expect_board(page, mirror)

    source, target, card = illegal_column_drop(mirror)
    await drag(page, top_card(page, source), pile(page, target))
    await expect(page.locator("#message")).to_have_text(goes_only_on(card))
    await expect(page.locator("#message")).to_have_attribute("data-kind", "error")
    await expect(page.locator(".drag-ghost")).to_have_count(0)
    await expect(page.locator(".lifted")).to_have_count(0)
    await expect(top_card(page, source)).to_have_attribute("data-card", card)
    await expect_board(page, mirror)

    column, auto = double_tap_column(mirror)  # its top card cannot go to its foundation
    if touch:  # one gesture, not two Playwright taps: their checks could outlast the window under load
        await double_tap(page, await centre(top_card(page, column)), 60, touch=True)
    else:
        await top_card(page, column).dblclick()
    mirror.play(auto)
    await expect_board(page, mirror)


async def test_gestures_timer_and_name_on_a_desktop(chromium: Any, site: str) -> None:
    errors: list[str] = []
    mirror, ace_column, group = gesture_deal()
    context = await chromium.new_context(viewport=DESKTOP)
    page = await open_client(context, site, errors, name="Zoë")
    await expect(page.locator("#player-name")).to_have_text("Zoë")
    await expect(page.locator("#toolbar")).to_be_hidden()  # no game on: no game actions
    game_id = await deal(page, mirror.deal.code())
    await expect_board(page, mirror)
    await expect(page.locator("#toolbar")).to_be_visible()
    assert await page.locator("#game-info").get_by_text(re.compile(r"^v$")).count() == 0

    # The timer runs from the deal.
    timer = page.locator('#game-info [data-field="time"]')
    await expect(timer).to_have_text(re.compile(r"^0:0\d$"))
    await expect(timer).not_to_have_text("0:00", timeout=4_000)

    # One tap on the ace on top of a column: to its foundation.
    await play_the_gestures(page, mirror, ace_column, group, touch=False)

    # Tap to pick up, tap the destination (a cell); then the keyboard's undo.
    picked = str(mirror.layout().columns[0][-1])
    await top_card(page, "t1").click()
    await expect(top_card(page, "t1")).to_have_class(re.compile(r"\bselected\b"))
    await pile(page, "c6").click()
    mirror.play(Move.parse("t1-c6"))
    await expect_board(page, mirror)
    await expect(page.locator('[data-pile="c6"] [data-card]')).to_have_attribute("data-card", picked)
    await page.keyboard.press("u")
    mirror.play(UNDO)
    await expect_board(page, mirror)

    # One's own game is not offered to watch in the live list.
    await page.click("#refresh-live")
    own = page.locator(f'[data-live-game="{game_id}"]')
    await expect(own).to_contain_text("your game")
    await expect(own.locator("[data-watch]")).to_have_count(0)

    await top_card(page, "t2").click()  # a card picked up, for the picture
    await screenshot(page, "desktop.png")

    # The name and the game survive a reload: no question asked again.
    player_id = await page.locator("#player-name").get_attribute("data-player-id")
    await page.reload()
    await expect(page.locator("body")).to_have_attribute("data-connection", "open")
    await expect(page.locator("#name-dialog")).to_be_hidden()
    await expect(page.locator("#player-name")).to_have_text("Zoë")
    await expect(page.locator("#player-name")).to_have_attribute("data-player-id", player_id or "")
    await expect_board(page, mirror)
    await expect(timer).not_to_have_text("0:00")

    # Restart: the same deal from its opening, in one step (confirmed by a second tap).
    await page.click("#restart")
    await page.click("#restart")
    await expect(page.locator("#board")).not_to_have_attribute("data-game", game_id)
    opening = Game.from_code(mirror.deal.code())
    await expect_board(page, opening)

    # The keyboard: Enter on a focused card taps it (here: picked up), "a" sends it to its best place.
    column, auto = double_tap_column(opening)
    await top_card(page, column).focus()
    await page.keyboard.press("Enter")
    await expect(top_card(page, column)).to_have_class(re.compile(r"\bselected\b"))
    await page.keyboard.press("a")
    opening.play(auto)
    await expect_board(page, opening)
    # ... and an empty cell, focused, is where the picked-up card goes.
    await top_card(page, "t8").focus()
    await page.keyboard.press("Enter")
    await expect(top_card(page, "t8")).to_have_class(re.compile(r"\bselected\b"))
    await pile(page, "c8").focus()
    await page.keyboard.press("Enter")
    opening.play(Move.parse("t8-c8"))
    await expect_board(page, opening)

    # Another name is another player (the protocol names a player once, at its first hello).
    await page.click("#rename")
    await expect(page.locator("#name-note")).to_contain_text("the games and ranks of Zoë stay")
    await page.fill("#name-input", "Ann")
    await page.click("#name-save")
    await expect(page.locator("#player-name")).to_have_text("Ann")
    await expect(page.locator("#player-name")).not_to_have_attribute("data-player-id", player_id or "")
    await expect(page.locator("#board")).to_be_hidden()
    await page.reload()
    await expect(page.locator("#player-name")).to_have_text("Ann")
    await context.close()
    assert errors == []


async def test_win_screen_and_play_again(chromium: Any, site: str, web_app: App) -> None:
    """The player's other connection plays all but the last move of a won line; the page follows by
    diffs, and its tap makes the winning move."""
    errors: list[str] = []
    code = "EO1-C8-AAAAAFA"
    context = await chromium.new_context(viewport=DESKTOP)
    page = await open_client(context, site, errors, name="Ann")
    game_id = await deal(page, code)
    token = await page.evaluate("localStorage.getItem('eightoff.token')")
    other = await WsClient.open(serverutil.ws_url(web_app))
    await other.hello(token=token)
    assert (await other.request("resume", game=game_id))["type"] == "snapshot"
    mirror = Game.from_code(code)
    for text in WINNING_LINE[:-1]:
        move = Move.parse(text)
        fields: dict[str, object] = {"from": str(move.source), "to": str(move.target)}
        if move.count > 1:
            fields["n"] = move.count
        reply = await other.request("move", game=game_id, **fields)
        assert reply["type"] == "ack", reply
        mirror.play(move)
    await other.close()
    await expect_board(page, mirror)

    last = Move.parse(WINNING_LINE[-1])
    await top_card(page, str(last.source)).click()
    mirror.play(last)
    over = page.locator("#game-over")
    await expect(over).to_be_visible()
    await expect(over).to_have_attribute("data-won", "true")
    await expect(page.locator("#game-over-title")).to_have_text("You won!")
    await expect(over.locator('[data-field="moves"]')).to_have_text(str(mirror.moves))
    await expect(over.locator('[data-field="score"]')).to_have_text(str(mirror.score))
    await expect(over.locator('[data-field="time"]')).to_have_text(re.compile(r"^\d+:\d\d$"))
    await expect(over.locator('[data-field="rank"]')).to_have_text("#1")
    await expect(page.locator("#toolbar")).to_be_hidden()  # the game is over: no game actions
    await screenshot(page, "desktop-won.png")

    await page.click("#play-again")
    await expect(page.locator("#board")).not_to_have_attribute("data-game", game_id)
    await expect(over).to_be_hidden()
    await expect_board(page, Game.from_code(code))
    ann = await page.locator("#player-name").get_attribute("data-player-id")

    # Someone else opens the leaderboards: Ann's row opens Ann's profile.
    other_context = await chromium.new_context(viewport=DESKTOP)
    bo = await open_client(other_context, site, errors, name="Bo")
    await bo.click("#leaderboards-toggle")
    row = bo.locator(f'#leaderboard-table tbody tr[data-player-id="{ann}"]')
    await expect(row).to_have_attribute("data-won", "true")
    await row.click()
    await expect(bo.locator("#profile")).to_have_attribute("data-player-id", ann or "")
    await expect(bo.locator("#profile-title")).to_have_text(re.compile(r"^Ann #[0-9A-Z]{4}'s profile$"))
    await expect(bo.locator('#profile [data-field="won"]')).to_have_text("1")
    await bo.click("#profile-mine")
    await expect(bo.locator("#profile-title")).to_have_text("Your profile")
    await expect(bo.locator('#profile [data-field="played"]')).to_have_text("0")
    await other_context.close()
    await context.close()
    assert errors == []


async def test_a_phone_plays_by_touch(chromium: Any, site: str) -> None:
    errors: list[str] = []
    mirror, ace_column, group = gesture_deal()
    context = await chromium.new_context(
        viewport=PHONE, has_touch=True, is_mobile=True, device_scale_factor=2
    )
    page = await context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    await page.goto(f"{site}/")
    await choose_name(page, None)  # the server picks the name
    await deal(page, mirror.deal.code())
    await expect_board(page, mirror)
    await no_horizontal_scroll(page)
    for control in ("#undo", "#restart", "#resign", "#board", "#tabs"):
        box = await page.locator(control).bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], (control, box)
    # The panels are tabs (stacked, they would sit ~1,000 px below the board): hidden while the
    # board shows, and the board alone on the screen (tests/web/test_phone.py measures it).
    await expect(page.locator("#side")).to_be_hidden()
    await page.locator('#tabs [data-tab="games"]').tap()
    side = await page.locator("#side").bounding_box()
    assert side and side["x"] >= 0 and side["x"] + side["width"] <= PHONE["width"], side
    await page.locator('#tabs [data-tab="table"]').tap()

    await play_the_gestures(page, mirror, ace_column, group, touch=True)
    await page.locator("#undo").tap()
    mirror.play(UNDO)
    await expect_board(page, mirror)
    await no_horizontal_scroll(page)
    await screenshot(page, "phone.png")
    await context.close()
    assert errors == []
