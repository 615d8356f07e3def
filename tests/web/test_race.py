"""The browser client races in a real Chromium against a scripted client (a raw WebSocket client) on a
real server: joined by its /r/CODE link or created from the form, the
lobby's seats and ready, the countdown, the seat's own game on the ordinary board, the rival's
progress bar moving as the scripted client plays, a reload mid-race, and the result (a win by the
rival; a time-out). The page never receives nor shows a rival's board before the race is over. A race
made and left in its lobby closes the panel. A spectator (a link to a started race) sees the standings
and every seat's board, late, then the final boards. A rematch: the page asks it and the scripted
rival, told, joins it; the scripted rival asks it and the page joins it in one tap.

Bad input tried: a well-formed link to no race, malformed links (too short, a letter a code never
has, a path under the code), and a malformed code typed into the join form.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import BrowserContext, Page, WebSocketRoute, expect

from engine import Deal, Game, Move
from server.app import App
from server.clock import utc_now
from solver import solve_deal
from tests.support import serverutil
from tests.support.wire import move_fields
from tests.support.wsclient import WsClient, player
from tests.web.pages import choose_name, leave_game, screenshot

DESKTOP = {"width": 1280, "height": 860}
PORTRAIT = {"width": 390, "height": 844}
#: A countdown long enough to see, short enough for a fast test. Each page load opens a dozen
#: connections (the page, its modules, the WebSocket), several loads a second from one address here:
#: more than the default per-address allowance, which would refuse a module (and break the page).
RACE_SETTINGS = {
    "race_countdown": 1.5,
    "sqlite_synchronous": "NORMAL",
    "shutdown_grace": 2.0,
    "new_connections_per_address_per_second": 500.0,
    "race_board_delay": 1.0,  # a spectator's boards, late: long enough to see, short for a test
    # The protocol clients come through a "proxy" on 127.0.0.1 from networks of their own (as rated
    # racers must be: docs/ratings.md, Farming); the browser's page from 127.0.0.1 itself.
    "trusted_proxies": "127.0.0.1",
    "established_networks": None,  # two newcomers' race rates (as on a server of established players)
}


@pytest_asyncio.fixture(loop_scope="session")
async def race_app(tmp_path: Path) -> AsyncIterator[App]:
    async with serverutil.running_app(f"sqlite+aiosqlite:///{tmp_path}/db.sqlite3", **RACE_SETTINGS) as app:
        yield app


@pytest.fixture
def site(race_app: App) -> str:
    """The base URL of the browser client (the ``chromium`` fixture closes before the server does)."""
    return f"http://127.0.0.1:{race_app.port}"


class Frames:
    """Between the page and the server: records every message the server sends the page, in order."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []

    def route(self, ws: WebSocketRoute) -> None:
        server = ws.connect_to_server()

        def downstream(frame: str | bytes) -> None:
            self.received.append(json.loads(frame))
            ws.send(frame)

        ws.on_message(server.send)
        server.on_message(downstream)


async def open_link(
    context: BrowserContext, site: str, path: str, errors: list[str], frames: Frames | None = None
) -> Page:
    """The client opened at ``path`` (an invitation link) by a first-time visitor named Ann."""
    page = await context.new_page()
    page.set_default_timeout(10_000)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    if frames is not None:
        await page.route_web_socket(re.compile(r"/ws$"), frames.route)
    response = await page.goto(f"{site}{path}")
    assert response is not None and response.status == 200
    assert (await response.header_value("content-type") or "").startswith("text/html")
    await choose_name(page, "Ann")
    return page


def bar(page: Page, mine: bool) -> Any:
    return page.locator(f'#race-bars li[data-mine="{"true" if mine else "false"}"]')


async def race_of(client: WsClient, race_id: str) -> dict[str, Any]:
    """The race as the scripted client sees it now (a fresh snapshot)."""
    race = await client.request("race_watch", race=race_id)
    assert race["type"] == "race", race
    return race


def game_of(race: dict[str, Any], client: WsClient) -> str:
    assert client.player is not None
    (row,) = [row for row in race["rows"] if row["player"]["id"] == client.player["id"]]
    return str(row["game"])


def a_cell_move(deal: Deal) -> Move:
    """A first move the page makes by two clicks: a column's top card (no ace: a tap would send it
    home) into an empty cell."""
    game = Game(deal)
    moves = [
        move
        for move in game.legal_moves
        if move.target.symbol().startswith("c") and str(game.top_card(move.source))[0] != "A"
    ]
    return sorted(moves, key=str)[0]


async def play(client: WsClient, game_id: str, line: list[Move], start: int) -> None:
    for index, move in enumerate(line, start):
        reply = await client.request("move", game=game_id, **move_fields(move), v=index)
        assert reply["type"] == "ack", reply


async def test_a_race_joined_by_link_and_won_by_the_rival(chromium: Any, site: str, race_app: App) -> None:
    errors: list[str] = []
    frames = Frames()
    url = serverutil.ws_url(race_app)
    bo = await player(url, forwarded_for="198.51.100.2", name="Bo")
    race = await bo.request("race_create", seats=2, time_limit=300)
    race_id, code = race["race"], race["code"]

    # The lobby, reached by the link: both seats, who is ready, the invitation shown.
    context = await chromium.new_context(viewport=DESKTOP)
    page = await open_link(context, site, f"/r/{code}", errors, frames)
    panel = page.locator("#race")
    await expect(panel).to_have_attribute("data-state", "lobby")
    await expect(page.locator("#race-seats li[data-seat]")).to_have_count(2)
    await expect(page.locator('#race-seats li[data-mine="true"]')).to_contain_text("Ann (you)")
    await expect(page.locator('#race-seats li[data-mine="false"]')).to_contain_text("Bo")
    await expect(page.locator("#race-link")).to_have_text(f"{site}/r/{code}")
    assert (await bo.request("race_ready", race=race_id))["type"] == "ok"
    await expect(page.locator('#race-seats li[data-mine="false"]')).to_have_attribute("data-ready", "true")
    assert await page.locator('[data-race-action="start"]').count() == 0  # only the creator starts
    await page.click('[data-race-action="ready"]')
    await expect(page.locator('#race-seats li[data-mine="true"]')).to_have_attribute("data-ready", "true")
    await screenshot(page, "desktop-race-lobby.png")

    # The countdown, then the reveal: the page's own seat's game on the ordinary board.
    assert (await bo.request("race_start", race=race_id))["type"] == "ok"
    await expect(page.locator("#race-countdown")).to_have_text(re.compile(r"^Starts in [12]$"))
    await expect(panel).to_have_attribute("data-state", "running")
    running = await race_of(bo, race_id)
    deal = Deal.from_code(running["deal"])
    mine = next(row["game"] for row in running["rows"] if row["player"]["name"] == "Ann")
    board = page.locator("#board")
    await expect(board).to_have_attribute("data-game", mine)
    await expect(board).to_have_attribute("data-mode", "play")
    await expect(page.locator('#game-info [data-field="code"]')).to_have_text(deal.code())
    await expect(page.locator("#race-time-left")).to_have_text(re.compile(r"^[45]:\d\d left$"))
    await expect(page.locator("#hint")).to_be_hidden()  # no solver's help in a race

    # The page plays a move: its own bar follows; a reload picks the race and the game up again.
    move = a_cell_move(deal)
    await page.locator(f'#board [data-pile="{move.source.symbol()}"] [data-card]').last.click()
    await page.click(f'#board [data-pile="{move.target.symbol()}"]')
    await expect(board).to_have_attribute("data-v", "1")
    await expect(bar(page, True)).to_have_attribute("data-moves", "1")
    await page.reload()
    await expect(panel).to_have_attribute("data-state", "running")
    await expect(board).to_have_attribute("data-game", mine)
    await expect(board).to_have_attribute("data-v", "1")
    await expect(bar(page, True)).to_have_attribute("data-moves", "1")

    # The rival plays: its bar moves, action by action; the page never gets its board (the live
    # list marks the rival's game sealed, and offers no Watch).
    line = list(solve_deal(deal).moves)
    rival_game = game_of(running, bo)
    # The rival opens its game as a racer's client does at the reveal: live lists the games someone
    # has open (server.play.presence).
    assert (await bo.request("resume", game=rival_game))["type"] == "snapshot"
    await page.click("#refresh-live")
    await expect(page.locator(f'[data-live-game="{rival_game}"] .tag')).to_have_text("sealed")
    half = len(line) // 2
    await play(bo, rival_game, line[:half], 0)
    rival = bar(page, False)
    await expect(rival).to_have_attribute("data-moves", str(half))
    home = int(await rival.get_attribute("data-cards") or "0")
    width = await rival.locator(".race-fill").evaluate("node => node.style.width")
    # the bar is as wide as the share of cards home (the browser writes 25.0% as 25%)
    assert width.endswith("%") and abs(float(width[:-1]) - home / 52 * 100) < 0.06, (width, home)
    await expect(rival.locator(".race-figures")).to_contain_text(f"{home}/52 home · {half} moves")
    await expect(page.locator("#race-boards")).to_have_count(0)  # a racer: no rival board drawn
    await screenshot(page, "desktop-race.png")
    await play(bo, rival_game, line[half:], half)

    # The end: the rival won the race; the places, and no board of the rival before it.
    await expect(panel).to_have_attribute("data-state", "finished")
    await expect(page.locator("#race-result")).to_have_text("You placed 2nd of 2")
    await expect(page.locator("#race-places li")).to_have_count(2)
    winner = page.locator('#race-places li[data-place="1"]')
    await expect(winner).to_contain_text("Bo")
    await expect(winner).to_contain_text(f"52/52 home · {len(line)} moves")
    # both guests were rated, newcomers at 1000 (the result's rows carry {before, after}): the winner up
    await expect(page.locator("#race .race-rating")).to_have_count(2)
    for rated in (winner, page.locator('#race-places li[data-mine="true"]')):
        await expect(rated.locator(".race-rating")).to_have_attribute(
            "title", re.compile(r"^rating 1000 → \d+$")
        )
    await expect(winner.locator(".race-rating")).to_have_class(re.compile(r"\bup\b"))
    await expect(winner.locator(".race-rating")).to_have_text(re.compile(r"^\d+ \(\+\d+\)$"))
    await expect(page.locator("#game-over")).to_be_hidden()  # the race's result stands for the game's
    await screenshot(page, "desktop-race-result.png")
    types = [message["type"] for message in frames.received]
    end = next(
        i
        for i, message in enumerate(frames.received)
        if message["type"] == "race_diff" and message["state"] == "finished"
    )
    before = frames.received[:end]
    assert "race_board" not in types[:end]
    assert {m["game"] for m in before if m["type"] in ("snapshot", "diff", "ack", "game_over")} == {mine}
    assert sorted(m["seat"] for m in frames.received[end:] if m["type"] == "race_board") == [1, 2]
    await expect(page.locator("#race-boards")).to_have_count(0)  # a racer's result: "See board" instead

    # Now the rival's board may be seen: its final position, won.
    await winner.locator("[data-race-board]").click()
    await leave_game(page, "keep")  # the page's own game of the race is unfinished: kept
    await expect(board).to_have_attribute("data-mode", "watch")
    await expect(board).to_have_attribute("data-game", rival_game)
    await expect(board).to_have_attribute("data-v", str(len(line)))
    await expect(board).to_have_attribute("data-status", "won")
    await expect(page.locator("#race-places [data-race-board]")).to_have_count(1)  # none for one's own

    # Closing the panel takes the page back to an ordinary table.
    await page.click('[data-race-action="close"]')
    await expect(panel).to_be_hidden()
    assert await page.evaluate("location.pathname") == "/"
    await bo.close()
    await context.close()
    assert errors == []


async def test_a_race_made_on_a_phone_ends_at_the_time_limit(chromium: Any, site: str, race_app: App) -> None:
    errors: list[str] = []
    offset = dt.timedelta()
    race_app.races.clock = lambda: utc_now() + offset
    context = await chromium.new_context(
        viewport=PORTRAIT, has_touch=True, is_mobile=True, device_scale_factor=2
    )
    page = await open_link(context, site, "/", errors)

    # The form of the New tab makes a 1-minute race of 4 cells; the table shows its lobby and code.
    await page.click('#tabs [data-tab="new"]')
    form = page.locator("#race-create-form")
    await form.locator('select[name="cells"]').select_option("4")
    await form.locator('select[name="time_limit"]').select_option("60")
    await page.click("#race-create")
    panel = page.locator("#race")
    await expect(panel).to_have_attribute("data-state", "lobby")
    await expect(panel.locator(".race-what")).to_have_text("4 cells · 1:00 · private")
    code = await page.locator("#race-code-shown").inner_text()
    assert re.fullmatch(r"[A-HJKMNP-Z2-9]{8}", code)
    assert await page.evaluate("location.pathname") == f"/r/{code}"
    start = page.locator('[data-race-action="start"]')
    await expect(start).to_be_disabled()
    await expect(panel).to_contain_text("Waiting for a second player.")

    bo = await player(serverutil.ws_url(race_app), name="Bo")
    race_id = (await bo.request("race_join", code=code))["race"]
    assert (await bo.request("race_ready", race=race_id))["type"] == "ok"
    await expect(page.locator("#race-seats li[data-seat]")).to_have_count(2)
    await expect(panel).to_contain_text("Waiting for Ann to be ready.")
    await page.click('[data-race-action="ready"]')
    await expect(start).to_be_enabled()
    await start.click()
    await expect(panel).to_have_attribute("data-state", "running")
    running = await race_of(bo, race_id)
    deal = Deal.from_code(running["deal"])
    assert deal.cells == 4
    await expect(page.locator("#board")).to_have_attribute("data-mode", "play")
    await expect(page.locator("#cells [data-pile]")).to_have_count(4)

    # The rival plays up to its first card home; the page's player nothing.
    line = list(solve_deal(deal).moves)
    first_home = next(i for i, move in enumerate(line) if move.target.symbol().startswith("f"))
    await play(bo, game_of(running, bo), line[: first_home + 1], 0)
    await expect(bar(page, False)).to_have_attribute("data-cards", re.compile(r"^[1-9]\d*$"))
    await expect(page.locator("#board")).to_be_in_viewport()
    await screenshot(page, "phone-race.png")

    # Time is up (the race's clock moved past its limit): most cards home takes it.
    offset = dt.timedelta(seconds=61)
    race_app.races.wake_all()
    await expect(panel).to_have_attribute("data-state", "finished")
    await expect(page.locator("#race-result")).to_have_text("You placed 2nd of 2")
    await expect(panel).to_contain_text("Time is up: most cards home wins, then fewer moves.")
    await expect(page.locator('#race-places li[data-place="1"]')).to_contain_text("Bo")
    await screenshot(page, "phone-race-result.png")

    # The page asks a rematch: a new lobby of the same settings, a new code, the page's player seated
    # as its creator; the scripted rival is told (a race_diff of the finished race names it) and joins.
    rematch = page.locator('[data-race-action="rematch"]')
    await expect(rematch).to_have_text("Rematch")
    await rematch.click()
    await expect(panel).to_have_attribute("data-state", "lobby")
    await expect(page.locator("#race-code-shown")).not_to_have_text(code)
    await expect(panel.locator(".race-what")).to_have_text("4 cells · 1:00 · private")
    new_code = await page.locator("#race-code-shown").inner_text()
    assert await page.evaluate("location.pathname") == f"/r/{new_code}"
    told = await _pushed_rematch(bo, race_id)
    assert told["code"] == new_code
    joined = await bo.request("race_rematch", race=race_id)
    assert (joined["type"], joined["race"], joined["code"]) == ("race", told["race"], new_code), joined
    await expect(page.locator("#race-seats li[data-seat]")).to_have_count(2)
    await expect(page.locator('#race-seats li[data-mine="true"]')).to_contain_text("Ann (you) · creator")
    await bo.close()
    await context.close()
    assert errors == []


async def test_a_link_to_a_started_race_watches_it(chromium: Any, site: str, race_app: App) -> None:
    """A stranger opening the invitation link of a race under way cannot join it: the page says so
    and watches it by its code: the standings of both seats (none of them the page's) live, and each
    seat's board late (the note says how late), then every final board; once a racer asks a rematch,
    the spectator is offered to join it; closing the panel stops following the race."""
    errors: list[str] = []
    url = serverutil.ws_url(race_app)
    bo, cy = await player(url, name="Bo"), await player(url, name="Cy")
    race = await bo.request("race_create", seats=2, time_limit=300)
    race_id, code = race["race"], race["code"]
    assert (await cy.request("race_join", code=code))["type"] == "race"
    for client in (bo, cy):
        assert (await client.request("race_ready", race=race_id))["type"] == "ok"
    assert (await bo.request("race_start", race=race_id))["type"] == "ok"
    context = await chromium.new_context(viewport=DESKTOP)
    page = await open_link(context, site, f"/r/{code}", errors)
    panel = page.locator("#race")
    await expect(page.locator("#race-message")).to_have_text(
        "That race had already started: you are watching it."
    )
    await expect(panel).to_have_attribute("data-state", "running", timeout=15_000)
    await expect(page.locator("#race-bars li")).to_have_count(2)
    await expect(page.locator('#race-bars li[data-mine="true"]')).to_have_count(0)
    await expect(page.locator('#race [data-race-action="close"]')).to_have_text("Stop watching")  # no seat
    running = await race_of(bo, race_id)
    bo_game = game_of(running, bo)
    move = next(iter(Game(Deal.from_code(running["deal"])).legal_moves))
    assert (await bo.request("move", game=bo_game, **move_fields(move)))["type"] == "ack"
    await expect(page.locator('#race-bars li[data-mine="false"]').first).to_have_attribute("data-moves", "1")

    # The boards, late: Bo's after its move (v 1), Cy's none yet; the note says how late.
    await expect(page.locator("#race-boards-note")).to_have_text(
        "You are watching: each board is shown 1 s late, so that no racer can be helped."
    )
    boards = page.locator("#race-boards .mini-board")
    await expect(boards).to_have_count(2)
    await expect(boards.nth(0)).to_have_attribute("data-v", "1")  # Bo, seat 1
    await expect(boards.nth(0).locator(".mini-column")).to_have_count(8)
    await expect(boards.nth(1)).to_contain_text("no board yet")
    await screenshot(page, "desktop-race-spectator.png")

    # The end (both resign): every final board; then a rematch asked by Bo is offered to the page.
    for client in (bo, cy):
        assert (await client.request("resign", game=game_of(running, client)))["type"] == "game_over"
    await expect(panel).to_have_attribute("data-state", "finished")
    final_note = "The race is over: these are the final boards."
    await expect(page.locator("#race-boards-note")).to_have_text(final_note)
    await expect(boards.nth(0)).to_have_attribute("data-status", "resigned")
    await expect(boards.nth(1)).to_have_attribute("data-status", "resigned")
    await expect(page.locator('[data-race-action="rematch"]')).to_have_count(0)  # nothing to join yet
    assert (await bo.request("race_rematch", race=race_id))["type"] == "race"
    await expect(page.locator('[data-race-action="rematch"]')).to_have_text("Join the rematch")
    await page.click('#race [data-race-action="close"]')  # a race_leave of a race over: ok, closed
    await expect(panel).to_be_hidden()
    await bo.close()
    await cy.close()
    await context.close()
    assert errors == []


async def test_bad_race_links_and_codes_say_what_is_wrong(chromium: Any, site: str) -> None:
    errors: list[str] = []
    context = await chromium.new_context(viewport=DESKTOP)
    page = await open_link(context, site, "/r/ABCDEFGH", errors)
    message = page.locator("#race-message")
    await expect(message).to_have_text("No race has that code. Check the link or the code.")
    for bad in ("/r/abc", "/r/ABCDEFGO", "/r/ABCDEFGH/more"):
        response = await page.goto(f"{site}{bad}")
        assert response is not None and response.status == 200
        await expect(message).to_have_text(
            "That race link is not valid: a race code is 8 letters and digits, like K7M2QX9P."
        )
    await page.goto(f"{site}/")

    # A race made and left in its lobby: cancelled, the page back to an ordinary table.
    await page.click("#race-create")
    await expect(page.locator("#race")).to_have_attribute("data-state", "lobby")
    await page.click('#race [data-race-action="close"]')
    await expect(page.locator("#race")).to_be_hidden()
    assert await page.evaluate("location.pathname") == "/"

    await page.fill("#race-code", "K7M2")
    await page.click("#race-join")
    await expect(message).to_have_text("A race code is 8 letters and digits, like K7M2QX9P.")
    await page.fill("#race-code", "k7m2qx9p")  # well-formed (lower case is fine), but no such race
    await page.click("#race-join")
    await expect(message).to_have_text("No race has that code. Check the link or the code.")
    await context.close()
    assert errors == []


async def test_leaving_mid_race_asks_twice_and_gives_the_seat_up(
    chromium: Any, site: str, race_app: App
) -> None:
    errors: list[str] = []
    url = serverutil.ws_url(race_app)
    bo = await player(url, name="Bo")
    race = await bo.request("race_create", seats=2, time_limit=300)
    race_id = race["race"]
    context = await chromium.new_context(viewport=DESKTOP)
    page = await open_link(context, site, f"/r/{race['code']}", errors)
    assert (await bo.request("race_ready", race=race_id))["type"] == "ok"
    await page.click('[data-race-action="ready"]')
    await expect(page.locator('#race-seats li[data-mine="true"]')).to_have_attribute("data-ready", "true")
    assert (await bo.request("race_start", race=race_id))["type"] == "ok"
    panel = page.locator("#race")
    await expect(panel).to_have_attribute("data-state", "running")
    leave = page.locator('#race [data-race-action="close"]')
    await leave.click()
    await expect(leave).to_have_text("Really leave?")  # one tap gives nothing up
    await expect(leave).to_have_text("Leave", timeout=5000)  # and it calms down again
    assert [row["status"] for row in (await race_of(bo, race_id))["rows"]] == ["playing", "playing"]
    await leave.click()
    await leave.click()
    await expect(panel).to_be_hidden()
    assert await page.evaluate("location.pathname") == "/"
    rows = {row["player"]["name"]: row["status"] for row in (await race_of(bo, race_id))["rows"]}
    assert rows == {"Bo": "playing", "Ann": "left"}
    await bo.close()
    await context.close()
    assert errors == []


async def _pushed_rematch(client: WsClient, race_id: str) -> dict[str, Any]:
    """The rematch named by the race_diff of finished race ``race_id`` pushed to ``client``."""
    while True:
        push = await client.next_push()
        if push["type"] == "race_diff" and push["race"] == race_id and "rematch" in push:
            return dict(push["rematch"])


async def test_the_rival_asks_a_rematch_and_the_page_joins_it_in_one_tap(
    chromium: Any, site: str, race_app: App
) -> None:
    errors: list[str] = []
    offset = dt.timedelta()
    race_app.races.clock = lambda: utc_now() + offset
    url = serverutil.ws_url(race_app)
    bo = await player(url, name="Bo")
    race = await bo.request("race_create", seats=2, time_limit=60, public=True)
    race_id = race["race"]
    context = await chromium.new_context(viewport=DESKTOP)
    page = await open_link(context, site, f"/r/{race['code']}", errors)
    assert (await bo.request("race_ready", race=race_id))["type"] == "ok"
    await page.click('[data-race-action="ready"]')
    await expect(page.locator('#race-seats li[data-mine="true"]')).to_have_attribute("data-ready", "true")
    assert (await bo.request("race_start", race=race_id))["type"] == "ok"
    panel = page.locator("#race")
    await expect(panel).to_have_attribute("data-state", "running")
    offset = dt.timedelta(seconds=61)
    race_app.races.wake_all()
    await expect(panel).to_have_attribute("data-state", "finished")
    rematch = page.locator('[data-race-action="rematch"]')
    await expect(rematch).to_have_text("Rematch")

    # The rival asks first: the page's button becomes "Join the rematch"; one tap seats the page in it.
    made = await bo.request("race_rematch", race=race_id)
    assert made["type"] == "race" and made["state"] == "lobby", made
    await expect(rematch).to_have_text("Join the rematch")
    note = page.locator("#race-rematch-note")
    await expect(note).to_have_text("A rematch was asked: same settings, a new deal.")
    await rematch.click()
    await expect(panel).to_have_attribute("data-state", "lobby")
    await expect(page.locator("#race-code-shown")).to_have_text(made["code"])
    await expect(panel.locator(".race-what")).to_have_text("8 cells · 1:00 · public")
    await expect(page.locator("#race-seats li[data-seat]")).to_have_count(2)
    await expect(page.locator('#race-seats li[data-mine="false"]')).to_contain_text("Bo · creator")
    # the page let go of the finished race: its seat is Bo's rematch's seat 2, and Bo sees it there
    fresh = await bo.request("race_watch", race=made["race"])
    assert [row["player"]["name"] for row in fresh["rows"]] == ["Bo", "Ann"]
    await bo.close()
    await context.close()
    assert errors == []
