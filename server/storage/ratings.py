"""Ratings as stored: each player's rating per variant, and what every race did to it.

None of these functions commits. `store_rating_changes` runs in the transaction that stores a race's
result (`StoreRatings` in `server.storage.commit_backends`), so a race's result and its rating
changes commit together or not at all. The ratings a race is computed from may be read earlier
(`load_ratings`, on any connection): a change is stored only onto the very rating it was computed
from (a stored row's ``races`` is its version), so two races finishing at once with one player in
both can't both apply theirs; the loser of that race gets False (the commit's `WriteConflict`), reads
the ratings again and computes anew.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import func, insert, literal, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncConnection

from server.storage.records import RatedRace, Rating, RatingChange
from server.storage.tables import players, race_rating_changes, race_seats, races, ratings

__all__ = [
    "load_race_rating_changes",
    "load_ratings",
    "networks_met",
    "player_ratings",
    "rated_networks_since",
    "rated_races_after",
    "rating_histories_after",
    "store_rating_changes",
]


async def load_ratings(conn: AsyncConnection, cells: int, player_ids: Iterable[str]) -> dict[str, Rating]:
    """The stored ratings of ``player_ids`` in variant ``cells``; a player with no rated race there has
    none (a newcomer: `server.play.race.ratings.NEWCOMER`)."""
    wanted = sorted(set(player_ids))
    if not wanted:
        return {}
    rows = await conn.execute(
        select(ratings.c.player_id, ratings.c.mu, ratings.c.sigma, ratings.c.races).where(
            ratings.c.cells == cells, ratings.c.player_id.in_(wanted)
        )
    )
    return {row.player_id: Rating(row.mu, row.sigma, row.races) for row in rows}


async def rated_networks_since(
    conn: AsyncConnection, networks: Iterable[str], since: dt.datetime
) -> list[list[str]]:
    """For each race rated at or after ``since`` in which one of ``networks`` had a rated seat, those
    of ``networks`` that had one (what `server.play.race.ratings.meetings_of` counts).

    On PostgreSQL the transaction first takes a lock per network (in one order: no deadlock), held to
    its end, so that two races of the same networks finishing at once on two nodes are rated one
    after the other, the second seeing the first's meeting; SQLite's one writer does so already.
    """
    wanted = sorted(set(networks))
    if not wanted:
        return []
    if conn.dialect.name == "postgresql":
        for network in wanted:
            await conn.execute(select(func.pg_advisory_xact_lock(int(network[:15], 16))))
    rows = await conn.execute(
        select(race_seats.c.race_id, race_seats.c.network)
        .join(
            race_rating_changes,
            (race_rating_changes.c.race_id == race_seats.c.race_id)
            & (race_rating_changes.c.player_id == race_seats.c.player_id),
        )
        .where(race_seats.c.network.in_(wanted), race_rating_changes.c.at >= since)
    )
    by_race: dict[str, list[str]] = {}
    for row in rows:
        by_race.setdefault(row.race_id, []).append(row.network)
    return list(by_race.values())


async def networks_met(conn: AsyncConnection, player_ids: Iterable[str], enough: int) -> dict[str, int]:
    """How many networks other than their own ``player_ids`` finished races against (people's seats
    only, up to ``enough``): stored per player, counted again and stored for a player below
    ``enough`` (the race being finished in this transaction counts). Bots have none."""
    wanted = sorted(set(player_ids))
    if not wanted:
        return {}
    rows = await conn.execute(
        select(players.c.id, players.c.networks_met).where(players.c.id.in_(wanted), players.c.bot.is_(False))
    )
    met = {row.id: row.networks_met for row in rows}
    for player_id, stored in met.items():
        if stored < enough:
            counted = await _count_networks_met(conn, player_id, enough)
            if counted > stored:
                await conn.execute(
                    update(players).where(players.c.id == player_id).values(networks_met=counted)
                )
                met[player_id] = counted
    return met


async def _count_networks_met(conn: AsyncConnection, player_id: str, enough: int) -> int:
    mine, theirs = race_seats.alias("mine"), race_seats.alias("theirs")
    rivals = (
        select(theirs.c.network)
        .select_from(mine)
        .join(races, (races.c.id == mine.c.race_id) & (races.c.state == "finished"))
        .join(theirs, (theirs.c.race_id == mine.c.race_id) & (theirs.c.player_id != player_id))
        .join(players, (players.c.id == theirs.c.player_id) & players.c.bot.is_(False))
        .where(
            mine.c.player_id == player_id,
            theirs.c.network.is_not(None),
            (mine.c.network.is_(None)) | (theirs.c.network != mine.c.network),
        )
        .distinct()
        .limit(enough)
        .subquery()
    )
    return int(await conn.scalar(select(func.count()).select_from(rivals)) or 0)


async def store_rating_changes(conn: AsyncConnection, race: RatedRace) -> bool:
    """Apply a race's rating changes and keep them, each onto the rating it was computed from.

    Rows are written in player order, so that two transactions touching the same players take their
    locks in one order (no deadlock on PostgreSQL).

    Returns:
        True when every change was applied; False when a player's stored rating is no longer the
        change's ``before`` (another race came first): the caller must let the transaction roll back,
        read the ratings again and rate the race anew.

    Raises:
        sqlalchemy.exc.IntegrityError: the race was already rated, a newcomer's row already exists
            (another race came first), or a player does not exist. Let it roll the transaction back.
    """
    if not race.changes:
        return True
    await conn.execute(insert(race_rating_changes), [_change_row(race, change) for change in race.changes])
    for change in sorted(race.changes, key=lambda change: change.player_id):
        values = _rating_values(change.after, race.at)
        if change.before.races == 0:
            await conn.execute(insert(ratings).values(player_id=change.player_id, cells=race.cells, **values))
            continue
        updated = await conn.execute(
            update(ratings)
            .where(
                ratings.c.player_id == change.player_id,
                ratings.c.cells == race.cells,
                ratings.c.races == change.before.races,
            )
            .values(**values)
        )
        if updated.rowcount != 1:
            return False
    return True


def _rating_values(rating: Rating, at: dt.datetime) -> dict[str, Any]:
    return {
        "mu": rating.mu,
        "sigma": rating.sigma,
        "races": rating.races,
        "sort_key": -rating.display,
        "updated_at": at,
    }


def _change_row(race: RatedRace, change: RatingChange) -> Mapping[str, Any]:
    return {
        "race_id": race.race_id,
        "player_id": change.player_id,
        "cells": race.cells,
        "place": change.place,
        "mu_before": change.before.mu,
        "sigma_before": change.before.sigma,
        "races_before": change.before.races,
        "mu_after": change.after.mu,
        "sigma_after": change.after.sigma,
        "at": race.at,
    }


async def load_race_rating_changes(conn: AsyncConnection, race_id: str) -> RatedRace | None:
    """What race ``race_id`` did to ratings, as stored (changes by place, then player); None when it
    changed none (not rated, not finished, or fewer than two rated players)."""
    rows = (
        await conn.execute(
            select(race_rating_changes)
            .where(race_rating_changes.c.race_id == race_id)
            .order_by(race_rating_changes.c.place, race_rating_changes.c.player_id)
        )
    ).all()
    if not rows:
        return None
    changes = tuple(map(_stored_change, rows))
    return RatedRace(race_id=race_id, cells=rows[0].cells, changes=changes, at=rows[0].at)


async def player_ratings(conn: AsyncConnection, player_id: str) -> dict[int, Rating]:
    """A player's ratings by variant (cells), for its profile; a variant never raced rated is absent."""
    rows = await conn.execute(
        select(ratings.c.cells, ratings.c.mu, ratings.c.sigma, ratings.c.races).where(
            ratings.c.player_id == player_id
        )
    )
    return {row.cells: Rating(row.mu, row.sigma, row.races) for row in rows}


def _stored_change(row: Any) -> RatingChange:
    return RatingChange(
        player_id=row.player_id,
        place=row.place,
        before=Rating(row.mu_before, row.sigma_before, row.races_before),
        after=Rating(row.mu_after, row.sigma_after, row.races_before + 1),
    )


async def rated_races_after(conn: AsyncConnection, after: str | None, limit: int) -> list[RatedRace]:
    """Up to ``limit`` rated races with all their changes, in race id order after ``after`` (from the
    first when None): a keyset walk for ``eightoff verify``. Read it on `Database.snapshot`."""
    ids = (
        select(race_rating_changes.c.race_id).distinct().order_by(race_rating_changes.c.race_id).limit(limit)
    )
    if after is not None:
        ids = ids.where(race_rating_changes.c.race_id > after)
    race_ids = list(await conn.scalars(ids))
    if not race_ids:
        return []
    rows = await conn.execute(
        select(race_rating_changes)
        .where(race_rating_changes.c.race_id.in_(race_ids))
        .order_by(race_rating_changes.c.race_id, race_rating_changes.c.place, race_rating_changes.c.player_id)
    )
    races: dict[str, RatedRace] = {}
    for row in rows:
        race = races.get(row.race_id) or RatedRace(row.race_id, row.cells, (), row.at)
        races[row.race_id] = RatedRace(
            race.race_id, race.cells, (*race.changes, _stored_change(row)), race.at
        )
    return [races[race_id] for race_id in race_ids]


async def rating_histories_after(
    conn: AsyncConnection, after: tuple[str, int] | None, limit: int
) -> list[tuple[str, int, Rating | None, tuple[RatingChange, ...]]]:
    """Up to ``limit`` (player, cells) pairs that have a rating or a change, in (player, cells) order
    after ``after``: each with its stored rating (None: no row) and its changes by ``races_before``.
    A keyset walk for ``eightoff verify``. Read it on `Database.snapshot`."""
    keys = (
        select(ratings.c.player_id, ratings.c.cells)
        .union(select(race_rating_changes.c.player_id, race_rating_changes.c.cells))
        .subquery()
    )
    page = select(keys.c.player_id, keys.c.cells).order_by(keys.c.player_id, keys.c.cells).limit(limit)
    if after is not None:
        page = page.where(
            tuple_(keys.c.player_id, keys.c.cells) > tuple_(literal(after[0]), literal(after[1]))
        )
    wanted = [(row.player_id, row.cells) for row in await conn.execute(page)]
    if not wanted:
        return []
    players = sorted({player for player, _ in wanted})
    stored = {
        (row.player_id, row.cells): Rating(row.mu, row.sigma, row.races)
        for row in await conn.execute(select(ratings).where(ratings.c.player_id.in_(players)))
    }
    changes: dict[tuple[str, int], list[RatingChange]] = {}
    for row in await conn.execute(
        select(race_rating_changes)
        .where(race_rating_changes.c.player_id.in_(players))
        .order_by(
            race_rating_changes.c.player_id, race_rating_changes.c.cells, race_rating_changes.c.races_before
        )
    ):
        changes.setdefault((row.player_id, row.cells), []).append(_stored_change(row))
    return [
        (player, cells, stored.get((player, cells)), tuple(changes.get((player, cells), ())))
        for player, cells in wanted
    ]
