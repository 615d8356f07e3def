"""``live`` pages are read from the database once per moment, whoever asks (four connections
asking ``live`` as fast as their rate limit allows would take two thirds of the server's core with a
database read each): one read answers every ask of the same page within ``LIVE_PAGE_SECONDS`` and every ask
made while it is in flight; a change of the process's rooms, a failed read or an older read is read
again; the pages kept are bounded."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest

from server.services.live_pages import PAGES_KEPT, LivePages
from server.storage import LiveGame, StorageUnavailable, repository

WINDOW = dt.timedelta(minutes=10)
AT = dt.datetime(2026, 12, 3, 12, tzinfo=dt.UTC)


class _Presence:
    """The part of `Presence` the pages use: its change count and its flush."""

    def __init__(self) -> None:
        self.changes = 0

    async def flushed(self) -> bool:
        return True


class _Database:
    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[object]:
        yield object()


class _Reads:
    """Stands for `repository.live_games`: counts the reads, each taking ``delay`` seconds."""

    def __init__(self, delay: float = 0.0) -> None:
        self.count = 0
        self.delay = delay
        self.failing = False

    async def __call__(
        self, conn: object, *, active_since: dt.datetime, after: Any, limit: int
    ) -> list[LiveGame]:
        self.count += 1
        await asyncio.sleep(self.delay)
        if self.failing:
            raise StorageUnavailable("the database is down")
        return [_game(f"g{self.count}-{index}") for index in range(limit)]


def _game(game_id: str) -> LiveGame:
    return LiveGame(
        id=game_id,
        player_id="p",
        player_name="Ann",
        code="EO1-C8-AAAAAFA",
        score=0,
        moves=0,
        started_at=AT,
        active_at=AT,
        cells=8,
        daily_date=None,
        player_bot=False,
        race_id=None,
    )


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> _Reads:
    fake = _Reads()
    monkeypatch.setattr(repository, "live_games", fake)
    return fake


def _pages(presence: _Presence, seconds: float = 60.0) -> LivePages:
    return LivePages(_Database(), presence, WINDOW, seconds=seconds)  # type: ignore[arg-type]


async def test_asks_while_a_read_is_in_flight_share_it(reads: _Reads) -> None:
    reads.delay = 0.05
    pages = _pages(_Presence())
    answers = await asyncio.gather(*(pages.page(None, 21) for _ in range(50)))
    assert reads.count == 1
    assert all(answer == answers[0] for answer in answers) and len(answers[0]) == 21


async def test_a_fresh_read_answers_later_asks_and_an_old_one_is_read_again(reads: _Reads) -> None:
    pages = _pages(_Presence(), seconds=0.05)
    first = await pages.page(None, 5)
    assert await pages.page(None, 5) == first and reads.count == 1
    await asyncio.sleep(0.06)
    assert await pages.page(None, 5) != first and reads.count == 2


async def test_each_page_is_a_read_of_its_own(reads: _Reads) -> None:
    pages = _pages(_Presence())
    cursor = (AT, "g1-4")
    await asyncio.gather(pages.page(None, 5), pages.page(None, 11), pages.page(cursor, 5))
    assert reads.count == 3


async def test_a_change_of_the_rooms_is_read_again(reads: _Reads) -> None:
    """A game just dealt (or left) on this process shows in the next ask, fresh or not."""
    presence = _Presence()
    pages = _pages(presence)
    first = await pages.page(None, 5)
    presence.changes += 1
    assert await pages.page(None, 5) != first and reads.count == 2


async def test_a_failed_read_fails_its_askers_and_is_not_kept(reads: _Reads) -> None:
    reads.delay, reads.failing = 0.02, True
    pages = _pages(_Presence())
    outcomes = await asyncio.gather(pages.page(None, 5), pages.page(None, 5), return_exceptions=True)
    assert all(isinstance(outcome, StorageUnavailable) for outcome in outcomes) and reads.count == 1
    reads.failing = False
    assert len(await pages.page(None, 5)) == 5 and reads.count == 2


async def test_an_asker_that_goes_away_does_not_cancel_the_read(reads: _Reads) -> None:
    reads.delay = 0.05
    pages = _pages(_Presence())
    leaving = asyncio.ensure_future(pages.page(None, 5))
    staying = asyncio.ensure_future(pages.page(None, 5))
    await asyncio.sleep(0.01)
    leaving.cancel()
    assert len(await staying) == 5 and reads.count == 1


async def test_the_pages_kept_are_bounded(reads: _Reads) -> None:
    """Distinct cursors each cost a read, as before, but never more memory than PAGES_KEPT reads:
    a page asked for beyond them is read and not kept, and once they are stale they make room."""
    pages = _pages(_Presence(), seconds=0.5)
    cursors = [(AT, f"g{index}") for index in range(PAGES_KEPT + 10)]
    for cursor in cursors:
        await pages.page(cursor, 1)
    assert reads.count == PAGES_KEPT + 10
    await pages.page(cursors[0], 1)  # kept: no read
    await pages.page(cursors[-1], 1)  # not kept: read again
    assert reads.count == PAGES_KEPT + 11
    await asyncio.sleep(0.55)  # every read stale now
    await pages.page(cursors[-1], 1)
    await pages.page(cursors[-1], 1)  # the stale ones made room: this one was kept
    assert reads.count == PAGES_KEPT + 12
