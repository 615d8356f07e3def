"""The hot path of SQLite storage: appending a batch of actions in one hop to one writer thread.

Through aiosqlite a group commit is about eight round trips between the event loop and the driver's
thread (begin, insert, commit, each awaited); under load that, not the disk, bounds throughput. Here a
dedicated thread owns a plain ``sqlite3`` connection and does BEGIN IMMEDIATE, the insert and the COMMIT
in one call. The statement is the same Core ``insert(actions)`` the rest of storage uses, compiled for
SQLite once. Other writes (players, games, results and the leaderboard summaries that go with them)
keep the async path; SQLite serialises the two writers with its lock and the busy timeout.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sqlalchemy import insert
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import make_url

from server.storage.tables import actions

__all__ = ["ActionAppendConflict", "SqliteActionLog", "sqlite_file_of"]

_INSERT_SQL = str(
    insert(actions)
    .values(game_id=":game_id", v=":v", action=":action")
    .compile(dialect=sqlite_dialect.dialect(paramstyle="qmark"))
)


class ActionAppendConflict(Exception):
    """A (game, v) of the batch is already stored: the fence refused the whole batch."""


def sqlite_file_of(url: str) -> Path | None:
    """The database file of a SQLite URL, or None (other databases, memory, URIs)."""
    parsed = make_url(url)
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    if database.startswith("file:"):
        return None
    return Path(database).expanduser()


class SqliteActionLog:
    """Appends action rows to a SQLite file from one dedicated thread."""

    def __init__(self, path: Path, *, synchronous: str = "FULL", busy_timeout_ms: int = 5000) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-actions")
        self._path = path
        self._synchronous = synchronous.upper()
        self._busy_timeout_ms = busy_timeout_ms
        self._conn: sqlite3.Connection | None = None

    async def append(self, rows: Sequence[tuple[str, int, str]]) -> None:
        """Commit ``rows`` (game_id, v, action) in one transaction.

        Raises:
            ActionAppendConflict: a row's (game_id, v) exists; nothing of the batch was stored.
            sqlite3.Error: the database failed; nothing of the batch was stored.
        """
        await asyncio.get_running_loop().run_in_executor(self._executor, self._append, rows)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_ms)}")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    def _append(self, rows: Sequence[tuple[str, int, str]]) -> None:
        if self._conn is None:
            self._conn = self._connect()
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(_INSERT_SQL, rows)
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.IntegrityError):
                raise ActionAppendConflict(str(exc)) from None
            raise

    async def close(self) -> None:
        def close_connection() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        await asyncio.get_running_loop().run_in_executor(self._executor, close_connection)
        self._executor.shutdown(wait=True)
