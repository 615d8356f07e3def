"""The lookups of sealed shared deals (`server.services.sealing`): which daily a game plays, and what a player
has played of a day's dailies; on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from server.storage import DailyStanding, Database, GameDaily, repository
from server.storage.records import LiveRoomsChange
from server.storage.unfinished import abandon_games
from tests.storage.test_repository import CODE, player, result, start

DAY = date(2026, 12, 1)
T0 = datetime(2026, 12, 1, 9, tzinfo=UTC)


async def test_game_daily_names_the_day_and_variant_of_a_game(database: Database) -> None:
    async with database.transaction() as conn:
        await repository.insert_player(conn, player("p1"))
        await repository.insert_game(conn, start("daily4", "p1", cells=4, daily_date=DAY, started_at=T0))
        await repository.insert_game(conn, start("free", "p1", started_at=T0))
    async with database.connection() as conn:
        assert await repository.game_daily(conn, "daily4") == GameDaily("p1", DAY, 4, CODE)
        assert await repository.game_daily(conn, "free") == GameDaily("p1", None, 8, CODE)
        assert await repository.game_daily(conn, "no-such-game") is None


async def test_daily_standings_per_day_and_variant(database: Database) -> None:
    """Finished (won or resigned) and unfinished games count; abandoned ones, other players' games,
    free games and other days do not."""
    yesterday = DAY - timedelta(days=1)
    async with database.transaction() as conn:
        for player_id in ("p1", "p2"):
            await repository.insert_player(conn, player(player_id))
        games = [
            ("won8", "p1", 8, DAY),
            ("playing8", "p1", 8, DAY),
            ("resigned4", "p1", 4, DAY),
            ("playing2", "p1", 2, yesterday),
            ("abandoned2", "p1", 2, DAY),
            ("free8", "p1", 8, None),
            ("other8", "p2", 8, DAY),
            ("old8", "p1", 8, DAY - timedelta(days=5)),
        ]
        for game_id, player_id, cells, day in games:
            await repository.insert_game(
                conn, start(game_id, player_id, cells=cells, daily_date=day, started_at=T0)
            )
        await repository.finish_game(conn, result("won8", status="won"))
        await repository.finish_game(conn, result("resigned4", status="resigned"))
        await repository.finish_game(conn, result("free8", status="won"))
        await abandon_games(conn, ["abandoned2"])
    async with database.connection() as conn:
        standings = await repository.daily_standings(conn, "p1", [DAY, yesterday, DAY])
        assert standings == [
            DailyStanding(yesterday, 2, finished=False, playing=True),
            DailyStanding(DAY, 4, finished=True, playing=False),
            DailyStanding(DAY, 8, finished=True, playing=True),
        ]
        assert await repository.daily_standings(conn, "p2", [yesterday]) == []
        assert await repository.daily_standings(conn, "p1", []) == []
        assert await repository.daily_standings(conn, "nobody", [DAY]) == []


async def test_live_games_carry_their_variant_and_daily_date(database: Database) -> None:
    async with database.transaction() as conn:
        await repository.insert_player(conn, player("p1"))
        await repository.insert_game(conn, start("daily4", "p1", cells=4, daily_date=DAY, started_at=T0))
        await repository.insert_game(conn, start("free", "p1", started_at=T0 + timedelta(seconds=1)))
        await repository.insert_game(conn, start("nobody-there", "p1", started_at=T0 + timedelta(seconds=2)))
        # Only games whose room some process holds are live; two holders of one game are one row.
        for holder, held in (("node-a/1", ("daily4", "free")), ("node-b/2", ("free",))):
            await repository.set_live_rooms(conn, LiveRoomsChange(holder, held, released=()))
    async with database.connection() as conn:
        found = await repository.live_games(conn, active_since=T0, after=None, limit=10)
    assert [(game.id, game.cells, game.daily_date) for game in found] == [
        ("free", 8, None),
        ("daily4", 4, DAY),
    ]
    async with database.transaction() as conn:
        released = LiveRoomsChange("node-a/1", held=(), released=("free", "daily4"))
        await repository.set_live_rooms(conn, released)
    async with database.connection() as conn:
        found = await repository.live_games(conn, active_since=T0, after=None, limit=10)
    assert [game.id for game in found] == ["free"]  # node-b still holds it
    async with database.transaction() as conn:
        await repository.clear_live_rooms(conn, "node-b/2")
    async with database.connection() as conn:
        assert await repository.live_games(conn, active_since=T0, after=None, limit=10) == []
