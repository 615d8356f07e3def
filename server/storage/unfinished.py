"""Unfinished games: a player's most recent ones page by page, when each was last active, and the
abandonment of those left idle or over a player's cap.

An abandoned game keeps its row and its actions, with status ``abandoned`` and no figures nor
``finished_at``: no list of unfinished games shows it, and no board or profile counts it. None of
these functions commits: the caller owns the transaction.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

from sqlalchemy import ColumnElement, and_, func, or_, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncConnection

from server.storage.tables import games

__all__ = [
    "ABANDONED",
    "UnfinishedGame",
    "abandon_games",
    "idle_games",
    "player_unfinished_games",
    "recent_unfinished_games",
]

ABANDONED: Final = "abandoned"
_PLAYING: Final = "playing"
_CHUNK: Final = 500  # ids per IN (...): well under every driver's parameter limit


@dataclass(frozen=True, slots=True)
class UnfinishedGame:
    id: str
    started_at: dt.datetime
    active_at: dt.datetime  # started_at when never touched since


def _last_active() -> ColumnElement[dt.datetime]:
    return func.coalesce(games.c.active_at, games.c.started_at)


async def recent_unfinished_games(
    conn: AsyncConnection, player_id: str, limit: int, before: tuple[dt.datetime, str] | None = None
) -> list[UnfinishedGame]:
    """Up to ``limit`` of a player's unfinished games, most recently started first, after the
    (started_at, id) key ``before`` of the previous page when given."""
    statement = (
        select(games.c.id, games.c.started_at, games.c.active_at)
        .where(games.c.player_id == player_id, games.c.status == _PLAYING)
        .order_by(games.c.started_at.desc(), games.c.id.desc())
        .limit(limit)
    )
    if before is not None:
        statement = statement.where(tuple_(games.c.started_at, games.c.id) < tuple_(*before))
    rows = await conn.execute(statement)
    return [UnfinishedGame(row.id, row.started_at, row.active_at or row.started_at) for row in rows]


async def player_unfinished_games(conn: AsyncConnection, player_id: str) -> list[UnfinishedGame]:
    """Every unfinished game of a player (bounded by the server's cap), most recently active first."""
    rows = await conn.execute(
        select(games.c.id, games.c.started_at, games.c.active_at)
        .where(games.c.player_id == player_id, games.c.status == _PLAYING)
        .order_by(_last_active().desc(), games.c.id.desc())
    )
    return [UnfinishedGame(row.id, row.started_at, row.active_at or row.started_at) for row in rows]


async def idle_games(conn: AsyncConnection, idle_since: dt.datetime, limit: int) -> list[str]:
    """Up to ``limit`` unfinished games last active before ``idle_since``, least recent first."""
    ids = await conn.scalars(
        select(games.c.id)
        .where(
            games.c.status == _PLAYING,
            or_(
                games.c.active_at < idle_since,
                and_(games.c.active_at.is_(None), games.c.started_at < idle_since),
            ),
        )
        .limit(limit)
    )
    return list(ids)


async def abandon_games(conn: AsyncConnection, game_ids: Collection[str]) -> int:
    """Mark these games abandoned (those still unfinished); returns how many were."""
    ids = list(game_ids)
    done = 0
    for start in range(0, len(ids), _CHUNK):
        result = await conn.execute(
            update(games)
            .where(games.c.id.in_(ids[start : start + _CHUNK]), games.c.status == _PLAYING)
            .values(status=ABANDONED)
        )
        done += result.rowcount
    return done
