"""The queries of events: the event row (fenced by its revision), its entrants, and the link from
each entrant's game to the event and the deal's index. Never commits (the caller's transaction does).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from typing import Any

from sqlalchemy import Row, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from server.storage import repository
from server.storage.records import EventEntryRecord, EventGameRecord, EventRecord, GameStart
from server.storage.tables import event_entries, event_games, events, games, players

__all__ = [
    "EventConflict",
    "add_entry",
    "entries_of",
    "entry_of",
    "event_games_of",
    "insert_event",
    "list_events",
    "load_event",
    "start_event_game",
    "store_entry_figures",
    "store_event",
]


class EventConflict(Exception):
    """The stored event is not at the revision the write follows: another process moved it first."""


def _row(event: EventRecord) -> dict[str, Any]:
    return {
        "name": event.name,
        "cells": event.cells,
        "opens_at": event.opens_at,
        "starts_at": event.starts_at,
        "closes_at": event.closes_at,
        "ends_at": event.ends_at,
        "max_players": event.max_players,
        "deals": event.deals,
        "game_time_s": event.game_time_s,
        "review_s": event.review_s,
        "state": event.state,
        "deal_codes": ",".join(event.deal_codes) or None,
        "started_at": event.started_at,
        "created_at": event.created_at,
        "created_by": event.created_by,
        "cancel_reason": event.cancel_reason,
        "revision": event.revision,
    }


def _event(row: Row[Any]) -> EventRecord:
    return EventRecord(
        id=row.id,
        name=row.name,
        cells=row.cells,
        opens_at=row.opens_at,
        starts_at=row.starts_at,
        closes_at=row.closes_at,
        ends_at=row.ends_at,
        max_players=row.max_players,
        deals=row.deals,
        game_time_s=row.game_time_s,
        review_s=row.review_s,
        state=row.state,
        created_at=row.created_at,
        created_by=row.created_by,
        deal_codes=tuple(row.deal_codes.split(",")) if row.deal_codes else (),
        started_at=row.started_at,
        cancel_reason=row.cancel_reason,
        revision=row.revision,
    )


async def insert_event(conn: AsyncConnection, event: EventRecord) -> None:
    """Add a new event.

    Raises:
        sqlalchemy.exc.IntegrityError: its id is taken.
    """
    await conn.execute(insert(events), {"id": event.id, **_row(event)})


async def store_event(conn: AsyncConnection, event: EventRecord) -> None:
    """Replace the event's row with ``event``, if the stored one is at the revision before.

    Raises:
        EventConflict: another write came first (the caller reads the event again).
    """
    fenced = events.c.id == event.id, events.c.revision == event.revision - 1
    if (await conn.execute(update(events).where(*fenced).values(**_row(event)))).rowcount != 1:
        raise EventConflict(
            f"event {event.id} was written by another process since revision {event.revision - 1}"
        )


async def load_event(conn: AsyncConnection, event_id: str) -> EventRecord | None:
    row = (await conn.execute(select(events).where(events.c.id == event_id))).first()
    return None if row is None else _event(row)


async def list_events(conn: AsyncConnection, states: Collection[str], limit: int) -> list[EventRecord]:
    """At most ``limit`` events in ``states``, by start (then id)."""
    query = (
        select(events)
        .where(events.c.state.in_(list(states)))
        .order_by(events.c.starts_at, events.c.id)
        .limit(limit)
    )
    return [_event(row) for row in await conn.execute(query)]


_ENTRY_COLUMNS = (
    event_entries,
    players.c.name.label("player_name"),
    players.c.bot.label("player_bot"),
)


def _entry(row: Row[Any]) -> EventEntryRecord:
    return EventEntryRecord(
        event_id=row.event_id,
        player_id=row.player_id,
        player_name=row.player_name,
        player_bot=row.player_bot,
        number=row.number,
        joined_at=row.joined_at,
        points=row.points,
        wins=row.wins,
        win_ms=row.win_ms,
        games=row.games,
        streak=row.streak,
        reached_at=row.reached_at,
        place=row.place,
        voided=row.voided,
    )


async def add_entry(
    conn: AsyncConnection, event_id: str, player_id: str, joined_at: dt.datetime, max_players: int
) -> int | None:
    """Enter the player: the next entry number, or None when the event is full. One statement takes
    the number and checks the cap, so two joins at once either take two numbers or one loses on the
    unique (event, number) key.

    Raises:
        sqlalchemy.exc.IntegrityError: the player has entered already, or another join took the number.
    """
    taken = select(func.coalesce(func.max(event_entries.c.number), 0)).where(
        event_entries.c.event_id == event_id
    )
    number = (await conn.execute(taken)).scalar_one() + 1
    if number > max_players:
        return None
    await conn.execute(
        insert(event_entries),
        {"event_id": event_id, "player_id": player_id, "number": number, "joined_at": joined_at},
    )
    return int(number)


async def entry_of(conn: AsyncConnection, event_id: str, player_id: str) -> EventEntryRecord | None:
    query = (
        select(*_ENTRY_COLUMNS)
        .join(players, players.c.id == event_entries.c.player_id)
        .where(event_entries.c.event_id == event_id, event_entries.c.player_id == player_id)
    )
    row = (await conn.execute(query)).first()
    return None if row is None else _entry(row)


async def entries_of(conn: AsyncConnection, event_id: str) -> list[EventEntryRecord]:
    """Every entrant of the event, in entry order."""
    query = (
        select(*_ENTRY_COLUMNS)
        .join(players, players.c.id == event_entries.c.player_id)
        .where(event_entries.c.event_id == event_id)
        .order_by(event_entries.c.number)
    )
    return [_entry(row) for row in await conn.execute(query)]


async def store_entry_figures(conn: AsyncConnection, entry: EventEntryRecord) -> None:
    """The entrant's figures (and place, voided) as ``entry`` has them."""
    await conn.execute(
        update(event_entries)
        .where(event_entries.c.event_id == entry.event_id, event_entries.c.player_id == entry.player_id)
        .values(
            points=entry.points,
            wins=entry.wins,
            win_ms=entry.win_ms,
            games=entry.games,
            streak=entry.streak,
            reached_at=entry.reached_at,
            place=entry.place,
            voided=entry.voided,
        )
    )


async def start_event_game(
    conn: AsyncConnection, game: GameStart, event_id: str, deal: int, *, berserk: bool
) -> None:
    """Add the entrant's game of deal ``deal``: an ordinary game row and its link, in one transaction.

    Raises:
        sqlalchemy.exc.IntegrityError: the entrant has a game of that deal already (a second ask at
            the same moment), or the game's id is taken.
    """
    await repository.insert_game(conn, game)
    await conn.execute(
        insert(event_games),
        {
            "event_id": event_id,
            "player_id": game.player_id,
            "deal": deal,
            "game_id": game.id,
            "berserk": berserk,
        },
    )


async def event_games_of(conn: AsyncConnection, event_id: str, player_id: str) -> list[EventGameRecord]:
    """The entrant's games of the event in deal order, with their ends as the games' rows say."""
    query = (
        select(
            event_games,
            games.c.status,
            games.c.won,
            games.c.hinted,
            games.c.moves,
            games.c.started_at,
            games.c.finished_at,
        )
        .join(games, games.c.id == event_games.c.game_id)
        .where(event_games.c.event_id == event_id, event_games.c.player_id == player_id)
        .order_by(event_games.c.deal)
    )
    return [
        EventGameRecord(
            row.event_id,
            row.player_id,
            row.deal,
            row.game_id,
            row.berserk,
            row.status,
            row.won,
            row.hinted,
            row.moves,
            row.started_at,
            row.finished_at,
        )
        for row in await conn.execute(query)
    ]
