"""The SQLite writer (`SqliteBackend`) on its own connection, under a server's load of appends: the
write-ahead log is checkpointed into the database file as it fills, stays bounded, and no committed
action is lost on the way; the fence refuses versions already stored and actions of finished games; a
batch written in several statements is still one transaction."""

from __future__ import annotations

import datetime as dt
import logging
import shutil
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from server.storage import ActionRecord, Database, StorageUnavailable, commit_backends, repository
from server.storage.commit_backends import (
    ROWS_PER_INSERT,
    AbandonGames,
    AddGame,
    AddPlayer,
    AppendActions,
    MarkHinted,
    SetLiveRooms,
    SqliteBackend,
    Write,
    WriteConflict,
)
from server.storage.db import SQLITE_WAL_SIZE_LIMIT, sqlite_file
from server.storage.records import GameResult, GameStart, LiveRoomsChange, PlayerRecord
from tests.server.test_startup import can_chattr, unwritable
from tests.support import dbutil

__all__ = ["can_chattr"]  # a fixture of test_startup's, used here

GAMES = [f"game-{index:03}" for index in range(100)]
ROWS_PER_COMMIT = 51
#: Commits the checkpoint test makes at most (about 3 pages of log each, 10,000 between checkpoints).
MAX_COMMITS = 8000
STARTED = "2026-11-30 12:00:00.000000"


class NoOtherWrites:
    """The backend for writes other than appends: none is expected here."""

    def commit(self, writes: Sequence[Write]) -> None:
        raise AssertionError(f"unexpected writes {writes}")

    def tidy(self) -> None:
        pass

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
        return conn.execute(
            f"SELECT game_id, v FROM {dbutil.SQLITE_STORED_ACTIONS} ORDER BY game_id, v"
        ).fetchall()
    finally:
        conn.close()


def wal_size(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return wal.stat().st_size if wal.exists() else 0


def test_checkpoints_keep_every_committed_action_and_bound_the_log(path: Path, tmp_path: Path) -> None:
    """Commits as the server makes them (51 rows of distinct games each, the journal compacted as the
    pipeline has it) write a few pages of log each, and the compactions some hundreds: a few thousand
    commits fill the log several times over. It is checkpointed into the database file and reused (the
    checkpoint sequence number of its header counts the restarts), never grows past
    `SQLITE_WAL_SIZE_LIMIT`, and copies of the files taken with the writer still open (what a crash
    leaves) hold every committed row, the database file alone the checkpointed ones. ``NORMAL``: the
    log is written as with ``FULL``, without a flush per commit (the test's time)."""
    backend = SqliteBackend(path, NoOtherWrites(), synchronous="NORMAL")
    versions = dict.fromkeys(GAMES, 0)
    committed: list[tuple[str, int]] = []
    largest_wal = 0
    try:
        for commit in range(MAX_COMMITS):
            rows = []
            for index in range(ROWS_PER_COMMIT):
                game = GAMES[(commit * ROWS_PER_COMMIT + index) % len(GAMES)]
                versions[game] += 1
                rows.append(ActionRecord(game, versions[game], "t1-c5"))
            backend.commit([AppendActions(rows)])
            backend.tidy()
            committed += [(row.game_id, row.v) for row in rows]
            largest_wal = max(largest_wal, wal_size(path))
            if commit % 100 == 0 and wal_restarts(path) >= 2:
                break

        assert wal_restarts(path) >= 2
        assert largest_wal <= SQLITE_WAL_SIZE_LIMIT
        crashed = copy_files(path, tmp_path / "crashed", ("", "-wal"))
        assert stored_actions(crashed) == sorted(committed)
        checkpointed = stored_actions(copy_files(path, tmp_path / "checkpointed", ("",)))
        assert checkpointed
        assert set(checkpointed) <= set(committed)
    finally:
        backend.close()


def wal_restarts(path: Path) -> int:
    """The checkpoint sequence number of the log's header: how many times it was started again."""
    header = path.with_name(path.name + "-wal").read_bytes()[:32]
    return int.from_bytes(header[12:16], "big")


def copy_files(path: Path, directory: Path, suffixes: Sequence[str]) -> Path:
    directory.mkdir()
    for suffix in suffixes:
        shutil.copyfile(f"{path}{suffix}", directory / f"{path.name}{suffix}")
    return directory / path.name


def test_the_fence_refuses_a_batch_whole_for_a_stored_version_an_ended_game_or_an_unknown_one(
    backend: SqliteBackend, path: Path
) -> None:
    """The actions' table is WITHOUT ROWID; the same batch is refused whole for a version already
    stored, an action of a game no longer playing, or a game that does not exist: each leaves a game
    of the batch without its row at a version below the batch's (`repository.sqlite_fence_sql`)."""
    with sqlite3.connect(path) as conn:
        (table,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'actions'").fetchone()
        conn.execute("UPDATE games SET status = 'won' WHERE id = ?", [GAMES[1]])
    conn.close()
    assert "WITHOUT ROWID" in table
    backend.commit([AppendActions([ActionRecord(GAMES[0], 1, "t1-c5")])])
    for row in (
        ActionRecord(GAMES[0], 1, "undo"),
        ActionRecord(GAMES[1], 1, "t1-c5"),
        ActionRecord("no-such-game", 1, "t1-c5"),
    ):
        with pytest.raises(WriteConflict, match="a game of the batch"):
            backend.commit([AppendActions([ActionRecord(GAMES[2], 1, "t1-c5"), row])])
    assert stored_actions(path) == [(GAMES[0], 1)]
    backend.commit([AppendActions([ActionRecord(GAMES[2], 1, "t1-c5")])])
    assert stored_actions(path) == [(GAMES[0], 1), (GAMES[2], 1)]


def test_a_batch_of_several_statements_commits_whole_or_not_at_all(
    backend: SqliteBackend, path: Path
) -> None:
    """A batch of more than `ROWS_PER_INSERT` games and rows goes in several fence and journal
    statements of one transaction: a game refused by the last fence statement (here a version already
    stored) takes the earlier statements' changes with it; the same batch without it is stored whole."""
    rows = [ActionRecord(game, v, "t1-c5") for v in (1, 2) for game in GAMES[:90]]
    assert len(rows) > 2 * ROWS_PER_INSERT
    backend.commit([AppendActions([ActionRecord(GAMES[95], 1, "undo")])])

    with pytest.raises(WriteConflict, match="a game of the batch"):
        backend.commit(
            [AppendActions(rows[:100]), AppendActions([*rows[100:], ActionRecord(GAMES[95], 1, "x")])]
        )
    assert stored_actions(path) == [(GAMES[95], 1)]

    backend.commit([AppendActions(rows[:100]), AppendActions(rows[100:])])
    assert stored_actions(path) == sorted([(row.game_id, row.v) for row in rows] + [(GAMES[95], 1)])


class RecordingWrites:
    """The backend for the writes the writer does not commit: records the batches handed to it."""

    def __init__(self) -> None:
        self.batches: list[Sequence[Write]] = []

    def commit(self, writes: Sequence[Write]) -> None:
        self.batches.append(writes)

    def tidy(self) -> None:
        pass

    def close(self) -> None:
        pass


def rows(path: Path, table: str, ids: Sequence[str]) -> dict[str, tuple[object, ...]]:
    """The stored rows of ``table`` by id, every column but the id, as the file holds them."""
    conn = sqlite3.connect(path)
    try:
        marks = ", ".join("?" * len(ids))
        found = conn.execute(f"SELECT * FROM {table} WHERE id IN ({marks})", list(ids)).fetchall()
        return {row[0]: tuple(row[1:]) for row in found}
    finally:
        conn.close()


async def test_new_players_games_and_hinted_marks_are_stored_by_the_writer_as_the_engine_stores_them(
    path: Path,
) -> None:
    """Issue 20 (the hint flood): on SQLite only action appends skipped the async engine; a new player,
    a new game or a hinted mark was committed through it on the event loop (about eight round trips
    with the driver's thread). Now the writer's own connection commits them, nothing of them is handed
    to the engine's backend, and the rows are stored exactly as the engine stores them (times as UTC
    text, booleans, the columns' defaults); a batch with anything else still goes to the engine whole."""
    others = RecordingWrites()
    writer = SqliteBackend(path, others, synchronous="FULL")
    at = dt.datetime(2026, 12, 3, 9, 30, 1, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    on_time = at.replace(microsecond=250)

    def start(game: str, player: str, moment: dt.datetime) -> GameStart:
        return GameStart(game, player, "EO1-C8-AAAAAFA", 8, dt.date(2026, 12, 3), moment)

    try:
        writer.commit(
            [AddPlayer(PlayerRecord("pw", "w", "hw", at, bot=True)), AddGame(start("gw", "pw", at))]
        )
        writer.commit(
            [AddGame(start("gw2", "pw", on_time)), AppendActions([ActionRecord("gw2", 1, "t1-c5")])]
        )
        writer.commit([MarkHinted("gw")])
        assert others.batches == []
        database = Database.create(f"sqlite+aiosqlite:///{path}")
        try:
            async with database.transaction() as conn:
                await repository.insert_player(conn, PlayerRecord("pe", "e", "he", at, bot=True))
                await repository.insert_game(conn, start("ge", "pe", at))
                await repository.insert_game(conn, start("ge2", "pe", on_time))
                await repository.append_actions(conn, [ActionRecord("ge2", 1, "t1-c5")])
                assert await repository.mark_hinted(conn, "ge")
        finally:
            await database.dispose()
        players = rows(path, "players", ["pw", "pe"])
        assert players["pw"][2:] == players["pe"][2:]  # past the name and the token's hash
        games = rows(path, "games", ["gw", "ge", "gw2", "ge2"])
        assert games["gw"][1:] == games["ge"][1:] and games["gw2"][1:] == games["ge2"][1:]  # past the player
        assert games["gw"] != games["gw2"]  # hinted, and started at another time
        raw = sqlite3.connect(path)
        raw.execute("UPDATE games SET status = 'won' WHERE id = 'gw2'")
        raw.commit()
        raw.close()
        with pytest.raises(WriteConflict, match="gw2 is no longer being played"):
            writer.commit([AddGame(start("gw3", "pw", at)), MarkHinted("gw2")])
        assert rows(path, "games", ["gw3"]) == {}  # the whole batch or nothing
        batch: list[Write] = [AddGame(start("gw4", "pw", at)), AbandonGames(("gw",))]
        writer.commit(batch)
        assert others.batches == [batch] and rows(path, "games", ["gw4"]) == {}
    finally:
        writer.close()


def live_rooms(path: Path) -> dict[str, set[str]]:
    """The games each holder holds, as the file has them."""
    conn = sqlite3.connect(path)
    try:
        held: dict[str, set[str]] = {}
        for game, holder in conn.execute("SELECT game_id, holder FROM live_rooms"):
            held.setdefault(holder, set()).add(game)
        return held
    finally:
        conn.close()


async def test_the_live_rooms_are_stored_by_the_writer_as_the_engine_stores_them(path: Path) -> None:
    """Issue 20 (the hint flood): the presence writer's changes went through the engine, a transaction
    of a few turns of the event loop holding SQLite's write lock, and each commit of the players'
    writes that met it waited in SQLite's busy handler (1, 2, 5, 10 ms and on). Now the writer's own
    connection commits them, in the batches of those writes, nothing handed to the engine's backend,
    the rows as the engine leaves them; another holder's rows are left alone."""
    others = RecordingWrites()
    writer = SqliteBackend(path, others, synchronous="FULL")
    at = dt.datetime(2026, 12, 6, 17, 0, tzinfo=dt.UTC)
    changes = [(("g1", "g2", "g3"), ()), (("g1",), ("g2",)), (("g2", "g4"), ("g3", "g5"))]  # held, released
    try:
        first, *rest = [SetLiveRooms(LiveRoomsChange("node/w", *change)) for change in changes]
        writer.commit([AddPlayer(PlayerRecord("pw", "w", "hw", at)), first])  # one batch with a player's
        for write in rest:
            writer.commit([write])
        assert others.batches == []
        database = Database.create(f"sqlite+aiosqlite:///{path}")
        try:
            for held, released in changes:
                async with database.transaction() as conn:
                    await repository.set_live_rooms(conn, LiveRoomsChange("node/e", held, released))
        finally:
            await database.dispose()
        assert live_rooms(path) == {"node/w": {"g1", "g2", "g4"}, "node/e": {"g1", "g2", "g4"}}
        writer.commit([SetLiveRooms(LiveRoomsChange("node/w", held=(), released=("g1", "g2", "g4")))])
        assert live_rooms(path) == {"node/e": {"g1", "g2", "g4"}}
        assert SetLiveRooms in commit_backends.WRITER_KINDS
        assert not commit_backends.is_append_only(SetLiveRooms(LiveRoomsChange("node/w", (), ())))
    finally:
        writer.close()


def game_column(path: Path, game: str, column: str) -> object:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"SELECT {column} FROM games WHERE id = ?", [game]).fetchone()[0]
    finally:
        conn.close()


async def test_a_game_played_with_hints_is_finished_by_the_writer_as_the_engine_finishes_it(
    path: Path,
) -> None:
    """Issue 20 (the hint flood, new_game then hint then resign): a resignation was still committed
    through the engine on the event loop. A game played with hints ranks on no leaderboard, so its
    result is one UPDATE, which the writer's connection now commits itself, storing the row as the
    engine does. A result of a game that ranks (or that is over, or not final) goes to the engine
    whole, nothing of its batch stored by the writer."""
    others = RecordingWrites()
    writer = SqliteBackend(path, others, synchronous="FULL")
    ended = dt.datetime(2026, 12, 3, 10, 0, 2, 500, tzinfo=dt.timezone(dt.timedelta(hours=-3)))

    def result(game: str, status: str = "resigned") -> GameResult:
        return GameResult(game, status, 15, 7, 1, ended, 61_000, won=False)

    hinted_by_engine, hinted_by_writer, ranked = GAMES[0], GAMES[1], GAMES[2]
    try:
        database = Database.create(f"sqlite+aiosqlite:///{path}")
        try:
            async with database.transaction() as conn:
                assert await repository.mark_hinted(conn, hinted_by_engine)
                assert await repository.finish_game(conn, result(hinted_by_engine))
        finally:
            await database.dispose()
        writer.commit([MarkHinted(hinted_by_writer), AppendActions((), result(hinted_by_writer))])
        assert others.batches == []
        games = rows(path, "games", [hinted_by_engine, hinted_by_writer])
        assert games[hinted_by_writer] == games[hinted_by_engine]
        assert game_column(path, hinted_by_writer, "status") == "resigned"

        batch: list[Write] = [
            AddGame(GameStart("gw", "p", "EO1-C8-AAAAAFA", 8, None, ended)),
            AppendActions((), result(ranked)),
        ]
        writer.commit(batch)  # a game that ranks: the engine's (its leaderboard summaries)
        again = [AppendActions((), result(hinted_by_writer))]  # over already: the engine says it conflicts
        writer.commit(again)
        not_final: list[Write] = [MarkHinted(GAMES[3]), AppendActions((), result(GAMES[3], status="playing"))]
        writer.commit(not_final)  # the engine refuses it (ValueError)
        assert others.batches == [batch, again, not_final]
        assert rows(path, "games", ["gw"]) == {}
        assert game_column(path, ranked, "status") == "playing"
        assert game_column(path, GAMES[3], "hinted") == 0  # its mark was rolled back with the result
    finally:
        writer.close()


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
        writer.commit([AppendActions(rows)])
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
