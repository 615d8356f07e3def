"""How a batch of writes is committed on each database: the backends of the group-commit pipeline.

The pipeline (`server.storage.committer.Committer`) owns the queue, the batching, the isolation of a conflict
and the hand-back to the event loop; a backend only commits one batch, atomically, on the pipeline's
writer thread, and says how it failed:

- `SqlAlchemyBackend`: every write, through the async engine on the event loop (PostgreSQL; on SQLite,
  the writes that finish games that rank, abandon games, store races or ratings, with the leaderboard
  summaries that go with them).
- `SqliteBackend`: batches that append actions (the hot path), add players or games, mark games
  hinted, finish games played with hints (which rank nowhere) or change the live rooms
  (`server.play.presence`), straight through a plain ``sqlite3``
  connection owned by the writer thread (through aiosqlite a commit is about eight round trips
  between the event loop and the driver's thread, each a turn of the loop; here it is none: a hint
  flood's new games, hinted marks and resignations would hold the loop); a batch with anything
  else goes to the SQLAlchemy backend whole (one whose result turns out to be a ranked game's is
  rolled back and handed over). The statements are the Core ones of
  `repository`, compiled for SQLite once, their parameters bound as the engine binds them (`_Bound`).
  The writer's connection and the engine's do contend for SQLite's write lock: each write begins
  ``BEGIN IMMEDIATE`` on a file the migrations made a write-ahead log, so either waits for the other
  (docs/durability.md says why that holds). The wait is SQLite's busy handler, which sleeps 1, 2, 5,
  10 ms and on: so the writes made often (the live rooms change with every game dealt or left) are
  the writer's, and what stays on the engine is rarer.

  The actions of a batch go to the action journal (`repository.sqlite_journal_sql`), fenced by one
  compare-and-set on ``game_fences`` for all its games (`repository.sqlite_fence_sql`; docs/durability.md,
  The fence): a commit writes a page or two of journal and of fences instead of a page of ``actions``
  per game, most of the writer's CPU. After a batch's outcome is handed back, the
  pipeline calls `SqliteBackend.tidy`, which moves the journal's oldest rows into ``actions``
  (`compact_journal`), a slice at a time: the next batch, and every ack waiting for it, waits for
  the slice, so a slice is small (`JOURNAL_ROWS_PER_SLICE`: the whole journal at once holds the
  writer some 20 ms, bench/bench_sqlite_append.py), and commits without a flush of its own
  (``synchronous=NORMAL``: the next batch's flush makes it durable, and a slice lost with the
  machine leaves its rows in the journal, durable). The fence and the journal go in multi-row statements of
  up to `ROWS_PER_INSERT` rows or games, not one statement per row: the driver releases the GIL
  around every statement it steps, each time a chance for the event loop to take the GIL and the
  writer to wait for it back. A multi-row statement that may fail half-way keeps a journal of the
  pages it changed, to undo just itself: the writer's is kept in memory (``temp_store=MEMORY``), else
  past 64 KiB it spills to a temporary file, which costs half as much again as the whole commit
  (bench/bench_sqlite_append.py).

  SQLite's automatic checkpoints fail without a word to the writer when the database file cannot be
  written (made immutable mid-run): the write-ahead log would then grow by every commit,
  acknowledged, for as long as the fault lasts. Once the log is past `SQLITE_WAL_SIZE_LIMIT` (where
  checkpoints keep it below), the writer checkpoints it itself, at most once per
  `LOG_CHECK_INTERVAL`: if that fails it logs one line and every write is refused ``unavailable``
  (nothing more goes into the log) until a checkpoint succeeds again.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import logging
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol, cast

from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from server.storage import races, ratings, repository, unfinished
from server.storage.db import SQLITE_WAL_SIZE_LIMIT, Database, StorageUnavailable, sqlite_pragmas
from server.storage.records import (
    ActionRecord,
    GameResult,
    GameStart,
    LiveRoomsChange,
    PlayerRecord,
    RaceRecord,
    RaceWrite,
    RatedRace,
    Rating,
)
from server.storage.tables import games

__all__ = [
    "JOURNAL_ROWS_PER_COMPACTION",
    "JOURNAL_ROWS_PER_SLICE",
    "LOG_CHECK_INTERVAL",
    "ROWS_PER_INSERT",
    "WRITER_KINDS",
    "AbandonGames",
    "AddGame",
    "AddPlayer",
    "AppendActions",
    "CommitBackend",
    "MarkHinted",
    "SetLiveRooms",
    "SqlAlchemyBackend",
    "SqliteBackend",
    "StoreRace",
    "StoreRatings",
    "Write",
    "WriteConflict",
    "actions_of",
    "compact_journal",
    "is_append_only",
]

logger = logging.getLogger(__name__)

#: Seconds between two checkpoints the writer makes itself while the log stays too long (a long
#: reader may hold it there; a file that cannot be written keeps it there).
LOG_CHECK_INTERVAL = 1.0


class WriteConflict(Exception):
    """The write breaks a constraint (a version of the game already stored, a game already finished)."""


class AddPlayer(NamedTuple):
    """A new player."""

    player: PlayerRecord


class AddGame(NamedTuple):
    """A new game."""

    game: GameStart


class AppendActions(NamedTuple):
    """A game's actions, and the result they end it with (the hot path: one is made per action, on
    the event loop)."""

    actions: Sequence[ActionRecord]
    result: GameResult | None = None


class MarkHinted(NamedTuple):
    """A game whose player asked for a hint: marked so while it is still being played (else a conflict)."""

    game_id: str


class AbandonGames(NamedTuple):
    """Unfinished games given up on (`server.services.quotas`): marked abandoned, those still unfinished."""

    game_ids: Sequence[str]


class StoreRace(NamedTuple):
    """A race stored whole (`server.play.race.room`), with the games its seats start."""

    race: RaceWrite


class StoreRatings(NamedTuple):
    """A finished race's rating changes (`server.play.race.ratings.rate_race`), stored with its seat's
    result when there is one: a conflict when a player's rating changed since they were computed
    (read again, rate anew)."""

    ratings: RatedRace
    result: GameResult | None = None


class SetLiveRooms(NamedTuple):
    """The rooms this process now holds or let go (`server.play.presence`), for ``live``."""

    change: LiveRoomsChange


#: What one request stores, atomically: one kind of write each, which the backends dispatch on (a
#: value: the pipeline may retry it alone; named tuples, not frozen dataclasses: one is made per
#: action, and a tuple costs a third of the time to make).
Write = (
    AddPlayer | AddGame | AppendActions | MarkHinted | AbandonGames | StoreRace | StoreRatings | SetLiveRooms
)
#: The kinds the SQLite writer's own connection may commit (`SqliteBackend`): all but races, ratings
#: and abandonments. A result only if its game was played with hints, which the writer finds out as
#: it stores it (`_write`).
WRITER_KINDS: frozenset[type[Write]] = frozenset(
    {AddPlayer, AddGame, AppendActions, MarkHinted, SetLiveRooms}
)


def actions_of(write: Write) -> Sequence[ActionRecord]:
    """The action rows ``write`` appends (none but for `AppendActions`)."""
    return write.actions if type(write) is AppendActions else ()


def is_append_only(write: Write) -> bool:
    """Whether ``write`` only appends actions: a batch of these takes the writer's shortest path."""
    return type(write) is AppendActions and write.result is None


class CommitBackend(Protocol):
    """Commits batches for the pipeline; called on its writer thread only, one batch at a time."""

    def commit(self, writes: Sequence[Write]) -> None:
        """Commit every write of ``writes`` in one transaction, or none of them.

        Raises:
            WriteConflict: a constraint refused the batch (the pipeline then retries each write alone).
            StorageUnavailable: the database failed; nothing was stored.
        """

    def tidy(self) -> None:
        """Work that no write waits for (on the writer thread, after a batch's outcome was handed
        back: the next batch gathers meanwhile)."""

    def close(self) -> None:
        """Release what the backend holds (on the writer thread, after its last commit)."""


class RaceRater(Protocol):
    """Rates a finished race from its places, the players' stored ratings and how often its seats'
    networks met in rated races lately (`server.play.race.ratings.FarmGuard`, given by the
    composition root: storage knows no rating rule)."""

    @property
    def established_networks(self) -> int | None:
        """The rivals' networks that establish a player (None: every player is)."""

    def meetings_since(self, race: RaceRecord) -> dt.datetime | None:
        """Since when the rated races of ``race``'s networks count (None: they don't)."""

    def __call__(
        self,
        race: RaceRecord,
        current: Mapping[str, Rating],
        recent: Sequence[Sequence[str]],
        networks_met: Mapping[str, int],
    ) -> RatedRace:
        """``recent``: for each race rated since `meetings_since`, which of ``race``'s networks had
        a rated seat in it (`server.storage.ratings.rated_networks_since`); ``networks_met``: each
        seated person's count (`server.storage.ratings.networks_met`)."""


class SqlAlchemyBackend:
    """Commits through `Database` (the async engine), on the event loop the pipeline was started on.
    With a ``rater``, a race's finishing write also rates it, in the same transaction: its result and
    the rating changes are stored together, computed from the ratings as they are in it."""

    def __init__(
        self, database: Database, loop: asyncio.AbstractEventLoop, rater: RaceRater | None = None
    ) -> None:
        self._database = database
        self._loop = loop
        self._rater = rater

    def commit(self, writes: Sequence[Write]) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self._commit(writes), self._loop).result()
        except RuntimeError as exc:  # the loop is closed: nothing ran
            raise StorageUnavailable(f"the server is stopping: {exc}") from None

    def tidy(self) -> None:
        pass

    def close(self) -> None:
        pass

    async def _commit(self, writes: Sequence[Write]) -> None:
        try:
            async with self._database.transaction() as conn:
                for write in writes:  # first the rows the actions need: players, games, races' games
                    match write:
                        case AddPlayer(player):
                            await repository.insert_player(conn, player)
                        case AddGame(game):
                            await repository.insert_game(conn, game)
                        case StoreRace(race):
                            await races.store_race(conn, race)
                            await self._rate(conn, race)
                rows = [row for write in writes for row in actions_of(write)]
                if rows:
                    await repository.append_actions(conn, rows)
                for write in writes:  # then what reads or ends the games the actions reached
                    match write:
                        case AppendActions(_, result) if result is not None:
                            await _finish_game(conn, result)
                        case MarkHinted(game_id):
                            if not await repository.mark_hinted(conn, game_id):
                                raise WriteConflict(f"game {game_id} is no longer being played")
                        case AbandonGames(game_ids):
                            await unfinished.abandon_games(conn, game_ids)
                        case StoreRatings(rated, result):
                            if result is not None:
                                await _finish_game(conn, result)
                            if not await ratings.store_rating_changes(conn, rated):
                                raise WriteConflict(
                                    f"race {rated.race_id}: a rating changed since it was rated"
                                )
                        case SetLiveRooms(change):
                            await repository.set_live_rooms(conn, change)
        except IntegrityError as exc:
            raise WriteConflict(str(exc.orig)) from None
        except races.RaceConflict as exc:
            raise WriteConflict(str(exc)) from None

    async def _rate(self, conn: AsyncConnection, write: RaceWrite) -> None:
        """Rate a race its write finishes (once: a race is finished by one write of its revisions)."""
        if self._rater is None:
            return
        race = write.race
        if race.state != "finished" or write.rematch is not None:  # a rematch's link: rated before
            return
        recent: list[list[str]] = []
        since = self._rater.meetings_since(race)
        if since is not None:
            networks = (seat.network for seat in race.seated if seat.network is not None)
            recent = await ratings.rated_networks_since(conn, networks, since)
        seated = [seat.player_id for seat in race.seated]
        enough = self._rater.established_networks
        met = {} if enough is None else await ratings.networks_met(conn, seated, enough)
        current = await ratings.load_ratings(conn, race.cells, seated)
        if not await ratings.store_rating_changes(conn, self._rater(race, current, recent, met)):
            raise WriteConflict(f"race {race.id}: a rating changed while it was rated")


async def _finish_game(conn: AsyncConnection, result: GameResult) -> None:
    if not await repository.finish_game(conn, result):
        raise WriteConflict(f"game {result.id} is no longer being played")


_DIALECT = sqlite_dialect.dialect(paramstyle="qmark")
#: Action rows per journal INSERT, and games per fence statement, of the SQLite writer: a batch of n
#: rows takes ceil(n / 64) of each, of at most 64 shapes each (prepared once, all within the
#: connection's cache of `WRITER_STATEMENTS`).
ROWS_PER_INSERT = repository.SQLITE_ROWS_PER_STATEMENT
#: Rows the writer journals between two slices of the compaction (`compact_journal`), each of which
#: moves as many of the journal's oldest rows: what the next batch waits for (a few milliseconds),
#: and what bounds the journal that every read of a game scans (it has no index, so that an append
#: changes one page or two). A slice of the games' rows changes each game's page of ``actions`` for
#: a few rows only: halving the slice adds 1 to 1.5 µs of the writer's CPU per row, and about halves
#: the pause (docs/benchmarks.md, the journal's compaction in slices).
JOURNAL_ROWS_PER_SLICE = 512
#: The most rows one slice moves (a backlog, after a failure or under batches bigger than a slice,
#: drains at this many per batch), and the rows journaled after a failed slice before the next try.
JOURNAL_ROWS_PER_COMPACTION = 4096
#: Prepared statements the writer's connection keeps: the fence's and the journal's 64 shapes each,
#: and the rest of its statements.
WRITER_STATEMENTS = 256
_FIGURES_SQL = str(repository.RECORD_FIGURES.compile(dialect=_DIALECT))
#: ``active_at`` as SQLAlchemy stores it on SQLite (UTC text that sorts in time order).
_STORED_TIME = games.c.active_at.type.bind_processor(_DIALECT)


class SqliteBackend:
    """The writes of `WRITER_KINDS` through the writer thread's own ``sqlite3`` connection;
    other batches through ``others``. The connection is opened at the first commit and again after a
    failure (the file may have come back)."""

    def __init__(
        self,
        path: Path,
        others: CommitBackend,
        *,
        synchronous: str = "FULL",
        log_limit: int = SQLITE_WAL_SIZE_LIMIT,
    ) -> None:
        """``log_limit``: bytes of write-ahead log past which the writer checks that a checkpoint
        can still write the database file."""
        self._path = path
        self._log = Path(f"{path}-wal")
        self._others = others
        self._synchronous = synchronous.upper()
        self._log_limit = log_limit
        self._conn: sqlite3.Connection | None = None
        self._level = 2  # the connection's PRAGMA synchronous, as it reads it (FULL)
        self._stuck: str | None = None  # why checkpoints fail: writes are refused meanwhile
        self._checked_at = -LOG_CHECK_INTERVAL
        # rows journaled that this writer's slices are to move: its own, those the engine journaled
        # for it (`_commit_elsewhere`), those it found in the journal as it connected
        self._owed = 0
        self._due = JOURNAL_ROWS_PER_SLICE  # rows owed that make a slice due
        self._batch = 0  # rows of the last batch journaled

    def commit(self, writes: Sequence[Write]) -> None:
        self._check_log()
        append_only = all(map(is_append_only, writes))
        if not append_only and not all(type(write) in WRITER_KINDS for write in writes):
            self._commit_elsewhere(writes)
            return
        try:
            self._conn = self._conn or self._connect()
            if append_only:  # the hot path: no call per write to find its rows
                rows = [row for write in cast(Sequence[AppendActions], writes) for row in write.actions]
                _append(self._conn, rows)
            else:
                rows = [row for write in writes for row in actions_of(write)]
                _write(self._conn, writes)
            self._journaled(len(rows))
        except _RanksOnLeaderboards:  # rolled back: the engine commits the batch whole
            self._commit_elsewhere(writes)
        except sqlite3.IntegrityError as exc:
            raise WriteConflict(str(exc)) from None
        except (sqlite3.Error, OSError) as exc:
            self._disconnect()
            raise StorageUnavailable(str(exc)) from None

    def _commit_elsewhere(self, writes: Sequence[Write]) -> None:
        """Through ``others``, which on SQLite journals the actions too: this writer's slices move them."""
        self._others.commit(writes)
        self._journaled(sum(len(actions_of(write)) for write in writes))

    def _journaled(self, rows: int) -> None:
        self._owed += rows
        self._batch = rows

    def tidy(self) -> None:
        """Move a slice of the journal (`compact_journal`) once this writer has put
        `JOURNAL_ROWS_PER_SLICE` rows in it since its last: as many of the oldest rows (whoever
        journaled them), at most `JOURNAL_ROWS_PER_COMPACTION` more than its last batch, so that each
        writer of the file moves what it adds and the journal stays bounded (below a slice per
        writer, except after a failure). A failure is logged and the rows stay (reads see them there)
        until the next try, `JOURNAL_ROWS_PER_COMPACTION` rows later."""
        if self._owed < self._due:
            return
        rows = min(self._owed, JOURNAL_ROWS_PER_COMPACTION + self._batch)
        moved = self._compact(rows)
        if moved is None:
            self._due = self._owed + JOURNAL_ROWS_PER_COMPACTION
            return
        self._owed = self._owed - rows if moved == rows else 0  # fewer: the journal is empty
        self._due = JOURNAL_ROWS_PER_SLICE

    def close(self) -> None:
        if self._owed:
            self._compact(None)  # a journal left empty behind a clean stop
        self._disconnect()
        self._others.close()

    def _compact(self, rows: int | None) -> int | None:
        """`compact_journal`; None if it failed (logged)."""
        try:
            self._conn = self._conn or self._connect()
            return compact_journal(self._conn, rows, self._level)
        except (sqlite3.Error, OSError) as exc:
            self._disconnect()
            logger.warning("compacting the action journal of %s failed: %s", self._path, exc)
            return None

    def _check_log(self) -> None:
        """Past ``log_limit`` bytes of log, a checkpoint of our own (once per `LOG_CHECK_INTERVAL`).

        Raises:
            StorageUnavailable: the last checkpoint could not write the database file.
        """
        if self._stuck is None:
            try:
                if self._log.stat().st_size <= self._log_limit:
                    return
            except OSError:  # no log yet
                return
        now = time.monotonic()
        if now - self._checked_at < LOG_CHECK_INTERVAL:
            if self._stuck is not None:
                raise StorageUnavailable(self._stuck)
            return
        self._checked_at = now
        try:
            self._conn = self._conn or self._connect()
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except (sqlite3.Error, OSError) as exc:
            self._disconnect()
            if self._stuck is None:
                logger.error(
                    "the database file %s cannot be written (%s): its write-ahead log is not "
                    "checkpointed, so every write is refused as unavailable until it can be",
                    self._path,
                    exc,
                )
            self._stuck = f"the database file cannot be written ({exc})"
            raise StorageUnavailable(self._stuck) from None
        if self._stuck is not None:
            logger.warning("the database file %s is written again: writes resume", self._path)
            self._stuck = None

    def _disconnect(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._path, isolation_level=None, check_same_thread=False, cached_statements=WRITER_STATEMENTS
        )
        for pragma in writer_pragmas(self._synchronous):
            conn.execute(pragma)
        # rows a writer left in the journal when it stopped without moving them (killed): ours too
        # (at most the journal: counted once again after a reconnection)
        (left,) = conn.execute(repository.SQLITE_JOURNAL_ROWS).fetchone()
        self._owed = max(self._owed, left)
        (self._level,) = conn.execute("PRAGMA synchronous").fetchone()
        return conn


def writer_pragmas(synchronous: str) -> tuple[str, ...]:
    """The set-up of the writer's connection: the server's (`sqlite_pragmas`), and statement journals
    in memory for its multi-row INSERTs."""
    return (*sqlite_pragmas(synchronous), "PRAGMA temp_store=MEMORY")


def compact_journal(conn: sqlite3.Connection, rows: int | None = None, level: int | None = None) -> int:
    """Move the journal's ``rows`` oldest rows (None: all of them) into ``actions`` and delete them,
    in one transaction: every row moves exactly once, whichever process compacts, since the write
    lock is held from the first statement (which reads where the slice ends) to the commit. The
    rows moved. ``level``: the connection's ``PRAGMA synchronous`` (None: read it).

    The transaction commits at ``synchronous=NORMAL`` at most (`_unflushed`): in WAL mode its frames
    then reach the disk with the next commit's flush (every commit of actions is FULL), or are lost
    with the machine before it, all of them (a frame counts only after a commit frame whose
    checksum covers every frame before it), and the rows are then still in the journal, where they
    were durable. A crash of the process alone loses no committed transaction, flushed or not."""
    if level is None:
        (level,) = conn.execute("PRAGMA synchronous").fetchone()
    with _unflushed(conn, level), immediate_transaction(conn):
        if rows is None:
            moved = conn.execute(repository.SQLITE_MOVE_JOURNAL).rowcount
            conn.execute(repository.SQLITE_EMPTY_JOURNAL)
            return moved
        moved = conn.execute(repository.SQLITE_MOVE_JOURNAL_SLICE, [rows]).rowcount
        conn.execute(repository.SQLITE_EMPTY_JOURNAL_SLICE, [rows])
        return moved


#: ``PRAGMA synchronous``'s NORMAL, as the pragma reads it.
_NORMAL = 1


@contextlib.contextmanager
def _unflushed(conn: sqlite3.Connection, level: int) -> Iterator[None]:
    """The connection's commits at ``synchronous=NORMAL`` (or below, as they were at ``level``)
    within: no flush of their own (the pragma cannot change within a transaction: outside one only)."""
    if level <= _NORMAL:
        yield
        return
    conn.execute(f"PRAGMA synchronous={_NORMAL}")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA synchronous={level}")


class _Bound:
    """A Core statement compiled for the plain driver once, and its parameters bound as the engine
    binds them: the columns' Python defaults filled in, each value through its type's bind processing
    (aware times as UTC text, booleans as 0 and 1), in the statement's order."""

    def __init__(self, statement: Any, keys: Sequence[str]) -> None:
        compiled = statement.compile(dialect=_DIALECT, column_keys=list(keys))
        self.sql = str(compiled)
        self._compiled = compiled
        self._names = tuple(compiled.positiontup or ())
        self._processors = tuple(
            compiled.binds[name].type.dialect_impl(_DIALECT).bind_processor(_DIALECT) for name in self._names
        )
        # the columns' Python defaults, which the engine fills in as it executes (not compiled in)
        self._defaults = {
            column.key: column.default.arg
            for column in compiled.insert_prefetch
            if column.default is not None and column.default.is_scalar
        }

    def parameters(self, values: Mapping[str, Any]) -> list[Any]:
        given = self._compiled.construct_params({**self._defaults, **values})
        return [
            given[name] if process is None else process(given[name])
            for name, process in zip(self._names, self._processors, strict=True)
        ]


@functools.cache
def _bound(statement: Any, keys: tuple[str, ...]) -> _Bound:
    return _Bound(statement, keys)


def _execute(conn: sqlite3.Connection, statement: Any, values: Mapping[str, Any]) -> sqlite3.Cursor:
    bound = _bound(statement, tuple(values))
    return conn.execute(bound.sql, bound.parameters(values))


def _execute_many(conn: sqlite3.Connection, statement: Any, rows: Sequence[Mapping[str, Any]]) -> None:
    """``statement`` once per row (rows of the same keys); nothing for no rows."""
    if rows:
        bound = _bound(statement, tuple(rows[0]))
        conn.executemany(bound.sql, [bound.parameters(values) for values in rows])


@contextlib.contextmanager
def immediate_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on any error: the write lock is taken at the
    start, where SQLite's busy handler waits for it, never half-way (docs/durability.md)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _append(conn: sqlite3.Connection, rows: Sequence[ActionRecord]) -> None:
    """The statements of `repository.append_actions`, through the plain driver, in one transaction."""
    with immediate_transaction(conn):
        _insert_actions(conn, rows)


def _insert_actions(conn: sqlite3.Connection, rows: Sequence[ActionRecord]) -> None:
    """The fence of every game of ``rows`` (`repository.sqlite_fence_sql`), the rows into the journal,
    and the figures of the games whose rows carry them.

    Raises:
        WriteConflict: a game has a version of its rows already, or ended, or is unknown; or
            ``rows`` hold a version of a game twice.
    """
    statements = repository.sqlite_journal_statements(rows)
    if statements is None:
        raise WriteConflict(repository.FENCE_REPEATED)
    for sql, parameters, changes in statements:
        if conn.execute(sql, parameters).rowcount != changes and changes is not None:
            raise WriteConflict(repository.FENCE_MISSED)
    last = {row.game_id: row.figures for row in rows if row.figures is not None}
    if last:
        conn.executemany(
            _FIGURES_SQL,
            [(p.score, p.moves, p.undos, _stored_time(p.at), game) for game, p in last.items()],
        )


class _RanksOnLeaderboards(Exception):
    """A result the writer does not store: its game was not played with hints (its leaderboard
    summaries are the engine's, `repository.finish_game`), or is no longer being played, or the
    status is not final (the engine says which)."""


def _write(conn: sqlite3.Connection, writes: Sequence[Write]) -> None:
    """The statements of `SqlAlchemyBackend._commit` for a batch the writer commits (each write of
    `WRITER_KINDS`), in its order, through the plain driver, in one transaction.

    Raises:
        WriteConflict: a game to mark hinted is no longer being played (nothing is stored).
        _RanksOnLeaderboards: a result is not for the writer (nothing is stored).
    """
    with immediate_transaction(conn):
        for write in writes:
            match write:
                case AddPlayer(player):
                    _execute(conn, repository.INSERT_PLAYER, repository.player_values(player))
                case AddGame(game):
                    _execute(conn, repository.INSERT_GAME, repository.game_values(game))
        _insert_actions(conn, [row for write in writes for row in actions_of(write)])
        for write in writes:
            match write:
                case MarkHinted(game_id):
                    if not _mark_hinted(conn, game_id):
                        raise WriteConflict(f"game {game_id} is no longer being played")
                case AppendActions(_, result) if result is not None:
                    if not _finish_hinted(conn, result):
                        raise _RanksOnLeaderboards(result.id)
                case SetLiveRooms(change):
                    _set_live_rooms(conn, change)


def _set_live_rooms(conn: sqlite3.Connection, change: LiveRoomsChange) -> None:
    """`repository.set_live_rooms`, its statements and rows."""
    deleted, inserted = repository.live_room_rows(change)
    _execute_many(conn, repository.DELETE_LIVE_ROOM, deleted)
    _execute_many(conn, repository.INSERT_LIVE_ROOM, inserted)


def _mark_hinted(conn: sqlite3.Connection, game_id: str) -> bool:
    return _execute(conn, repository.MARK_HINTED, {"h_game": game_id}).rowcount == 1


def _finish_hinted(conn: sqlite3.Connection, result: GameResult) -> bool:
    """`repository.finish_game` for a game played with hints (False, nothing changed: another game)."""
    if not repository.is_final(result.status):
        return False
    values = {"f_game": result.id, **repository.result_values(result)}
    return _execute(conn, repository.FINISH_HINTED, values).rowcount == 1


def _stored_time(moment: object) -> object:
    return moment if _STORED_TIME is None else _STORED_TIME(moment)
