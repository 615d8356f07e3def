"""SQLite's action journal and its fence (migration 8f3a6c1d2e90): the writers append actions to
``action_journal`` and move each game's row of ``game_fences`` with one compare-and-set per commit;
the compaction moves the journal into ``actions``; reads see both tables.

Two `SqliteBackend` objects on one file are two connections with locks of their own, as two worker
processes' writers are: what fences them is the database, not the process."""

from __future__ import annotations

import datetime as dt
import logging
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from sqlalchemy.exc import IntegrityError

from server.storage import ActionRecord, Database, repository
from server.storage.commit_backends import (
    AbandonGames,
    AppendActions,
    SqliteBackend,
    Write,
    WriteConflict,
    actions_of,
    compact_journal,
)
from server.storage.records import GameResult
from server.storage.unfinished import abandon_games
from tests.storage.test_sqlite_backend import GAMES, NoOtherWrites, path
from tests.support import dbutil

__all__ = ["path"]  # a fixture of test_sqlite_backend's: a migrated file with GAMES being played

ROOT = Path(__file__).parents[2]
ENDED = dt.datetime(2026, 12, 3, 12, 0, tzinfo=dt.UTC)
#: Threads racing for the versions of one game, and the commits each tries.
RACERS = 4
TRIES = 60


def appended(game: str, *versions: int) -> Write:
    return AppendActions([ActionRecord(game, v, f"t{v % 8 + 1}-c5") for v in versions])


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
        writer._owed = 0  # left for the compactions under test
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
    monkeypatch.setattr("server.storage.commit_backends.JOURNAL_ROWS_PER_SLICE", 10)
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


def test_a_failed_compaction_leaves_the_rows_and_is_tried_again_later_then_drains_the_backlog(
    path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Tried again `JOURNAL_ROWS_PER_COMPACTION` rows after the failure; the backlog then goes at
    most that many rows more than the last batch a slice, the oldest first."""
    monkeypatch.setattr("server.storage.commit_backends.JOURNAL_ROWS_PER_SLICE", 5)
    monkeypatch.setattr("server.storage.commit_backends.JOURNAL_ROWS_PER_COMPACTION", 10)
    failures = iter([sqlite3.OperationalError("disk I/O error")])
    real_compact = compact_journal

    def compact_failing_once(
        conn: sqlite3.Connection, rows: int | None = None, level: int | None = None
    ) -> int:
        for failure in failures:
            raise failure
        return real_compact(conn, rows, level)

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
        writer.tidy()  # 10 rows since: 10 more than the last batch's 5 move, the oldest
        assert table_rows(path, "action_journal") == [(game, 3) for game in GAMES[:5]]
        assert table_rows(path, "actions") == sorted(
            [(game, 1) for game in GAMES[:10]] + [(game, 2) for game in GAMES[:5]]
        )
        writer.tidy()  # the rest of the backlog (a slice's worth), no batch since
        assert table_rows(path, "action_journal") == []
        assert len(table_rows(path, "actions")) == 20
    finally:
        writer.close()


async def test_a_slice_moves_the_oldest_rows_and_reads_see_every_row_meanwhile(path: Path) -> None:
    writer = SqliteBackend(path, NoOtherWrites())
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        writer.commit([appended(GAMES[0], 1, 2), appended(GAMES[1], 1)])
        writer.commit([appended(GAMES[0], 3), appended(GAMES[1], 2)])
        assert compact_journal(conn, 4) == 4  # the journal's order: g0 1, 2; g1 1; g0 3
        assert table_rows(path, "action_journal") == [(GAMES[1], 2)]
        assert table_rows(path, "actions") == [(GAMES[0], 1), (GAMES[0], 2), (GAMES[0], 3), (GAMES[1], 1)]
        assert await loaded(path, GAMES[1]) == ("t2-c5", "t3-c5")
        assert compact_journal(conn, 4) == 1
        assert compact_journal(conn, 4) == 0  # an empty journal
        writer.commit([appended(GAMES[1], 3)])  # the sequence starts again: the slice still finds it
        assert compact_journal(conn, 1) == 1
        assert table_rows(path, "action_journal") == []
        assert table_rows(path, "actions") == [(GAMES[0], v) for v in (1, 2, 3)] + [
            (GAMES[1], v) for v in (1, 2, 3)
        ]
    finally:
        writer._owed = 0
        writer.close()
        conn.close()


def test_slices_at_once_with_appends_meanwhile_move_every_row_exactly_once(path: Path) -> None:
    """Compactions of small slices on connections of their own, all at once, while a writer appends:
    every row ends in ``actions`` once (its key refuses a second copy), none is lost."""
    appended_rows: list[tuple[str, int]] = []
    writer = SqliteBackend(path, NoOtherWrites(), synchronous="OFF")
    try:
        for v in range(1, 6):
            writer.commit([appended(game, v) for game in GAMES[:20]])
            appended_rows += [(game, v) for game in GAMES[:20]]
        moved: list[int] = []
        lock = threading.Lock()
        start = threading.Barrier(RACERS + 1)
        appending = threading.Event()
        appending.set()

        def compact(rows: int) -> None:
            conn = sqlite3.connect(path, isolation_level=None, timeout=30)
            try:
                start.wait()
                while True:
                    count = compact_journal(conn, rows)
                    with lock:
                        moved.append(count)
                    if not count and not appending.is_set():
                        return
            finally:
                conn.close()

        threads = [threading.Thread(target=compact, args=(rows,)) for rows in (7, 13, 1, 64)[:RACERS]]
        for thread in threads:
            thread.start()
        start.wait()
        for v in range(6, 11):
            writer.commit([appended(game, v) for game in GAMES[:20]])
            appended_rows += [(game, v) for game in GAMES[:20]]
        appending.clear()
        for thread in threads:
            thread.join()
    finally:
        writer._owed = 0
        writer.close()
    assert sum(moved) == len(appended_rows) == 200
    assert table_rows(path, "action_journal") == []
    assert table_rows(path, "actions") == sorted(appended_rows)


def test_the_journal_stays_below_a_slice_per_writer_under_a_steady_load(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two writers on one file (two workers' processes), batches of every size, some bigger than a
    slice and than `JOURNAL_ROWS_PER_COMPACTION`: after each writer's tidying the journal holds
    fewer rows than a slice per writer, and every row is stored once, in order."""
    monkeypatch.setattr("server.storage.commit_backends.JOURNAL_ROWS_PER_SLICE", 16)
    monkeypatch.setattr("server.storage.commit_backends.JOURNAL_ROWS_PER_COMPACTION", 32)
    writers = [SqliteBackend(path, NoOtherWrites(), synchronous="OFF") for _ in range(2)]
    versions = dict.fromkeys(GAMES, 0)
    largest = 0
    try:
        for turn in range(60):
            writer = writers[turn % 2]
            batch = [GAMES[(turn * 7 + index) % len(GAMES)] for index in range((turn * 37) % 90 + 1)]
            for game in batch:
                versions[game] += 1
            writer.commit([appended(game, versions[game]) for game in batch])
            writer.tidy()
            journal = len(table_rows(path, "action_journal"))
            largest = max(largest, journal)
            assert journal < 2 * 16, f"turn {turn}: {journal} rows in the journal"
    finally:
        for writer in writers:
            writer.close()
    assert largest > 0  # the bound was tested with rows in the journal
    assert table_rows(path, "action_journal") == []
    assert table_rows(path, "actions") == sorted(
        (game, v) for game, last in versions.items() for v in range(1, last + 1)
    )


def test_a_slice_commits_without_a_flush_and_the_writer_is_back_at_its_level_after(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The slice's transaction at NORMAL (no flush: the next commit's covers it), the connection's
    own level before and after, in as few statements as can be (each a wait for the GIL on a busy
    server); a connection at OFF stays at OFF."""
    monkeypatch.setattr("server.storage.commit_backends.JOURNAL_ROWS_PER_SLICE", 1)
    writer = SqliteBackend(path, NoOtherWrites(), synchronous="FULL")
    statements: list[str] = []
    try:
        writer.commit([appended(GAMES[0], 1)])
        conn = writer._conn
        assert conn is not None
        conn.set_trace_callback(statements.append)
        writer.tidy()
        conn.set_trace_callback(None)
        assert conn.execute("PRAGMA synchronous").fetchone() == (2,)
    finally:
        writer.close()
    assert table_rows(path, "actions") == [(GAMES[0], 1)]
    assert [" ".join(sql.split()[:3]) for sql in statements] == [
        "PRAGMA synchronous=1",
        "BEGIN IMMEDIATE",
        "INSERT INTO actions",
        "DELETE FROM action_journal",
        "COMMIT",
        "PRAGMA synchronous=2",
    ]
    off = sqlite3.connect(path, isolation_level=None)
    statements.clear()
    try:
        off.execute("PRAGMA synchronous=OFF")
        off.set_trace_callback(statements.append)
        assert compact_journal(off) == 0
        assert off.execute("PRAGMA synchronous").fetchone() == (0,)
    finally:
        off.close()
    assert not [sql for sql in statements if sql.startswith("PRAGMA synchronous=")]


def stored_copies(path: Path) -> list[tuple[str, int]]:
    """Every stored (game, v), both tables, a row moved twice or lost showing as such."""
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        return conn.execute(
            "SELECT game_id, v FROM actions UNION ALL SELECT game_id, v FROM action_journal ORDER BY 1, 2"
        ).fetchall()
    finally:
        conn.close()


def test_a_slice_lost_with_the_machine_leaves_its_rows_in_the_journal(path: Path, tmp_path: Path) -> None:
    """A power loss before the next flush keeps a prefix of the log, at worst the one of the last
    flushed commit, or a slice's frames torn: the copies of the file and of such a prefix of its log
    recover the journal with every row, as the last FULL commit left it; the whole log, the slice."""
    writer = SqliteBackend(path, NoOtherWrites(), synchronous="FULL")
    log = Path(f"{path}-wal")
    try:
        writer.commit([appended(GAMES[0], 1)])
        conn = writer._conn
        assert conn is not None
        conn.execute("PRAGMA wal_autocheckpoint=0")  # the log is not reset under the test
        for v in range(1, 6):
            writer.commit([appended(game, v + (game == GAMES[0])) for game in GAMES[:40]])
        flushed = log.stat().st_size
        assert compact_journal(conn, 150) == 150
        whole = log.stat().st_size
        assert whole > flushed
        journal = table_rows(path, "action_journal")
        for cut in (flushed, (flushed + whole) // 2, whole - 1, whole):
            copy = tmp_path / f"lost-{cut}" / "eightoff.db"
            copy.parent.mkdir()
            shutil.copyfile(path, copy)
            with log.open("rb") as source, Path(f"{copy}-wal").open("wb") as target:
                target.write(source.read(cut))
            stored = stored_copies(copy)
            assert stored == sorted(
                [(GAMES[0], 1)] + [(g, v + (g == GAMES[0])) for g in GAMES[:40] for v in range(1, 6)]
            )
            if cut < whole:
                assert len(table_rows(copy, "action_journal")) == 201, cut
            else:
                assert table_rows(copy, "action_journal") == journal
    finally:
        writer._owed = 0
        writer.close()


#: A writer process that goes on from the stored version of ``GAMES`` (all at one: a commit holds
#: them all), commits batches (printing each committed one's version) and, every ``ROUND`` batches,
#: says ``slice`` and moves most of the journal's rows.
WRITER_PROCESS = """
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from server.storage.commit_backends import AppendActions, SqliteBackend, compact_journal
from server.storage.records import ActionRecord
from tests.storage.test_sqlite_backend import GAMES, NoOtherWrites

ROUND = 8
path = Path(sys.argv[1])
(start,) = sqlite3.connect(path).execute("SELECT min(v) FROM game_fences").fetchone()
writer = SqliteBackend(path, NoOtherWrites(), synchronous="FULL")
for v in range(start + 1, start + 10_000):
    writer.commit([AppendActions([ActionRecord(game, v, "t1-c5")]) for game in GAMES])
    print(v, flush=True)
    if v % ROUND == 0:
        print("slice", flush=True)
        compact_journal(writer._conn, len(GAMES) * ROUND - 50)
"""


def killed_after_slices(path: Path, slices: int, delay: float) -> int:
    """Run `WRITER_PROCESS` until it says ``slice`` the ``slices``-th time, then ``delay`` seconds
    later kill it (SIGKILL); the last version it printed as committed."""
    process = subprocess.Popen(
        [sys.executable, "-c", WRITER_PROCESS, str(path)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    committed = seen = 0
    try:
        for line in process.stdout:
            if line.strip() != "slice":
                committed = int(line)
                continue
            seen += 1
            if seen == slices:
                threading.Event().wait(delay)
                break
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        process.stdout.close()
    assert seen == slices, "the writer process stopped early"
    return committed


def test_a_process_killed_mid_compaction_loses_and_doubles_nothing(path: Path) -> None:
    """``kill -9`` of a writer as a slice starts (three times, 0 to 3 ms after it said so): every
    version it printed as committed is stored, once, in one table or the other; the file is whole;
    the next writer goes on from it; a compaction then moves every row."""
    rng = random.Random(23)
    for _ in range(3):
        committed = killed_after_slices(path, 2, rng.uniform(0, 0.003))
        stored = stored_copies(path)
        assert len(stored) == len(set(stored))
        for game in GAMES:
            versions = [v for g, v in stored if g == game]
            assert versions == list(range(1, len(versions) + 1)) and len(versions) >= committed
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        compact_journal(conn)
    finally:
        conn.close()
    assert table_rows(path, "action_journal") == []
    assert table_rows(path, "actions") == stored


class EngineJournal:
    """The engine's part for writes the writer hands over (a ranked finish, an abandonment): on
    SQLite it journals their actions too, here through a connection of its own."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def commit(self, writes: Sequence[Write]) -> None:
        statements = repository.sqlite_journal_statements(
            [row for write in writes for row in actions_of(write)]
        )
        assert statements is not None
        conn = sqlite3.connect(self._path, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            for sql, parameters, _ in statements:
                conn.execute(sql, parameters)
            conn.execute("COMMIT")
        finally:
            conn.close()

    def tidy(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_rows_the_engine_journals_for_the_writer_are_moved_by_its_slices(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Else they would stay in the journal for good, a few more with every ranked finish."""
    monkeypatch.setattr("server.storage.commit_backends.JOURNAL_ROWS_PER_SLICE", 4)
    writer = SqliteBackend(path, EngineJournal(path))
    try:
        for v in range(1, 4):
            writer.commit([AppendActions([ActionRecord(GAMES[0], v, "t1-c5")]), AbandonGames(["elsewhere"])])
            writer.tidy()
        assert len(table_rows(path, "action_journal")) == 3
        writer.commit([AppendActions([ActionRecord(GAMES[0], 4, "t1-c5")]), AbandonGames(["elsewhere"])])
        writer.tidy()
        assert table_rows(path, "action_journal") == []
        assert table_rows(path, "actions") == [(GAMES[0], v) for v in range(1, 5)]
    finally:
        writer.close()


def test_a_writer_moves_the_rows_a_stopped_one_left_in_the_journal(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process killed before its slice leaves rows no writer owes: the next writer to open the
    file takes them on."""
    monkeypatch.setattr("server.storage.commit_backends.JOURNAL_ROWS_PER_SLICE", 10)
    killed = SqliteBackend(path, NoOtherWrites())
    killed.commit([appended(game, 1) for game in GAMES[:30]])
    killed._owed = 0  # as if killed: nothing moves at its close
    killed.close()
    writer = SqliteBackend(path, NoOtherWrites())
    try:
        writer.commit([appended(GAMES[0], 2)])
        writer.tidy()
        assert table_rows(path, "action_journal") == []
        assert len(table_rows(path, "actions")) == 31
    finally:
        writer.close()
