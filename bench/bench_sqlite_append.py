"""SQLite append micro-benchmark: the writer thread's CPU per action row and per commit, variant by variant.

Each variant gets a database file of its own, migrated by the real migrations (``server.storage``), with
one player and ``--games`` games (100) being played; then commits of ``--batch`` action rows (51: what
the pipeline commits at bench_load N = 100), each row the next version of a distinct game, go through
the writer's own ``sqlite3`` connection as the server's ``SqliteBackend`` sets it up (WAL,
``synchronous=FULL``, foreign keys, busy timeout, checkpoints, statement journals in memory).
One commit in ``PROGRESS_EVERY`` also updates one game's figures, about the server's rate. A game that
reaches ``MAX_GAME_ACTIONS`` is finished and a new one starts (outside the timing), so the table grows
as a server's does: full games behind, live tails spread over the index.

- ``actions table``: the writer before issue 23 item 2 (the baseline: the ratios are to it): each
  commit's rows appended to ``actions`` (clustered on (game_id, v), the key and a trigger refusing
  actions of finished games fencing them) in INSERTs of up to ``ROWS_PER_INSERT`` rows, so each row
  lands on its own game's leaf page.
- ``current``: the server's (``_append`` on the head schema): the rows appended to ``action_journal``
  (a sequence: a commit's rows share a page or two), fenced by one compare-and-set statement per commit
  on ``game_fences`` (the games being played only), the journal moved into ``actions`` in key order
  a slice at a time: every ``JOURNAL_ROWS_PER_SLICE`` rows journaled, as many of its oldest rows
  (``compact_journal``, at ``synchronous=NORMAL``), timed apart like the checkpoints (the "apart"
  column): the server does it after the commit's outcome is handed back, and the next commit waits
  for it (the wall-clock time of each compaction: median, 90th percentile, longest).

The compaction's variants, against ``current``:

- ``whole journal at FULL``: the compaction before slices: every ``JOURNAL_ROWS_PER_COMPACTION`` rows,
  the whole journal, committed with a flush of its own; ``whole journal at NORMAL``: the same without.
- ``slices at FULL``: ``current``'s slices committed with a flush of their own.
- ``slices of N``: slices every N rows instead.
- ``current, no flush``: ``current`` at ``synchronous=OFF`` (not durable: no ``fdatasync``): what the
  flush of each commit costs the writer's CPU, the waking after it included (the floor of issue 23's
  item 2: per commit, whatever the rows).

Variants of the actions table (before the journal), one change each against ``actions table``:

- ``executemany``: the one-row INSERT stepped once per row (the writer's statement before issue 14),
  instead of multi-row INSERTs of up to ``ROWS_PER_INSERT`` rows.
- ``multi-row, journal on disk``: ``temp_store`` left at its default: the statement journal of a
  multi-row INSERT spills to a temporary file past 64 KiB.
- ``no finished-game trigger``: the trigger of migration ``live_games_and_finished_fence`` dropped.
- ``no foreign keys``: ``PRAGMA foreign_keys=OFF`` on the writer.
- ``rowid actions`` / ``WITHOUT ROWID actions``: the actions table as a rowid table plus the primary
  key's index (the schema before revision ``actions_without_rowid``), or clustered on its key.
- ``checkpoints apart, N``: the writer's automatic checkpoint off, a PASSIVE checkpoint run every N
  WAL frames (1000 is SQLite's default automatic checkpoint) and timed in a column of its own: the
  checkpoints' share of the writer's CPU, which a checkpoint thread would pay instead.
- ``wal_autocheckpoint=N``: automatic checkpoints every N frames (bounded WAL: its largest size is
  reported).
- ``before issue 14's changes``: all of the above as they were (rowid table, checkpoints every 1000
  frames, ``executemany``).

Other journal designs (measured before ``current`` was chosen): the same journal, compacted alike, with
the fence elsewhere:

- ``journal, fence per row``: a compare-and-set per row on a ``v`` column added to ``games``
  (``v = first - 1 AND status = 'playing'``, which does the trigger's work).
- ``journal, one fence``: one such statement per commit for all its games (``UPDATE … FROM
  (VALUES …)``), the count of rows it changed checked.
- ``commit journal, one fence``: the same fence, and the commit's actions as one msgpack blob in one row.
- ``journal, rowid fence table``: ``current``'s fence table as a rowid table (rows in the order the
  games started) with the id's index.

``games`` is a rowid table: a game's row sits where its start put it, so a fence on ``games`` changes
the pages of the games being played, wherever they are. ``--finished-games N`` puts N finished games
in the table first (random ids, as the server's), the games being played among them at random places
(among the last ``--spread`` of them only, when given: games started lately), and ``--idle-games``
unfinished games nobody plays (they keep their rows in a fence table).

Warm-up commits first (the WAL file reaches its full size and is reused, as on a running server), then
``--rounds`` rounds of ``--commits`` commits, the variants taking turns within each round so that a
busy moment of the shared machine hits them alike. It prints, per variant, the median over the rounds of
the writer thread's CPU (``time.thread_time``: user + system, fsync included) per row and per commit,
the CPU of what is timed apart (checkpoints, compactions) per row, as a total over the rounds (it
comes in bursts), the ratio of the total to the first variant's (``actions table`` unless ``--only``
names another first; measured in the same run), the largest WAL file seen and the wall-clock time of a commit.

``--gil-busy`` runs the measured rounds with another thread executing Python all along, as a loaded
event loop does: the driver releases the GIL around each statement it steps and must then wait for it,
so the number of statements per commit shows in the commit's wall-clock time (and in CPU).

Run: ``.venv/bin/python -m bench.bench_sqlite_append [--rounds 15] [--commits 100] [--batch 51]
[--finished-games N [--spread M]] [--idle-games K] [--only NAME ...]``
(``--gil-busy`` for the contended figures)
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import random
import secrets
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import msgpack  # type: ignore[import-untyped]
from alembic import command

from bench.bench_load import percentile
from server.ids import new_id
from server.storage import repository, upgrade_to_head
from server.storage.commit_backends import (
    JOURNAL_ROWS_PER_COMPACTION,
    JOURNAL_ROWS_PER_SLICE,
    ROWS_PER_INSERT,
    WriteConflict,
    _append,
    _stored_time,
    compact_journal,
    immediate_transaction,
    writer_pragmas,
)
from server.storage.db import _alembic_config
from server.storage.records import ActionRecord, GameFigures

#: The revision before ``actions_without_rowid``: the actions table as a rowid table with an index.
ROWID_REVISION = "3b8e61d4a0c7"
#: The revision before ``action_journal``: every action appended to ``actions``, fenced by its key.
BEFORE_JOURNAL_REVISION = "5d2b8e4f1a63"
TRIGGER = "tr_actions_refuse_finished_games"
MAX_GAME_ACTIONS = 2000
PROGRESS_EVERY = 24
WARM_UP_COMMITS = 400
STARTED = "2026-11-30 00:00:00.000000"
JOURNAL_SCHEMA = (
    f"DROP TRIGGER {TRIGGER}",  # the compare-and-set on games does its work
    "ALTER TABLE games ADD COLUMN v INTEGER NOT NULL DEFAULT 0",
    "CREATE TABLE journal (seq INTEGER PRIMARY KEY, game_id VARCHAR(32) NOT NULL, v INTEGER NOT NULL, "
    "action VARCHAR(16) NOT NULL)",
    "CREATE TABLE commit_journal (seq INTEGER PRIMARY KEY, batch BLOB NOT NULL)",
)
FENCE_PER_ROW = "UPDATE games SET v = ? WHERE id = ? AND v = ? - 1 AND status = 'playing'"
#: The fence apart from ``games``: a small table of the games being played only (a row made with the
#: game, deleted when it ends), keyed by the game (its rows in id order, like the actions'), or a rowid
#: table (its rows in the order the games started, the recent ones together) with the id's index.
FENCE_TABLE_SCHEMA = (
    f"DROP TRIGGER {TRIGGER}",
    "CREATE TABLE journal (seq INTEGER PRIMARY KEY, game_id VARCHAR(32) NOT NULL, v INTEGER NOT NULL, "
    "action VARCHAR(16) NOT NULL)",
    "CREATE TABLE game_fences (game_id VARCHAR(32) PRIMARY KEY, v INTEGER NOT NULL) WITHOUT ROWID",
)
ROWID_FENCE_TABLE_SCHEMA = (
    *FENCE_TABLE_SCHEMA[:2],
    "CREATE TABLE game_fences (game_id VARCHAR(32) NOT NULL UNIQUE, v INTEGER NOT NULL)",
)
FENCE_ROW_ADD = "INSERT INTO game_fences (game_id, v) VALUES (?, 0)"
FENCE_ROW_DELETE = "DELETE FROM game_fences WHERE game_id = ?"

Append = Callable[[sqlite3.Connection, Sequence[ActionRecord]], None]


@functools.cache
def _insert_sql(rows: int) -> str:
    """The multi-row INSERT of ``rows`` actions into ``actions`` (the writer's before the journal)."""
    return "INSERT INTO actions (game_id, v, action) VALUES " + ", ".join(["(?, ?, ?)"] * rows)


def _append_to_actions(conn: sqlite3.Connection, rows: Sequence[ActionRecord]) -> None:
    """The writer's commit before the journal: INSERTs of up to ``ROWS_PER_INSERT`` rows into ``actions``
    (the key and the finished-game trigger fence them), and the games' figures."""
    with immediate_transaction(conn):
        for start in range(0, len(rows), ROWS_PER_INSERT):
            chunk = rows[start : start + ROWS_PER_INSERT]
            conn.execute(_insert_sql(len(chunk)), [value for row in chunk for value in row[:3]])
        _update_progress(conn, rows)


@dataclass(frozen=True)
class Variant:
    name: str
    revision: str = BEFORE_JOURNAL_REVISION
    schema: tuple[str, ...] = ()
    pragmas: tuple[str, ...] = ()
    append: Append = _append_to_actions
    #: When set, the writer's automatic checkpoint is off and a PASSIVE one runs every this many WAL
    #: frames, timed apart.
    checkpoints_apart: int = 0
    #: A journal variant's move of its journal into ``actions`` (`compact_journal`'s signature: the
    #: oldest rows to move, None for all), run every ``JOURNAL_ROWS_PER_COMPACTION`` rows journaled,
    #: all of them, and timed apart.
    compact: Callable[[sqlite3.Connection, int | None], object] | None = None
    #: When set, ``compact`` is run every this many rows journaled instead, for as many of the oldest
    #: rows as were journaled since (`SqliteBackend.tidy`'s slices).
    slice_rows: int = 0
    #: Statements a game's start and end also run (bound to the game's id): a fence table's row.
    on_start: tuple[str, ...] = ()
    on_end: tuple[str, ...] = ()


@dataclass
class Figures:
    """One variant's measured rounds."""

    commit_cpu: list[float] = field(default_factory=list)
    commit_wall: list[float] = field(default_factory=list)
    checkpoint_cpu: list[float] = field(default_factory=list)
    #: WAL frames the timed-apart checkpoints found (SQLite's own count), and the commits that wrote them.
    wal_frames: int = 0
    wal_commits: int = 0
    #: Wall-clock seconds of each timed-apart checkpoint: how long the commit that ran it would wait.
    checkpoint_walls: list[float] = field(default_factory=list)
    #: Wall-clock seconds of each compaction (or slice): how long the commit after it waits.
    compaction_walls: list[float] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    commits: list[int] = field(default_factory=list)
    largest_wal: int = 0

    def per_row(self, values: list[float]) -> float:
        return statistics.median(value / rows for value, rows in zip(values, self.rows, strict=True))

    def amortized_per_row(self, values: list[float]) -> float:
        """The total over the rounds per row: for work that comes in bursts (a round may hold none)."""
        return sum(values) / sum(self.rows)

    def per_commit(self, values: list[float]) -> float:
        return statistics.median(value / commits for value, commits in zip(values, self.commits, strict=True))


def _append_executemany(conn: sqlite3.Connection, rows: Sequence[ActionRecord]) -> None:
    """`_append` as it was: ``executemany`` of the one-row INSERT (the driver steps it once per row)."""
    with immediate_transaction(conn):
        conn.executemany(_insert_sql(1), [(row.game_id, row.v, row.action) for row in rows])
        _update_progress(conn, rows)


def _update_progress(conn: sqlite3.Connection, rows: Sequence[ActionRecord]) -> None:
    last = {row.game_id: row.figures for row in rows if row.figures is not None}
    if last:
        conn.executemany(
            "UPDATE games SET score=?, moves=?, undos=?, active_at=? WHERE games.id = ?",
            [(p.score, p.moves, p.undos, _stored_time(p.at), game) for game, p in last.items()],
        )


def _fence_per_row(conn: sqlite3.Connection, rows: Sequence[ActionRecord]) -> None:
    for row in rows:
        if conn.execute(FENCE_PER_ROW, (row.v, row.game_id, row.v)).rowcount != 1:
            raise WriteConflict(f"{row.game_id} is not at v {row.v - 1}, or is finished")


@functools.cache
def _fence_sql(games: int) -> str:
    values = ", ".join(["(?, ?, ?)"] * games)
    return (
        "UPDATE games SET v = f.last FROM (SELECT column1 AS id, column2 AS first, column3 AS last "
        f"FROM (VALUES {values})) AS f "
        "WHERE games.id = f.id AND games.v = f.first - 1 AND games.status = 'playing'"
    )


def _fence_at_once(conn: sqlite3.Connection, rows: Sequence[ActionRecord]) -> None:
    """One compare-and-set for all the commit's games: each must be at the version before its first row."""
    spans: dict[str, list[int]] = {}
    for row in rows:
        spans.setdefault(row.game_id, [row.v, row.v])[1] = row.v
    values = [value for game, (first, last) in spans.items() for value in (game, first, last)]
    if conn.execute(_fence_sql(len(spans)), values).rowcount != len(spans):
        raise WriteConflict("a game of the commit is not at the version before its rows, or is finished")


@functools.cache
def _fence_table_sql(games: int) -> str:
    values = ", ".join(["(?, ?, ?)"] * games)
    return (
        "UPDATE game_fences SET v = f.last FROM (SELECT column1 AS id, column2 AS first, column3 AS last "
        f"FROM (VALUES {values})) AS f "
        "WHERE game_fences.game_id = f.id AND game_fences.v = f.first - 1"
    )


def _fence_table_at_once(conn: sqlite3.Connection, rows: Sequence[ActionRecord]) -> None:
    """`_fence_at_once` on the fence table: a game has a row there only while it is being played."""
    spans: dict[str, list[int]] = {}
    for row in rows:
        spans.setdefault(row.game_id, [row.v, row.v])[1] = row.v
    values = [value for game, (first, last) in spans.items() for value in (game, first, last)]
    if conn.execute(_fence_table_sql(len(spans)), values).rowcount != len(spans):
        raise WriteConflict("a game of the commit is not at the version before its rows, or is finished")


@functools.cache
def _journal_sql(rows: int) -> str:
    """The journal's INSERT of ``rows`` rows, made once per size (as the server's `_insert_sql`)."""
    return "INSERT INTO journal (game_id, v, action) VALUES " + ", ".join(["(?, ?, ?)"] * rows)


def _journal_rows(conn: sqlite3.Connection, rows: Sequence[ActionRecord]) -> None:
    for start in range(0, len(rows), ROWS_PER_INSERT):
        chunk = rows[start : start + ROWS_PER_INSERT]
        values = [value for row in chunk for value in (row.game_id, row.v, row.action)]
        conn.execute(_journal_sql(len(chunk)), values)


def _journal_blob(conn: sqlite3.Connection, rows: Sequence[ActionRecord]) -> None:
    batch = msgpack.packb([(row.game_id, row.v, row.action) for row in rows])
    conn.execute("INSERT INTO commit_journal (batch) VALUES (?)", (batch,))


def _journal_append(fence: Append, journal: Append) -> Append:
    def append(conn: sqlite3.Connection, rows: Sequence[ActionRecord]) -> None:
        with immediate_transaction(conn):
            fence(conn, rows)
            journal(conn, rows)
            _update_progress(conn, rows)

    return append


def _compact_rows(conn: sqlite3.Connection, rows: int | None = None) -> None:
    """The other designs' journal moved whole (``rows`` is None: they compact at once)."""
    with immediate_transaction(conn):
        conn.execute(
            "INSERT INTO actions (game_id, v, action) "
            "SELECT game_id, v, action FROM journal ORDER BY game_id, v"
        )
        conn.execute("DELETE FROM journal")


def _compact_blobs(conn: sqlite3.Connection, rows: int | None = None) -> None:
    with immediate_transaction(conn):
        batches = conn.execute("SELECT batch FROM commit_journal")
        moving = sorted(row for (batch,) in batches for row in msgpack.unpackb(batch))
        for start in range(0, len(moving), ROWS_PER_INSERT):
            chunk = moving[start : start + ROWS_PER_INSERT]
            conn.execute(_insert_sql(len(chunk)), [value for row in chunk for value in row])
        conn.execute("DELETE FROM commit_journal")


def _compact_all_flushed(conn: sqlite3.Connection, rows: int | None = None) -> int:
    """The compaction before slices: the whole journal at once, committed at the writer's FULL."""
    with immediate_transaction(conn):
        moved: int = conn.execute(repository.SQLITE_MOVE_JOURNAL).rowcount
        conn.execute(repository.SQLITE_EMPTY_JOURNAL)
    return moved


def _compact_slice_flushed(conn: sqlite3.Connection, rows: int | None = None) -> int:
    """`compact_journal`'s slice committed at the writer's FULL (a flush of its own)."""
    with immediate_transaction(conn):
        moved: int = conn.execute(repository.SQLITE_MOVE_JOURNAL_SLICE, [rows]).rowcount
        conn.execute(repository.SQLITE_EMPTY_JOURNAL_SLICE, [rows])
    return moved


def variants() -> list[Variant]:
    no_autocheckpoint = ("PRAGMA wal_autocheckpoint=0",)
    current = Variant(
        "current",
        revision="head",
        append=_append,
        compact=functools.partial(compact_journal, level=2),
        slice_rows=JOURNAL_ROWS_PER_SLICE,
    )
    return [
        Variant("actions table"),
        current,
        Variant("whole journal at FULL", revision="head", append=_append, compact=_compact_all_flushed),
        Variant("whole journal at NORMAL", revision="head", append=_append, compact=compact_journal),
        Variant(
            "slices at FULL",
            revision="head",
            append=_append,
            compact=_compact_slice_flushed,
            slice_rows=JOURNAL_ROWS_PER_SLICE,
        ),
        *(
            Variant(
                f"slices of {rows}",
                revision="head",
                append=_append,
                compact=functools.partial(compact_journal, level=2),
                slice_rows=rows,
            )
            for rows in (256, 1024, 2048, 4096)
        ),
        replace(
            current,
            name="current, no flush",
            compact=functools.partial(compact_journal, level=0),
            pragmas=("PRAGMA synchronous=OFF",),
        ),
        Variant("executemany", append=_append_executemany),
        Variant("multi-row, journal on disk", pragmas=("PRAGMA temp_store=DEFAULT",)),
        Variant("no finished-game trigger", schema=(f"DROP TRIGGER {TRIGGER}",)),
        Variant("no foreign keys", pragmas=("PRAGMA foreign_keys=OFF",)),
        Variant("rowid actions", revision=ROWID_REVISION),
        Variant("WITHOUT ROWID actions", schema=_without_rowid_actions()),
        Variant("checkpoints apart, 1000", pragmas=no_autocheckpoint, checkpoints_apart=1000),
        Variant("checkpoints apart, 10000", pragmas=no_autocheckpoint, checkpoints_apart=10000),
        Variant("wal_autocheckpoint=1000", pragmas=("PRAGMA wal_autocheckpoint=1000",)),
        Variant("wal_autocheckpoint=4000", pragmas=("PRAGMA wal_autocheckpoint=4000",)),
        Variant("wal_autocheckpoint=10000", pragmas=("PRAGMA wal_autocheckpoint=10000",)),
        Variant(
            "before issue 14's changes",
            revision=ROWID_REVISION,
            pragmas=(
                "PRAGMA wal_autocheckpoint=1000",
                "PRAGMA journal_size_limit=-1",
                "PRAGMA temp_store=DEFAULT",
            ),
            append=_append_executemany,
        ),
        Variant(
            "journal, fence per row",
            schema=JOURNAL_SCHEMA,
            append=_journal_append(_fence_per_row, _journal_rows),
            compact=_compact_rows,
        ),
        Variant(
            "journal, one fence",
            schema=JOURNAL_SCHEMA,
            append=_journal_append(_fence_at_once, _journal_rows),
            compact=_compact_rows,
        ),
        Variant(
            "commit journal, one fence",
            schema=JOURNAL_SCHEMA,
            append=_journal_append(_fence_at_once, _journal_blob),
            compact=_compact_blobs,
        ),
        Variant(
            "journal, rowid fence table",
            schema=ROWID_FENCE_TABLE_SCHEMA,
            append=_journal_append(_fence_table_at_once, _journal_rows),
            compact=_compact_rows,
            on_start=(FENCE_ROW_ADD,),
            on_end=(FENCE_ROW_DELETE,),
        ),
    ]


def _without_rowid_actions() -> tuple[str, ...]:
    """The actions table rebuilt clustered on (game_id, v), whatever the head schema has."""
    return (
        f"DROP TRIGGER {TRIGGER}",
        "CREATE TABLE actions_clustered (game_id VARCHAR(32) NOT NULL, v INTEGER NOT NULL, "
        "action VARCHAR(16) NOT NULL, CONSTRAINT pk_actions PRIMARY KEY (game_id, v), "
        "CONSTRAINT ck_actions_v_positive CHECK (v >= 1), "
        "CONSTRAINT fk_actions_game_id_games FOREIGN KEY(game_id) REFERENCES games (id)) WITHOUT ROWID",
        "DROP TABLE actions",
        "ALTER TABLE actions_clustered RENAME TO actions",
        f"CREATE TRIGGER {TRIGGER} BEFORE INSERT ON actions "
        "WHEN (SELECT status FROM games WHERE id = NEW.game_id) <> 'playing' "
        "BEGIN SELECT RAISE(ABORT, 'the game is finished: no more actions'); END",
    )


#: A finished game's row, about as long as the server's (its figures, times and a final status).
FINISHED_GAME = (
    "INSERT INTO games (id, player_id, code, cells, status, score, moves, undos, started_at, "
    "finished_at, duration_ms, won, active_at) "
    "VALUES (?, 'p', 'EO1-C8-AAAAAFA', 8, 'won', 1234, 187, 3, ?, ?, 754321, 1, ?)"
)


@dataclass(frozen=True)
class Shape:
    """The games a database holds before the timed commits: ``playing`` ones the commits append to,
    ``idle`` unfinished ones nobody plays, and ``finished`` ones. ``games`` is a rowid table, so a
    game's row sits where its start put it: the playing and idle games start at random places among
    the last ``spread`` finished games (all of them when ``spread`` is None: games played for days)."""

    playing: int
    finished: int = 0
    idle: int = 0
    spread: int | None = None

    def row_order(self) -> list[str]:
        spread = self.finished if self.spread is None else min(self.spread, self.finished)
        mixed = ["finished"] * spread + ["idle"] * self.idle + ["playing"] * self.playing
        random.Random(7).shuffle(mixed)
        return ["finished"] * (self.finished - spread) + mixed


class Run:
    """One variant's database, writer connection and live games."""

    def __init__(self, variant: Variant, directory: Path, shape: Shape) -> None:
        self.variant = variant
        self.path = directory / f"{secrets.token_hex(4)}.db"
        url = f"sqlite+aiosqlite:///{self.path}"
        if variant.revision == "head":
            upgrade_to_head(url)
        else:
            command.upgrade(_alembic_config(url), variant.revision)
        self.conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        for statement in (*writer_pragmas("FULL"), *variant.schema, *variant.pragmas):
            self.conn.execute(statement)
        self.conn.execute(
            "INSERT INTO players (id, name, token_hash, created_at) VALUES ('p', 'bench', 'h', ?)", (STARTED,)
        )
        self.versions: dict[str, int] = {}
        with immediate_transaction(self.conn):
            for kind in shape.row_order():
                if kind == "finished":
                    self.conn.execute(FINISHED_GAME, (new_id(), STARTED, STARTED, STARTED))
                else:
                    game = self._start_game()
                    if kind == "idle":
                        del self.versions[game]
        self.turn = 0
        self.commits = 0
        self.journaled = 0
        self.since_checkpoint = 0
        #: WAL frames a commit writes, as the last timed-apart checkpoint found (a first guess until then).
        self.frames_per_commit = 50.0
        self.figures = Figures()

    def _start_game(self) -> str:
        game = new_id()
        self.conn.execute(
            "INSERT INTO games (id, player_id, code, cells, status, started_at, active_at) "
            "VALUES (?, 'p', 'EO1-C8-AAAAAFA', 8, 'playing', ?, ?)",
            (game, STARTED, STARTED),
        )
        for statement in self.variant.on_start:
            self.conn.execute(statement, (game,))
        self.versions[game] = 0
        return game

    def _batch(self, size: int) -> list[ActionRecord]:
        games = list(self.versions)
        rows = []
        for index in range(size):
            game = games[(self.turn + index) % len(games)]
            self.versions[game] += 1
            rows.append(ActionRecord(game_id=game, v=self.versions[game], action="t1-c5"))
        self.turn += size
        self.commits += 1
        self.journaled += size
        if self.commits % PROGRESS_EVERY == 0:
            progress = GameFigures(score=10, moves=rows[-1].v, undos=0, at=datetime.now(UTC))
            rows[-1] = ActionRecord(rows[-1].game_id, rows[-1].v, rows[-1].action, figures=progress)
        return rows

    def _replace_full_games(self) -> None:
        for game, v in list(self.versions.items()):
            if v >= MAX_GAME_ACTIONS:
                self.conn.execute("UPDATE games SET status = 'won' WHERE id = ?", (game,))
                for statement in self.variant.on_end:
                    self.conn.execute(statement, (game,))
                del self.versions[game]
                self._start_game()

    def commit_round(self, commits: int, batch: int, *, measured: bool) -> None:
        commit_cpu = commit_wall = checkpoint_cpu = 0.0
        for _ in range(commits):
            rows = self._batch(batch)
            started, wall_started = time.thread_time(), time.perf_counter()
            self.variant.append(self.conn, rows)
            commit_cpu += time.thread_time() - started
            commit_wall += time.perf_counter() - wall_started
            self.since_checkpoint += 1
            checkpoint_cpu += self._checkpoint_if_due(measured=measured)
            checkpoint_cpu += self._compact_if_due(measured=measured)
            self._replace_full_games()
            self.figures.largest_wal = max(self.figures.largest_wal, self._wal_size())
        if measured:
            self.figures.commit_cpu.append(commit_cpu)
            self.figures.commit_wall.append(commit_wall)
            self.figures.checkpoint_cpu.append(checkpoint_cpu)
            self.figures.rows.append(commits * batch)
            self.figures.commits.append(commits)

    def _checkpoint_if_due(self, *, measured: bool) -> float:
        """A timed-apart checkpoint when the WAL holds ``checkpoints_apart`` frames; its CPU seconds."""
        every = self.variant.checkpoints_apart
        if not every or self.since_checkpoint * self.frames_per_commit < every:
            return 0.0
        started, wall_started = time.thread_time(), time.perf_counter()
        _, frames, _ = self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        cpu = time.thread_time() - started
        wall = time.perf_counter() - wall_started
        self.frames_per_commit = max(1.0, frames / self.since_checkpoint)
        if measured:
            self.figures.wal_frames += frames
            self.figures.wal_commits += self.since_checkpoint
            self.figures.checkpoint_walls.append(wall)
        self.since_checkpoint = 0
        return cpu

    def _compact_if_due(self, *, measured: bool) -> float:
        """A journal variant's compaction once ``JOURNAL_ROWS_PER_COMPACTION`` rows are journaled, or
        its slice once ``slice_rows`` are (the server's cadence); its CPU seconds."""
        every = self.variant.slice_rows or JOURNAL_ROWS_PER_COMPACTION
        if self.variant.compact is None or self.journaled < every:
            return 0.0
        rows = self.journaled if self.variant.slice_rows else None
        self.journaled = 0
        started, wall_started = time.thread_time(), time.perf_counter()
        self.variant.compact(self.conn, rows)
        if measured:
            self.figures.compaction_walls.append(time.perf_counter() - wall_started)
        return time.thread_time() - started

    def _wal_size(self) -> int:
        wal = self.path.with_name(self.path.name + "-wal")
        return wal.stat().st_size if wal.exists() else 0

    def close(self) -> None:
        self.conn.close()


def _print_table(runs: Sequence[Run]) -> None:
    baseline = runs[0].figures
    base_total = baseline.per_row(baseline.commit_cpu) + baseline.amortized_per_row(baseline.checkpoint_cpu)
    print(
        f"{'variant':<28} {'µs CPU/row':>10} {'µs CPU/commit':>13} {'apart µs/row':>12} "
        f"{'total µs/row':>12} {'ratio':>6} {'max WAL MiB':>11} {'ms wall/commit':>14}"
    )
    for run in runs:
        figures = run.figures
        commit = figures.per_row(figures.commit_cpu)
        checkpoint = figures.amortized_per_row(figures.checkpoint_cpu)
        per_commit = figures.per_commit(figures.commit_cpu)
        print(
            f"{run.variant.name:<28} {commit * 1e6:>10.2f} {per_commit * 1e6:>13.0f} "
            f"{checkpoint * 1e6:>12.2f} {(commit + checkpoint) * 1e6:>12.2f} "
            f"{(commit + checkpoint) / base_total:>6.2f} {figures.largest_wal / 2**20:>11.1f} "
            f"{figures.per_commit(figures.commit_wall) * 1e3:>14.2f}"
        )
        if figures.compaction_walls:
            walls = sorted(figures.compaction_walls)
            print(
                f"{'':<28} (a compaction: {len(walls)}, median {statistics.median(walls) * 1e3:.2f} ms, "
                f"p90 {percentile(walls, 0.9) * 1e3:.2f} ms, longest {walls[-1] * 1e3:.2f} ms wall)"
            )
        if figures.wal_commits:
            print(
                f"{'':<28} (WAL frames per commit: {figures.wal_frames / figures.wal_commits:.1f}; "
                f"a checkpoint: median {statistics.median(figures.checkpoint_walls) * 1e3:.1f} ms, "
                f"longest {max(figures.checkpoint_walls) * 1e3:.1f} ms wall)"
            )


@contextlib.contextmanager
def _busy_gil(*, enabled: bool) -> Iterator[None]:
    """A thread running Python bytecode without pause, as a loaded event loop does: the writer gets the
    GIL back after each statement it steps only when this thread yields it (every switch interval)."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(100))

    thread = threading.Thread(target=spin, daemon=True)
    if enabled:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        if enabled:
            thread.join()


@contextlib.contextmanager
def _runs(chosen: Sequence[Variant], directory: Path, shape: Shape) -> Iterator[list[Run]]:
    runs = [Run(variant, directory, shape) for variant in chosen]
    try:
        yield runs
    finally:
        for run in runs:
            run.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--games", type=int, default=100, help="games being played (default 100)")
    parser.add_argument(
        "--finished-games", type=int, default=0, help="finished games in the table before the run (default 0)"
    )
    parser.add_argument(
        "--idle-games", type=int, default=0, help="unfinished games nobody plays during the run (default 0)"
    )
    parser.add_argument(
        "--spread",
        type=int,
        help="the games being played started among the last SPREAD finished games (default: all of them)",
    )
    parser.add_argument("--batch", type=int, default=51, help="action rows per commit (default 51)")
    parser.add_argument("--commits", type=int, default=100, help="commits per round (default 100)")
    parser.add_argument("--rounds", type=int, default=15, help="measured rounds (default 15)")
    parser.add_argument("--only", nargs="*", help="variant names to run (the first is the baseline)")
    parser.add_argument(
        "--gil-busy",
        action="store_true",
        help="a Python thread keeps the GIL busy during the measured rounds (the event loop's stand-in)",
    )
    args = parser.parse_args()
    if args.batch > args.games:
        parser.error("--batch must not exceed --games: the rows of a commit are of distinct games")
    chosen = variants()
    if args.only:
        by_name = {variant.name: variant for variant in chosen}
        chosen = [by_name[name] for name in args.only]
    shape = Shape(args.games, args.finished_games, args.idle_games, args.spread)
    process_started = time.process_time()
    with (
        tempfile.TemporaryDirectory(prefix="eightoff-bench-append-") as tmp,
        _runs(chosen, Path(tmp), shape) as runs,
    ):
        for run in runs:
            run.commit_round(WARM_UP_COMMITS, args.batch, measured=False)
        with _busy_gil(enabled=args.gil_busy):
            for _ in range(args.rounds):
                for run in runs:
                    run.commit_round(args.commits, args.batch, measured=True)
        print(
            f"SQLite {sqlite3.sqlite_version}, synchronous=FULL, {args.games} games, {args.finished_games} "
            f"finished (the played ones among the last {shape.spread or 'all'}), {args.idle_games} idle, "
            f"{args.batch} rows per "
            f"commit, {args.rounds} rounds x {args.commits} commits after {WARM_UP_COMMITS} warm-up; "
            f"medians over rounds; statements of up to {ROWS_PER_INSERT} rows"
            + ("; a busy Python thread contends for the GIL" if args.gil_busy else "")
        )
        _print_table(runs)
    print(f"process CPU for the whole run: {time.process_time() - process_started:.1f} s")


if __name__ == "__main__":
    main()
