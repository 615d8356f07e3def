"""The browser client (web/) in a real Chromium against a real server: play, reload, resume, spectate,
leaderboards and profile.

The engine plays the same actions alongside ("the mirror"), and after each step the board the page
draws must be exactly the mirror's layout.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.async_api import WebSocketRoute, expect

from engine import UNDO, Game, IllegalMoveError, Move, parse_pile
from tests.web.pages import expect_board, leave_game, open_client, top_card

CODE = "EO1-C8-AAAAAFA"
SCREENSHOT = "/tmp/eightoff-board.png"
SPECTATOR_SCREENSHOT = "/tmp/eightoff-spectator.png"
LEADERBOARD_SCREENSHOT = "/tmp/eightoff-leaderboard.png"
VIEWPORT = {"width": 1280, "height": 860}


class DiffDropper:
    """Sits between a page and the server, forwarding every frame but the server's next ``diff`` once
    ``armed``, so that the page sees a gap in ``v``; it counts the requests the page sends by type."""

    def __init__(self) -> None:
        self.armed = False
        self.dropped: list[dict[str, Any]] = []
        self.sent: list[str] = []

    def route(self, ws: WebSocketRoute) -> None:
        server = ws.connect_to_server()

        def upstream(frame: str | bytes) -> None:
            self.sent.append(json.loads(frame)["type"])
            server.send(frame)

        def downstream(frame: str | bytes) -> None:
            message = json.loads(frame)
            if self.armed and message["type"] == "diff":
                self.armed = False
                self.dropped.append(message)
                return
            ws.send(frame)

        ws.on_message(upstream)
        server.on_message(downstream)


async def test_play_reload_resume_and_spectate(chromium: Any, site: str) -> None:
    errors: list[str] = []
    mirror = Game.from_code(CODE)

    # (1) A new game by code: the dealt board, a move into a cell, undo, an illegal move. -----------------
    player = await chromium.new_context(viewport=VIEWPORT)
    page = await open_client(player, site, errors, name=None)
    player_id = await page.locator("#player-name").get_attribute("data-player-id")
    assert await page.evaluate("localStorage.getItem('eightoff.token')")

    await page.fill("#code", CODE)
    await expect(page.locator('input[name="deal"][value="code"]')).to_be_checked()
    await page.click("#new-game")
    await expect_board(page, mirror)
    assert await page.locator("#cells [data-pile]").count() == 8
    assert await page.locator("#tableau [data-pile]").count() == 8
    game_id = await page.locator("#board").get_attribute("data-game")
    assert game_id
    await expect(page.locator(f'[data-my-game="{game_id}"]')).to_be_visible()

    moved = str(mirror.top_card(parse_pile("t1")))
    await top_card(page, "t1").click()
    await expect(top_card(page, "t1")).to_have_class(re.compile(r"\bselected\b"))
    await page.click('[data-pile="c5"]')
    mirror.play(Move.parse("t1-c5"))
    await expect_board(page, mirror)
    await expect(page.locator(f'[data-pile="c5"] [data-card="{moved}"]')).to_be_visible()
    await expect(page.locator('#game-info [data-field="moves"]')).to_have_text("1")

    await page.click("#undo")
    mirror.play(UNDO)
    await expect_board(page, mirror)
    assert await page.locator('[data-pile="c5"] [data-card]').count() == 0

    # A refusal reads as the rule, in a player's words.
    with pytest.raises(IllegalMoveError, match="wrong suit: 5C does not go onto 5D"):
        mirror.copy().play(Move.parse("t1-t2"))
    await top_card(page, "t1").click()
    await expect(top_card(page, "t1")).to_have_class(re.compile(r"\bselected\b"))
    await page.click('[data-pile="t2"]')
    await expect(page.locator("#message")).to_have_text("5♣ goes only on 6♣")
    await expect(page.locator("#message")).to_have_attribute("data-kind", "error")
    await expect_board(page, mirror)  # nothing changed

    # A card inside a column picks up the run above it, only if it is one: here 5♥ under
    # 8♥ is not, and the board says so; a double tap asks the server, which refuses it as a group (`n`).
    with pytest.raises(IllegalMoveError, match="not a same-suit run"):
        mirror.copy().play(Move.parse("t3-t8:2"))
    t3_cards = page.locator('[data-pile="t3"] [data-card]')
    # Click the visible strip of the covered card, as a person would.
    await t3_cards.nth(await t3_cards.count() - 2).click(position={"x": 12, "y": 8})
    await expect(page.locator("#message")).to_have_text(
        "5♥ and 8♥ are not a run: only a run of one suit in order moves together"
    )
    await expect(page.locator(".selected")).to_have_count(0)
    await page.wait_for_timeout(400)  # the next clicks are a gesture of their own
    await t3_cards.nth(await t3_cards.count() - 2).dblclick(position={"x": 12, "y": 8})
    await expect(page.locator("#message")).to_have_text("Only a run of one suit in order moves together")
    await expect(page.locator(".selected")).to_have_count(0)
    await expect_board(page, mirror)

    # Leave the game with one move made, through the double-click ("auto") this time.
    auto = mirror.double_tap_move(parse_pile("t1"))
    await top_card(page, "t1").dblclick()
    mirror.play(auto)
    await expect_board(page, mirror)
    await expect(page.locator("#message")).to_have_text("")

    # (2) Reload: the same player (token in localStorage) gets the game back. ----------------------------
    await page.reload()
    await expect(page.locator("body")).to_have_attribute("data-connection", "open")
    await expect(page.locator("#player-name")).to_have_attribute("data-player-id", player_id or "")
    await expect(page.locator(f'[data-my-game="{game_id}"]')).to_be_visible()
    await expect(page.locator("#board")).to_have_attribute("data-game", game_id)  # this tab's game
    await expect_board(page, mirror)

    # Switch to another deal, then resume the first from the list of unfinished games (each time the
    # game in progress is kept for later, as asked).
    await page.check('input[name="deal"][value="random"]')
    await page.click("#new-game")
    await leave_game(page, "keep")
    await expect(page.locator("#board")).not_to_have_attribute("data-game", game_id)
    await page.click(f'[data-resume="{game_id}"]')
    await leave_game(page, "keep")
    await expect(page.locator("#board")).to_have_attribute("data-game", game_id)
    await expect_board(page, mirror)

    # (3) Someone else watches the game from the live list and sees the next move arrive. ----------------
    spectator = await chromium.new_context(viewport=VIEWPORT)
    dropper = DiffDropper()
    watcher = await open_client(spectator, site, errors, name=None, route=dropper.route)
    assert await watcher.locator("#player-name").get_attribute("data-player-id") != player_id
    await watcher.click("#refresh-live")
    await watcher.locator(f'[data-live-game="{game_id}"] [data-watch]').click()
    await expect(watcher.locator("#board")).to_have_attribute("data-game", game_id)
    await expect_board(watcher, mirror, mode="watch")
    await expect(watcher.locator("#undo")).to_be_hidden()

    await top_card(page, "t2").click()
    await page.click('[data-pile="c6"]')
    mirror.play(Move.parse("t2-c6"))
    await expect_board(page, mirror)
    await expect_board(watcher, mirror, mode="watch")

    # A spectator that misses a diff sees the gap in v and watches again: a fresh snapshot.
    assert dropper.sent.count("watch") == 1
    dropper.armed = True
    await top_card(page, "t3").click()
    await page.click('[data-pile="c7"]')
    mirror.play(Move.parse("t3-c7"))
    await expect_board(page, mirror)
    await page.click("#undo")
    mirror.play(UNDO)
    await expect_board(page, mirror)
    await expect_board(watcher, mirror, mode="watch")
    assert len(dropper.dropped) == 1
    assert dropper.sent.count("watch") == 2

    # Clicking on a watched board does nothing.
    await top_card(watcher, "t3").click()
    assert await watcher.locator(".selected").count() == 0

    # (4) A screenshot for a person to look at (not asserted). -------------------------------------------
    await top_card(page, "t4").click()  # show a selection too
    await page.screenshot(path=SCREENSHOT, full_page=True)
    await watcher.screenshot(path=SPECTATOR_SCREENSHOT, full_page=True)
    await page.keyboard.press("Escape")
    await expect(page.locator(".selected")).to_have_count(0)

    # Resigning (two clicks) ends the game for the player and the spectator.
    await page.click("#resign")
    await page.click("#resign")
    for each in (page, watcher):
        await expect(each.locator("#game-over")).to_be_visible()
        await expect(each.locator("#game-over")).to_have_attribute("data-won", "false")
        await expect(each.locator("#game-over-title")).to_have_text("Game over")
        await expect(each.locator("#board")).to_have_attribute("data-status", "resigned")
    await expect(page.locator(f'[data-my-game="{game_id}"]')).to_have_count(0)
    await spectator.close()

    # (5) Leaderboards: the resigned game ranks on the C8 variant board; the profile counts it. ----------
    await page.click("#leaderboards-toggle")
    await expect(page.locator("#leaderboard-form")).to_be_visible()
    await page.select_option("#board-kind", "variant")
    await page.select_option("#board-cells", "8")
    await page.select_option("#board-period", "all")
    await page.select_option("#board-order", "moves")
    await page.click("#leaderboard-show")
    table = page.locator("#leaderboard-table")
    await expect(table).to_have_attribute("data-state", "loaded")
    await expect(table).to_have_attribute("data-board", "variant")
    row = table.locator(f'tbody tr[data-player-id="{player_id}"]')
    await expect(row).to_have_count(1)
    await expect(row).to_have_attribute("data-rank", "1")
    await expect(row).to_have_attribute("data-won", "false")
    await expect(row).to_have_attribute("aria-current", "true")
    await expect(row).to_have_class(re.compile(r"\bmine\b"))
    await expect(row.locator('[data-col="moves"]')).to_have_text(str(mirror.moves))
    await expect(row.locator('[data-col="won"]')).to_have_text("✗")
    await expect(row.locator('[data-col="time"]')).to_have_text(re.compile(r"^\d+:\d\d$"))
    await expect(page.locator("#leaderboard-more")).to_be_hidden()  # one row: no next page
    profile = page.locator("#profile")
    await expect(profile).to_have_attribute("data-loaded", "true")
    await expect(profile.locator('[data-field="played"]')).to_have_text("1")
    await expect(profile.locator('[data-field="won"]')).to_have_text("0")
    await expect(profile.locator('[data-field="win_rate"]')).to_have_text("0%")
    await expect(profile.locator('[data-field="streak"]')).to_have_attribute("data-current", "0")

    # "Around me" finds the same row; the score order says scores can be farmed.
    await page.click("#leaderboard-around")
    await expect(row).to_have_attribute("aria-current", "true")
    await page.select_option("#board-order", "score")
    await expect(page.locator("#score-note")).to_be_visible()
    await page.select_option("#board-order", "moves")
    await expect(page.locator("#score-note")).to_be_hidden()

    # The players board: played, won, win rate.
    await page.select_option("#board-kind", "players")
    await expect(page.locator("#board-order")).to_have_value("wins")
    await expect(page.locator("#board-cells")).to_be_hidden()
    await expect(table).to_have_attribute("data-board", "players")
    await expect(row.locator('[data-col="played"]')).to_have_text("1")
    await expect(row.locator('[data-col="win_rate"]')).to_have_text("0%")

    # The deal board's code follows the shown game; a bad code shows the server's own message.
    await page.select_option("#board-kind", "deal")
    await expect(page.locator("#board-code")).to_have_value(CODE)
    await expect(table).to_have_attribute("data-board", "deal")
    await expect(row).to_have_attribute("data-rank", "1")
    bad_query = "board=deal&code=EO1-NOPE&period=all&order=moves"
    refusal = await page.request.get(f"{site}/api/leaderboard?{bad_query}")
    assert refusal.status == 400
    await page.fill("#board-code", "EO1-NOPE")
    await page.click("#leaderboard-show")
    await expect(page.locator("#leaderboard-error")).to_have_text((await refusal.json())["message"])
    await expect(table).to_be_hidden()

    await page.select_option("#board-kind", "variant")
    await expect(row).to_have_attribute("aria-current", "true")
    await expect(page.locator("#leaderboard-error")).to_be_hidden()
    await page.locator("#leaderboards-section").screenshot(path=LEADERBOARD_SCREENSHOT)

    await player.close()
    assert errors == []
