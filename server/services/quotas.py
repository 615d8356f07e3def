"""Quotas on games: new games per player and per source address in a time window, a cap on
unfinished games per player, and the expiry of games left idle.

`NewGames` meters ``new_game`` before it costs anything: a loop of new_game, hint, resign from a
few connections makes a write, a read and a game in memory per loop, and the other players' moves
wait behind them. A player may start ``per_player`` games a minute and the players of one
address ``per_address``, a quarter of either at once; past that ``new_game`` is ``rate_limited``.

A player keeps at most ``max_unfinished_games_per_player`` unfinished games. Starting one more
abandons the least recently active ones no connection here has open (and none played in the last
two sweep intervals, which may be open on another node); when every one of them is, ``new_game`` is refused
with ``rate_limited``. The player's unfinished games are read only when its remembered room has run
out or lapsed (``COUNT_MEMORY``): a read finds how many more games fit under the cap, and the new
games after it take from that room without a read (a new_game loop would otherwise read them at
every game). Games that end only leave more room than remembered; games started where this process does
not count them (another node, a race's seats) may pass the cap by what starts within the memory,
until the next read abandons them. Every ``sweep_interval`` the sweeper abandons the unfinished games idle (by
``games.active_at``, which every commit of an action keeps current) for longer than ``abandon_after``,
but those open on this node. Abandoned games are stored, marked ``abandoned`` through the node's one
write pipeline (`server.storage.committer`), gone from ``welcome`` and never counted
(``server.storage.unfinished``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from protocol.limits import MAX_PAGE_SIZE
from server.clock import utc_now
from server.cursors import parse_time_cursor, time_cursor
from server.errors import ErrorCode, Refusal
from server.play.driver import RoomDriver
from server.ratelimit import BucketsByKey
from server.storage import Database
from server.storage import unfinished as storage
from server.storage.committer import AbandonGames, Committer

__all__ = ["NewGames", "UnfinishedGames"]

logger = logging.getLogger(__name__)

SWEEP_INTERVAL = 60.0
"""Seconds between sweeps at most (a quarter of ``abandon_after`` when that is shorter)."""
EXPIRY_BATCH = 1000
FULL_MEMORY = 1.0
"""Seconds a player refused at the cap is refused again without reading its games."""
COUNT_MEMORY = 60.0
"""Seconds the room a read of a player's unfinished games found under the cap is remembered."""
_REMEMBERED = 10_000  # players remembered (full, or their room) before the lapsed ones are forgotten


def _per_minute(per_minute: int | None, clock: Callable[[], float]) -> BucketsByKey | None:
    """Buckets of ``per_minute`` a minute, a quarter of it at once (None: no quota)."""
    return None if per_minute is None else BucketsByKey(per_minute / 60, per_minute // 4, clock)


class NewGames:
    """Owns the new-game quotas of one process: a token bucket per player and per source address,
    refilled at ``per_minute / 60`` a second, holding a quarter of a minute's games (None: no quota)."""

    def __init__(
        self, *, per_player: int | None, per_address: int | None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._per_player = per_player
        self._per_address = per_address
        self._players = _per_minute(per_player, clock)
        self._addresses = _per_minute(per_address, clock)

    def check(self, player_id: str, address: str) -> None:
        """Count one new game of ``player_id`` from ``address``.

        Raises:
            Refusal: rate_limited, when the address or the player has started its share of games.
        """
        if self._addresses is not None and not self._addresses.allow(address):
            raise Refusal(
                ErrorCode.RATE_LIMITED,
                f"your address started more than {self._per_address} games a minute; retry in a few seconds",
            )
        if self._players is not None and not self._players.allow(player_id):
            raise Refusal(
                ErrorCode.RATE_LIMITED,
                f"you started more than {self._per_player} games a minute; retry in a few seconds",
            )


class UnfinishedGames:
    """Owns the unfinished-games quotas of one node."""

    def __init__(
        self,
        database: Database,
        committer: Committer,
        open_rooms: Callable[[], Iterable[RoomDriver[Any]]],
        *,
        per_player: int | None,
        abandon_after: float | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``open_rooms()``: the games open on this node now (the room registry's)."""
        self._database = database
        self._committer = committer  # the abandoned marks go through the one write pipeline
        self._rooms = open_rooms
        self._per_player = per_player
        self._abandon_after = abandon_after
        self._clock = clock
        self._full: dict[str, float] = {}  # player -> until when new_game is refused at once
        self._room: dict[str, tuple[int, float]] = {}  # player -> (new games that fit, until when)
        self.sweep_interval = min(SWEEP_INTERVAL, abandon_after / 4) if abandon_after else SWEEP_INTERVAL

    def _open_ids(self) -> set[str]:
        return {room.id for room in self._rooms()}

    @staticmethod
    async def page(
        conn: AsyncConnection, player_id: str, limit: int, after: str | None = None
    ) -> tuple[list[str], str | None]:
        """A page of a player's unfinished games, most recently started first (welcome's list, and
        the ``games`` request's pages), and the cursor of the next page when there is one.

        Raises:
            Refusal: bad_request, for a cursor this server did not make.
        """
        limit = min(limit, MAX_PAGE_SIZE)
        before = None if after is None else parse_time_cursor(after, "games")
        found = await storage.recent_unfinished_games(conn, player_id, limit + 1, before)
        page = found[:limit]
        next_cursor = time_cursor(page[-1].started_at, page[-1].id) if len(found) > limit else None
        return [game.id for game in page], next_cursor

    async def make_room(self, player_id: str) -> None:
        """Before a new game of ``player_id``: abandon its least recently active unfinished games
        beyond the cap.

        Raises:
            Refusal: rate_limited, when every game over the cap is open or was active just now.
        """
        cap = self._per_player
        if cap is None:
            return
        now = self._clock()
        if self._full.get(player_id, 0.0) > now:  # refused a moment ago: spare the database
            raise self._refusal(cap)
        if self._take_room(player_id, now):
            return
        async with self._database.connection() as conn:
            games = await storage.player_unfinished_games(conn, player_id)
        excess = len(games) - (cap - 1)
        if excess <= 0:
            self._remember_room(player_id, -excess, now)
            return
        # The rooms open now, with no await between this look and the write's submission: a game
        # opened meanwhile is spared (one opened before the write commits is the narrow race that
        # docs/reliability.md admits: it stays playable in memory, and stays abandoned).
        open_ids = self._open_ids()
        quiet_since = utc_now() - dt.timedelta(seconds=2 * self.sweep_interval)
        idle = [
            game.id for game in reversed(games) if game.id not in open_ids and game.active_at < quiet_since
        ]
        if len(idle) < excess:
            self._remember_full(player_id, now)
            raise self._refusal(cap)
        await self._committer.stored(AbandonGames(tuple(idle[:excess])))
        logger.info("player %s over %d unfinished games: abandoned %s", player_id, cap, idle[:excess])

    @staticmethod
    def _refusal(cap: int) -> Refusal:
        return Refusal(
            ErrorCode.RATE_LIMITED, f"at most {cap} unfinished games per player: finish or resign one first"
        )

    def _remember_full(self, player_id: str, now: float) -> None:
        """A player at the cap with nothing to abandon is refused without a query for
        ``FULL_MEMORY`` seconds (a new_game loop would otherwise read its games each time)."""
        if len(self._full) > _REMEMBERED:  # bounded: forget the ones that lapsed
            self._full = {player: until for player, until in self._full.items() if until > now}
        self._full[player_id] = now + FULL_MEMORY

    def known(self, player_id: str, unfinished: int) -> None:
        """``player_id`` has ``unfinished`` unfinished games, as a read just found (its ``hello``: a
        new guest has none, a returning player's welcome lists all of them when they fit on its one
        page): its next new games need no read of their own."""
        if self._per_player is not None:
            self._remember_room(player_id, self._per_player - unfinished, self._clock())

    def _take_room(self, player_id: str, now: float) -> bool:
        """Whether a new game of ``player_id`` fits in the room its last read found (taking it)."""
        room, until = self._room.get(player_id, (0, 0.0))
        if room <= 0 or until <= now:
            return False
        self._room[player_id] = (room - 1, until)
        return True

    def _remember_room(self, player_id: str, room: int, now: float) -> None:
        """``room`` more new games of ``player_id`` fit under the cap, for ``COUNT_MEMORY`` seconds."""
        if len(self._room) > _REMEMBERED:
            self._room = {player: kept for player, kept in self._room.items() if kept[1] > now}
        if room > 0:
            self._room[player_id] = (room, now + COUNT_MEMORY)
        else:
            self._room.pop(player_id, None)

    async def sweep(self, now: dt.datetime | None = None) -> int:
        """Abandon the idle unfinished games no connection here has open (through the write pipeline:
        those still unfinished when it commits); returns how many were marked."""
        if self._abandon_after is None:
            return 0
        now = now or utc_now()
        idle_since = now - dt.timedelta(seconds=self._abandon_after)
        async with self._database.connection() as conn:
            idle = await storage.idle_games(conn, idle_since, EXPIRY_BATCH)
        open_ids = self._open_ids()  # as they are now, just before the write (see make_room)
        abandoned = tuple(game for game in idle if game not in open_ids)
        if abandoned:
            await self._committer.stored(AbandonGames(abandoned))
            logger.info("abandoned %d unfinished games idle since %s", len(abandoned), idle_since.isoformat())
        return len(abandoned)

    async def sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_interval)
            try:
                await self.sweep()
            except Exception:
                logger.exception("the unfinished-games sweep failed; retrying at the next one")
