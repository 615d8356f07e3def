"""The queries of races: a race stored whole at each change of phase or seats, read back whole.

A race is small (a row and at most eight seats) and written a handful of times in its life, so a
write replaces its seats rather than diffing them. Never commits (the caller's transaction does).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, Row, and_, delete, exists, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from server.storage import repository
from server.storage.records import GameRace, RaceRecord, RaceSeatRecord, RaceWrite
from server.storage.tables import games, players, race_seats, races

__all__ = [
    "RaceConflict",
    "due_race_ids",
    "finished_races_after",
    "game_race",
    "games_of_races",
    "load_race",
    "open_race_ids",
    "race_ends_at",
    "race_id_by_code",
    "race_seating",
    "races_not_over",
    "racing_deal",
    "seated_in_open_race",
    "store_race",
]

_OPEN_STATES = ("lobby", "countdown", "running")


class RaceConflict(Exception):
    """The stored race is not at the revision the write follows (`server.storage.commit_backends`
    turns it into a ``WriteConflict``)."""


async def store_race(conn: AsyncConnection, write: RaceWrite) -> None:
    """Insert or replace the race, its seats, and the games its seats start.

    Raises:
        sqlalchemy.exc.IntegrityError: a new race whose id or code is taken, or an unknown player.
    """
    race = write.race
    row = {
        "code": race.code,
        "creator_id": race.creator_id,
        "cells": race.cells,
        "seats": race.seats,
        "time_limit_s": race.time_limit_s,
        "public": race.public,
        "state": race.state,
        "deal_code": race.deal_code,
        "created_at": race.created_at,
        "starts_at": race.starts_at,
        "ends_at": race.ends_at,
        "finished_at": race.finished_at,
        "revision": race.revision,
        "rematch_id": race.rematch_id,
    }
    if write.new:
        await conn.execute(insert(races), {"id": race.id, **row})
    else:
        fenced = races.c.id == race.id, races.c.revision == race.revision - 1
        if (await conn.execute(update(races).where(*fenced).values(**row))).rowcount != 1:
            raise RaceConflict(
                f"race {race.id} was written by another room since revision {race.revision - 1}"
            )
        await conn.execute(delete(race_seats).where(race_seats.c.race_id == race.id))
    if write.rematch is not None:
        await store_race(conn, RaceWrite(write.rematch, new=True))
    for game in write.games:  # before the seats that name them
        await repository.insert_game(conn, game)
    if race.seated:
        await conn.execute(
            insert(race_seats),
            [
                {
                    "race_id": race.id,
                    "seat": seat.seat,
                    "player_id": seat.player_id,
                    "ready": seat.ready,
                    "game_id": seat.game_id,
                    "status": seat.status,
                    "cards_home": seat.cards_home,
                    "moves": seat.moves,
                    "score": seat.score,
                    "time_ms": seat.time_ms,
                    "place": seat.place,
                    "network": seat.network,
                }
                for seat in race.seated
            ],
        )


async def load_race(conn: AsyncConnection, race_id: str) -> RaceRecord | None:
    """The race with its seats (in seat order), or None."""
    row = (await conn.execute(select(races).where(races.c.id == race_id))).first()
    if row is None:
        return None
    seated = await conn.execute(
        select(race_seats, players.c.name, players.c.bot)
        .join(players, players.c.id == race_seats.c.player_id)
        .where(race_seats.c.race_id == race_id)
        .order_by(race_seats.c.seat)
    )
    rematch_code = None
    if row.rematch_id is not None:
        rematch_code = await conn.scalar(select(races.c.code).where(races.c.id == row.rematch_id))
    return _race(row, tuple(_seat(seat) for seat in seated), rematch_code)


async def race_id_by_code(conn: AsyncConnection, code: str) -> str | None:
    return await conn.scalar(select(races.c.id).where(races.c.code == code))


async def open_race_ids(conn: AsyncConnection) -> list[str]:
    """The races not over yet (lobby, countdown or running)."""
    return list(await conn.scalars(select(races.c.id).where(races.c.state.in_(_OPEN_STATES))))


async def due_race_ids(conn: AsyncConnection, now: dt.datetime, lobby_timeout: float) -> list[str]:
    """The races not over whose next change was due at ``now`` (what a node's sweep takes up:
    `server.play.race.registry`): a lobby made ``lobby_timeout`` seconds before, a countdown's start,
    a running race's time limit, and a running race decided by its seats' stored games by ``now``
    (one won, or none still playing) whose finishing write never came (its node died between the
    two). The state index narrows it to the races not over."""
    lobby_made_by = now - dt.timedelta(seconds=lobby_timeout)
    due = or_(
        and_(races.c.state == "lobby", races.c.created_at <= lobby_made_by),
        and_(races.c.state == "countdown", races.c.starts_at <= now),
        and_(races.c.state == "running", or_(races.c.ends_at <= now, _decided_by(now))),
    )
    query = select(races.c.id).where(races.c.state.in_(_OPEN_STATES), due).order_by(races.c.id)
    return list(await conn.scalars(query))


def _decided_by(now: dt.datetime) -> ColumnElement[bool]:
    """A running race's seats' games, as stored, decided it by ``now``: one won, or every seat's game
    over (a seat that left plays no more either), the last of them ended by ``now`` (a race with no
    seat's game ended is not decided by its games)."""
    seat_games = race_seats.join(games, games.c.id == race_seats.c.game_id)
    of_the_race = race_seats.c.race_id == races.c.id
    won = exists(
        select(1)
        .select_from(seat_games)
        .where(of_the_race, games.c.status == "won", games.c.finished_at <= now)
    )
    playing = exists(
        select(1)
        .select_from(seat_games)
        .where(
            of_the_race,
            race_seats.c.status != "left",
            or_(games.c.status == "playing", games.c.finished_at > now),
        )
    )
    ended = exists(select(1).select_from(seat_games).where(of_the_race, games.c.finished_at <= now))
    return or_(won, and_(ended, ~playing))


async def game_race(conn: AsyncConnection, game_id: str) -> GameRace | None:
    """The race ``game_id`` is a seat of, its state and its players; None for a game of no race."""
    race_id = await conn.scalar(select(games.c.race_id).where(games.c.id == game_id))
    return None if race_id is None else await race_seating(conn, race_id)


async def race_seating(conn: AsyncConnection, race_id: str) -> GameRace:
    """Race ``race_id``'s state, end and players (a caller that knows a game's race asks this)."""
    race = (await conn.execute(select(races.c.state, races.c.ends_at).where(races.c.id == race_id))).one()
    seated = await conn.scalars(select(race_seats.c.player_id).where(race_seats.c.race_id == race_id))
    return GameRace(race_id, race.state, frozenset(seated), race.ends_at)


async def racing_deal(conn: AsyncConnection, player_id: str, deal_code: str) -> bool:
    """``player_id`` holds a seat in a running race of deal ``deal_code`` (its deal revealed to them)."""
    found = await conn.scalar(
        select(races.c.id)
        .join(race_seats, race_seats.c.race_id == races.c.id)
        .where(
            race_seats.c.player_id == player_id, races.c.state == "running", races.c.deal_code == deal_code
        )
        .limit(1)
    )
    return found is not None


async def seated_in_open_race(conn: AsyncConnection, player_id: str) -> bool:
    """``player_id`` holds a seat in a race not over, on any node (quick match refuses it)."""
    found = await conn.scalar(
        select(races.c.id)
        .join(race_seats, race_seats.c.race_id == races.c.id)
        .where(race_seats.c.player_id == player_id, races.c.state.in_(_OPEN_STATES))
        .limit(1)
    )
    return found is not None


async def race_ends_at(conn: AsyncConnection, race_id: str) -> dt.datetime | None:
    """When race ``race_id`` ends (None before its reveal): what a seat's game closes at; a race
    finished before its time limit (a win, every seat done) ended when it finished."""
    row = (
        await conn.execute(select(races.c.ends_at, races.c.finished_at).where(races.c.id == race_id))
    ).first()
    if row is None or row.ends_at is None:
        return None
    ends_at: dt.datetime = row.ends_at if row.finished_at is None else min(row.ends_at, row.finished_at)
    return ends_at


async def races_not_over(conn: AsyncConnection, race_ids: Iterable[str]) -> frozenset[str]:
    """Which of ``race_ids`` are not over yet (their seats' games are sealed)."""
    wanted = sorted(set(race_ids))
    if not wanted:
        return frozenset()
    found = await conn.scalars(
        select(races.c.id).where(races.c.id.in_(wanted), races.c.state.in_(_OPEN_STATES))
    )
    return frozenset(found)


async def finished_races_after(conn: AsyncConnection, after: str | None, limit: int) -> list[RaceRecord]:
    """Up to ``limit`` finished races with their seats, by id after ``after`` (``verify`` pages them)."""
    query = select(races).where(races.c.state == "finished").order_by(races.c.id).limit(limit)
    if after is not None:
        query = query.where(races.c.id > after)
    rows = (await conn.execute(query)).all()
    if not rows:
        return []
    seated = await conn.execute(
        select(race_seats, players.c.name, players.c.bot)
        .join(players, players.c.id == race_seats.c.player_id)
        .where(race_seats.c.race_id.in_([row.id for row in rows]))
        .order_by(race_seats.c.race_id, race_seats.c.seat)
    )
    by_race: dict[str, list[RaceSeatRecord]] = {}
    for seat in seated:
        by_race.setdefault(seat.race_id, []).append(_seat(seat))
    return [_race(row, tuple(by_race.get(row.id, ()))) for row in rows]


async def games_of_races(
    conn: AsyncConnection, game_ids: Iterable[str]
) -> dict[str, tuple[str, str, str | None]]:
    """Game id → (its deal's code, its player, its race) of those of ``game_ids`` that are stored."""
    wanted = sorted(set(game_ids))
    if not wanted:
        return {}
    rows = await conn.execute(
        select(games.c.id, games.c.code, games.c.player_id, games.c.race_id).where(games.c.id.in_(wanted))
    )
    return {row.id: (row.code, row.player_id, row.race_id) for row in rows}


def _race(row: Row[Any], seated: tuple[RaceSeatRecord, ...], rematch_code: str | None = None) -> RaceRecord:
    return RaceRecord(
        id=row.id,
        code=row.code,
        creator_id=row.creator_id,
        cells=row.cells,
        seats=row.seats,
        time_limit_s=row.time_limit_s,
        public=row.public,
        state=row.state,
        deal_code=row.deal_code,
        created_at=row.created_at,
        starts_at=row.starts_at,
        ends_at=row.ends_at,
        finished_at=row.finished_at,
        seated=seated,
        revision=row.revision,
        rematch_id=row.rematch_id,
        rematch_code=rematch_code,
    )


def _seat(row: Row[Any]) -> RaceSeatRecord:
    return RaceSeatRecord(
        seat=row.seat,
        player_id=row.player_id,
        player_name=row.name,
        player_bot=row.bot,
        game_id=row.game_id,
        status=row.status,
        cards_home=row.cards_home,
        moves=row.moves,
        score=row.score,
        time_ms=row.time_ms,
        place=row.place,
        ready=row.ready,
        network=row.network,
    )
