"""`server.storage.ratings` on SQLite and PostgreSQL, directly and through the group-commit pipeline
(`StoreRatings`): a race's changes are stored onto the ratings they were computed from, with the
race's result in one transaction, and a race is rated once."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from server.metrics import Metrics
from server.play.race.ratings import NEWCOMER, Placement, rate_race
from server.storage import Database, GameResult, GameStart, PlayerRecord, repository
from server.storage import ratings as stored_ratings
from server.storage.commit_backends import SqlAlchemyBackend
from server.storage.committer import Committer, StoreRatings, WriteConflict
from server.storage.records import RatedRace, Rating
from server.storage.tables import games, race_rating_changes
from server.storage.tables import ratings as ratings_table

NOW = dt.datetime(2026, 12, 2, 5, 0, tzinfo=dt.UTC)
PLAYERS = ("ann", "bo", "cy", "di")


@pytest.fixture
async def seeded(database: Database) -> Database:
    async with database.transaction() as conn:
        for name in PLAYERS:
            await repository.insert_player(conn, PlayerRecord(name, name, name.ljust(64, "0"), NOW))
        await repository.insert_game(conn, GameStart("seat-game", "ann", "EO1-C8-AAAAAFA", 8, None, NOW))
    return database


@pytest.fixture
async def committer(seeded: Database) -> AsyncIterator[Committer]:
    pipeline = Committer(SqlAlchemyBackend(seeded, asyncio.get_running_loop()), Metrics())
    pipeline.start()
    yield pipeline
    await pipeline.stop()


async def rated(database: Database, race_id: str, places: dict[str, int], cells: int = 8) -> RatedRace:
    """The race rated from the ratings as stored now."""
    async with database.connection() as conn:
        current = await stored_ratings.load_ratings(conn, cells, places)
    changes = rate_race([Placement(player, place) for player, place in places.items()], current)
    return RatedRace(race_id, cells, changes, NOW)


async def test_a_first_race_stores_newcomers_ratings_and_the_changes(seeded: Database) -> None:
    race = await rated(seeded, "race-1", {"ann": 1, "bo": 2, "cy": 2})
    assert all(change.before == NEWCOMER for change in race.changes)
    async with seeded.transaction() as conn:
        assert await stored_ratings.store_rating_changes(conn, race)
    async with seeded.connection() as conn:
        loaded = await stored_ratings.load_ratings(conn, 8, ["ann", "bo", "cy", "nobody"])
        again = await stored_ratings.load_race_rating_changes(conn, "race-1")
        ann = await stored_ratings.player_ratings(conn, "ann")
        keys = dict((await conn.execute(select(ratings_table.c.player_id, ratings_table.c.sort_key))).all())
    assert loaded == {change.player_id: change.after for change in race.changes}
    assert again == race
    assert ann == {8: loaded["ann"]}
    assert keys == {change.player_id: -change.after.display for change in race.changes}


async def test_a_later_race_starts_from_the_stored_ratings(seeded: Database) -> None:
    first = await rated(seeded, "race-1", {"ann": 1, "bo": 2})
    async with seeded.transaction() as conn:
        assert await stored_ratings.store_rating_changes(conn, first)
    second = await rated(seeded, "race-2", {"bo": 1, "ann": 2, "cy": 3})
    by_player = {change.player_id: change for change in second.changes}
    assert by_player["ann"].before == next(c.after for c in first.changes if c.player_id == "ann")
    assert by_player["cy"].before == NEWCOMER
    async with seeded.transaction() as conn:
        assert await stored_ratings.store_rating_changes(conn, second)
    async with seeded.connection() as conn:
        loaded = await stored_ratings.load_ratings(conn, 8, PLAYERS)
    assert {player: rating.races for player, rating in loaded.items()} == {"ann": 2, "bo": 2, "cy": 1}


async def test_ratings_are_per_variant(seeded: Database) -> None:
    async with seeded.transaction() as conn:
        assert await stored_ratings.store_rating_changes(conn, await rated(seeded, "r8", {"ann": 1, "bo": 2}))
    c4 = await rated(seeded, "r4", {"ann": 2, "bo": 1}, cells=4)
    assert all(change.before == NEWCOMER for change in c4.changes)
    async with seeded.transaction() as conn:
        assert await stored_ratings.store_rating_changes(conn, c4)
    async with seeded.connection() as conn:
        ann = await stored_ratings.player_ratings(conn, "ann")
    assert set(ann) == {8, 4}
    assert ann[8].mu > NEWCOMER.mu > ann[4].mu


async def test_a_change_computed_from_an_old_rating_is_refused(seeded: Database) -> None:
    """Bad input tried: two races rated from the same stored ratings (a player finishing two races at
    once); the second one's change no longer starts from what is stored."""
    async with seeded.transaction() as conn:
        assert await stored_ratings.store_rating_changes(conn, await rated(seeded, "r1", {"ann": 1, "bo": 2}))
    second = await rated(seeded, "r2", {"ann": 1, "bo": 2})
    third = await rated(seeded, "r3", {"ann": 2, "bo": 1})
    async with seeded.transaction() as conn:
        assert await stored_ratings.store_rating_changes(conn, second)
    with pytest.raises(_Refused):
        async with seeded.transaction() as conn:
            if not await stored_ratings.store_rating_changes(conn, third):
                raise _Refused
    async with seeded.connection() as conn:
        assert await stored_ratings.load_race_rating_changes(conn, "r3") is None
        assert (await stored_ratings.load_ratings(conn, 8, ["ann"]))["ann"].races == 2


class _Refused(Exception):
    """Rolls the test's transaction back, as the commit's WriteConflict does."""


@pytest.mark.parametrize("case", ["rated twice", "newcomer twice", "unknown player"])
async def test_the_database_refuses_what_would_rate_twice(seeded: Database, case: str) -> None:
    """Bad input tried: the same race stored twice; two races both starting newcomer cy's rating (both
    rated while cy had none); a change of a player who does not exist."""
    first = await rated(seeded, "r1", {"ann": 1, "bo": 2})
    cy_again = await rated(seeded, "r3", {"cy": 2, "bo": 1})
    async with seeded.transaction() as conn:
        assert await stored_ratings.store_rating_changes(conn, first)
        assert await stored_ratings.store_rating_changes(conn, await rated(seeded, "r2", {"cy": 1, "di": 2}))
    bad = {
        "rated twice": first,
        "newcomer twice": RatedRace("r3", 8, tuple(c for c in cy_again.changes if c.player_id == "cy"), NOW),
        "unknown player": RatedRace(
            "r4", 8, rate_race([Placement("ann", 1), Placement("ghost", 2)], {}), NOW
        ),
    }[case]
    with pytest.raises(IntegrityError):
        async with seeded.transaction() as conn:
            await stored_ratings.store_rating_changes(conn, bad)
    async with seeded.connection() as conn:
        assert await stored_ratings.load_race_rating_changes(conn, bad.race_id) == (
            first if bad is first else None
        )


async def test_a_race_of_no_rated_change_stores_nothing(seeded: Database) -> None:
    async with seeded.transaction() as conn:
        assert await stored_ratings.store_rating_changes(conn, RatedRace("r1", 8, (), NOW))
        assert await stored_ratings.load_ratings(conn, 8, []) == {}
    async with seeded.connection() as conn:
        assert (await conn.execute(select(race_rating_changes))).all() == []
        assert await stored_ratings.load_race_rating_changes(conn, "r1") is None


async def test_the_pipeline_stores_a_result_and_its_ratings_together(
    committer: Committer, seeded: Database
) -> None:
    result = GameResult("seat-game", "won", 500, 120, 0, NOW, 60_000, won=True)
    race = await rated(seeded, "race-1", {"ann": 1, "bo": 2})
    await committer.stored(StoreRatings(race, result))
    async with seeded.connection() as conn:
        assert await stored_ratings.load_race_rating_changes(conn, "race-1") == race
        assert await conn.scalar(select(games.c.status).where(games.c.id == "seat-game")) == "won"


async def test_the_pipeline_refuses_a_stale_rating_and_stores_none_of_its_write(
    committer: Committer, seeded: Database
) -> None:
    """Bad input tried: a race result whose rating changes start from a rating another race changed
    meanwhile; the result of the same write must not be stored either."""
    stale = await rated(seeded, "race-2", {"ann": 1, "bo": 2})
    await committer.stored(StoreRatings(await rated(seeded, "race-1", {"ann": 2, "bo": 1})))
    result = GameResult("seat-game", "won", 500, 120, 0, NOW, 60_000, won=True)
    with pytest.raises(WriteConflict):
        await committer.stored(StoreRatings(stale, result))
    async with seeded.connection() as conn:
        assert await stored_ratings.load_race_rating_changes(conn, "race-2") is None
        assert await conn.scalar(select(games.c.status).where(games.c.id == "seat-game")) == "playing"
        assert {r.races for r in (await stored_ratings.load_ratings(conn, 8, ["ann", "bo"])).values()} == {1}
    fresh = await rated(seeded, "race-2", {"ann": 1, "bo": 2})
    await committer.stored(StoreRatings(fresh, result))
    async with seeded.connection() as conn:
        assert (await stored_ratings.load_ratings(conn, 8, ["ann"]))["ann"] == fresh.changes[0].after


def test_rating_display_is_the_documented_ordinal() -> None:
    assert NEWCOMER.display == 1000
    assert Rating(30.0, 2.0).display == round(1000 + 40 * (30.0 - 6.0))


async def test_two_races_of_one_player_committed_together_store_only_the_first(
    committer: Committer, seeded: Database
) -> None:
    """Bad input tried: two races rated from the same stored ratings (ann in both) submitted in one
    batch: the batch is refused, each write is retried alone, the first one stores, the second one
    conflicts and stores nothing."""
    await committer.stored(StoreRatings(await rated(seeded, "race-0", {"ann": 1, "bo": 2})))
    first = await rated(seeded, "race-1", {"ann": 1, "cy": 2})
    second = await rated(seeded, "race-2", {"ann": 2, "di": 1})
    outcomes = await asyncio.gather(
        committer.stored(StoreRatings(first)),
        committer.stored(StoreRatings(second)),
        return_exceptions=True,
    )
    assert outcomes[0] is None and isinstance(outcomes[1], WriteConflict)
    async with seeded.connection() as conn:
        assert await stored_ratings.load_race_rating_changes(conn, "race-1") == first
        assert await stored_ratings.load_race_rating_changes(conn, "race-2") is None
        assert "di" not in await stored_ratings.load_ratings(conn, 8, ["di"])
