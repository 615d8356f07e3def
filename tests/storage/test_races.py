"""server.storage.races through the write pipeline: a race stored whole, read back whole, fenced by
its revision; on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import update

from server.metrics import Metrics
from server.storage import Database, GameStart, PlayerRecord, races, repository
from server.storage.commit_backends import SqlAlchemyBackend, StoreRace, WriteConflict
from server.storage.committer import Committer
from server.storage.records import RaceRecord, RaceSeatRecord, RaceWrite
from server.storage.tables import games

NOW = dt.datetime(2026, 12, 2, 5, 0, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)
CODE = "EO1-C8-AAAAAAB"


@pytest.fixture
async def committer(database: Database) -> AsyncIterator[Committer]:
    async with database.transaction() as conn:
        for player in ("ann", "bo"):
            await repository.insert_player(conn, PlayerRecord(player, player, (player * 64)[:64], NOW))
    pipeline = Committer(SqlAlchemyBackend(database, asyncio.get_running_loop()), Metrics())
    pipeline.start()
    yield pipeline
    await pipeline.stop()


def seat(number: int, player: str, game: str | None = None, place: int | None = None) -> RaceSeatRecord:
    return RaceSeatRecord(
        number, player, player, False, game, "playing" if game else "waiting", 0, 0, 0, 0, place
    )


def lobby() -> RaceRecord:
    return RaceRecord(
        "r1", "K7M2QX9P", "ann", 8, 2, 60, False, "lobby", CODE, NOW, None, None, None, (seat(1, "ann"),)
    )


async def test_a_race_is_stored_whole_and_its_seats_games_with_it(
    committer: Committer, database: Database
) -> None:
    await committer.stored(StoreRace(RaceWrite(lobby(), new=True)))
    running = dataclasses.replace(
        lobby(), state="running", starts_at=NOW, ends_at=NOW + dt.timedelta(minutes=1), revision=1,
        seated=(seat(1, "ann", "g1"), seat(2, "bo", "g2")),
    )  # fmt: skip
    games = tuple(GameStart(g, p, CODE, 8, None, NOW, "r1") for g, p in (("g1", "ann"), ("g2", "bo")))
    await committer.stored(StoreRace(RaceWrite(running, games=games)))
    async with database.connection() as conn:
        assert await races.load_race(conn, "r1") == running
        assert await races.race_id_by_code(conn, "K7M2QX9P") == "r1"
        assert await races.open_race_ids(conn) == ["r1"]
        stored = await repository.load_game(conn, "g2")
        assert stored is not None and stored.race_id == "r1"
        found = await races.game_race(conn, "g2")
        assert found is not None and (found.state, found.player_ids) == ("running", frozenset({"ann", "bo"}))
        assert await races.game_race(conn, "no-such-game") is None


async def test_a_seats_ready_flag_is_stored(committer: Committer, database: Database) -> None:
    """A copy of the race on another node reads who is ready (a ready is a fenced write, as a join)."""
    await committer.stored(StoreRace(RaceWrite(lobby(), new=True)))
    ready = dataclasses.replace(
        lobby(), revision=1, seated=(dataclasses.replace(seat(1, "ann"), ready=True), seat(2, "bo"))
    )
    await committer.stored(StoreRace(RaceWrite(ready)))
    async with database.connection() as conn:
        stored = await races.load_race(conn, "r1")
    assert stored is not None and [s.ready for s in stored.seated] == [True, False]


async def test_the_sweep_finds_the_races_whose_timed_change_is_due(
    committer: Committer, database: Database
) -> None:
    """Due: a lobby made an hour ago, a countdown whose start has come, a running race past its time
    limit. Not due: the same a second earlier, and a race over."""
    hour = dt.timedelta(hours=1)
    made = [
        dataclasses.replace(lobby(), id="lobby-old", code="LOBBYOLD", created_at=NOW - hour),
        dataclasses.replace(lobby(), id="lobby-new", code="LOBBYNEW", created_at=NOW - hour / 2),
        dataclasses.replace(lobby(), id="count-due", code="COUNTDUE", state="countdown", starts_at=NOW),
        dataclasses.replace(
            lobby(), id="count-not", code="COUNTNOT", state="countdown", starts_at=NOW + SECOND
        ),
        dataclasses.replace(lobby(), id="run-due", code="RUNDUE22", state="running", starts_at=NOW - hour,
                            ends_at=NOW - SECOND),
        dataclasses.replace(lobby(), id="run-not", code="RUNNOT22", state="running", starts_at=NOW,
                            ends_at=NOW + SECOND),
        dataclasses.replace(lobby(), id="over", code="OVER2222", state="cancelled", created_at=NOW - hour),
    ]  # fmt: skip
    for race in made:
        await committer.stored(StoreRace(RaceWrite(race, new=True)))
    async with database.connection() as conn:
        due = await races.due_race_ids(conn, NOW, 3600.0)
    assert due == ["count-due", "lobby-old", "run-due"]


async def test_two_writers_of_one_race_revision_cannot_both_commit(
    committer: Committer, database: Database
) -> None:
    """Refused writes tried: a second write of revision 1 (another room of the race), a write that
    skips a revision, and a new race whose invitation code is taken."""
    await committer.stored(StoreRace(RaceWrite(lobby(), new=True)))
    first = dataclasses.replace(lobby(), seated=(seat(1, "ann"), seat(2, "bo")), revision=1)
    await committer.stored(StoreRace(RaceWrite(first)))
    with pytest.raises(WriteConflict):
        await committer.stored(StoreRace(RaceWrite(dataclasses.replace(first, state="cancelled"))))
    with pytest.raises(WriteConflict):
        await committer.stored(StoreRace(RaceWrite(dataclasses.replace(first, revision=3))))
    with pytest.raises(WriteConflict):
        await committer.stored(StoreRace(RaceWrite(dataclasses.replace(lobby(), id="r2"), new=True)))
    async with database.connection() as conn:
        assert await races.load_race(conn, "r1") == first


async def test_the_sweep_finds_running_races_their_seats_games_decided(
    committer: Committer, database: Database
) -> None:
    """A node that dies between a seat's stored win and its race's finishing write leaves a running
    race that its time limit would end an hour late: the sweep finds it once the seats' stored games
    decide it by then. Due: a game won; every game over (resigned, or its seat left). Not due: a game
    won after ``now``, a game still playing beside a resigned one."""
    hour = dt.timedelta(hours=1)
    cases = {  # race: (ann's seat and game, bo's seat and game), each (seat status, game status, ended)
        "won": (("playing", "won", NOW - SECOND), ("playing", "playing", None)),
        "won-late": (("playing", "won", NOW + SECOND), ("playing", "playing", None)),
        "resigned": (("playing", "resigned", NOW - SECOND), ("playing", "resigned", NOW - hour)),
        "one-plays": (("playing", "resigned", NOW - SECOND), ("playing", "playing", None)),
        "left": (("left", "playing", None), ("playing", "resigned", NOW - SECOND)),
    }
    for race_id, seats in cases.items():
        seated = tuple(
            dataclasses.replace(seat(n, p, f"{race_id}-{p}"), status=seat_status)
            for n, (p, (seat_status, _, _)) in enumerate(zip(("ann", "bo"), seats, strict=True), 1)
        )
        running = dataclasses.replace(
            lobby(), id=race_id, code=f"{race_id:X<8}"[:8].upper(), state="running", starts_at=NOW - hour,
            ends_at=NOW + hour, seated=seated,
        )  # fmt: skip
        starts = tuple(GameStart(s.game_id or "", s.player_id, CODE, 8, None, NOW, race_id) for s in seated)
        await committer.stored(StoreRace(RaceWrite(running, new=True, games=starts)))
        async with database.transaction() as conn:
            for s, (_, status, ended) in zip(seated, seats, strict=True):
                await conn.execute(
                    update(games).where(games.c.id == s.game_id).values(status=status, finished_at=ended)
                )
    async with database.connection() as conn:
        due = await races.due_race_ids(conn, NOW, 3600.0)
    assert due == ["left", "resigned", "won"]
