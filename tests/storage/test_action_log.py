"""The SQLite writer thread of action appends: group commits, the (game, v) fence refusing only the
conflicting append of a batch, database failures refused without storing anything, and a close that
commits what was queued before it."""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import dbutil
import pytest

from server.storage import ActionRecord, Database, GameStart, PlayerRecord, repository
from server.storage.action_log import ActionAppendConflict, BatchStats, SqliteActionLog
from server.storage.db import sqlite_file

GAMES = [f"game-{index}" for index in range(20)]


@pytest.fixture
def migrated_url(tmp_path: Path) -> str:
    return dbutil.migrated_sqlite_url(tmp_path)


@pytest.fixture
async def database_file(migrated_url: str) -> AsyncIterator[Path]:
    """A migrated SQLite file holding one player and the games of ``GAMES``."""
    url = migrated_url
    database = Database.create(url, sqlite_synchronous="OFF")
    now = dt.datetime.now(dt.UTC)
    async with database.transaction() as conn:
        await repository.insert_player(conn, PlayerRecord("player", "player", "0" * 64, now))
        for game in GAMES:
            await repository.insert_game(conn, GameStart(game, "player", "EO1-C8-AAAAAFA", 8, None, now))
    await database.dispose()
    path = sqlite_file(url)
    assert path is not None
    yield path


def row(game: str, v: int, action: str) -> ActionRecord:
    """An append of ``action`` as version ``v`` of ``game``."""
    return ActionRecord(game, v, action)


def stored_rows(path: Path) -> list[tuple[str, int, str]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT game_id, v, action FROM actions ORDER BY game_id, v").fetchall()


async def test_concurrent_appends_are_grouped_into_few_commits(database_file: Path) -> None:
    batches: list[BatchStats] = []
    log = SqliteActionLog(database_file, synchronous="OFF", on_batch=batches.append)
    await asyncio.gather(*(log.append([row(game, v, "t1-c5")]) for v in (1, 2, 3) for game in GAMES))
    await log.close()
    assert len(stored_rows(database_file)) == 3 * len(GAMES)
    assert sum(batch.appends for batch in batches) == 3 * len(GAMES)
    assert sum(batch.actions for batch in batches) == 3 * len(GAMES)
    assert len(batches) < 3 * len(GAMES), "appends queued together must share commits"


async def test_the_fence_refuses_only_the_conflicting_append_of_a_batch(database_file: Path) -> None:
    log = SqliteActionLog(database_file, synchronous="OFF")
    await log.append([row(GAMES[0], 1, "t1-c5")])
    results = await asyncio.gather(
        log.append([row(GAMES[1], 1, "t1-c5")]),
        log.append([row(GAMES[0], 1, "undo")]),  # version 1 of GAMES[0] is already stored
        log.append([row(GAMES[2], 1, "t1-c5"), row(GAMES[2], 2, "undo")]),
        return_exceptions=True,
    )
    await log.close()
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], ActionAppendConflict)
    assert stored_rows(database_file) == [
        (GAMES[0], 1, "t1-c5"),
        (GAMES[1], 1, "t1-c5"),
        (GAMES[2], 1, "t1-c5"),
        (GAMES[2], 2, "undo"),
    ]


async def test_an_append_for_a_game_that_does_not_exist_is_refused(database_file: Path) -> None:
    log = SqliteActionLog(database_file, synchronous="OFF")
    with pytest.raises(ActionAppendConflict):  # the foreign key is a constraint like the fence
        await log.append([row("no-such-game", 1, "t1-c5")])
    await log.close()
    assert stored_rows(database_file) == []


async def test_a_database_failure_stores_nothing_and_the_next_append_works(
    database_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = SqliteActionLog(database_file, synchronous="OFF")
    real_connect = SqliteActionLog._connect
    failures = iter([sqlite3.OperationalError("disk I/O error")])

    def connect_failing_once(self: SqliteActionLog) -> sqlite3.Connection:
        for failure in failures:
            raise failure
        return real_connect(self)

    monkeypatch.setattr(SqliteActionLog, "_connect", connect_failing_once)
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        await log.append([row(GAMES[0], 1, "t1-c5")])
    assert stored_rows(database_file) == []
    await log.append([row(GAMES[0], 1, "t1-c5")])  # the thread is alive and reconnects
    await log.close()
    assert stored_rows(database_file) == [(GAMES[0], 1, "t1-c5")]


async def test_close_commits_what_was_queued_then_refuses_appends(database_file: Path) -> None:
    log = SqliteActionLog(database_file, synchronous="OFF")
    queued = [asyncio.ensure_future(log.append([row(game, 1, "t1-c5")])) for game in GAMES]
    await asyncio.sleep(0)  # every append is in the queue
    await log.close()
    await asyncio.gather(*queued)
    assert len(stored_rows(database_file)) == len(GAMES)
    with pytest.raises(sqlite3.OperationalError, match="closed"):
        await log.append([row(GAMES[0], 2, "undo")])


async def test_close_without_any_append_starts_no_thread(database_file: Path) -> None:
    log = SqliteActionLog(database_file)
    await log.close()
    assert stored_rows(database_file) == []
