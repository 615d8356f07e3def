"""The solver's parts of the client, in a real Chromium against the real server and its solver:
"winnable deals only" in the new-game dialog (on by default for 4 and 2 cells), the hint button
whose marks a player can follow move after move, and a lost position told calmly, only when asked.

Bad input tried: a hint asked while a move is in flight (the hint must be about the position after
it), a move made while a hint is in flight (the hint's marks and words must not outlive its position),
and a finished game (no hint button).
"""

from __future__ import annotations

import json
import re
from typing import Any

from playwright.async_api import Page, WebSocketRoute, expect

from engine import UNDO, Game, Move
from server.services.winnable import winnable_deals
from solver import Verdict, solve
from tests.support.waiting import eventually
from tests.web.pages import (
    accept_hint_cost,
    card_from_top,
    centre,
    deal,
    expect_board,
    leave_game,
    mouse_drag,
    open_client,
    pile,
    screenshot,
    strip_point,
)

DESKTOP = {"width": 1280, "height": 860}
#: A C4 deal the solver proves lost from its opening, which still has moves to make.
DEAD_C4 = "EO1-C4-AAAAAAA"
LOST_NOTICE = "There is no way to win from here. Undo a few moves, or restart the deal."


class Gate:
    """Between the page and the real server: passes every frame on, records the types the page sends,
    and holds the server's frames back while ``held`` is a list, so that requests stay in flight."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.held: list[str | bytes] | None = None
        self.page_side: WebSocketRoute | None = None

    def route(self, ws: WebSocketRoute) -> None:
        server = ws.connect_to_server()
        self.page_side = ws

        def upstream(frame: str | bytes) -> None:
            self.sent.append(json.loads(frame)["type"])
            server.send(frame)

        def downstream(frame: str | bytes) -> None:
            if self.held is None:
                ws.send(frame)
            else:
                self.held.append(frame)

        ws.on_message(upstream)
        server.on_message(downstream)

    async def release_after(self, *types: str) -> None:
        """Wait until the server has answered with ``types`` (held back), then let everything through."""
        assert self.held is not None and self.page_side is not None
        held = self.held
        await eventually(
            lambda: set(types) <= {json.loads(frame)["type"] for frame in held}, f"answered {types}"
        )
        frames, self.held = self.held, None
        for frame in frames:
            self.page_side.send(frame)


async def hinted_move(page: Page) -> Move:
    """The move the board marks: the hinted cards' pile and count, and the marked destination."""
    await expect(page.locator("#message")).to_have_text(re.compile(r"^Hint: "))
    await expect(page.locator("#message")).to_have_attribute("data-kind", "hint")
    marks = await page.evaluate(
        """() => ({
          from: document.querySelector("#board .card.hint").closest("[data-pile]").dataset.pile,
          n: document.querySelectorAll("#board .card.hint").length,
          to: document.querySelector("#board .pile.hint-target").dataset.pile,
        })"""
    )
    return Move.parse(f"{marks['from']}-{marks['to']}" + (f":{marks['n']}" if marks["n"] > 1 else ""))


def assert_wins_after(mirror: Game, move: Move) -> None:
    """``move`` is legal on the mirror and leaves a won game reachable: a real next winning move."""
    mirror.play(move)
    assert solve(mirror.layout(), max_nodes=200_000).verdict is Verdict.WIN, move


async def click_point(page: Page, point: tuple[float, float]) -> None:
    await page.mouse.click(*point)


async def follow_by_taps(page: Page, move: Move) -> None:
    """Make ``move`` the way a player follows the marks: tap the marked card (a single card that goes to
    its foundation goes there), else tap it to pick it up, then tap the marked pile."""
    await click_point(page, await strip_point(card_from_top(page, str(move.source), move.count)))
    if str(move.target)[0] == "f":
        return
    await expect(card_from_top(page, str(move.source), move.count)).to_have_class(re.compile(r"\bselected\b"))
    await click_point(page, await centre(pile(page, str(move.target))))


async def deal_random(page: Page, cells: int, *, leaving: str | None = None) -> str:
    """A random deal from the new-game form with its default "winnable" choice; returns its code.
    ``leaving``: the answer when a game is in progress."""
    previous = await page.locator("#board").get_attribute("data-game")
    await page.check('input[name="deal"][value="random"]')
    await page.select_option("#cells-count", str(cells))
    await page.click("#new-game")
    if leaving is not None:
        await leave_game(page, leaving)
    await expect(page.locator("#board")).not_to_have_attribute("data-game", previous or "")
    await expect(page.locator("#board")).to_have_attribute("data-v", "0")
    return await page.locator('#game-info [data-field="code"]').inner_text()


async def test_winnable_deals_and_hints_followed_by_taps(chromium: Any, site: str) -> None:
    errors: list[str] = []
    gate = Gate()
    context = await chromium.new_context(viewport=DESKTOP)
    page = await open_client(context, site, errors, route=gate.route)
    winnable = page.locator("#winnable")
    await expect(winnable).not_to_be_checked()  # 8 cells: nearly every deal is won anyway
    for cells, checked in ((4, True), (2, True), (8, False), (2, True)):
        await page.select_option("#cells-count", str(cells))
        await expect(winnable).to_be_checked(checked=checked)

    code = await deal_random(page, 2)
    assert code in {each.code() for each in winnable_deals(2)}
    code = await deal_random(page, 4, leaving="resign")
    assert code in {each.code() for each in winnable_deals(4)}

    # The same deal every run from here: a tap on a card that may go to its foundation sends it
    # there, so the line the taps follow must be known to be one they can follow.
    code = winnable_deals(4)[0].code()
    await deal(page, code, leaving="keep")
    mirror = Game.from_code(code)

    for step in range(10):  # hints followed by taps: to foundations, cells, columns, a run of 2
        await page.click("#hint")
        if step == 0:
            await accept_hint_cost(page)  # the game's first hint: asked once
        move = await hinted_move(page)
        assert_wins_after(mirror, move)
        if step == 0:
            await screenshot(page, "desktop-hint.png")
        await follow_by_taps(page, move)
        await expect_board(page, mirror)
        await expect(page.locator("#board .hint, #board .hint-target")).to_have_count(0)
        await expect(page.locator("#message")).to_have_text("")

    # A hint asked while a dragged move is unanswered: it is about the position after the move.
    await page.click("#hint")
    move = await hinted_move(page)
    gate.held = []
    await mouse_drag(page, card_from_top(page, str(move.source), move.count), pile(page, str(move.target)))
    await page.click("#hint")
    await gate.release_after("ack", "hint")
    assert_wins_after(mirror, move)
    await expect_board(page, mirror)
    move = await hinted_move(page)
    assert_wins_after(mirror.copy(), move)

    # A move made while a hint is unanswered: the hint, about the old position, leaves no trace.
    gate.held = []
    await page.click("#hint")
    await mouse_drag(page, card_from_top(page, str(move.source), move.count), pile(page, str(move.target)))
    await gate.release_after("hint", "ack")
    mirror.play(move)
    await expect_board(page, mirror)
    await expect(page.locator("#board .hint, #board .hint-target")).to_have_count(0)
    await expect(page.locator("#message")).to_have_text("")

    # A finished game has no hint button.
    await page.click("#resign")
    await page.click("#resign")
    await expect(page.locator("#board")).to_have_attribute("data-status", "resigned")
    await expect(page.locator("#hint")).to_be_hidden()
    await context.close()
    assert errors == []


async def test_a_lost_position_is_told_calmly_and_only_when_asked(chromium: Any, site: str) -> None:
    errors: list[str] = []
    gate = Gate()
    context = await chromium.new_context(viewport=DESKTOP)
    page = await open_client(context, site, errors, route=gate.route)
    mirror = Game.from_code(DEAD_C4)
    assert solve(mirror.layout(), max_nodes=100_000).verdict is Verdict.LOST
    await deal(page, DEAD_C4)
    await expect_board(page, mirror)
    move = sorted(mirror.legal_moves, key=str)[0]
    await mouse_drag(page, card_from_top(page, str(move.source), move.count), pile(page, str(move.target)))
    mirror.play(move)
    await expect_board(page, mirror)
    await page.wait_for_timeout(300)
    await expect(page.locator("#message")).to_have_text("")  # nothing is said unasked
    assert "hint" not in gate.sent

    await page.click("#hint")
    await accept_hint_cost(page)
    await expect(page.locator("#message")).to_have_text(LOST_NOTICE)
    await expect(page.locator("#message")).to_have_attribute("data-kind", "hint")
    await expect(page.locator("#board .hint, #board .hint-target")).to_have_count(0)
    await expect(page.locator("#hint")).to_be_visible()  # the game goes on: it is the player's to end
    await screenshot(page, "desktop-lost.png")

    await page.click("#undo")  # the notice spoke of that position: it goes with it
    mirror.play(UNDO)
    await expect_board(page, mirror)
    await expect(page.locator("#message")).to_have_text("")
    await context.close()
    assert errors == []
