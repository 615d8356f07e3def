"""server.storage.events on SQLite and PostgreSQL: an event reads back whole, its sequence null
until the start; a write on a stale revision loses; entry numbers follow join order, a second
entry and one past the cap are refused; one game per deal, linked to an ordinary game row."""

from __future__ import annotations

import dataclasses
import datetime as dt
import random

import pytest
from sqlalchemy.exc import IntegrityError

from server.services.winnable import winnable_deals, winnable_sequence
from server.storage import Database, events, repository
from server.storage.records import EventRecord, GameStart, PlayerRecord

NOW = dt.datetime(2026, 12, 7, 12, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)


def event(event_id: str = "e1", **changes: object) -> EventRecord:
    base = EventRecord(
        event_id, "Sunday", 8, NOW, NOW + HOUR, NOW + 2 * HOUR, NOW + 3 * HOUR, 2, 3, 600, 600,
        "scheduled", NOW, "cli",
    )  # fmt: skip
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


async def add_players(database: Database, *names: str) -> None:
    async with database.transaction() as conn:
        for name in names:
            await repository.insert_player(conn, PlayerRecord(name, name.title(), f"hash-{name}", NOW))


async def test_an_event_reads_back_whole_and_its_writes_are_fenced(database: Database) -> None:
    async with database.transaction() as conn:
        await events.insert_event(conn, event())
        await events.insert_event(conn, event("e0", starts_at=NOW + HOUR / 2))
    async with database.connection() as conn:
        assert await events.load_event(conn, "e1") == event()
        assert await events.load_event(conn, "nope") is None
        listed = await events.list_events(conn, ("scheduled",), 10)
    assert [e.id for e in listed] == ["e0", "e1"]
    started = event(
        state="running", deal_codes=("EO1-C8-AAAAAFA", "EO1-C8-AAAAAFB"), started_at=NOW, revision=1
    )
    async with database.transaction() as conn:
        await events.store_event(conn, started)
    with pytest.raises(events.EventConflict):
        async with database.transaction() as conn:
            await events.store_event(conn, dataclasses.replace(started, state="cancelled"))
    async with database.connection() as conn:
        assert await events.load_event(conn, "e1") == started
        assert [e.id for e in await events.list_events(conn, ("running",), 10)] == ["e1"]


async def test_entries_in_join_order_once_each_within_the_cap(database: Database) -> None:
    await add_players(database, "ann", "bo", "cy")
    async with database.transaction() as conn:
        await events.insert_event(conn, event())
    numbers = []
    for player in ("ann", "bo", "cy"):
        async with database.transaction() as conn:
            numbers.append(await events.add_entry(conn, "e1", player, NOW, 2))
    assert numbers == [1, 2, None]  # the cap is 2
    with pytest.raises(IntegrityError):  # entered already (with room left under the cap)
        async with database.transaction() as conn:
            await events.add_entry(conn, "e1", "ann", NOW, 5)
    async with database.connection() as conn:
        entries = await events.entries_of(conn, "e1")
        assert [(e.player_id, e.player_name, e.number, e.points) for e in entries] == [
            ("ann", "Ann", 1, 0),
            ("bo", "Bo", 2, 0),
        ]
        assert await events.entry_of(conn, "e1", "cy") is None
    scored = dataclasses.replace(entries[1], points=4, wins=2, win_ms=1234, games=2, streak=2, reached_at=NOW)
    async with database.transaction() as conn:
        await events.store_entry_figures(conn, scored)
    async with database.connection() as conn:
        assert await events.entry_of(conn, "e1", "bo") == scored


async def test_one_game_per_deal_linked_to_an_ordinary_game(database: Database) -> None:
    await add_players(database, "ann")
    async with database.transaction() as conn:
        await events.insert_event(conn, event())
        await events.add_entry(conn, "e1", "ann", NOW, 2)
        await events.start_event_game(
            conn, GameStart("g1", "ann", "EO1-C8-AAAAAFA", 8, None, NOW), "e1", 1, berserk=True
        )
    with pytest.raises(IntegrityError):
        async with database.transaction() as conn:
            await events.start_event_game(
                conn, GameStart("g2", "ann", "EO1-C8-AAAAAFA", 8, None, NOW), "e1", 1, berserk=False
            )
    async with database.connection() as conn:
        played = await events.event_games_of(conn, "e1", "ann")
        assert await repository.load_game(conn, "g2") is None  # the refused ask stored nothing
    assert [(g.deal, g.game_id, g.berserk, g.status, g.won, g.started_at) for g in played] == [
        (1, "g1", True, "playing", False, NOW)
    ]


def test_a_sequence_is_distinct_winnable_deals() -> None:
    sequence = winnable_sequence(random.Random(1), 2, 200)
    assert len(set(sequence)) == 200
    assert set(sequence) <= {deal.code() for deal in winnable_deals(2)}
    with pytest.raises(ValueError):
        winnable_sequence(random.Random(1), 2, len(winnable_deals(2)) + 1)
