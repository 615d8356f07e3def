"""The SQLite writer (`SqliteBackend`) on its own connection, under a server's load of appends: the
write-ahead log is checkpointed into the database file as it fills, stays bounded, and no committed
action is lost on the way; the clustered actions table still fences versions and finished games; a
batch written in several multi-row INSERTs is still one transaction."""

from __future__ import annotations

import logging
import shutil
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from server.storage import ActionRecord, StorageUnavailable, commit_backends
from server.storage.commit_backends import ROWS_PER_INSERT, SqliteBackend, Write, WriteConflict
from server.storage.db import SQLITE_WAL_SIZE_LIMIT, sqlite_file
from tests.server.test_startup import can_chattr, unwritable
from tests.support import dbutil

__all__ = ["can_chattr"]  # a fixture of test_startup's, used here

GAMES = [f"game-{index:03}" for index in range(100)]
ROWS_PER_COMMIT = 51
STARTED = "2026-11-30 12:00:00.000000"


class NoOtherWrites:
    """The backend for writes other than appends: none is expected here."""

    def commit(self, writes: Sequence[Write]) -> None:
        raise AssertionError(f"unexpected writes {writes}")

    def close(self) -> None:
        pass


@pytest.fixture
def path(tmp_path: Path) -> Path:
    """A migrated SQLite file with one player and ``GAMES`` being played."""
    database = sqlite_file(dbutil.migrated_sqlite_url(tmp_path))
    assert database is not None
    with sqlite3.connect(database) as conn:
        conn.execute(
            "INSERT INTO players (id, name, token_hash, created_at) VALUES ('p', 'p', 'h', ?)", [STARTED]
        )
        conn.executemany(
            "INSERT INTO games (id, player_id, code, cells, status, started_at) "
            "VALUES (?, 'p', 'EO1-C8-AAAAAFA', 8, 'playing', ?)",
            [(game, STARTED) for game in GAMES],
        )
    conn.close()
    return database


@pytest.fixture
def backend(path: Path) -> Iterator[SqliteBackend]:
    writer = SqliteBackend(path, NoOtherWrites(), synchronous="FULL")
    yield writer
    writer.close()


def stored_actions(path: Path) -> list[tuple[str, int]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT game_id, v FROM actions ORDER BY game_id, v").fetchall()
    finally:
        conn.close()


def wal_size(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return wal.stat().st_size if wal.exists() else 0


def test_checkpoints_keep_every_committed_action_and_bound_the_log(
    backend: SqliteBackend, path: Path, tmp_path: Path
) -> None:
    """Commits as the server makes them (51 rows of distinct games each) write about a 4 KiB page of
    log per row: 700 of them fill the log several times over. It is checkpointed into the database
    file and reused (the checkpoint sequence number of its header counts the restarts), never grows
    past `SQLITE_WAL_SIZE_LIMIT`, and copies of the files taken with the writer still open (what a
    crash leaves) hold every committed row, the database file alone the checkpointed ones."""
    versions = dict.fromkeys(GAMES, 0)
    committed: list[tuple[str, int]] = []
    largest_wal = 0
    for commit in range(700):
        rows = []
        for index in range(ROWS_PER_COMMIT):
            game = GAMES[(commit * ROWS_PER_COMMIT + index) % len(GAMES)]
            versions[game] += 1
            rows.append(ActionRecord(game, versions[game], "t1-c5"))
        backend.commit([Write(actions=rows)])
        committed += [(row.game_id, row.v) for row in rows]
        largest_wal = max(largest_wal, wal_size(path))

    assert wal_restarts(path) >= 2
    assert largest_wal <= SQLITE_WAL_SIZE_LIMIT
    crashed = copy_files(path, tmp_path / "crashed", ("", "-wal"))
    assert stored_actions(crashed) == sorted(committed)
    checkpointed = stored_actions(copy_files(path, tmp_path / "checkpointed", ("",)))
    assert checkpointed
    assert set(checkpointed) <= set(committed)


def wal_restarts(path: Path) -> int:
    """The checkpoint sequence number of the log's header: how many times it was started again."""
    header = path.with_name(path.name + "-wal").read_bytes()[:32]
    return int.from_bytes(header[12:16], "big")


def copy_files(path: Path, directory: Path, suffixes: Sequence[str]) -> Path:
    directory.mkdir()
    for suffix in suffixes:
        shutil.copyfile(f"{path}{suffix}", directory / f"{path.name}{suffix}")
    return directory / path.name


def test_the_clustered_actions_table_still_fences_versions_and_finished_games(
    backend: SqliteBackend, path: Path
) -> None:
    """The appends' table is WITHOUT ROWID; the same batch is refused whole for a version already
    stored, an action of a game no longer playing, or a game that does not exist."""
    with sqlite3.connect(path) as conn:
        (table,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'actions'").fetchone()
        conn.execute("UPDATE games SET status = 'won' WHERE id = ?", [GAMES[1]])
    conn.close()
    assert "WITHOUT ROWID" in table
    backend.commit([Write(actions=[ActionRecord(GAMES[0], 1, "t1-c5")])])
    refused = {
        "UNIQUE constraint failed": ActionRecord(GAMES[0], 1, "undo"),
        "the game is finished": ActionRecord(GAMES[1], 1, "t1-c5"),
        "FOREIGN KEY constraint failed": ActionRecord("no-such-game", 1, "t1-c5"),
    }
    for message, row in refused.items():
        with pytest.raises(WriteConflict, match=message):
            backend.commit([Write(actions=[ActionRecord(GAMES[2], 1, "t1-c5"), row])])
    assert stored_actions(path) == [(GAMES[0], 1)]
    backend.commit([Write(actions=[ActionRecord(GAMES[2], 1, "t1-c5")])])
    assert stored_actions(path) == [(GAMES[0], 1), (GAMES[2], 1)]


def test_a_batch_of_several_inserts_commits_whole_or_not_at_all(backend: SqliteBackend, path: Path) -> None:
    """A batch longer than `ROWS_PER_INSERT` goes in several statements of one transaction: a row
    refused in the last one (here a version already stored) takes the earlier statements' rows with
    it; the same batch without it is stored whole."""
    rows = [ActionRecord(game, v, "t1-c5") for v in (1, 2) for game in GAMES[:90]]
    assert len(rows) > 2 * ROWS_PER_INSERT
    backend.commit([Write(actions=[ActionRecord(GAMES[89], 3, "undo")])])

    with pytest.raises(WriteConflict, match="UNIQUE constraint failed"):
        backend.commit(
            [Write(actions=rows[:100]), Write(actions=[*rows[100:], ActionRecord(GAMES[89], 3, "x")])]
        )
    assert stored_actions(path) == [(GAMES[89], 3)]

    backend.commit([Write(actions=rows[:100]), Write(actions=rows[100:])])
    assert stored_actions(path) == sorted([(row.game_id, row.v) for row in rows] + [(GAMES[89], 3)])


@pytest.mark.usefixtures("can_chattr")
def test_a_database_file_that_cannot_be_written_refuses_writes_instead_of_growing_the_log(
    path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 20, item 8: the database file made immutable mid-run, SQLite's automatic checkpoints
    fail without a word and the log grew by every (acknowledged) commit. Now, past ``log_limit``, the
    writer's own checkpoint fails: one error line, and each commit is refused ``StorageUnavailable``
    with nothing written, until the file can be written again; then every refused write can be
    committed and nothing acknowledged was lost."""
    writer = SqliteBackend(path, NoOtherWrites(), synchronous="OFF", log_limit=256 * 2**10)
    versions = dict.fromkeys(GAMES, 0)
    committed: list[tuple[str, int]] = []

    def commit() -> None:
        rows = [ActionRecord(game, versions[game] + 1, "t1-c5") for game in GAMES[:ROWS_PER_COMMIT]]
        writer.commit([Write(actions=rows)])
        for row in rows:
            versions[row.game_id] = row.v
            committed.append((row.game_id, row.v))

    try:
        commit()  # the writer's connection is open when the file is made immutable (mid-run)
        with unwritable(path), caplog.at_level(logging.WARNING, logger=commit_backends.__name__):
            for _ in range(50):  # 51 pages of log each: past the limit in a few
                try:
                    commit()
                except StorageUnavailable:
                    break
            else:
                raise AssertionError(f"50 commits into a log of {wal_size(path)} bytes, none refused")
            full = wal_size(path)
            for _ in range(20):  # refused at once, the log as it was
                with pytest.raises(StorageUnavailable, match="the database file cannot be written"):
                    commit()
            monkeypatch.setattr(commit_backends, "LOG_CHECK_INTERVAL", 0.0)
            with pytest.raises(StorageUnavailable):  # checked again: still not writable
                commit()
            assert wal_size(path) == full
        errors = [record for record in caplog.records if "cannot be written" in record.getMessage()]
        assert len(errors) == 1 and errors[0].levelno == logging.ERROR, caplog.records
        assert str(path) in errors[0].getMessage()
        commit()  # the file is writable again: the checkpoint goes through, writes resume
        assert any("written again" in record.getMessage() for record in caplog.records)
        assert wal_size(path) <= SQLITE_WAL_SIZE_LIMIT
    finally:
        writer.close()
    assert stored_actions(path) == sorted(committed)
