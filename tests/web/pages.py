"""Helpers of the browser tests: open the client as a named player, read the board it draws, and the
gestures (drag with a mouse, drag with a finger) a person makes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from playwright.async_api import BrowserContext, CDPSession, Locator, Page, WebSocketRoute, expect
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from engine import Deal, Game
from protocol import layout_fields

EXPECT_TIMEOUT_MS = 10_000
expect.set_options(timeout=EXPECT_TIMEOUT_MS)

#: Where the screenshots go: docs/screenshots when EIGHTOFF_SCREENSHOTS says so (to refresh the
#: README's), else a temporary folder.
SCREENSHOTS = Path(os.environ.get("EIGHTOFF_SCREENSHOTS", "/tmp/eightoff-screenshots"))

READ_BOARD = """() => {
  const cards = (pile) => [...document.querySelectorAll(`#board [data-pile="${pile}"] [data-card]`)]
    .map((node) => node.dataset.card);
  const cells = [...document.querySelectorAll('#cells [data-pile]')]
    .map((node) => cards(node.dataset.pile)[0] ?? null);
  const foundations = {};
  for (const suit of ["S", "H", "D", "C"]) foundations[suit] = cards(`f${suit}`)[0] ?? null;
  const tableau = [1, 2, 3, 4, 5, 6, 7, 8].map((i) => cards(`t${i}`));
  const field = (name) => document.querySelector(`#game-info [data-field="${name}"]`).textContent;
  return {tableau, cells, foundations, score: field("score"), moves: field("moves"),
          status: document.querySelector("#board").dataset.status, code: field("code")};
}"""

#: Installed before the client's own scripts: the page's time of the last pointer release on it.
RECORD_LAST_RELEASE = (
    """document.addEventListener("pointerup", (e) => { window.lastRelease = e.timeStamp; }, true);"""
)

SUIT_SYMBOLS = {"S": "♠", "H": "♥", "D": "♦", "C": "♣"}
RANKS = "A23456789TJQK"


def card_text(card: str) -> str:
    """How the client prints a card: "TD" → "10♦"."""
    return ("10" if card[0] == "T" else card[0]) + SUIT_SYMBOLS[card[1]]


def goes_only_on(card: str) -> str:
    """The refusal of a card dropped on a column it does not fit, in the player's words."""
    above = RANKS[RANKS.index(card[0]) + 1] + card[1]
    return f"{card_text(card)} goes only on {card_text(above)}"


async def open_client(
    context: BrowserContext,
    site: str,
    errors: list[str],
    name: str | None = "Ann",
    route: Callable[[WebSocketRoute], Any] | None = None,
) -> Page:
    """A page of the client; a first visit picks ``name`` (None: lets the server pick one). ``route``
    sits between the page and the server's WebSocket when given."""
    page = await context.new_page()
    page.set_default_timeout(10_000)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    await page.add_init_script(RECORD_LAST_RELEASE)
    if route is not None:
        await page.route_web_socket(re.compile(r"/ws$"), route)
    await page.goto(f"{site}/")
    await choose_name(page, name)
    return page


async def choose_name(page: Page, name: str | None) -> None:
    await expect(page.locator("#name-dialog")).to_be_visible()
    if name is None:
        await page.click("#name-skip")
    else:
        await page.fill("#name-input", name)
        await page.click("#name-save")
    await expect(page.locator("body")).to_have_attribute("data-connection", "open")
    await expect(page.locator("#player-name")).to_have_attribute("data-player-id", re.compile(r".+"))


async def leave_game(page: Page, choice: str) -> None:
    """Answer the question asked before a game in progress is left: "keep", "resign" or "cancel"."""
    await expect(page.locator("#leave-dialog")).to_be_visible()
    await page.click(f"#leave-{choice}")
    await expect(page.locator("#leave-dialog")).to_be_hidden()


async def accept_hint_cost(page: Page) -> None:
    """Say yes to the cost of a game's first hint (asked once per game, before it)."""
    await expect(page.locator("#hint-dialog")).to_be_visible()
    await page.click("#hint-accept")
    await expect(page.locator("#hint-dialog")).to_be_hidden()


async def deal(page: Page, code: str, *, leaving: str | None = None) -> str:
    """A new game of ``code`` from the side panel; returns its game id. ``leaving``: the answer to
    the question asked when a game is in progress (none is expected without it). On a phone the form
    is a tab of its own."""
    if await page.locator("#tabs").is_visible():
        await page.click('#tabs [data-tab="new"]')
    await page.fill("#code", code)
    await page.click("#new-game")
    if leaving is not None:
        await leave_game(page, leaving)
    board = page.locator("#board")
    await expect(board).to_have_attribute("data-v", "0")
    await expect(page.locator('#game-info [data-field="code"]')).to_have_text(code)
    game_id = await board.get_attribute("data-game")
    assert game_id
    return game_id


#: Whether the board shows version ARG[0] in mode ARG[1].
BOARD_AT = """([v, mode]) => {
  const board = document.querySelector("#board");
  return board !== null && board.dataset.v === v && board.dataset.mode === mode;
}"""


async def until_page(page: Page, condition: str, arg: Any = None) -> None:
    """Wait until ``condition`` (a function of ``arg``, run in the page) holds, checked at every
    frame the page draws. Playwright's ``expect`` checks again only after 100, 250, 500 then 1000 ms:
    a board that changes just after its first check was seen a quarter of a second late, at each of
    the many waits of a gesture test. Once this is done the ``expect`` that follows passes at its
    first check; if the condition never holds this returns after ``expect``'s time anyway, and that
    ``expect`` fails saying what the page showed."""
    with contextlib.suppress(PlaywrightTimeoutError):
        await page.wait_for_function(condition, arg=arg, timeout=EXPECT_TIMEOUT_MS, polling="raf")


async def expect_board(page: Page, mirror: Game, *, mode: str = "play") -> None:
    """Wait until the page shows version ``mirror.v``, then compare every pile with the mirror."""
    board = page.locator("#board")
    await until_page(page, BOARD_AT, [str(mirror.v), mode])
    await expect(board).to_have_attribute("data-v", str(mirror.v))
    await expect(board).to_have_attribute("data-mode", mode)
    shown = await page.evaluate(READ_BOARD)
    expected = layout_fields(mirror.layout())
    assert shown["tableau"] == expected["tableau"]
    assert shown["cells"] == expected["cells"]
    assert shown["foundations"] == expected["foundations"]
    assert (shown["score"], shown["moves"], shown["status"], shown["code"]) == (
        str(mirror.score),
        str(mirror.moves),
        mirror.status.value,
        mirror.deal.code(),
    )


def pile(page: Page, name: str) -> Locator:
    return page.locator(f'#board [data-pile="{name}"]')


def top_card(page: Page, name: str) -> Locator:
    return pile(page, name).locator("[data-card]").last


def card_from_top(page: Page, name: str, n: int) -> Locator:
    """The ``n``-th card from the top of a pile (1 = the top card)."""
    return pile(page, name).locator(f"[data-card]:nth-last-child({n})")


async def settled(page: Page) -> None:
    """Wait until no card is sliding (the client animates moves), so that positions are final."""
    await page.wait_for_function("document.getAnimations().length === 0")


async def idle(page: Page) -> None:
    """Wait until the page awaits no reply and has drawn everything it was told (web/app.js marks the
    body ``data-busy`` meanwhile). Whatever a gesture made the client send, at once or on a reply, has
    been sent, answered and drawn by then: a second action of one gesture would show."""
    await page.wait_for_function("!document.body.hasAttribute('data-busy')")


async def double_tap_window_ms(page: Page) -> float:
    """The client's double-tap window (web/input.js), read from the page, not copied here."""
    window_ms = await page.evaluate("import('/input.js').then((input) => input.DOUBLE_TAP_MS)")
    assert isinstance(window_ms, int | float) and window_ms > 0, window_ms
    return float(window_ms)


async def past_double_tap_window(page: Page) -> None:
    """Wait until the client's double-tap window has passed since the page's last pointer release, by
    the page's own clock: the next tap starts a gesture of its own, whatever the load."""
    window_ms = await double_tap_window_ms(page)
    await page.wait_for_function(
        "(ms) => window.lastRelease === undefined || performance.now() - window.lastRelease >= ms",
        arg=window_ms,
    )


async def strip_point(card: Locator) -> tuple[float, float]:
    """A point on the visible strip of a card (its top edge shows even when covered)."""
    await settled(card.page)
    box = await card.bounding_box()
    assert box
    return box["x"] + box["width"] / 2, box["y"] + 6


async def centre(target: Locator) -> tuple[float, float]:
    box = await target.bounding_box()
    assert box
    return box["x"] + box["width"] / 2, box["y"] + min(box["height"] / 2, 40)


async def mouse_drag(page: Page, card: Locator, target: Locator) -> None:
    """Press on the card's visible strip, move in steps, release over the target pile."""
    x, y = await strip_point(card)
    tx, ty = await centre(target)
    await page.mouse.move(x, y)
    await page.mouse.down()
    await page.mouse.move(x + 4, y + 4, steps=2)
    await page.mouse.move(tx, ty, steps=8)
    await page.mouse.up()


async def touch_drag(page: Page, card: Locator, target: Locator) -> None:
    """The same with a finger: raw touch events through the DevTools protocol (Chromium makes the
    pointer events of a real touch screen from them)."""
    x, y = await strip_point(card)
    tx, ty = await centre(target)
    cdp = await page.context.new_cdp_session(page)

    def point(px: float, py: float) -> list[dict[str, float]]:
        return [{"x": px, "y": py, "radiusX": 4, "radiusY": 4, "force": 1, "id": 1}]

    await cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": point(x, y)})
    for step in range(1, 11):
        f = step / 10
        await cdp.send(
            "Input.dispatchTouchEvent",
            {"type": "touchMove", "touchPoints": point(x + (tx - x) * f, y + (ty - y) * f)},
        )
    await cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
    await cdp.detach()


def gesture_deal() -> tuple[Game, str, str]:
    """The first C8 deal whose opening has an ace on top of a column and a legal group move between
    columns: everything the gesture tests need. Returns the game, the ace's column and the group move."""
    for number in range(10_000):
        game = Game(Deal(number, 8))
        columns = game.layout().columns
        aces = [f"t{i}" for i, column in enumerate(columns, 1) if column and str(column[-1])[0] == "A"]
        groups = sorted(
            str(move) for move in game.legal_moves if move.count > 1 and str(move.target)[0] == "t"
        )
        if aces and groups:
            return game, aces[0], groups[0]
    raise AssertionError("no deal with an ace on top and a group move in the first 10,000")


async def screenshot(page: Page, name: str, **options: Any) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / name
    await settled(page)
    await page.screenshot(path=str(path), **options)
    return path


class ReplyDelay:
    """Between a page and the real server: every frame the server sends reaches the page ``delay``
    seconds late (in order), as on a slow network; it records the types of the requests the page
    sends, so that a test can count the actions one gesture made."""

    def __init__(self) -> None:
        self.delay = 0.0
        self.sent: list[str] = []
        self.flowing = asyncio.Event()  # cleared: the server's frames wait here (in order) until set
        self.flowing.set()
        self._queue: asyncio.Queue[tuple[float, str | bytes]] = asyncio.Queue()
        self._pump: asyncio.Task[None] | None = None

    def route(self, ws: WebSocketRoute) -> None:
        server = ws.connect_to_server()
        if self._pump is not None:
            self._pump.cancel()  # a reload: the old page is gone
        self._queue = asyncio.Queue()
        self._pump = asyncio.get_running_loop().create_task(self._forward(ws, self._queue, self.flowing))

        def upstream(frame: str | bytes) -> None:
            self.sent.append(json.loads(frame)["type"])
            server.send(frame)

        def downstream(frame: str | bytes) -> None:
            self._queue.put_nowait((asyncio.get_running_loop().time() + self.delay, frame))

        ws.on_message(upstream)
        server.on_message(downstream)

    @staticmethod
    async def _forward(
        ws: WebSocketRoute, queue: asyncio.Queue[tuple[float, str | bytes]], flowing: asyncio.Event
    ) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due, frame = await queue.get()
            await asyncio.sleep(max(0.0, due - loop.time()))
            await flowing.wait()
            ws.send(frame)

    def close(self) -> None:
        if self._pump is not None:
            self._pump.cancel()


async def _touch_tap(cdp: CDPSession, x: float, y: float, at: float | None = None) -> None:
    """A finger down and up at (x, y); ``at`` (seconds since the epoch) is the time the events carry."""
    stamp = {} if at is None else {"timestamp": at}
    touch = [{"x": x, "y": y, "radiusX": 4, "radiusY": 4, "force": 1, "id": 1}]
    await cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": touch, **stamp})
    await cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": [], **stamp})


async def _mouse_click(cdp: CDPSession, x: float, y: float, at: float, count: int) -> None:
    """The left button pressed and released at (x, y), the ``count``-th click of a gesture, at ``at``."""
    for kind in ("mousePressed", "mouseReleased"):
        event = {"type": kind, "x": x, "y": y, "button": "left", "clickCount": count, "timestamp": at}
        await cdp.send("Input.dispatchMouseEvent", event)


async def touch_tap(page: Page, point: tuple[float, float]) -> None:
    """One finger down and up at ``point``, as a touch screen reports it."""
    cdp = await page.context.new_cdp_session(page)
    await _touch_tap(cdp, *point)
    await cdp.detach()


async def double_tap(
    page: Page,
    point: tuple[float, float],
    interval_ms: int,
    *,
    touch: bool,
    before_second: Callable[[], Awaitable[object]] | None = None,
) -> None:
    """Two taps at one point, ``interval_ms`` apart (from the first release to the second press),
    with a finger or the mouse. Each event carries the time it is meant for (CDP's ``timestamp``),
    as a device stamps its input: on a loaded machine the second tap may reach the page later than
    that (as on a slow phone), but the page sees the gesture's own gap, not the test's lateness.
    ``before_second`` (e.g. a wait for the first tap's effect) is awaited between the taps."""
    cdp = await page.context.new_cdp_session(page)
    first = time.time()
    for index, at in enumerate((first, first + interval_ms / 1000)):
        if index:  # the second tap is sent no sooner than its time: the page is never told of the future
            if before_second is not None:
                await before_second()
            await asyncio.sleep(max(0.0, at - time.time()))
        if touch:
            await _touch_tap(cdp, *point, at=at)
        else:
            await _mouse_click(cdp, *point, at, index + 1)
    await cdp.detach()
