"""``eightoff verify`` checks the finished races (`server.ops.verify.verify_races`): their places follow
from their seats' stored figures, and every seat's game is stored with the race's deal; a race played
over real WebSockets, on SQLite and PostgreSQL, and through the command line."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import update

from server.ops import cli
from server.ops.verify import verify_races
from server.storage import Database
from server.storage.tables import games, race_seats
from tests.server.test_races import RACE_SETTINGS, Standings, close_all, follow_until, lobby, start
from tests.support import serverutil


async def a_finished_race(database_url: str) -> tuple[str, list[str]]:
    """A race of two played to its end (both seats resign): its id and its seats' games."""
    async with serverutil.running_app(database_url, **RACE_SETTINGS) as app:
        clients, copies = await lobby(serverutil.ws_url(app), 2, time_limit=600)
        await start(clients, copies)
        game_ids = [copy.of(client)["game"] for client, copy in zip(clients, copies, strict=True)]
        for client, game_id in zip(clients, game_ids, strict=True):
            assert (await client.request("resign", game=game_id))["type"] == "game_over"
        copy: Standings = copies[0]
        await follow_until(clients[0], copy, lambda s: s.race["state"] == "finished")
        await close_all(*clients)
        return copy.race["race"], game_ids


async def test_a_finished_race_verifies_and_changes_to_it_are_found(
    database: Database, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad input tried: a seat's stored figures edited (10 cards home: its place no longer follows),
    and a seat's game made of another deal. The session's PostgreSQL database is emptied first
    (``database``): a race left open by an earlier test would be finished by the app's sweep."""
    race_id, game_ids = await a_finished_race(database_url)  # into the emptied database: one race
    assert await verify_races(database, batch=1) == (1, [])
    async with database.transaction() as conn:
        await conn.execute(
            update(race_seats)
            .where(race_seats.c.race_id == race_id, race_seats.c.seat == 2)
            .values(cards_home=10)
        )
    checked, mismatches = await verify_races(database)
    assert checked == 1 and [m.game_id for m in mismatches] == [race_id]
    assert mismatches[0].problem.startswith("places stored {1: 1, 2: ")  # 2: 1 if resigned in one ms
    assert mismatches[0].problem.endswith("the seats' figures give {1: 2, 2: 1}")
    async with database.transaction() as conn:
        await conn.execute(
            update(race_seats)
            .where(race_seats.c.race_id == race_id, race_seats.c.seat == 2)
            .values(cards_home=0)
        )
        await conn.execute(update(games).where(games.c.id == game_ids[1]).values(code="EO1-C8-AAAAAFA"))
    (mismatch,) = (await verify_races(database))[1]
    assert f"game {game_ids[1]} is of deal EO1-C8-AAAAAFA" in mismatch.problem
    assert await asyncio.to_thread(cli.main, ["verify", "--database-url", database_url]) == 1
    out = capsys.readouterr().out
    assert f"RACE MISMATCH {race_id}: seat 2's game" in out
    assert "verified 1 finished races: 1 mismatch(es)" in out
