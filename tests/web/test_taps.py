"""One gesture is one action, and only a run a move could take is picked up
(item 3), in a real Chromium against the real server: a double
tap, with a mouse or a finger, 60 to 250 ms between its taps, with the server's replies on time and
late (300 ms, so that the second tap lands before the first reply), makes exactly the one move the
rules give a double tap, whatever the first tap's reply redraws under the second.

Bad input tried: a double tap on a card that a tap sends home (the first reply redraws the card
underneath where the second tap lands), on a card that does not go home (the second tap turns the
refused tap into the double tap's move), and on the destination of a picked-up card (the first tap
moves it there, and the second lands on the moved card); a tap and a drag (mouse and finger) on a
card inside a column whose cards above are not a run, and on a run too long for any move.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from playwright.async_api import Page, expect

from engine import UNDO, Deal, Game, IllegalMoveError, Move, max_group_size, parse_pile
from tests.web.pages import (
    ReplyDelay,
    card_from_top,
    card_text,
    centre,
    deal,
    double_tap,
    double_tap_window_ms,
    expect_board,
    gesture_deal,
    idle,
    mouse_drag,
    open_client,
    past_double_tap_window,
    pile,
    settled,
    strip_point,
    top_card,
    touch_drag,
    touch_tap,
)

DESKTOP = {"width": 1280, "height": 860}
PHONE = {"width": 390, "height": 844}
INTERVALS_MS = (60, 120, 180, 250)
DELAYS_S = (0.0, 0.3)
ACTIONS = {"tap", "auto", "move", "undo", "resign", "new_game", "hint"}  # not "live", "leaderboard"…

#: A C2 deal with both cells full and QD, JD on top of column 6: a run no move can carry at the opening.
TWO_RUN_C2 = "EO1-C2-AAAAAAI"
TWO_RUN_COLUMN = "t6"

RECORD_TAPS = """() => {
  window.tapLog = [];
  for (const type of ["pointerdown", "pointerup"]) {
    document.addEventListener(type, (e) => window.tapLog.push([type, e.timeStamp, e.pointerType]), true);
  }
}"""


def goes_home(game: Game, column: str) -> bool:
    try:
        game.copy().play(game.tap_move(parse_pile(column)))
    except IllegalMoveError:
        return False
    return True


def auto_column(game: Game) -> tuple[str, Move]:
    """A column whose top card a tap cannot send home, and the move its double tap makes."""
    for index in range(1, 9):
        column = f"t{index}"
        if not goes_home(game, column):
            try:
                return column, game.double_tap_move(parse_pile(column))
            except IllegalMoveError:
                continue
    raise AssertionError("no column for a double tap")


def tap_deal() -> tuple[Game, str, Move]:
    """The first C8 deal whose opening has an ace on top of a column and a single card that can go
    onto another column's top card but not home: (game, the ace's column, that move)."""
    for number in range(10_000):
        game = Game(Deal(number, 8))
        columns = game.layout().columns
        aces = [f"t{i}" for i, column in enumerate(columns, 1) if column and str(column[-1])[0] == "A"]
        onto = [
            move
            for move in game.legal_moves
            if move.count == 1
            and str(move.source)[0] == "t"
            and str(move.target)[0] == "t"
            and not goes_home(game, str(move.source))
        ]
        if aces and onto:
            return game, aces[0], onto[0]
    raise AssertionError("no such deal in the first 10,000")


async def tap(page: Page, point: tuple[float, float], *, touch: bool) -> None:
    await (touch_tap(page, point) if touch else page.mouse.click(*point))


async def check_gap(page: Page, interval_ms: int, *, touch: bool) -> None:
    """The page saw two taps of the intended kind, the second pressed within the double-tap window."""
    log = await page.evaluate("window.tapLog.splice(0)")
    assert [entry[0] for entry in log] == ["pointerdown", "pointerup"] * 2, log
    assert {entry[2] for entry in log} == {"touch" if touch else "mouse"}, log
    gap = log[2][1] - log[1][1]
    assert interval_ms - 5 <= gap < await double_tap_window_ms(page), (interval_ms, gap)


async def one_action(page: Page, proxy: ReplyDelay, mirror: Game, move: Move, sent: list[str]) -> None:
    """The page shows ``move`` made, nothing else follows, nothing is picked up; the page sent
    exactly ``sent``. Then the move is undone, for the next try, which starts past the client's
    double-tap window (a gesture of its own)."""
    mirror.play(move)
    await expect_board(page, mirror)
    # The client acts on a tap at once or on a reply (web/input.js has no timer): once it awaits no
    # reply and has drawn what it was told, a second action of the gesture would show.
    await idle(page)
    await expect_board(page, mirror)
    await expect(page.locator("#board .selected")).to_have_count(0)
    actions = [kind for kind in proxy.sent if kind in ACTIONS]
    assert actions == sent, (move, proxy.sent)
    # The undo only sets the board back for the next try: its reply comes on time whatever the delay
    # under test (nothing is waiting for a reply now: ``idle``).
    delay, proxy.delay = proxy.delay, 0.0
    await page.keyboard.press("u")
    mirror.play(UNDO)
    await expect_board(page, mirror)
    proxy.delay = delay
    await settled(page)
    await past_double_tap_window(page)
    proxy.sent.clear()


@pytest.mark.parametrize("delay", DELAYS_S, ids=["on-time", "late"])
@pytest.mark.parametrize("touch", [False, True], ids=["mouse", "touch"])
async def test_a_double_tap_is_one_action(chromium: Any, site: str, touch: bool, delay: float) -> None:
    errors: list[str] = []
    mirror, ace_column, onto = tap_deal()
    ace = str(mirror.layout().columns[int(ace_column[1:]) - 1][-1])
    proxy = ReplyDelay()
    options: dict[str, Any] = {"viewport": PHONE, "has_touch": True, "is_mobile": True} if touch else {}
    context = await chromium.new_context(**(options or {"viewport": DESKTOP}))
    page = await open_client(context, site, errors, route=proxy.route)
    await deal(page, mirror.deal.code())
    await expect_board(page, mirror)
    await page.evaluate(RECORD_TAPS)
    auto_source, auto = auto_column(mirror)
    proxy.delay = delay
    for interval in INTERVALS_MS:
        proxy.sent.clear()
        # A tap sends the ace home; the second tap lands on the card that was under it.
        await double_tap(page, await centre(top_card(page, ace_column)), interval, touch=touch)
        await check_gap(page, interval, touch=touch)
        await one_action(page, proxy, mirror, Move.parse(f"{ace_column}-f{ace[1]}"), ["tap"])

        # The tap is refused (not home); the second tap makes it the double tap's move.
        await double_tap(page, await centre(top_card(page, auto_source)), interval, touch=touch)
        await check_gap(page, interval, touch=touch)
        await one_action(page, proxy, mirror, auto, ["tap", "auto"])

        # A card picked up; the double tap on its destination moves it there, once.
        await tap(page, await centre(top_card(page, str(onto.source))), touch=touch)
        await expect(top_card(page, str(onto.source))).to_have_class(re.compile(r"\bselected\b"))
        await page.evaluate("window.tapLog.length = 0")
        await past_double_tap_window(page)
        await double_tap(page, await centre(top_card(page, str(onto.target))), interval, touch=touch)
        await check_gap(page, interval, touch=touch)
        await one_action(page, proxy, mirror, onto, ["tap", "move"])
    proxy.close()
    await context.close()
    assert errors == []


async def desktop_deal(
    chromium: Any, site: str, errors: list[str], proxy: ReplyDelay, mirror: Game
) -> tuple[Any, Page]:
    """A desktop page through ``proxy``, dealt ``mirror``'s deal and at rest: its context and the page."""
    context = await chromium.new_context(viewport=DESKTOP)
    page = await open_client(context, site, errors, route=proxy.route)
    await deal(page, mirror.deal.code())
    await idle(page)
    return context, page


async def test_the_page_is_marked_busy_until_its_reply_is_drawn(chromium: Any, site: str) -> None:
    """What the taps tests wait on instead of a fixed time (``idle``): ``data-busy`` on the body from
    the moment a tap sends its request until its reply is drawn; not busy at rest."""
    errors: list[str] = []
    mirror, ace_column, _ = tap_deal()
    ace = str(mirror.layout().columns[int(ace_column[1:]) - 1][-1])
    proxy = ReplyDelay()
    context, page = await desktop_deal(chromium, site, errors, proxy, mirror)
    proxy.flowing.clear()  # the tap's reply waits in the proxy
    await page.mouse.click(*await centre(top_card(page, ace_column)))
    await expect(page.locator("body")).to_have_attribute("data-busy", "")
    await asyncio.sleep(0.2)  # still busy while the reply is out (not only while the first frame is due)
    assert await page.evaluate("document.body.hasAttribute('data-busy')")
    assert await page.locator("#board").get_attribute("data-v") == "0"
    proxy.flowing.set()
    await idle(page)
    mirror.play(Move.parse(f"{ace_column}-f{ace[1]}"))
    assert await page.locator("#board").get_attribute("data-v") == str(mirror.v)  # drawn once idle
    await expect_board(page, mirror)
    assert [kind for kind in proxy.sent if kind in ACTIONS] == ["new_game", "tap"]
    proxy.close()
    await context.close()
    assert errors == []


async def test_a_tap_on_another_pile_before_the_reply_moves_the_card_there(chromium: Any, site: str) -> None:
    """A card tapped, then another pile tapped while the tap's reply is still out (a slow network or a
    quick hand): the card moves there once the reply says it did not go home; a card that went home
    is not followed by a move. The replies are held in the proxy until both taps are in."""
    errors: list[str] = []
    mirror, ace_column, onto = tap_deal()
    ace = str(mirror.layout().columns[int(ace_column[1:]) - 1][-1])
    proxy = ReplyDelay()
    context, page = await desktop_deal(chromium, site, errors, proxy, mirror)
    for source, target, made, sent in (
        (str(onto.source), str(onto.target), onto, ["tap", "move"]),
        (ace_column, str(onto.target), Move.parse(f"{ace_column}-f{ace[1]}"), ["tap"]),
    ):
        proxy.sent.clear()
        proxy.flowing.clear()
        await page.mouse.click(*await centre(top_card(page, source)))
        await past_double_tap_window(page)
        await page.mouse.click(*await centre(pile(page, target)))
        assert [kind for kind in proxy.sent if kind in ACTIONS] == ["tap"]  # the move waits for the reply
        proxy.flowing.set()
        mirror.play(made)
        await expect_board(page, mirror)
        await idle(page)
        await expect_board(page, mirror)
        await expect(page.locator("#board .selected")).to_have_count(0)
        assert [kind for kind in proxy.sent if kind in ACTIONS] == sent
    proxy.close()
    await context.close()
    assert errors == []


def non_run(game: Game) -> tuple[str, int]:
    """A column and a depth whose top cards are not a same-suit run (the engine says so)."""
    for index in range(1, 9):
        for count in (3, 2):
            reason = game.illegal_reason(Move.parse(f"t{index}-t{index % 8 + 1}:{count}"))
            if reason and "not a same-suit run" in reason:
                return f"t{index}", count
    raise AssertionError("every column is a run")


async def expect_refused_lift(page: Page, mirror: Game, column: str, count: int, words: str) -> None:
    await expect(page.locator("#message")).to_have_text(words)
    await expect(page.locator("#message")).to_have_attribute("data-kind", "error")
    await expect(page.locator("#board .selected, .lifted, .drag-ghost")).to_have_count(0)
    await expect_board(page, mirror)


async def test_only_a_movable_run_is_picked_up(chromium: Any, site: str) -> None:
    errors: list[str] = []
    mirror, _, group_text = gesture_deal()
    group = Move.parse(group_text)
    column, count = non_run(mirror)
    cards = [card_text(str(card)) for card in mirror.layout().columns[int(column[1:]) - 1][-count:]]
    named = f"{', '.join(cards[:-1])} and {cards[-1]}"
    not_a_run = f"{named} are not a run: only a run of one suit in order moves together"
    context = await chromium.new_context(viewport=PHONE, has_touch=True, is_mobile=True)
    page = await open_client(context, site, errors)
    await deal(page, mirror.deal.code())

    # A tap (mouse, then finger) inside the column on a card that does not start a run: nothing lifted.
    deep = card_from_top(page, column, count)
    await page.mouse.click(*await strip_point(deep))
    await expect_refused_lift(page, mirror, column, count, not_a_run)
    await page.evaluate("document.querySelector('#message').textContent = ''")
    await past_double_tap_window(page)
    await touch_tap(page, await strip_point(deep))
    await expect_refused_lift(page, mirror, column, count, not_a_run)
    # Nor by dragging it, with the mouse or a finger.
    for drag in (mouse_drag, touch_drag):
        await page.evaluate("document.querySelector('#message').textContent = ''")
        await drag(page, deep, pile(page, "c6"))
        await expect_refused_lift(page, mirror, column, count, not_a_run)

    # A run a move can take is picked up whole, and goes where it is tapped to.
    await past_double_tap_window(page)
    await touch_tap(page, await strip_point(card_from_top(page, str(group.source), group.count)))
    await expect(pile(page, str(group.source)).locator(".selected")).to_have_count(group.count)
    await touch_tap(page, await centre(pile(page, str(group.target))))
    mirror.play(group)
    await expect_board(page, mirror)
    await context.close()

    # A run of one suit, but more cards than any move can carry now (C2, both cells full: 1).
    context = await chromium.new_context(viewport=DESKTOP)
    page = await open_client(context, site, errors, name="Bo")
    mirror = Game.from_code(TWO_RUN_C2)
    await deal(page, TWO_RUN_C2)
    for target in range(1, 9):
        reason = mirror.illegal_reason(Move.parse(f"{TWO_RUN_COLUMN}-t{target}:2")) or ""
        assert "not a same-suit run" not in reason  # the engine: a run, refused for its size or place
    assert max_group_size(mirror.empty_cells(), mirror.empty_columns()) == 1
    await page.mouse.click(*await strip_point(card_from_top(page, TWO_RUN_COLUMN, 2)))
    words = "2 cards are too many to move at once: 1 at most now (free cells and empty columns allow more)"
    await expect_refused_lift(page, mirror, TWO_RUN_COLUMN, 2, words)
    await context.close()
    assert errors == []


def adjacent_onto() -> tuple[Game, Move]:
    """The first C8 deal whose opening has a single card that goes onto the next column's top card
    (left or right) but not home."""
    for number in range(10_000):
        game = Game(Deal(number, 8))
        for move in sorted(game.legal_moves, key=str):
            source, target = str(move.source), str(move.target)
            if (
                move.count == 1
                and source[0] == target[0] == "t"
                and abs(int(source[1:]) - int(target[1:])) == 1
                and not goes_home(game, source)
            ):
                return game, move
    raise AssertionError("no such deal in the first 10,000")


async def test_a_quick_tap_on_the_next_column_is_a_move_not_a_double_tap(chromium: Any, site: str) -> None:
    """Adjacent columns are about 46 px apart on a phone: a card picked up, then the next column tapped
    near their common edge 150 ms later, is the move there (two gestures), not a double tap."""
    errors: list[str] = []
    mirror, onto = adjacent_onto()
    proxy = ReplyDelay()
    context = await chromium.new_context(viewport=PHONE, has_touch=True, is_mobile=True)
    page = await open_client(context, site, errors, route=proxy.route)
    await deal(page, mirror.deal.code())
    proxy.sent.clear()
    first = await centre(top_card(page, str(onto.source)))
    await touch_tap(page, first)
    await expect(top_card(page, str(onto.source))).to_have_class(re.compile(r"\bselected\b"))
    box = await top_card(page, str(onto.target)).bounding_box()
    assert box
    edge = box["x"] + 4 if box["x"] > first[0] else box["x"] + box["width"] - 4  # the side facing it
    assert abs(edge - first[0]) < 32  # as near as a double tap's second tap may be
    await asyncio.sleep(0.15)
    await touch_tap(page, (edge, first[1]))
    mirror.play(onto)
    await expect_board(page, mirror)
    assert [kind for kind in proxy.sent if kind in ACTIONS] == ["tap", "move"]
    proxy.close()
    await context.close()
    assert errors == []
