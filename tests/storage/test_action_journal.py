"""SQLite's action journal and its fence (migration 8f3a6c1d2e90): the writers append actions to
``action_journal`` and move each game's row of ``game_fences`` with one compare-and-set per commit;
the compaction moves the journal into ``actions``; reads see both tables.

Two `SqliteBackend` objects on one file are two connections with locks of their own, as two worker
processes' writers are: what fences them is the database, not the process."""

from __future__ import annotations

import datetime as dt
import logging
import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy.exc import IntegrityError

from server.storage import ActionRecord, Database, repository
from server.storage.commit_backends import SqliteBackend, Write, WriteConflict, compact_journal
from server.storage.records import GameResult
from server.storage.unfinished import abandon_games
from tests.storage.test_sqlite_backend import GAMES, NoOtherWrites, path
from tests.support import dbutil

__all__ = ["path"]  # a fixture of test_sqlite_backend's: a migrated file with GAMES being played

ENDED = dt.datetime(2026, 12, 3, 12, 0, tzinfo=dt.UTC)
#: Threads racing for the versions of one game, and the commits each tries.
RACERS = 4
TRIES = 60


def appended(game: str, *versions: int) -> Write:
    return Write(actions=[ActionRecord(game, v, f"t{v % 8 + 1}-c5") for v in versions])


def table_rows(path: Path, table: str) -> list[tuple[str, int]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"SELECT game_id, v FROM {table} ORDER BY game_id, v").fetchall()
    finally:
        conn.close()


def fence(path: Path, game: str) -> int | None:
    conn = sqlite3.connect(path)
    try:
        row = conn.execute("SELECT v FROM game_fences WHERE game_id = ?", [game]).fetchone()
        return None if row is None else row[0]
    finally:
        conn.close()


async def loaded(path: Path, game: str) -> tuple[str, ...]:
    database = Database.create(dbutil.sqlite_url(path))
    try:
        async with database.connection() as conn:
            stored = await repository.load_game(conn, game)
            assert stored is not None
            return stored.actions
    finally:
        await database.dispose()


def test_two_writers_never_both_store_a_version(path: Path) -> None:
    """The second writer's batch is refused whole when one of its games is already at that version;
    each writer goes on from what is stored."""
    first = SqliteBackend(path, NoOtherWrites())
    second = SqliteBackend(path, NoOtherWrites())
    try:
        first.commit([appended(GAMES[0], 1)])
        with pytest.raises(WriteConflict):
            second.commit([appended(GAMES[1], 1), appended(GAMES[0], 1)])
        second.commit([appended(GAMES[0], 2, 3)])
        with pytest.raises(WriteConflict):
            first.commit([appended(GAMES[0], 3)])
        with pytest.raises(WriteConflict):  # a version twice in one batch
            first.commit([appended(GAMES[2], 1), appended(GAMES[2], 1)])
    finally:
        first.close()
        second.close()
    assert table_rows(path, "actions") == [(GAMES[0], 1), (GAMES[0], 2), (GAMES[0], 3)]
    assert fence(path, GAMES[0]) == 3 and fence(path, GAMES[1]) == 0 and fence(path, GAMES[2]) == 0


def test_writers_racing_for_one_game_store_each_version_once(path: Path) -> None:
    """Writers on connections of their own read the game's version and commit the next, all at once:
    the stored versions are 1 to n, each once, and n is the number of commits that succeeded."""
    stored: list[int] = []
    lock = threading.Lock()

    def race() -> None:
        writer = SqliteBackend(path, NoOtherWrites(), synchronous="OFF")
        try:
            for _ in range(TRIES):
                version = fence(path, GAMES[0])
                assert version is not None
                try:
                    writer.commit([appended(GAMES[0], version + 1)])
                except WriteConflict:
                    continue
                with lock:
                    stored.append(version + 1)
        finally:
            writer.close()

    threads = [threading.Thread(target=race) for _ in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(stored) == list(range(1, len(stored) + 1))
    assert table_rows(path, "actions") == [(GAMES[0], v) for v in range(1, len(stored) + 1)]


async def test_a_game_that_ended_or_does_not_exist_takes_no_action(path: Path) -> None:
    """Finished (through the engine's `finish_game`), abandoned, or unknown: no row in ``game_fences``,
    so the fence refuses its actions, through the writer and through the engine alike."""
    database = Database.create(dbutil.sqlite_url(path))
    writer = SqliteBackend(path, NoOtherWrites())
    try:
        writer.commit([appended(GAMES[0], 1), appended(GAMES[1], 1)])
        async with database.transaction() as conn:
            result = GameResult(GAMES[0], "resigned", 0, 1, 0, ENDED, 1000, won=False)
            assert await repository.finish_game(conn, result)
            assert await abandon_games(conn, [GAMES[1]]) == 1
        for game in (GAMES[0], GAMES[1], "no-such-game"):
            assert fence(path, game) is None
            with pytest.raises(WriteConflict):
                writer.commit([appended(game, 2 if game != "no-such-game" else 1)])
            with pytest.raises(IntegrityError):
                async with database.transaction() as conn:
                    await repository.insert_actions(conn, [(game, 2, "t1-c5")])
    finally:
        writer.close()
        await database.dispose()
    assert table_rows(path, "actions") == [(GAMES[0], 1), (GAMES[1], 1)]


async def test_reads_see_the_journal_and_the_compacted_rows_in_version_order(path: Path) -> None:
    writer = SqliteBackend(path, NoOtherWrites())
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        writer.commit([appended(GAMES[0], 1, 2), appended(GAMES[1], 1)])
        assert compact_journal(conn) == 3
        writer.commit([appended(GAMES[0], 3), appended(GAMES[1], 2)])
        writer.commit([appended(GAMES[0], 4)])
        assert table_rows(path, "actions") == [(GAMES[0], 1), (GAMES[0], 2), (GAMES[1], 1)]
        assert table_rows(path, "action_journal") == [(GAMES[0], 3), (GAMES[0], 4), (GAMES[1], 2)]
        expected = ("t2-c5", "t3-c5", "t4-c5", "t5-c5")
        assert await loaded(path, GAMES[0]) == expected
        database = Database.create(dbutil.sqlite_url(path))
        try:
            async with database.connection() as reader:
                games = await repository.load_games_after(reader, None, len(GAMES))
        finally:
            await database.dispose()
        by_id = {game.id: game.actions for game in games}
        assert by_id[GAMES[0]] == expected and by_id[GAMES[1]] == ("t2-c5", "t3-c5")
    finally:
        writer.close()
        conn.close()


def test_compactions_at_once_move_every_row_exactly_once(path: Path) -> None:
    """Two compactions on connections of their own: one moves the journal, the other finds it empty
    (the write lock is held from the move to the commit)."""
    writer = SqliteBackend(path, NoOtherWrites())
    try:
        for v in range(1, 11):
            writer.commit([appended(game, v) for game in GAMES[:20]])
    finally:
        writer._journaled = 0  # left for the compactions under test
        writer.close()
    moved: list[int] = []
    start = threading.Barrier(2)

    def compact() -> None:
        conn = sqlite3.connect(path, isolation_level=None, timeout=30)
        try:
            start.wait()
            moved.append(compact_journal(conn))
        finally:
            conn.close()

    threads = [threading.Thread(target=compact) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(moved) == [0, 200]
    assert table_rows(path, "action_journal") == []
    assert table_rows(path, "actions") == sorted((game, v) for game in GAMES[:20] for v in range(1, 11))


def test_the_writer_compacts_once_it_journaled_enough_and_when_it_closes(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("server.storage.commit_backends.JOURNAL_ROWS_PER_COMPACTION", 10)
    writer = SqliteBackend(path, NoOtherWrites())
    try:
        writer.commit([appended(game, 1) for game in GAMES[:9]])
        writer.tidy()
        assert len(table_rows(path, "action_journal")) == 9
        writer.commit([appended(game, 1) for game in GAMES[9:11]])
        writer.tidy()
        assert table_rows(path, "action_journal") == []
        assert len(table_rows(path, "actions")) == 11
        writer.commit([appended(GAMES[0], 2)])
    finally:
        writer.close()
    assert table_rows(path, "action_journal") == []
    assert len(table_rows(path, "actions")) == 12


def test_a_failed_compaction_leaves_the_rows_and_is_tried_again_as_many_rows_later(
    path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("server.storage.commit_backends.JOURNAL_ROWS_PER_COMPACTION", 10)
    failures = iter([sqlite3.OperationalError("disk I/O error")])
    real_compact = compact_journal

    def compact_failing_once(conn: sqlite3.Connection) -> int:
        for failure in failures:
            raise failure
        return real_compact(conn)

    monkeypatch.setattr("server.storage.commit_backends.compact_journal", compact_failing_once)
    writer = SqliteBackend(path, NoOtherWrites())
    try:
        writer.commit([appended(game, 1) for game in GAMES[:10]])
        with caplog.at_level(logging.WARNING, logger="server.storage.commit_backends"):
            writer.tidy()
        assert "compacting the action journal" in caplog.text and "disk I/O error" in caplog.text
        assert len(table_rows(path, "action_journal")) == 10
        writer.commit([appended(game, 2) for game in GAMES[:5]])
        writer.tidy()  # 5 rows since the failure: not yet
        assert len(table_rows(path, "action_journal")) == 15
        writer.commit([appended(game, 3) for game in GAMES[:5]])
        writer.tidy()
        assert table_rows(path, "action_journal") == []
        assert len(table_rows(path, "actions")) == 20
    finally:
        writer.close()
