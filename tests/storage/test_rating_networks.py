"""What a race's finishing transaction reads to decide who it rates (docs/ratings.md, Farming): the
networks its seats met in the day's rated races, and how many networks each player has raced; on
SQLite and PostgreSQL, through the write pipeline and the rules the server runs."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator

import pytest

from server.metrics import Metrics
from server.play.race.ratings import FarmGuard
from server.storage import Database, PlayerRecord, ratings, repository
from server.storage.commit_backends import SqlAlchemyBackend, StoreRace
from server.storage.committer import Committer
from server.storage.records import RaceRecord, RaceSeatRecord, RaceWrite
from server.storage.tables import players

NOW = dt.datetime(2026, 12, 7, 5, 0, tzinfo=dt.UTC)
#: Each player's network: a1 on A; b1 and b2 on B; c1 on C.
NETWORK = {
    "a1": "aaaaaaaaaaaaaaaa",
    "b1": "bbbbbbbbbbbbbbbb",
    "b2": "bbbbbbbbbbbbbbbb",
    "c1": "cccccccccccccccc",
}
GUARD = FarmGuard(distinct_networks=True, meetings_per_day=2, established_networks=2)


@pytest.fixture
async def committer(database: Database) -> AsyncIterator[Committer]:
    async with database.transaction() as conn:
        for player in NETWORK:
            await repository.insert_player(conn, PlayerRecord(player, player, (player * 64)[:64], NOW))
    pipeline = Committer(SqlAlchemyBackend(database, asyncio.get_running_loop(), GUARD), Metrics())
    pipeline.start()
    yield pipeline
    await pipeline.stop()


async def finish(
    committer: Committer, database: Database, number: int, winner: str, loser: str, hours: float
) -> set[str]:
    """Race ``r<number>`` finished ``hours`` after NOW, ``winner`` first: the players it rated."""
    at = NOW + dt.timedelta(hours=hours)
    seated = tuple(
        RaceSeatRecord(
            n, p, p, False, None, "won" if n == 1 else "resigned", 0, 0, 0, 0, n, network=NETWORK[p]
        )
        for n, p in ((1, winner), (2, loser))
    )
    race = RaceRecord(
        f"r{number}", f"CODE{number:04}", winner, 8, 2, 60, True, "finished", "unused", at, at, at, at, seated
    )
    await committer.stored(StoreRace(RaceWrite(race, new=True)))
    async with database.connection() as conn:
        rated = await ratings.load_race_rating_changes(conn, race.id)
    return set() if rated is None else {change.player_id for change in rated.changes}


async def networks_met(database: Database) -> dict[str, int]:
    async with database.connection() as conn:
        return {row.id: row.networks_met for row in await conn.execute(players.select())}


async def test_a_race_rates_once_two_players_are_established_and_until_their_networks_met_enough(
    committer: Committer, database: Database
) -> None:
    assert await finish(committer, database, 1, "a1", "b1", 0) == set()  # each has met one network
    assert await networks_met(database) == {"a1": 1, "b1": 1, "b2": 0, "c1": 0}
    assert await finish(committer, database, 2, "b2", "b1", 1) == set()  # one network: b1 met none more
    assert await networks_met(database) == {"a1": 1, "b1": 1, "b2": 0, "c1": 0}
    assert await finish(committer, database, 3, "a1", "c1", 2) == set()  # a1 established, c1 not yet
    assert await finish(committer, database, 4, "b1", "c1", 3) == {"b1", "c1"}  # both established
    assert await networks_met(database) == {"a1": 2, "b1": 2, "b2": 0, "c1": 2}
    assert await finish(committer, database, 5, "a1", "c1", 4) == {"a1", "c1"}  # A and C: once today
    assert await finish(committer, database, 6, "c1", "a1", 5) == {"a1", "c1"}  # twice
    assert await finish(committer, database, 7, "a1", "c1", 6) == set()  # the cap: not a third time
    # A and B: their first rated race
    assert await finish(committer, database, 8, "b1", "a1", 7) == {"a1", "b1"}
    # a day after the first of A and C, the second is the only one of the day
    assert await finish(committer, database, 9, "a1", "c1", 4.5 + 24) == {"a1", "c1"}
    async with database.connection() as conn:
        seen = await ratings.rated_networks_since(conn, [NETWORK["a1"], NETWORK["c1"]], NOW)
        assert sorted(map(sorted, seen)) == sorted(
            [[NETWORK["c1"]], [NETWORK["a1"], NETWORK["c1"]], [NETWORK["a1"], NETWORK["c1"]], [NETWORK["a1"]],
             [NETWORK["a1"], NETWORK["c1"]]]
        )  # fmt: skip
        assert await ratings.rated_networks_since(conn, [], NOW) == []
        assert await ratings.networks_met(conn, [], 5) == {}
