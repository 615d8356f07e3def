"""The polish of issue 21 item 9, in Debian's Chromium against the real server: a win celebrated under a
result that stays readable; moves that fly from their source (for the player, a spectator and an undo)
and end where the server says, with a double tap during a flight still one action; sound off until
turned on, and remembered; a live list that drops a closed browser's game and shows a new one within
seconds; two players called "Cleo" told apart on every screen.

Bad input tried: taps during a flight on the place the card left (60-250 ms after the first, replies
on time and late), a stored sound choice that is neither "on" nor "off", a browser closed without a
goodbye (its context closed), two players of one name.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import pytest
from playwright.async_api import BrowserContext, Page, expect

from engine import UNDO, Game, Move
from server.app import App
from tests.support import serverutil
from tests.support.wire import WINNING_LINE
from tests.support.wsclient import WsClient, player
from tests.web.pages import (
    ReplyDelay,
    centre,
    deal,
    double_tap,
    expect_board,
    open_client,
    past_double_tap_window,
    pile,
    settled,
    top_card,
)
from tests.web.test_taps import DESKTOP, PHONE, RECORD_TAPS, auto_column, check_gap, one_action, tap_deal

CODE = "EO1-C8-AAAAAFA"
INTERVALS_MS = (60, 120, 180, 250)
DELAYS_S = (0.0, 0.15)  # on time, and late enough that some second taps land before the flight starts
TAG = re.compile(r"#[0-9A-Z]{4}")
#: What the live list promises: a closed browser's game gone, a new game shown, this soon.
LIVE_PROMPT_S = 5.0

RECORD_FLIGHTS = """() => {
  window.flights = [];
  new MutationObserver((records) => {
    for (const record of records) for (const node of record.addedNodes) {
      if (!(node instanceof Element) || !node.classList.contains("flyer")) continue;
      const r = node.getBoundingClientRect();  // the flight's first frame: where the card was
      window.flights.push({card: node.firstChild.dataset.card, x: r.left, y: r.top});
    }
  }).observe(document.body, {childList: true});
  window.inFlight = [];
  document.addEventListener("pointerdown",
    () => window.inFlight.push(document.querySelector(".flyer") !== null), true);
  new MutationObserver((records) => {  // the piles redrawn (web/render.js): animate.js's lastRedraw
    if (records.some((record) => record.target.id === "tableau")) window.lastPiles = performance.now();
  }).observe(document.body, {childList: true, subtree: true});
}"""


async def past_burst(page: Page) -> None:
    """Wait until the piles were last redrawn ``BURST_MS`` ago or more (web/animate.js), by the page's
    clock: the next redraw is not part of a burst, so its moves fly."""
    burst_ms = await page.evaluate("import('/animate.js').then((animate) => animate.BURST_MS)")
    assert isinstance(burst_ms, int | float) and burst_ms > 0, burst_ms
    await page.wait_for_function(
        "(ms) => window.lastPiles === undefined || performance.now() - window.lastPiles >= ms", arg=burst_ms
    )


async def box_of(page: Page, selector: str) -> dict[str, float]:
    box = await page.locator(selector).bounding_box()
    assert box
    return {"x": box["x"], "y": box["y"]}


async def expect_flight(page: Page, card: str, start: dict[str, float]) -> None:
    """A copy of ``card`` flew, from ``start`` (where the card was drawn); then nothing is in flight."""
    await page.wait_for_function(f"window.flights.some((f) => f.card === {card!r})")
    flight = await page.evaluate(f"window.flights.find((f) => f.card === {card!r})")
    assert abs(flight["x"] - start["x"]) < 3 and abs(flight["y"] - start["y"]) < 3, (flight, start)
    await settled(page)
    await expect(page.locator(".flyer, .card.landing")).to_have_count(0)
    await page.evaluate("window.flights.length = 0")


async def play_to_the_last_move(web_app: App, page: Page, game_id: str) -> Game:
    """The player's other connection plays all of a won line but its last move; the page follows."""
    token = await page.evaluate("localStorage.getItem('eightoff.token')")
    other = await WsClient.open(serverutil.ws_url(web_app))
    await other.hello(token=token)
    await other.request("resume", game=game_id)
    mirror = Game.from_code(CODE)
    for text in WINNING_LINE[:-1]:
        move = Move.parse(text)
        fields: dict[str, object] = {"from": str(move.source), "to": str(move.target)}
        if move.count > 1:
            fields["n"] = move.count
        assert (await other.request("move", game=game_id, **fields))["type"] == "ack"
        mirror.play(move)
    await other.close()
    await expect_board(page, mirror)
    return mirror


READABLE = """() => {
  const panel = document.querySelector("#game-over");
  const shown = (node) => node.getClientRects().length > 0;
  const targets = [...panel.querySelectorAll("h2, dd, button")].filter(shown);
  return targets.every((node) => {
    const r = node.getBoundingClientRect();
    return panel.contains(document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2));
  }) && targets.length >= 4;  // the title and three figures at least
}"""


@pytest.mark.parametrize("motion", ["no-preference", "reduce"])
async def test_a_win_is_celebrated_under_a_readable_result(
    chromium: Any, site: str, web_app: App, motion: str
) -> None:
    errors: list[str] = []
    context = await chromium.new_context(viewport=DESKTOP, reduced_motion=motion)
    page = await open_client(context, site, errors, name="Ann")
    game_id = await deal(page, CODE)
    spectator_context = await chromium.new_context(viewport=DESKTOP, reduced_motion=motion)
    spectator = await open_client(spectator_context, site, errors, name="Bo")
    await spectator.click("#refresh-live")
    await spectator.click(f'[data-live-game="{game_id}"] [data-watch]')
    await expect(spectator.locator("#board")).to_have_attribute("data-mode", "watch")
    mirror = await play_to_the_last_move(web_app, page, game_id)

    last = Move.parse(WINNING_LINE[-1])
    await top_card(page, str(last.source)).click()
    mirror.play(last)
    celebration = page.locator("#board-wrap .celebration")
    await expect(celebration).to_have_count(1)
    await expect(spectator.locator("#board-wrap .celebration")).to_have_count(1)
    await expect(page.locator("#game-over-title")).to_have_text("You won!")
    pieces = await celebration.locator("span").count()
    assert pieces == (0 if motion == "reduce" else 36)
    await expect(page.locator("#game-over")).to_have_class(re.compile(r"\bcelebrating\b"))
    # While it runs, every figure and button of the result is what a tap or a glance there reaches.
    for _ in range(5):
        assert await page.evaluate(READABLE)
        await asyncio.sleep(0.3)
    await expect(celebration).to_have_count(0, timeout=4000)  # short: gone within 3 s
    await expect(page.locator("#game-over")).to_be_visible()
    await expect(page.locator('#game-over [data-field="moves"]')).to_have_text(str(mirror.moves))
    assert await page.evaluate(READABLE)
    # The spectator saw it too, named with Ann's tag.
    await expect(spectator.locator("#game-over-title")).to_have_text(re.compile(r"^Ann #[0-9A-Z]{4} won!$"))
    assert await spectator.evaluate(READABLE)
    await spectator_context.close()

    # A game already won, opened again, is not celebrated again.
    await page.reload()
    await expect(page.locator("body")).to_have_attribute("data-connection", "open")
    await asyncio.sleep(0.5)
    await expect(page.locator(".celebration")).to_have_count(0)
    await context.close()
    assert errors == []


async def test_moves_fly_from_their_source_for_the_player_a_spectator_and_an_undo(
    chromium: Any, site: str
) -> None:
    errors: list[str] = []
    mirror, ace_column, onto = tap_deal()
    ace = str(mirror.layout().columns[int(ace_column[1:]) - 1][-1])
    context = await chromium.new_context(viewport=DESKTOP)
    page = await open_client(context, site, errors, name="Ann")
    game_id = await deal(page, mirror.deal.code())
    spectator_context = await chromium.new_context(viewport=PHONE, has_touch=True, is_mobile=True)
    spectator = await open_client(spectator_context, site, errors, name="Bo")
    await spectator.click('#tabs [data-tab="games"]')
    await spectator.click("#refresh-live")
    await spectator.click(f'[data-live-game="{game_id}"] [data-watch]')
    await expect(spectator.locator("#board")).to_have_attribute("data-mode", "watch")
    for each in (page, spectator):
        await each.evaluate(RECORD_FLIGHTS)

    # The ace goes home: it flies from its column, on both screens, and lands where the server says.
    selector = f'#board [data-card="{ace}"]'
    starts = [await box_of(each, selector) for each in (page, spectator)]
    await top_card(page, ace_column).click()
    mirror.play(Move.parse(f"{ace_column}-f{ace[1]}"))
    for each, start in zip((page, spectator), starts, strict=True):
        await expect_flight(each, ace, start)
        await expect_board(each, mirror, mode="play" if each is page else "watch")
        await expect(pile(each, f"f{ace[1]}").locator(f'[data-card="{ace}"]')).to_have_count(1)

    # The undo flies it back from the foundation.
    starts = [await box_of(each, selector) for each in (page, spectator)]
    await page.keyboard.press("u")
    mirror.play(UNDO)
    for each, start in zip((page, spectator), starts, strict=True):
        await expect_flight(each, ace, start)
        await expect_board(each, mirror, mode="play" if each is page else "watch")

    # A card moved by taps (picked up, then its destination) flies from its column too.
    card = str(mirror.layout().columns[int(str(onto.source)[1:]) - 1][-1])
    start = await box_of(page, f'#board [data-card="{card}"]')
    await top_card(page, str(onto.source)).click()
    await past_double_tap_window(page)  # the next tap is a gesture of its own
    await top_card(page, str(onto.target)).click()
    mirror.play(onto)
    await expect_flight(page, card, start)
    await expect_board(page, mirror)
    await spectator_context.close()
    await context.close()

    # Reduced motion: nothing flies, the card is simply there.
    context = await chromium.new_context(viewport=DESKTOP, reduced_motion="reduce")
    page = await open_client(context, site, errors, name="Cy")
    mirror = Game.from_code(mirror.deal.code())
    await deal(page, mirror.deal.code())
    await page.evaluate(RECORD_FLIGHTS)
    await top_card(page, ace_column).click()
    mirror.play(Move.parse(f"{ace_column}-f{ace[1]}"))
    await expect_board(page, mirror)
    assert await page.evaluate("window.flights.length") == 0
    await context.close()
    assert errors == []


@pytest.mark.parametrize("delay", DELAYS_S, ids=["on-time", "late"])
@pytest.mark.parametrize("touch", [False, True], ids=["mouse", "touch"])
async def test_a_double_tap_during_a_flight_is_one_action(
    chromium: Any, site: str, touch: bool, delay: float
) -> None:
    """The first tap's move flies while the second tap lands on the place the card left (the card
    that was under it is there now): still the one action of the gesture.

    With the reply on time, the second tap waits for the flight to start and the page's animations
    are held still meanwhile (DevTools' Animation.setPlaybackRate), so that every such second tap
    lands during the flight, however late a loaded machine delivers the reply or the tap; each tap
    still carries the gesture's own time (``double_tap``). With the reply late, the second tap comes
    at its time, often before the flight starts (the taps test covers that case too)."""
    errors: list[str] = []
    mirror, ace_column, _ = tap_deal()
    ace = str(mirror.layout().columns[int(ace_column[1:]) - 1][-1])
    proxy = ReplyDelay()
    options: dict[str, Any] = {"viewport": PHONE, "has_touch": True, "is_mobile": True} if touch else {}
    context = await chromium.new_context(**(options or {"viewport": DESKTOP}))
    page = await open_client(context, site, errors, route=proxy.route)
    await deal(page, mirror.deal.code())
    await page.evaluate(RECORD_TAPS)
    await page.evaluate(RECORD_FLIGHTS)
    devtools = await context.new_cdp_session(page)
    auto_source, auto = auto_column(mirror)

    async def flight_started() -> None:
        await page.wait_for_function("document.querySelector('.flyer') !== null")

    proxy.delay = delay
    on_time = delay == 0.0
    for interval in INTERVALS_MS:
        proxy.sent.clear()
        await page.evaluate("window.inFlight.length = 0")
        if on_time:
            # The tap's move must fly: a redraw within BURST_MS of the last (the undo's, which
            # itself flew not when it came that soon after the move's) is drawn without flights.
            await past_burst(page)
            await devtools.send("Animation.setPlaybackRate", {"playbackRate": 0})
        point = await centre(top_card(page, ace_column))
        await double_tap(
            page, point, interval, touch=touch, before_second=flight_started if on_time else None
        )
        await devtools.send("Animation.setPlaybackRate", {"playbackRate": 1})
        await check_gap(page, interval, touch=touch)
        in_flight = await page.evaluate("window.inFlight")
        assert in_flight[1] or not on_time, (interval, in_flight)
        await one_action(page, proxy, mirror, Move.parse(f"{ace_column}-f{ace[1]}"), ["tap"])

        await page.evaluate("window.inFlight.length = 0")
        await double_tap(page, await centre(top_card(page, auto_source)), interval, touch=touch)
        await check_gap(page, interval, touch=touch)
        await one_action(page, proxy, mirror, auto, ["tap", "auto"])
    await devtools.detach()
    proxy.close()
    await context.close()
    assert errors == []


async def test_sound_is_off_until_turned_on_and_the_choice_is_remembered(chromium: Any, site: str) -> None:
    errors: list[str] = []
    mirror, ace_column, _ = tap_deal()
    context = await chromium.new_context(viewport=DESKTOP)
    page = await open_client(context, site, errors, name="Ann")
    button = page.locator("#sound")
    await expect(button).to_have_attribute("aria-pressed", "false")
    await expect(button).to_have_text("Sound off")
    await deal(page, mirror.deal.code())
    hear = "window.heard = []; addEventListener('eightoff-sound', (e) => window.heard.push(e.detail))"
    await page.evaluate(hear)
    await top_card(page, ace_column).click()
    mirror.play(Move.parse(f"{ace_column}-f{str(mirror.layout().columns[int(ace_column[1:]) - 1][-1])[1]}"))
    await expect_board(page, mirror)
    assert await page.evaluate("window.heard") == []  # off by default: silent

    await button.click()
    await expect(button).to_have_attribute("aria-pressed", "true")
    await expect(button).to_have_text("Sound on")
    await page.wait_for_function("window.heard.length === 1")  # the toggle sounds, to say it is on
    await page.evaluate("window.heard.length = 0")
    await page.keyboard.press("u")  # the undo lays the card back down: a sound
    mirror.play(UNDO)
    await expect_board(page, mirror)
    await page.wait_for_function("window.heard.includes('place')")
    assert await page.evaluate("localStorage.getItem('eightoff.sound')") == "on"

    await page.reload()
    await expect(page.locator("#sound")).to_have_attribute("aria-pressed", "true")  # remembered
    await page.click("#sound")
    await page.reload()
    await expect(page.locator("#sound")).to_have_attribute("aria-pressed", "false")
    await page.evaluate("localStorage.setItem('eightoff.sound', 'loud')")  # bad input: not "on"
    await page.reload()
    await expect(page.locator("#sound")).to_have_attribute("aria-pressed", "false")
    await context.close()
    assert errors == []


async def live_rows(page: Page) -> list[str]:
    rows = page.locator("#live-games [data-live-game]")
    return [await row.get_attribute("data-live-game") or "" for row in await rows.all()]


async def wait_live(page: Page, game: str, *, present: bool, since: float) -> float:
    """Seconds from ``since`` until ``page``'s live list shows (or no longer shows) ``game``, by itself."""
    row = page.locator(f'#live-games [data-live-game="{game}"]')
    await expect(row).to_have_count(1 if present else 0, timeout=LIVE_PROMPT_S * 1000 + 2000)
    took = time.monotonic() - since
    assert took < LIVE_PROMPT_S, f"the live list took {took:.1f} s"
    return took


async def test_the_live_list_drops_a_closed_browser_and_shows_a_new_game(chromium: Any, site: str) -> None:
    errors: list[str] = []
    watcher_context = await chromium.new_context(viewport=DESKTOP)
    watcher = await open_client(watcher_context, site, errors, name="Bo")
    await expect(watcher.locator("#live-games .none")).to_have_count(1)
    ann_context: BrowserContext = await chromium.new_context(viewport=DESKTOP)
    ann = await open_client(ann_context, site, errors, name="Ann")
    dealt = time.monotonic()
    game_id = await deal(ann, CODE)
    await wait_live(watcher, game_id, present=True, since=dealt)  # no Refresh tapped
    await ann_context.close()  # the browser goes, without a word to the server
    await wait_live(watcher, game_id, present=False, since=time.monotonic())
    assert await live_rows(watcher) == []
    await watcher_context.close()
    assert errors == []


async def test_two_players_called_cleo_are_told_apart(chromium: Any, site: str, web_app: App) -> None:
    url = serverutil.ws_url(web_app)
    cleos = [await player(url, name="Cleo") for _ in range(2)]
    games = [(await cleo.request("new_game", code=CODE))["game"] for cleo in cleos]
    for cleo, game in zip(cleos, games, strict=True):
        assert (await cleo.request("move", game=game, **{"from": "t1", "to": "c5"}))["type"] == "ack"
    errors: list[str] = []
    context = await chromium.new_context(viewport=DESKTOP)
    page = await open_client(context, site, errors, name="Cleo")  # a third Cleo looks on
    own_tag = await page.locator("#player-tag").text_content()
    assert own_tag and TAG.fullmatch(own_tag)

    # The live list: two rows of "Cleo", each with its own tag, neither the onlooker's.
    await page.click("#refresh-live")
    labels: list[str] = []
    for game in games:
        row = page.locator(f'[data-live-game="{game}"] .who')
        await expect(row).to_have_text(re.compile(r"^Cleo #[0-9A-Z]{4}$"))
        labels.append(await row.text_content() or "")
    assert len({*labels, f"Cleo {own_tag}"}) == 3, labels

    # The spectator view names the player it shows with the same tag as the list.
    await page.click(f'[data-live-game="{games[1]}"] [data-watch]')
    await expect(page.locator('#game-info [data-field="owner"]')).to_have_text(labels[1])

    # The leaderboards and the profiles: the two finished games, two tags.
    for cleo, game in zip(cleos, games, strict=True):
        await cleo.request("resign", game=game)
        await cleo.close()
    await page.click("#unwatch")
    await page.click("#leaderboards-toggle")
    await page.select_option("#board-kind", "deal")
    await page.fill("#board-code", CODE)
    await page.click("#leaderboard-show")
    table = page.locator("#leaderboard-table")
    await expect(table.locator("tbody tr")).to_have_count(2)
    cells = [
        await cell.text_content() or "" for cell in await table.locator('tbody [data-col="player"]').all()
    ]
    assert sorted(cells) == sorted(labels), (cells, labels)
    ids = [await row.get_attribute("data-player-id") for row in await table.locator("tbody tr").all()]
    await table.locator(f'tbody tr[data-player-id="{ids[0]}"]').click()
    await expect(page.locator("#profile")).to_have_attribute("data-player-id", ids[0] or "")
    await expect(page.locator("#profile-title")).to_have_text(f"{cells[0]}'s profile")
    await context.close()
    assert errors == []
