"""The sealing of shared deals (`server.services.sealing`) applied to requests: the database lookups it needs
and the refusals it makes. The request layer calls one method per hook: before a ``watch``, before a
daily ``new_game``, and over a ``live`` page.
"""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from collections.abc import Sequence
from typing import Final

from sqlalchemy.ext.asyncio import AsyncConnection

from protocol.timestamps import format_timestamp
from server.errors import ErrorCode, Refusal
from server.services.sealing import NOT_PLAYED, SharedDeal, Standing, may_start, seal
from server.storage import Database, GameDaily, LiveGame, races, repository

__all__ = ["FairPlay"]

#: Games whose daily (or none) is remembered: a few hundred bytes each.
GAMES_REMEMBERED: Final = 8192


class FairPlay:
    """Owned by the request handler. What daily a game plays never changes, so it is read once per
    game (then remembered, the most recently asked first); what the viewer has played of a daily is
    read each time, and only for another player's daily game."""

    def __init__(self, database: Database) -> None:
        self._database = database
        self._dailies: OrderedDict[str, GameDaily] = OrderedDict()

    async def check_watch(self, viewer: str, game_id: str, now: dt.datetime) -> None:
        """Refuse ``viewer`` the moves of ``game_id`` while they are sealed to them. A game of no daily
        costs one read by primary key the first time; no game at all passes (`find` says not_found).

        Raises:
            Refusal: ``forbidden``, saying when the game opens to the viewer.
            StorageUnavailable: the database cannot be read.
        """
        daily = self._dailies.get(game_id)
        if daily is not None:
            self._dailies.move_to_end(game_id)
        else:
            async with self._database.connection() as conn:
                daily = await repository.game_daily(conn, game_id)
            if daily is None:
                return
            self._remember(game_id, daily)
        if daily.player_id == viewer:
            return
        if daily.race_id is not None:
            await self._check_race_watch(viewer, game_id, daily, now)
        await self.check_racing_deal(viewer, daily.code, f"game {game_id}")
        if daily.day is None or daily.race_id is not None:
            return
        async with self._database.connection() as conn:
            standing = await _standing(conn, viewer, daily.day, daily.cells)
        sealed = seal(
            SharedDeal.daily(daily.day, daily.cells, daily.code),
            viewer=viewer,
            owner=daily.player_id,
            standing=standing,
            now=now,
        )
        if sealed is not None:
            raise Refusal(ErrorCode.FORBIDDEN, sealed.message(game_id))

    async def _check_race_watch(self, viewer: str, game_id: str, daily: GameDaily, now: dt.datetime) -> None:
        """A race seat's game: sealed to everyone else until the race is over. Its seats hold the
        deal (standing: playing) until then, even once their own game is over; the others see its
        boards through the race, late (race_board)."""
        assert daily.race_id is not None
        async with self._database.connection() as conn:
            race = await races.race_seating(conn, daily.race_id)  # the game's race is known: no re-read
        over = race.state in ("finished", "cancelled")
        closes_at = now if over else (race.ends_at or dt.datetime.max.replace(tzinfo=dt.UTC))
        sealed = seal(
            SharedDeal.race(race.race_id, daily.code, closes_at),
            viewer=viewer,
            owner=daily.player_id,
            standing=Standing(playing=not over and viewer in race.player_ids),
            now=now,
        )
        if sealed is not None:
            raise Refusal(
                ErrorCode.FORBIDDEN,
                f"game {game_id} is a seat of race {race.race_id}, not over yet: its moves are sealed;"
                " race_watch the race (boards shown late to spectators)",
            )

    async def check_racing_deal(self, viewer: str, code: str, what: str) -> None:
        """Refuse ``viewer`` another player's moves on deal ``code`` while it races that deal: the seal
        is per deal, not per race (a deal drawn by two races, or played by a friend as an ordinary
        game once the race revealed it, must not show its line to a racer).

        Raises:
            Refusal: ``forbidden``. StorageUnavailable: the database cannot be read.
        """
        async with self._database.connection() as conn:
            racing = await races.racing_deal(conn, viewer, code)
        if racing:
            raise Refusal(
                ErrorCode.FORBIDDEN,
                f"{what}: you are racing deal {code}; other players' moves on it are sealed until your"
                " race is over",
            )

    async def check_daily_start(
        self, player: str, day: dt.date, cells: int, code: str, now: dt.datetime
    ) -> None:
        """Refuse a second daily game once ``player`` has finished ``day``'s daily (deal ``code``) in
        ``cells``' variant: by then everyone's moves on it are open to them.

        Raises:
            Refusal: ``forbidden``. StorageUnavailable: the database cannot be read.
        """
        deal = SharedDeal.daily(day, cells, code)
        async with self._database.connection() as conn:
            standing = await _standing(conn, player, day, cells)
        if not may_start(deal, standing, now):
            raise Refusal(
                ErrorCode.FORBIDDEN,
                f"you have finished {deal.name}; the next daily opens at {format_timestamp(deal.closes_at)}",
            )

    def _remember(self, game_id: str, daily: GameDaily) -> None:
        self._dailies[game_id] = daily
        while len(self._dailies) > GAMES_REMEMBERED:
            self._dailies.popitem(last=False)

    async def sealed_live(self, viewer: str, page: Sequence[LiveGame], now: dt.datetime) -> frozenset[str]:
        """The games of a ``live`` page whose moves are sealed to ``viewer``: no read when the page holds
        no other player's daily or race game, else at most two, for the viewer's own games of the
        page's daily challenges and for the page's races (a race seat's game is sealed to everyone but
        its player until the race is over)."""
        racing = {game.race_id for game in page if game.race_id is not None and game.player_id != viewer}
        days = {game.daily_date for game in page if game.daily_date is not None and game.player_id != viewer}
        if not racing and not days:
            return frozenset()
        async with self._database.connection() as conn:
            running = await races.races_not_over(conn, racing) if racing else frozenset()
            found = await repository.daily_standings(conn, viewer, days) if days else []
        in_race = frozenset(game.id for game in page if game.race_id in running and game.player_id != viewer)
        standings = {(row.day, row.cells): Standing(row.finished, row.playing) for row in found}
        return in_race | frozenset(
            game.id
            for game in page
            if game.daily_date is not None
            and seal(
                SharedDeal.daily(game.daily_date, game.cells, game.code),
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
