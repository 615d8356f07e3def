"""server.storage.repository on a migrated database, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import event, select
from sqlalchemy.exc import IntegrityError, StatementError

from server.storage import Database, GameResult, GameStart, PlayerRecord, StoredGame, repository
from server.storage.tables import games
from tests.support import dbutil

T0 = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)
CODE = "EO1-C8-AAAAAFA"


def player(player_id: str = "p1", *, token_hash: str | None = None, name: str = "Ada") -> PlayerRecord:
    return PlayerRecord(id=player_id, name=name, token_hash=token_hash or f"{player_id:0>64}", created_at=T0)


def start(
    game_id: str = "g1",
    player_id: str = "p1",
    *,
    started_at: datetime = T0,
    cells: int = 8,
    daily_date: date | None = None,
) -> GameStart:
    return GameStart(
        id=game_id, player_id=player_id, code=CODE, cells=cells, daily_date=daily_date, started_at=started_at
    )


def result(game_id: str = "g1", *, status: str = "won", finished_at: datetime | None = None) -> GameResult:
    return GameResult(
        id=game_id,
        status=status,
        score=520,
        moves=97,
        undos=3,
        finished_at=finished_at or T0 + timedelta(minutes=5),
        duration_ms=300_000,
        won=status == "won",
    )


async def add_player_and_game(database: Database, *game_ids: str, player_id: str = "p1") -> None:
    async with database.transaction() as conn:
        await repository.insert_player(conn, player(player_id))
        for i, game_id in enumerate(game_ids or ("g1",)):
            started_at = T0 + timedelta(seconds=i)
            await repository.insert_game(conn, start(game_id, player_id, started_at=started_at))


async def load(database: Database, game_id: str = "g1") -> StoredGame:
    async with database.connection() as conn:
        game = await repository.load_game(conn, game_id)
    assert game is not None
    return game


# Players ------------------------------------------------------------------------------------------------


async def test_insert_player_then_get_player_and_by_token_hash(database: Database) -> None:
    ada = player("p1", token_hash="ab" * 32)
    async with database.transaction() as conn:
        await repository.insert_player(conn, ada)
    async with database.connection() as conn:
        assert await repository.get_player(conn, "p1") == ada
        assert await repository.get_player_by_token_hash(conn, "ab" * 32) == ada


async def test_get_player_missing_is_none(database: Database) -> None:
    async with database.connection() as conn:
        assert await repository.get_player(conn, "nobody") is None
        assert await repository.get_player_by_token_hash(conn, "00" * 32) is None


async def test_insert_player_duplicate_token_hash_raises(database: Database) -> None:
    async with database.transaction() as conn:
        await repository.insert_player(conn, player("p1", token_hash="cd" * 32))
    with pytest.raises(IntegrityError):
        async with database.transaction() as conn:
            await repository.insert_player(conn, player("p2", token_hash="cd" * 32))


async def test_insert_player_duplicate_id_raises(database: Database) -> None:
    async with database.transaction() as conn:
        await repository.insert_player(conn, player("p1"))
    with pytest.raises(IntegrityError):
        async with database.transaction() as conn:
            await repository.insert_player(conn, player("p1", token_hash="ef" * 32))


# Games --------------------------------------------------------------------------------------------------


async def test_insert_game_then_load_game(database: Database) -> None:
    async with database.transaction() as conn:
        await repository.insert_player(conn, player())
        await repository.insert_game(conn, start(cells=4, daily_date=date(2026, 11, 30)))
    assert await load(database) == StoredGame(
        id="g1",
        player_id="p1",
        code=CODE,
        cells=4,
        daily_date=date(2026, 11, 30),
        status="playing",
        score=0,
        moves=0,
        undos=0,
        started_at=T0,
        finished_at=None,
        duration_ms=None,
        won=False,
        actions=(),
    )


async def test_load_game_missing_is_none(database: Database) -> None:
    async with database.connection() as conn:
        assert await repository.load_game(conn, "nope") is None


async def test_insert_game_unknown_player_raises(database: Database) -> None:
    with pytest.raises(IntegrityError):
        async with database.transaction() as conn:
            await repository.insert_game(conn, start(player_id="ghost"))


async def test_insert_game_bad_cells_refused_by_check_constraint(database: Database) -> None:
    async with database.transaction() as conn:
        await repository.insert_player(conn, player())
    with pytest.raises(IntegrityError):
        async with database.transaction() as conn:
            await repository.insert_game(conn, start(cells=3))


async def test_count_games(database: Database) -> None:
    async with database.connection() as conn:
        assert await repository.count_games(conn) == 0
    await add_player_and_game(database, "g1", "g2", "g3")
    async with database.connection() as conn:
        assert await repository.count_games(conn) == 3


# Actions and the (game_id, v) fence ---------------------------------------------------------------------


async def test_insert_actions_load_in_version_order(database: Database) -> None:
    await add_player_and_game(database, "g1", "g2")
    async with database.transaction() as conn:
        await repository.insert_actions(
            conn, [("g1", 2, "c2-fH"), ("g2", 1, "t8-c1"), ("g1", 1, "t1-t4:3"), ("g1", 3, "undo")]
        )
    async with database.transaction() as conn:
        await repository.insert_actions(conn, [("g1", 4, "t2-c3")])
    game = await load(database, "g1")
    assert game.actions == ("t1-t4:3", "c2-fH", "undo", "t2-c3")
    assert game.version == 4
    assert (await load(database, "g2")).actions == ("t8-c1",)


async def test_insert_actions_empty_batch_is_a_no_op(database: Database) -> None:
    await add_player_and_game(database)
    async with database.transaction() as conn:
        await repository.insert_actions(conn, [])
    assert (await load(database)).actions == ()


async def test_insert_actions_existing_version_raises_and_rolls_back_the_batch(database: Database) -> None:
    await add_player_and_game(database)
    async with database.transaction() as conn:
        await repository.insert_actions(conn, [("g1", 1, "t1-c1"), ("g1", 2, "t2-c2")])
    with pytest.raises(IntegrityError):
        async with database.transaction() as conn:
            await repository.insert_actions(conn, [("g1", 3, "t3-c3"), ("g1", 2, "t4-c4")])
    assert (await load(database)).actions == ("t1-c1", "t2-c2")


async def test_insert_actions_same_version_twice_in_a_batch_raises(database: Database) -> None:
    await add_player_and_game(database)
    with pytest.raises(IntegrityError):
        async with database.transaction() as conn:
            await repository.insert_actions(conn, [("g1", 1, "t1-c1"), ("g1", 1, "t2-c2")])
    assert (await load(database)).actions == ()


async def test_two_writers_cannot_both_commit_a_version(database: Database) -> None:
    await add_player_and_game(database)
    first_inserted = asyncio.Event()

    async def first_writer() -> None:
        async with database.transaction() as conn:
            await repository.insert_actions(conn, [("g1", 1, "t1-c1")])
            first_inserted.set()
            await asyncio.sleep(0.2)  # the scenario under test: a transaction held open while another tries

    async def second_writer() -> None:
        # bounded: if the first writer's insert fails, the test fails on it instead of hanging
        await asyncio.wait_for(first_inserted.wait(), timeout=10)
        async with database.transaction() as conn:
            await repository.insert_actions(conn, [("g1", 1, "t2-c1")])

    outcomes = await asyncio.gather(first_writer(), second_writer(), return_exceptions=True)
    assert outcomes[0] is None
    assert isinstance(outcomes[1], IntegrityError)
    assert (await load(database)).actions == ("t1-c1",)


async def test_insert_actions_unknown_game_raises(database: Database) -> None:
    with pytest.raises(IntegrityError):
        async with database.transaction() as conn:
            await repository.insert_actions(conn, [("ghost", 1, "t1-c1")])


async def test_insert_actions_version_zero_refused(database: Database) -> None:
    await add_player_and_game(database)
    with pytest.raises(IntegrityError):
        async with database.transaction() as conn:
            await repository.insert_actions(conn, [("g1", 0, "t1-c1")])


# Finishing ----------------------------------------------------------------------------------------------


async def test_finish_game_writes_the_final_figures(database: Database) -> None:
    await add_player_and_game(database)
    async with database.transaction() as conn:
        await repository.insert_actions(conn, [("g1", 1, "t1-c1")])
        assert await repository.finish_game(conn, result()) is True
    game = await load(database)
    assert (game.status, game.score, game.moves, game.undos) == ("won", 520, 97, 3)
    assert (game.finished_at, game.duration_ms, game.won) == (T0 + timedelta(minutes=5), 300_000, True)
    assert game.actions == ("t1-c1",)


async def test_finish_game_refuses_a_finished_game(database: Database) -> None:
    await add_player_and_game(database)
    async with database.transaction() as conn:
        assert await repository.finish_game(conn, result(status="resigned")) is True
    async with database.transaction() as conn:
        assert await repository.finish_game(conn, result(status="won")) is False
    game = await load(database)
    assert (game.status, game.won) == ("resigned", False)


async def test_finish_game_unknown_game_is_false(database: Database) -> None:
    async with database.transaction() as conn:
        assert await repository.finish_game(conn, result("ghost")) is False


async def test_finish_game_playing_status_raises(database: Database) -> None:
    await add_player_and_game(database)
    async with database.transaction() as conn:
        with pytest.raises(ValueError, match="playing"):
            await repository.finish_game(conn, result(status="playing"))


async def test_unfinished_game_ids_oldest_first(database: Database) -> None:
    await add_player_and_game(database, "g1", "g2", "g3", "g4")
    await add_player_and_game(database, "h1", player_id="p2")
    async with database.transaction() as conn:
        # g4 started first, g1 ... g3 one second apart after it.
        an_hour_earlier = T0 - timedelta(hours=1)
        await conn.execute(games.update().where(games.c.id == "g4").values(started_at=an_hour_earlier))
        assert await repository.finish_game(conn, result("g2")) is True
    async with database.connection() as conn:
        assert await repository.unfinished_game_ids(conn, "p1") == ["g4", "g1", "g3"]
        assert await repository.unfinished_game_ids(conn, "p2") == ["h1"]
        assert await repository.unfinished_game_ids(conn, "nobody") == []


# Timestamps ---------------------------------------------------------------------------------------------


async def test_timestamps_round_trip_as_aware_utc(database: Database) -> None:
    plus_five = timezone(timedelta(hours=5))
    created = datetime(2026, 11, 30, 17, 30, 0, 654321, tzinfo=plus_five)
    async with database.transaction() as conn:
        await repository.insert_player(conn, PlayerRecord("p1", "Ada", "ab" * 32, created))
        await repository.insert_game(conn, start(started_at=created))
        await repository.finish_game(conn, result(finished_at=created + timedelta(seconds=1)))
    async with database.connection() as conn:
        ada = await repository.get_player(conn, "p1")
    game = await load(database)
    assert ada is not None
    for moment in (ada.created_at, game.started_at, game.finished_at):
        assert moment is not None
        assert moment.tzinfo is not None and moment.utcoffset() == timedelta(0)
    assert ada.created_at == created
    assert ada.created_at == datetime(2026, 11, 30, 12, 30, 0, 654321, tzinfo=UTC)
    assert game.finished_at == created + timedelta(seconds=1)


async def test_timestamps_sort_in_time_order_whatever_their_offset(database: Database) -> None:
    await add_player_and_game(database, "early", "late")
    late = datetime(2026, 11, 30, 13, 0, tzinfo=UTC)
    early_in_tokyo = datetime(2026, 11, 30, 21, 0, tzinfo=timezone(timedelta(hours=9)))  # 12:00 UTC
    async with database.transaction() as conn:
        await repository.finish_game(conn, result("late", finished_at=late))
        await repository.finish_game(conn, result("early", finished_at=early_in_tokyo))
    async with database.connection() as conn:
        ordered = list(await conn.scalars(select(games.c.id).order_by(games.c.finished_at)))
    assert ordered == ["early", "late"]


async def test_naive_timestamps_are_refused(database: Database) -> None:
    with pytest.raises(StatementError, match="naive datetime"):
        async with database.transaction() as conn:
            await repository.insert_player(conn, PlayerRecord("p1", "Ada", "ab" * 32, datetime(2026, 1, 1)))


async def test_on_postgresql_a_batch_of_actions_is_one_statement_not_one_per_row(postgres_url: str) -> None:
    """asyncpg's executemany binds and runs the INSERT once per row (a backend executor start-up, the
    row's protocol messages); the rows go as three arrays in one statement instead."""
    database = Database.create(postgres_url)
    statements: list[tuple[str, bool]] = []

    def record(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool
    ) -> None:
        statements.append((statement, executemany))

    try:
        async with database.transaction() as conn:
            await dbutil.clear_tables(conn)
        await add_player_and_game(database, "g1", "g2")
        event.listen(database.engine.sync_engine, "before_cursor_execute", record)
        async with database.transaction() as conn:
            await repository.insert_actions(conn, [("g1", 1, "t1-c5"), ("g2", 1, "t8-c1"), ("g1", 2, "undo")])
        event.remove(database.engine.sync_engine, "before_cursor_execute", record)
        inserts = [(sql, many) for sql, many in statements if sql.lstrip().upper().startswith("INSERT")]
        assert len(inserts) == 1 and inserts[0][1] is False, inserts
        assert (await load(database, "g1")).actions == ("t1-c5", "undo")
        assert (await load(database, "g2")).actions == ("t8-c1",)
    finally:
        await database.dispose()
