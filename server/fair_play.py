"""The sealing of shared deals (`server.sealing`) applied to requests: the database lookups it needs
and the refusals it makes. The request layer calls one method per hook: before a ``watch``, before a
daily ``new_game``, and over a ``live`` page.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncConnection

from protocol.timestamps import format_timestamp
from server.errors import ErrorCode, Refusal
from server.sealing import NOT_PLAYED, SharedDeal, Standing, may_start, seal
from server.storage import Database, LiveGame, repository

__all__ = ["FairPlay"]


class FairPlay:
    """Owned by the request handler; reads the database only for games of a daily challenge."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def check_watch(self, viewer: str, game_id: str, now: dt.datetime) -> None:
        """Refuse ``viewer`` the moves of ``game_id`` while they are sealed to them. A game of no daily
        (or no game at all: `find` says not_found) costs one read by primary key.

        Raises:
            Refusal: ``forbidden``, saying when the game opens to the viewer.
            StorageUnavailable: the database cannot be read.
        """
        async with self._database.connection() as conn:
            daily = await repository.game_daily(conn, game_id)
            if daily is None or daily.player_id == viewer:
                return
            standing = await _standing(conn, viewer, daily.day, daily.cells)
        sealed = seal(
            SharedDeal.daily(daily.day, daily.cells),
            viewer=viewer,
            owner=daily.player_id,
            standing=standing,
            now=now,
        )
        if sealed is not None:
            raise Refusal(ErrorCode.FORBIDDEN, sealed.message(game_id))

    async def check_daily_start(self, player: str, day: dt.date, cells: int, now: dt.datetime) -> None:
        """Refuse a second daily game once ``player`` has finished ``day``'s daily in ``cells``' variant:
        by then everyone's moves on it are open to them.

        Raises:
            Refusal: ``forbidden``. StorageUnavailable: the database cannot be read.
        """
        deal = SharedDeal.daily(day, cells)
        async with self._database.connection() as conn:
            standing = await _standing(conn, player, day, cells)
        if not may_start(deal, standing, now):
            raise Refusal(
                ErrorCode.FORBIDDEN,
                f"you have finished {deal.name}; the next daily opens at {format_timestamp(deal.closes_at)}",
            )

    @staticmethod
    async def sealed_live(
        conn: AsyncConnection, viewer: str, page: Sequence[LiveGame], now: dt.datetime
    ) -> frozenset[str]:
        """The games of a ``live`` page whose moves are sealed to ``viewer``: at most one more read,
        for the viewer's own games of the page's daily challenges."""
        days = {game.daily_date for game in page if game.daily_date is not None and game.player_id != viewer}
        if not days:
            return frozenset()
        standings = {
            (found.day, found.cells): Standing(found.finished, found.playing)
            for found in await repository.daily_standings(conn, viewer, days)
        }
        return frozenset(
            game.id
            for game in page
            if game.daily_date is not None
            and seal(
                SharedDeal.daily(game.daily_date, game.cells),
                viewer=viewer,
                owner=game.player_id,
                standing=standings.get((game.daily_date, game.cells), NOT_PLAYED),
                now=now,
            )
            is not None
        )


async def _standing(conn: AsyncConnection, player: str, day: dt.date, cells: int) -> Standing:
    for found in await repository.daily_standings(conn, player, [day]):
        if found.cells == cells:
            return Standing(found.finished, found.playing)
    return NOT_PLAYED
