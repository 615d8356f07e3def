"""The game's clock shows the time the server will record, within a second, on
every path, in a real Chromium against the real server: a new deal, a resume of a game dealt ten
minutes before (without moves, then with), a reload, a spectator, and the end (the over screen shows
the stored duration); each browser's own clock is minutes off (one ahead, one behind).

Bad input tried: machine clocks seven minutes ahead and eleven minutes behind the server's, and a game
whose deal is older than the page (its first snapshot is at v 0: the old client took the time since
the deal for clock skew and showed 0:00).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
import time
import urllib.request
from typing import Any

import pytest
from playwright.async_api import BrowserContext, Page, expect

from engine import Game
from protocol import parse_timestamp
from server.app import App
from server.clock import utc_now
from tests.support import serverutil
from tests.support.wsclient import WsClient
from tests.web.pages import deal, leave_game, open_client, top_card

DESKTOP = {"width": 1280, "height": 860}
CODE = "EO1-C8-AAAAAFA"
#: How late the shown clock may be besides its own rounding down: the sync's error and a late timer.
SLACK_MS = 150
#: How long a clock behind by more than that is read again (a late tick under load).
LATE_TICK_S = 3.0

SKEWED_CLOCK = """(() => {
  const offset = %d;
  const Real = Date;
  function Skewed(...args) {
    if (!new.target) return new Real(Real.now() + offset).toString();
    return args.length ? new Real(...args) : new Real(Real.now() + offset);
  }
  Skewed.prototype = Real.prototype;
  Skewed.now = () => Real.now() + offset;
  Skewed.parse = Real.parse;
  Skewed.UTC = Real.UTC;
  globalThis.Date = Skewed;
})();"""


async def skewed_context(chromium: Any, minutes: int) -> BrowserContext:
    """A browser whose machine clock is ``minutes`` off the server's."""
    context: BrowserContext = await chromium.new_context(viewport=DESKTOP)
    await context.add_init_script(SKEWED_CLOCK % (minutes * 60_000))
    return context


def get(url: str) -> tuple[str | None, bytes]:
    """The Cache-Control header and the body of a GET."""
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.headers["Cache-Control"], response.read()


def shown_ms(text: str) -> int:
    match = re.fullmatch(r"(\d+):(\d\d)", text)
    assert match, text
    return (int(match[1]) * 60 + int(match[2])) * 1000


def since(moment: dt.datetime) -> int:
    return int((utc_now() - moment).total_seconds() * 1000)


async def expect_clock(page: Page, started_at: dt.datetime) -> int:
    """The page's clock reads the server's time since ``started_at``, rounded down to the second
    (within ``SLACK_MS``); returns what it shows, in ms. Read again for up to ``LATE_TICK_S`` while
    it is behind: on a loaded machine the page's one-second tick can come late (CI once read 20:00
    at 20:01.834); a clock off by the machine's minutes of skew never comes right."""
    clock = page.locator('#game-info [data-field="time"]')
    await expect(clock).to_have_text(re.compile(r"^\d+:\d\d$"))
    deadline = time.monotonic() + LATE_TICK_S
    while True:
        before = since(started_at)
        shown = shown_ms(await clock.inner_text())
        after = since(started_at)
        if before - 1000 - SLACK_MS <= shown <= after + SLACK_MS:
            return shown
        if shown > after + SLACK_MS or time.monotonic() > deadline:  # ahead: no later tick fixes it
            raise AssertionError((before, shown, after))
        await asyncio.sleep(0.1)


async def started_at_of(observer: WsClient, game: str) -> dt.datetime:
    """When the server dealt ``game``: its snapshot's ``started_at``, read by another client."""
    snapshot = await observer.request("watch", game=game)
    assert snapshot["type"] == "snapshot", snapshot
    assert (await observer.request("unwatch", game=game))["type"] == "ok"
    return parse_timestamp(snapshot["started_at"])


async def deal_earlier(
    app: App, token: str, minutes: int, monkeypatch: pytest.MonkeyPatch, *, moves: int = 0
) -> str:
    """A game of the player of ``token`` dealt ``minutes`` ago (the server's clock set back for the
    deal only), with ``moves`` moves made on it; returns its id."""
    client = await WsClient.open(serverutil.ws_url(app))
    await client.hello(token=token)
    with monkeypatch.context() as patch:
        patch.setattr("server.play.registry.utc_now", lambda: utc_now() - dt.timedelta(minutes=minutes))
        snapshot = await client.request("new_game", code=CODE)
    game = Game.from_code(CODE)
    for move in sorted(game.legal_moves, key=str)[:moves]:
        fields: dict[str, object] = {"from": str(move.source), "to": str(move.target)}
        reply = await client.request("move", game=snapshot["game"], v=game.v, **fields)
        assert reply["type"] == "ack", reply
        game.play(move)
    await client.close()
    return str(snapshot["game"])


async def test_the_clock_is_the_servers_on_every_path(
    chromium: Any, site: str, web_app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    errors: list[str] = []
    cache, body = await asyncio.to_thread(get, f"{site}/api/time")  # the server runs on this loop
    assert cache == "no-store"
    assert abs((utc_now() - parse_timestamp(json.loads(body)["now"])).total_seconds()) < 1

    observer = await WsClient.open(serverutil.ws_url(web_app))
    await observer.hello(name="Observer")
    ahead = await skewed_context(chromium, 7)
    page = await open_client(ahead, site, errors)
    token = await page.evaluate("localStorage.getItem('eightoff.token')")

    # A new deal.
    fresh = await deal(page, CODE)
    await expect_clock(page, await started_at_of(observer, fresh))

    # A game dealt ten minutes ago, resumed from the list at v 0; then one of twenty with a move made.
    old = await deal_earlier(web_app, token, 10, monkeypatch)
    older = await deal_earlier(web_app, token, 20, monkeypatch, moves=1)
    await page.reload()
    # The tab resumes its game first: a click on the list before it does resumed the old game
    # without asking (nothing was in progress yet) and the leave question never came (seen under load).
    await expect(page.locator("#board")).to_have_attribute("data-game", fresh)
    for game, version in ((old, "0"), (older, "1")):
        await page.click(f'[data-resume="{game}"]')
        await leave_game(page, "keep")
        await expect(page.locator("#board")).to_have_attribute("data-game", game)
        await expect(page.locator("#board")).to_have_attribute("data-v", version)
        shown = await expect_clock(page, await started_at_of(observer, game))
        assert shown >= 10 * 60_000

    # A move, then a reload: the tab resumes its game at once.
    await top_card(page, "t1").click()
    await top_card(page, "t2").click()  # the t1 card picked up goes onto t2, or is refused: no matter
    await page.reload()
    await expect(page.locator("#board")).to_have_attribute("data-game", older)
    started = await started_at_of(observer, older)
    await expect_clock(page, started)

    # A spectator whose clock runs eleven minutes behind.
    behind = await skewed_context(chromium, -11)
    watcher = await open_client(behind, site, errors, name="Bo")
    await watcher.click("#refresh-live")
    await watcher.click(f'[data-watch="{older}"]')
    await expect(watcher.locator("#board")).to_have_attribute("data-mode", "watch")
    await expect_clock(watcher, started)

    # The end: the last clock, the over screens (the player's and the spectator's) and the stored
    # duration agree.
    last = await expect_clock(page, started)
    await page.click("#resign")
    await page.click("#resign")
    await expect(page.locator("#game-over")).to_be_visible()
    player_id = await page.locator("#player-name").get_attribute("data-player-id")
    profile = await observer.request("profile", player=player_id)
    stored = next(row for row in profile["recent"] if row["game"] == older)
    duration = stored["duration_ms"]
    assert 0 <= duration - last <= 2000 + SLACK_MS, (last, duration)  # two clicks apart
    recorded = f"{duration // 60_000}:{duration // 1000 % 60:02d}"
    for screen in (page, watcher):
        await expect(screen.locator('#game-over [data-field="time"]')).to_have_text(recorded)
        await expect(screen.locator('#game-info [data-field="time"]')).to_have_text(recorded)
    await observer.close()
    await ahead.close()
    await behind.close()
    assert errors == []
