"""Quotas on unfinished games: a cap per player, and the expiry of games left idle.

A player keeps at most ``max_unfinished_games_per_player`` unfinished games. Starting one more
abandons the least recently active ones no connection has open (and none seen active in the last
two sweeps, which may be open on another node); when every one of them is, ``new_game`` is refused
with ``rate_limited``. Every ``sweep_interval`` the sweeper notes the games open on this node as
active, and abandons unfinished games idle for longer than ``abandon_after``. Abandoned games are
stored, marked ``abandoned``, gone from ``welcome`` and never counted (``server.storage.unfinished``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable, Iterable

from sqlalchemy.ext.asyncio import AsyncConnection

from server.hub import GameRoom, Refusal, utc_now
from server.storage import Database
from server.storage import unfinished as storage

__all__ = ["UnfinishedGames"]

logger = logging.getLogger(__name__)

SWEEP_INTERVAL = 60.0
"""Seconds between sweeps at most (a quarter of ``abandon_after`` when that is shorter)."""
EXPIRY_BATCH = 1000


class UnfinishedGames:
    """Owns the unfinished-games quotas of one node."""

    def __init__(
        self,
        database: Database,
        open_rooms: Callable[[], Iterable[GameRoom]],
        *,
        per_player: int | None,
        abandon_after: float | None,
    ) -> None:
        """``open_rooms()``: the games open on this node now (the hub's rooms)."""
        self._database = database
        self._rooms = open_rooms
        self._per_player = per_player
        self._abandon_after = abandon_after
        self.sweep_interval = min(SWEEP_INTERVAL, abandon_after / 4) if abandon_after else SWEEP_INTERVAL

    def _open_ids(self) -> set[str]:
        return {room.id for room in self._rooms()}

    @staticmethod
    async def recent(conn: AsyncConnection, player_id: str, limit: int) -> list[str]:
        """The ids of a player's ``limit`` most recently started unfinished games (welcome's list)."""
        return [game.id for game in await storage.recent_unfinished_games(conn, player_id, limit)]

    async def make_room(self, player_id: str) -> None:
        """Before a new game of ``player_id``: abandon its least recently active unfinished games
        beyond the cap.

        Raises:
            Refusal: rate_limited, when every game over the cap is open or was active just now.
        """
        cap = self._per_player
        if cap is None:
            return
        async with self._database.connection() as conn:
            games = await storage.player_unfinished_games(conn, player_id)
        excess = len(games) - (cap - 1)
        if excess <= 0:
            return
        open_ids = self._open_ids()
        quiet_since = utc_now() - dt.timedelta(seconds=2 * self.sweep_interval)
        idle = [
            game.id for game in reversed(games) if game.id not in open_ids and game.active_at < quiet_since
        ]
        if len(idle) < excess:
            raise Refusal(
                "rate_limited", f"at most {cap} unfinished games per player: finish or resign one first"
            )
        async with self._database.transaction() as conn:
            await storage.abandon_games(conn, idle[:excess])
        logger.info("player %s over %d unfinished games: abandoned %s", player_id, cap, idle[:excess])

    async def sweep(self, now: dt.datetime | None = None) -> int:
        """Note open games as active, abandon idle ones; returns how many were abandoned."""
        now = now or utc_now()
        open_ids = self._open_ids()
        async with self._database.transaction() as conn:
            await storage.touch_games(conn, sorted(open_ids), now)
            if self._abandon_after is None:
                return 0
            idle_since = now - dt.timedelta(seconds=self._abandon_after)
            idle = await storage.idle_games(conn, idle_since, EXPIRY_BATCH)
            abandoned = await storage.abandon_games(conn, [game for game in idle if game not in open_ids])
        if abandoned:
            logger.info("abandoned %d unfinished games idle since %s", abandoned, idle_since.isoformat())
        return abandoned

    async def sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_interval)
            try:
                await self.sweep()
            except Exception:
                logger.exception("the unfinished-games sweep failed; retrying at the next one")
