"""The ``live`` list's pages, read from the database at most once per ``LIVE_PAGE_SECONDS`` per page
and process, whoever asks.

Every client with the live list on screen asks for it again every few seconds (the browser client
every 3 s), and a page costs the event loop milliseconds of database round trips: four connections
asking as fast as the rate limit lets them would take two thirds of the server's core unshared
(bench_attacks ``live``), and a thousand open lobbies would do the same. The list is the picture of a
moment anyway (a game's figures lag by up to ``server.play.game_room.FIGURES_INTERVAL``), so a page
read is shared by everyone who asks for that page within ``LIVE_PAGE_SECONDS`` (short enough that a
game closed on another node still leaves every list within the second the web client promises), and
those who ask while it is being read wait for that one read. A change of this process's rooms (a game dealt, a
room left) is a fresh read: a player sees their new game at once. What is sealed depends on who
asks, so that stays per request (`server.services.fair_play.FairPlay.sealed_live`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass
from typing import Final

from server.clock import utc_now
from server.play.presence import Presence
from server.storage import Database, LiveGame, repository

__all__ = ["LIVE_PAGE_SECONDS", "LivePages"]

#: How long one read of a page answers everyone who asks for it: four reads a second per page and
#: process, whatever the number of askers.
LIVE_PAGE_SECONDS: Final = 0.25
#: Pages remembered at most (each distinct cursor and size is a page): past it, the stale ones go.
PAGES_KEPT: Final = 64

#: A page: where it starts (None: the first) and how many games it holds at most.
_PageKey = tuple[tuple[dt.datetime, str] | None, int]


@dataclass(slots=True)
class _Read:
    """One read of a page from the database, shared by everyone who asks for it while it is fresh."""

    games: asyncio.Future[list[LiveGame]]
    started: float  # the event loop's clock when it began
    rooms: int  # `Presence.changes` when it began

    def is_fresh(self, now: float, rooms: int, seconds: float) -> bool:
        failed = self.games.done() and self.games.exception() is not None
        return not failed and rooms == self.rooms and now - self.started < seconds


class LivePages:
    """Owns the recent reads of ``live`` pages; shared by every connection of the process."""

    def __init__(
        self,
        database: Database,
        presence: Presence,
        window: dt.timedelta,
        *,
        seconds: float = LIVE_PAGE_SECONDS,
    ) -> None:
        self._database = database
        self._presence = presence
        self._window = window  # how recent a game's last action must be to be listed
        self._seconds = seconds
        self._reads: dict[_PageKey, _Read] = {}

    async def page(self, after: tuple[dt.datetime, str] | None, limit: int) -> list[LiveGame]:
        """Up to ``limit`` games being followed, most recently active first, after the game ``after``
        (``repository.live_games``), as read at most ``LIVE_PAGE_SECONDS`` ago and since this process's
        rooms last changed.

        Raises:
            StorageUnavailable: the database could not be read (the next ask reads again).
        """
        await self._presence.flushed()  # this process's rooms as of now (a game just dealt)
        key = (after, limit)
        now = asyncio.get_running_loop().time()
        read = self._reads.get(key)
        if read is None or not read.is_fresh(now, self._presence.changes, self._seconds):
            read = self._begin(key, now)
        return list(await asyncio.shield(read.games))

    def _begin(self, key: _PageKey, now: float) -> _Read:
        if len(self._reads) >= PAGES_KEPT:
            self._forget_stale(now)
        games = asyncio.ensure_future(self._fetch(*key))
        games.add_done_callback(_retrieved)  # a read nobody waits for any more fails quietly
        read = _Read(games, now, self._presence.changes)
        if len(self._reads) < PAGES_KEPT:  # else as many pages were asked for this instant: not kept
            self._reads[key] = read
        return read

    def _forget_stale(self, now: float) -> None:
        rooms = self._presence.changes
        for key, read in list(self._reads.items()):
            if read.games.done() and not read.is_fresh(now, rooms, self._seconds):
                del self._reads[key]

    async def _fetch(self, after: tuple[dt.datetime, str] | None, limit: int) -> list[LiveGame]:
        async with self._database.connection() as conn:
            return await repository.live_games(
                conn, active_since=utc_now() - self._window, after=after, limit=limit
            )


def _retrieved(read: asyncio.Future[list[LiveGame]]) -> None:
    if not read.cancelled():
        read.exception()
