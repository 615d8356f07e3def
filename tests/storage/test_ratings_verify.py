"""``eightoff verify`` checks the stored ratings (`server.ops.verify.verify_ratings`): every rated race
rates again to its stored afters, every player's races chain from a newcomer's rating to its stored
one; on SQLite and PostgreSQL, and through the command line."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest
from sqlalchemy import insert, update

from server.ops import cli
from server.ops.verify import check_rated_race, check_rating_history, verify_ratings
from server.play.race.ratings import NEWCOMER, Placement, rate_race, rated_race
from server.storage import Database, PlayerRecord, repository
from server.storage import ratings as stored_ratings
from server.storage.records import RatedRace, Rating
from server.storage.tables import race_rating_changes, ratings

NOW = dt.datetime(2026, 12, 2, 5, 0, tzinfo=dt.UTC)
RACES = [
    ("r1", 8, {"ann": 1, "bo": 2, "cy": 3}),
    ("r2", 8, {"bo": 1, "ann": 2}),
    ("r3", 4, {"cy": 1, "ann": 1}),
]


@pytest.fixture
async def raced(database: Database) -> Database:
    async with database.transaction() as conn:
        for name in ("ann", "bo", "cy"):
            await repository.insert_player(conn, PlayerRecord(name, name, name.ljust(64, "0"), NOW))
    for race_id, cells, places in RACES:
        async with database.transaction() as conn:
            current = await stored_ratings.load_ratings(conn, cells, places)
            seats = [Placement(player, place) for player, place in places.items()]
            assert await stored_ratings.store_rating_changes(
                conn, rated_race(race_id, cells, seats, current, NOW)
            )
    return database


async def test_honest_ratings_verify(raced: Database) -> None:
    assert await verify_ratings(raced, batch=2) == (3, [])


async def test_a_changed_rating_is_found(raced: Database) -> None:
    """Bad input tried: a rating edited by hand (mu raised), and a rating row that no race made."""
    async with raced.transaction() as conn:
        await conn.execute(
            update(ratings).where(ratings.c.player_id == "bo", ratings.c.cells == 8).values(mu=40.0)
        )
        await conn.execute(
            insert(ratings).values(
                player_id="bo", cells=2, mu=30.0, sigma=1.0, races=5, sort_key=-1960, updated_at=NOW
            )
        )
    checked, mismatches = await verify_ratings(raced, batch=1)
    assert checked == 3
    assert [(m.game_id, m.problem) for m in mismatches] == [
        ("bo/C2", "rating Rating(mu=30.0, sigma=1.0, races=5) without a rated race"),
        ("bo/C8", mismatches[1].problem),
    ]
    assert mismatches[1].problem.startswith("rating stored Rating(mu=40.0, ")


async def test_a_changed_race_is_found(raced: Database) -> None:
    """Bad input tried: a race's stored after edited (the race no longer rates to it, and the player's
    next race no longer starts from it)."""
    async with raced.transaction() as conn:
        await conn.execute(
            update(race_rating_changes)
            .where(race_rating_changes.c.race_id == "r1", race_rating_changes.c.player_id == "cy")
            .values(sigma_after=1.0)
        )
    _, mismatches = await verify_ratings(raced)
    assert [m.game_id for m in mismatches] == ["r1", "cy/C8"]
    assert mismatches[0].problem.startswith("cy stored Rating(mu=")


@pytest.mark.parametrize("races", [0, 1])
def test_a_race_of_fewer_than_two_rated_players_is_a_mismatch(races: int) -> None:
    changes = rate_race([Placement("ann", 1), Placement("bo", 2)], {})[:races]
    assert "fewer than two" in (check_rated_race(RatedRace("r", 8, changes, NOW)) or "")


def test_a_history_must_start_from_a_newcomer_and_chain() -> None:
    """Bad input tried: a first race that starts from a rating of its own, a gap between two races, a
    stored rating with changes but no row."""
    first = rate_race([Placement("ann", 1), Placement("bo", 2)], {})[0]
    second = rate_race([Placement("ann", 1), Placement("bo", 2)], {"ann": first.after})[0]
    assert check_rating_history(second.after, [first, second]) is None
    assert "starts from" in (check_rating_history(second.after, [second]) or "")
    assert "starts from" in (check_rating_history(second.after, [first, first]) or "")
    assert "no rating stored" in (check_rating_history(None, [first]) or "")
    assert check_rating_history(None, []) is None
    assert Rating(25.0, 25.0 / 3.0, 0) == NEWCOMER


async def test_the_command_line_reports_rating_mismatches(raced: Database, database_url: str) -> None:
    ok = await asyncio.to_thread(cli.main, ["verify", "--database-url", database_url])
    assert ok == 0
    async with raced.transaction() as conn:
        await conn.execute(update(ratings).where(ratings.c.player_id == "ann").values(races=9))
    assert await asyncio.to_thread(cli.main, ["verify", "--database-url", database_url]) == 1


async def test_the_command_line_prints_what_it_found(
    raced: Database, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async with raced.transaction() as conn:
        await conn.execute(
            update(ratings).where(ratings.c.player_id == "cy", ratings.c.cells == 4).values(mu=1.0)
        )
    assert await asyncio.to_thread(cli.main, ["verify", "--database-url", database_url]) == 1
    out = capsys.readouterr().out
    assert "RATING MISMATCH cy/C4: rating stored Rating(mu=1.0" in out
    assert "verified the ratings of 3 rated races: 1 mismatch(es)" in out
