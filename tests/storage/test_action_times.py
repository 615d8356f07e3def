"""The server's time of every action (migration 4c7e2a9d1f38): stored with the action on every write
path (the engine's on SQLite and PostgreSQL, the SQLite writer's journal), moved with it by the
compaction, read back with it; an action stored without one reads as unknown (None), never as 0."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from server.storage import ActionRecord, Database, StoredGame, repository
from server.storage.commit_backends import AppendActions, SqliteBackend, compact_journal
from tests.storage.test_repository import add_player_and_game
from tests.storage.test_sqlite_backend import GAMES, NoOtherWrites, path
from tests.support import dbutil

__all__ = ["path"]  # test_sqlite_backend's fixture: a migrated file with GAMES being played

#: 2026-12-07 12:00:00.123 UTC in milliseconds: past 2^32 (a 32-bit column would wrap it).
AT = 1_796_644_800_123


async def stored(database: Database, game_id: str) -> StoredGame:
    async with database.connection() as conn:
        game = await repository.load_game(conn, game_id)
    assert game is not None
    return game


async def test_each_action_keeps_its_time_and_an_unknown_one_stays_unknown(database: Database) -> None:
    await add_player_and_game(database, "g1", "g2")
    async with database.transaction() as conn:
        await repository.append_actions(
            conn,
            [
                ActionRecord("g1", 1, "t1-c5", AT),
                ActionRecord("g2", 1, "t8-c1", AT + 7),
                ActionRecord("g1", 2, "undo", AT + 1500),
            ],
        )
        await repository.insert_actions(conn, [("g1", 3, "t2-c6")])  # a row of before: no time
    game = await stored(database, "g1")
    assert game.actions == ("t1-c5", "undo", "t2-c6")
    assert game.action_times == (AT, AT + 1500, None)
    async with database.snapshot() as conn:
        walked = await repository.load_games_after(conn, None, 10)
    assert [(g.id, g.action_times) for g in walked] == [("g1", (AT, AT + 1500, None)), ("g2", (AT + 7,))]


async def test_the_writers_journal_keeps_the_times_and_the_compaction_moves_them(path: Path) -> None:
    writer = SqliteBackend(path, NoOtherWrites())
    try:
        writer.commit([AppendActions([ActionRecord(GAMES[0], v, "t1-c5", AT + v) for v in (1, 2)])])
        writer.commit([AppendActions([ActionRecord(GAMES[1], 1, "t1-c5", None)])])
        database = Database.create(dbutil.sqlite_url(path))
        try:
            in_journal = (await stored(database, GAMES[0])).action_times
            conn = sqlite3.connect(path, isolation_level=None)
            try:
                assert compact_journal(conn, 2) == 2  # a slice: GAMES[0]'s rows
                assert conn.execute("SELECT count(*) FROM action_journal").fetchone() == (1,)
                assert compact_journal(conn) == 1  # the rest
                moved = conn.execute("SELECT game_id, v, at_ms FROM actions ORDER BY game_id, v").fetchall()
            finally:
                conn.close()
            assert in_journal == (AT + 1, AT + 2)
            assert moved == [(GAMES[0], 1, AT + 1), (GAMES[0], 2, AT + 2), (GAMES[1], 1, None)]
            assert (await stored(database, GAMES[0])).action_times == (AT + 1, AT + 2)
            assert (await stored(database, GAMES[1])).action_times == (None,)
        finally:
            await database.dispose()
    finally:
        writer.close()
