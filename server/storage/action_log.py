"""The hot path of SQLite storage: action appends, group-committed by one dedicated writer thread.

Through aiosqlite a group commit is about eight round trips between the event loop and the driver's
thread (begin, insert, commit, each awaited); under load that, not the disk, bounds throughput. Here a
dedicated thread owns a plain ``sqlite3`` connection and its own queue: the event loop only enqueues an
append (no task, no executor hop), and the thread takes everything queued, does BEGIN IMMEDIATE, the
insert and the COMMIT, then hands the whole batch back to the loop in one callback. The next batch
starts as soon as the previous commit ends, without waiting for the busy event loop to schedule it.
The statement is the same Core ``insert(actions)`` the rest of storage uses, compiled for SQLite once.
Other writes (players, games, results and the leaderboard summaries that go with them) keep the async
path; SQLite serialises the two writers with its lock and the busy timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.dialects import sqlite as sqlite_dialect

from server.storage import repository
from server.storage.db import sqlite_pragmas
from server.storage.records import ActionRecord
from server.storage.tables import games

__all__ = ["ActionAppendConflict", "BatchStats", "SqliteActionLog"]

logger = logging.getLogger(__name__)

_DIALECT = sqlite_dialect.dialect(paramstyle="qmark")
_INSERT_SQL = str(repository.INSERT_ACTIONS.compile(dialect=_DIALECT, column_keys=["game_id", "v", "action"]))
_PROGRESS_SQL = str(repository.RECORD_PROGRESS.compile(dialect=_DIALECT))
#: ``active_at`` as SQLAlchemy stores it on SQLite (UTC text that sorts in time order).
_STORED_TIME = games.c.active_at.type.bind_processor(_DIALECT)


class ActionAppendConflict(Exception):
    """A (game, v) of the append is already stored: the fence refused it and nothing of it was stored."""


@dataclass(frozen=True, slots=True)
class BatchStats:
    """One group commit, for the metrics: how many appends it held, how many actions it stored and how
    long it took."""

    appends: int
    actions: int
    seconds: float


@dataclass(slots=True)
class _Append:
    rows: Sequence[ActionRecord]
    future: asyncio.Future[None]
    error: Exception | None = None


_STOP = object()  # queued by close(): commit what came before, then end the thread


class SqliteActionLog:
    """Appends action rows to a SQLite file, group-committed by one thread of its own."""

    def __init__(
        self,
        path: Path,
        *,
        synchronous: str = "FULL",
        max_batch: int = 1024,
        on_batch: Callable[[BatchStats], None] | None = None,
    ) -> None:
        """``on_batch`` is called on the event loop after every group commit (for the metrics)."""
        self._path = path
        self._synchronous = synchronous.upper()
        self._max_batch = max_batch
        self._on_batch = on_batch
        self._queue: queue.SimpleQueue[_Append | object] = queue.SimpleQueue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    async def append(self, rows: Sequence[ActionRecord]) -> None:
        """Commit ``rows`` atomically (with their games' figures), grouped with whatever else is queued.

        Raises:
            ActionAppendConflict: a row's (game_id, v) exists, or its game is finished; nothing of
                ``rows`` was stored.
            sqlite3.Error | OSError: the database failed; nothing of ``rows`` was stored.
        """
        if self._closed:
            raise sqlite3.OperationalError("the action log is closed")
        if self._thread is None:
            self._start()
        future = asyncio.get_running_loop().create_future()
        self._queue.put(_Append(rows, future))
        await future

    async def close(self) -> None:
        """Commit everything already queued, then stop the thread and close the connection."""
        self._closed = True
        if self._thread is not None:
            self._queue.put(_STOP)
            await asyncio.to_thread(self._thread.join)

    def _start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="sqlite-actions", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ the writer thread

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        stopping = False
        try:
            while not stopping:
                batch, stopping = self._take_batch()
                if not batch:
                    continue
                started = time.perf_counter()
                try:
                    conn = conn or self._connect()
                    self._commit_isolating_conflicts(conn, batch)
                except (sqlite3.Error, OSError) as exc:
                    logger.warning("appending %d actions failed: %s", len(batch), exc)
                    _discard(conn)  # reconnect next time: the file may have come back
                    conn = None
                    for append in batch:
                        append.error = append.error or exc
                except Exception as exc:  # a bug must not freeze every game: answer unavailable
                    logger.exception("group commit of %d appends failed unexpectedly", len(batch))
                    for append in batch:
                        append.error = append.error or sqlite3.OperationalError(str(exc))
                stored = sum(len(append.rows) for append in batch if append.error is None)
                stats = BatchStats(len(batch), stored, time.perf_counter() - started)
                self._hand_back(batch, stats)
        finally:
            _discard(conn)

    def _take_batch(self) -> tuple[list[_Append], bool]:
        """Block for the first append, then take whatever else is queued (up to ``max_batch``)."""
        batch: list[_Append] = []
        item = self._queue.get()
        while True:
            if not isinstance(item, _Append):
                return batch, True
            batch.append(item)
            if len(batch) >= self._max_batch:
                return batch, False
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return batch, False

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        for pragma in sqlite_pragmas(self._synchronous):
            conn.execute(pragma)
        return conn

    def _commit_isolating_conflicts(self, conn: sqlite3.Connection, batch: list[_Append]) -> None:
        """One transaction for the batch; if the fence refuses it, one per append, so that only the
        conflicting appends fail."""
        try:
            _commit(conn, [row for append in batch for row in append.rows])
        except sqlite3.IntegrityError as exc:
            if len(batch) == 1:
                batch[0].error = ActionAppendConflict(str(exc))
                return
            for append in batch:
                try:
                    _commit(conn, append.rows)
                except sqlite3.IntegrityError as single:
                    append.error = ActionAppendConflict(str(single))

    def _hand_back(self, batch: list[_Append], stats: BatchStats) -> None:
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            self._loop.call_soon_threadsafe(self._settle, batch, stats)

    def _settle(self, batch: list[_Append], stats: BatchStats) -> None:
        for append in batch:
            if append.future.done():
                continue
            if append.error is None:
                append.future.set_result(None)
            else:
                append.future.set_exception(append.error)
        if self._on_batch is not None:
            self._on_batch(stats)


def _commit(conn: sqlite3.Connection, rows: Sequence[ActionRecord]) -> None:
    """The statements of `repository.append_actions`, through the plain driver."""
    last = {row.game_id: row.progress for row in rows if row.progress is not None}
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(_INSERT_SQL, [(row.game_id, row.v, row.action) for row in rows])
        if last:
            conn.executemany(
                _PROGRESS_SQL,
                [(p.score, p.moves, p.undos, _stored_time(p.at), game) for game, p in last.items()],
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _stored_time(moment: object) -> object:
    return moment if _STORED_TIME is None else _STORED_TIME(moment)


def _discard(conn: sqlite3.Connection | None) -> None:
    if conn is not None:
        with contextlib.suppress(sqlite3.Error):
            conn.close()
