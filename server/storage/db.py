"""The database handle and the schema migrations.

`Database` owns the async engine and its connection pool, and hands out units of work:
`Database.transaction()` commits when its block ends normally and rolls back when it raises;
`Database.connection()` is for reads and never commits. Repository functions
(`server.storage.repository`) take the connection and never commit themselves.

The schema is made only by the alembic migrations in the ``migrations`` package. The synchronous functions
`upgrade_to_head`, `downgrade_to_base`, `current_revision` and `head_revision` run them from the command line
or, from async code, through ``await asyncio.to_thread(upgrade_to_head, url)``.

SQLite, the single-node default, is put in write-ahead-log mode by the migrations, once, before the
server opens it (`SQLITE_WRITE_AHEAD_LOG` says why), and set up on every new connection: write-ahead
log (then a mere check), the configured
``synchronous`` level, foreign keys enforced, a busy timeout of 5 s, and a checkpoint every
`SQLITE_WAL_AUTOCHECKPOINT_PAGES` pages of log (SQLite's default, 1000, costs the writer thread about a
tenth of its CPU at the server's rate of appends; the log, reused after each checkpoint, stays about
40 MiB, and is cut back to `SQLITE_WAL_SIZE_LIMIT` if a long reader ever made it grow past that).
SQLAlchemy, not the sqlite3 driver, emits BEGIN, so that reads inside a unit of work see one snapshot;
`Database.transaction()` begins with ``BEGIN IMMEDIATE``, taking the write lock up front instead of
failing on a lock upgrade later; `Database.write_alone()` emits no BEGIN at all, so that its one
statement takes the lock as it starts and gives it back as it ends. PostgreSQL connections go
through asyncpg, pinged before each checkout so that the pool survives a database restart.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Final

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, ProgrammingError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry, NullPool

SQLITE_SYNCHRONOUS: Final = frozenset({"OFF", "NORMAL", "FULL", "EXTRA"})
#: Run by the migrations' connection (migrations/env.py) before the server opens the file, and first by
#: every connection of the server (where the file already is a write-ahead log, it only reads). The
#: switch from a rollback journal is a write that SQLite makes from within a read transaction, where it
#: calls no busy handler: were it left to the server's first connections, one opening while another
#: holds the write lock (the writer thread's and the async engine's, at a fresh server's first
#: requests) would fail at once with ``database is locked``, whatever the busy timeout.
SQLITE_WRITE_AHEAD_LOG: Final = "PRAGMA journal_mode=WAL"
SQLITE_BUSY_TIMEOUT_MS: Final = 5000
#: Pages (4 KiB) of write-ahead log after which a commit checkpoints it into the database file: fewer,
#: larger checkpoints copy each hot page once for many commits (bench/bench_sqlite_append.py).
SQLITE_WAL_AUTOCHECKPOINT_PAGES: Final = 10_000
#: Bytes the write-ahead log file is cut back to when a checkpoint resets it (above its usual size).
SQLITE_WAL_SIZE_LIMIT: Final = 64 * 2**20

_ASYNC_DRIVERS: Final = {
    "sqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
}
#: The drivers the storage runs on, as `async_url` names them.
SUPPORTED_DRIVERS: Final = frozenset(_ASYNC_DRIVERS.values())
_BEGIN_OPTION: Final = "eightoff_sqlite_begin"


class StorageUnavailable(Exception):
    """The database failed, timed out or could not be reached; nothing of the unit of work is stored, and
    it may be retried. The one exception every storage failure becomes (`Database` maps them)."""


def async_url(url: str | URL) -> URL:
    """Parse a database URL, choosing the async driver when none is named.

    ``sqlite:///x.db`` becomes ``sqlite+aiosqlite:///x.db`` and ``postgresql://…`` becomes
    ``postgresql+asyncpg://…``; a URL naming a driver is returned as it is.

    Raises:
        sqlalchemy.exc.ArgumentError: when the text is not a database URL.
    """
    parsed = make_url(url)
    drivername = _ASYNC_DRIVERS.get(parsed.drivername)
    return parsed.set(drivername=drivername) if drivername else parsed


def _is_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite"


def sqlite_file(url: str | URL) -> Path | None:
    """The file of a SQLite database URL; None for other databases, in-memory ones and ``file:`` URIs.

    The very file SQLAlchemy opens: a relative path is relative to the working directory, and ``~`` is
    not expanded (``sqlite:///~/x.db`` is ``./~/x.db`` to SQLAlchemy, so it is here too: the server's
    own connections must open the file the migrations made)."""
    url = make_url(url)
    database = url.database
    if not _is_sqlite(url) or not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


def describe_database(url: str | URL) -> str:
    """How the start-up banner names a database: a SQLite file by its absolute path (a relative one is
    relative to the working directory: ``sqlite:///tmp/x.db`` is ``./tmp/x.db``), others by their URL
    without the password."""
    path = sqlite_file(url)
    if path is not None:
        return str(path.absolute())
    return make_url(url).render_as_string(hide_password=True)


class DatabaseNotWritable(OSError):
    """The server could not write its database (a read-only or immutable file, directory or file
    system; a read-only PostgreSQL); it refuses to start rather than fail at the first write."""


def check_sqlite_files(url: str | URL) -> None:
    """Refuse a SQLite database the server could not write, before anything opens it: its directory
    must exist (nothing creates it silently, so a mistyped path or a missing slash fails here) and be
    writable, and so must the file and its ``-wal`` and ``-shm`` companions where they exist. Other
    URLs are not checked here (see `check_writes`).

    Checked with ``access(2)``, without opening the files: closing a descriptor of a SQLite file drops
    the POSIX locks this process holds on it. An immutable ``-shm`` must be caught before SQLite
    maps it: reading it is a SIGBUS that ends the process.

    Raises:
        DatabaseNotWritable: naming the absolute path at fault.
    """
    path = sqlite_file(url)
    if path is None:
        return
    path = path.absolute()
    if not path.parent.is_dir():
        raise DatabaseNotWritable(
            f"the directory {path.parent} of the database file does not exist (create it first; "
            f"sqlite:///name is relative to the working directory, sqlite:////name is absolute)"
        )
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise DatabaseNotWritable(f"the directory {path.parent} of the database file is not writable")
    for name in (path, *(path.with_name(path.name + suffix) for suffix in ("-wal", "-shm"))):
        if name.exists() and not os.access(name, os.R_OK | os.W_OK):
            raise DatabaseNotWritable(f"{name} is not writable (read-only or immutable)")


def check_writes(url: str) -> None:
    """Prove that the (migrated) database takes a write: one statement that writes, rolled back.

    A SQLite file opened read-only and a PostgreSQL in read-only mode (a standby, or
    ``default_transaction_read_only``) refuse it, where otherwise the first player would be the one
    to find out. Blocks, like `upgrade_to_head`.

    Raises:
        sqlalchemy.exc.SQLAlchemyError: the database refused the write (or could not be reached).
    """
    _refuse_running_loop("check_writes")
    parsed = async_url(url)
    if _is_sqlite(parsed) and sqlite_file(parsed) is None:
        return  # in memory: gone with its connection, nothing to prove
    asyncio.run(_check_writes(parsed))


async def _check_writes(url: URL) -> None:
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            await conn.exec_driver_sql("UPDATE alembic_version SET version_num = version_num")
            await conn.rollback()
    finally:
        await engine.dispose()


def prepare_for_serving(url: str) -> None:
    """What ``eightoff serve`` does to its database before it listens: `check_sqlite_files`, migrate to
    head (`upgrade_to_head`), `check_writes`. Blocks, like `upgrade_to_head`.

    Raises:
        DatabaseNotWritable: the server could not write the database.
        sqlalchemy.exc.SQLAlchemyError: the database cannot be reached or a migration failed.
    """
    check_sqlite_files(url)
    upgrade_to_head(url)
    try:
        check_writes(url)
    except (DBAPIError, OSError) as exc:
        cause = exc.orig if isinstance(exc, DBAPIError) else exc
        raise DatabaseNotWritable(f"the database refused a write: {cause}") from exc


def ensure_sqlite_directory(url: str | URL) -> None:
    """Create the parent directory of a SQLite database file if it is missing; other URLs are ignored."""
    path = sqlite_file(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)


class Database:
    """The async engine of one database, and the units of work on it.

    Build it with `Database.create` and close it with `dispose` when the server stops.
    """

    def __init__(self, engine: AsyncEngine, *, timeout: float | None = None) -> None:
        """Wrap an engine; prefer `Database.create`, which sets the engine up for this server."""
        self.engine: Final = engine
        self._timeout = timeout
        self._is_sqlite = engine.dialect.name == "sqlite"
        self._writer = engine.execution_options(**{_BEGIN_OPTION: "IMMEDIATE"}) if self._is_sqlite else engine
        self._alone = engine.execution_options(**{_BEGIN_OPTION: "NONE"}) if self._is_sqlite else engine
        self._snapshot_reader = (
            engine if self._is_sqlite else engine.execution_options(isolation_level="REPEATABLE READ")
        )

    @classmethod
    def create(
        cls,
        url: str,
        *,
        sqlite_synchronous: str = "FULL",
        application_name: str = "eightoff",
        timeout: float | None = None,
    ) -> Database:
        """Build the engine for ``url`` (no connection is opened yet).

        Args:
            url: a SQLAlchemy URL: ``sqlite+aiosqlite:///path/to/file.db`` or
                ``postgresql+asyncpg://user@host/db`` (``sqlite://`` and ``postgresql://`` get the async
                driver). The parent directory of a SQLite file is created if missing.
            sqlite_synchronous: SQLite ``PRAGMA synchronous``: ``FULL`` (the default: a committed
                transaction survives power loss), ``NORMAL``, ``OFF`` or ``EXTRA``. Ignored elsewhere.
            application_name: how PostgreSQL connections name themselves in ``pg_stat_activity``.
            timeout: seconds a unit of work may take, connecting and waiting for a pooled connection
                included, before it fails with `StorageUnavailable` (a database that accepts
                connections but never answers must not hang requests); None waits forever (tools).

        Raises:
            ValueError: for an unknown ``sqlite_synchronous``.
            sqlalchemy.exc.ArgumentError: for a malformed URL.
        """
        parsed = async_url(url)
        if _is_sqlite(parsed):
            synchronous = sqlite_synchronous.upper()
            if synchronous not in SQLITE_SYNCHRONOUS:
                raise ValueError(
                    f"sqlite_synchronous {sqlite_synchronous!r} is not one of {sorted(SQLITE_SYNCHRONOUS)}"
                )
            ensure_sqlite_directory(parsed)
            engine = create_async_engine(parsed)
            _set_up_sqlite(engine, synchronous)
        elif parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() == "asyncpg":
            connect_args: dict[str, Any] = {"server_settings": {"application_name": application_name}}
            if timeout is not None:
                connect_args.update(timeout=timeout, command_timeout=timeout)
            engine = create_async_engine(
                parsed,
                pool_pre_ping=True,
                pool_timeout=timeout if timeout is not None else 30.0,
                connect_args=connect_args,
            )
        else:
            engine = create_async_engine(parsed, pool_pre_ping=True)
        return cls(engine, timeout=timeout)

    @property
    def is_sqlite(self) -> bool:
        """True when the database is SQLite (a single node), False for PostgreSQL."""
        return self._is_sqlite

    def transaction(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A unit of work: ``async with database.transaction() as conn: ...``.

        The block's statements run in one transaction, committed when the block ends normally and rolled
        back when it raises (the exception propagates). On PostgreSQL a failed statement, such as an
        insert refused by a unique key, aborts the transaction: let the exception leave the block and start
        a new unit of work.

        Raises:
            StorageUnavailable: the database failed or timed out; nothing was committed.
            sqlalchemy.exc.IntegrityError: a constraint refused a statement (not a failure: a conflict).
        """
        return self._unit_of_work(self._writer.begin)

    def write_alone(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A unit of work of one writing statement, atomic by itself: ``async with
        database.write_alone() as conn: await conn.execute(statement)``.

        On SQLite the statement is a transaction of its own (no BEGIN: the driver commits it as it
        ends): it takes the write lock as it starts, through the busy handler like ``BEGIN IMMEDIATE``,
        and gives it back as it ends, all within one call to the driver's thread. A `transaction()`
        holds the lock from its BEGIN to its COMMIT, across turns of the event loop, each as long as
        the loop is busy: a writer waits for those too. On PostgreSQL it is a `transaction()`. Two
        statements in the block are two transactions on SQLite: give it one.

        Raises:
            StorageUnavailable: the database failed or timed out; a statement that failed stored
                nothing (on SQLite one that ended is committed, whatever the block does next).
            sqlalchemy.exc.IntegrityError: a constraint refused the statement.
        """
        return self._unit_of_work(self._alone.begin)

    def connection(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A connection for reads: ``async with database.connection() as conn: ...``.

        Nothing is committed: whatever the block did is rolled back when it ends.

        Raises:
            StorageUnavailable: the database failed or timed out.
        """
        return self._unit_of_work(self.engine.connect)

    def snapshot(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A connection for reads that must agree with each other: every statement of the block sees
        the database as of its first one, whatever commits meanwhile.

        PostgreSQL's default READ COMMITTED gives each statement its own snapshot, so this runs at
        REPEATABLE READ there; SQLite's read transaction (begun at the first statement, in WAL mode)
        already is one snapshot. Nothing is committed.

        Raises:
            StorageUnavailable: the database failed or timed out.
        """
        return self._unit_of_work(self._snapshot_reader.connect)

    @asynccontextmanager
    async def _unit_of_work(
        self, open_unit: Callable[[], AbstractAsyncContextManager[AsyncConnection]]
    ) -> AsyncIterator[AsyncConnection]:
        """The one place where storage failures become `StorageUnavailable`, within ``timeout``.

        A refusal by a constraint, and errors of the statement itself (bugs), are not failures of the
        database and pass through unchanged."""
        try:
            async with asyncio.timeout(self._timeout), open_unit() as conn:
                yield conn
        except (IntegrityError, ProgrammingError, DataError):
            raise
        except (DBAPIError, PoolTimeout, OSError, TimeoutError) as exc:
            raise StorageUnavailable(f"the database is unavailable: {type(exc).__name__}: {exc}") from exc

    async def ping(self) -> None:
        """One round trip to the database.

        Raises:
            StorageUnavailable: it did not answer within the timeout.
        """
        async with self.connection() as conn:
            await conn.exec_driver_sql("SELECT 1")

    async def dispose(self) -> None:
        """Close every pooled connection; the `Database` may still be used afterwards (it reconnects)."""
        await self.engine.dispose()


def sqlite_pragmas(synchronous: str) -> tuple[str, ...]:
    """What every SQLite connection of the server runs first, whichever path writes through it."""
    return (
        SQLITE_WRITE_AHEAD_LOG,
        f"PRAGMA synchronous={synchronous}",
        "PRAGMA foreign_keys=ON",
        f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}",
        f"PRAGMA wal_autocheckpoint={SQLITE_WAL_AUTOCHECKPOINT_PAGES}",
        f"PRAGMA journal_size_limit={SQLITE_WAL_SIZE_LIMIT}",
    )


def _set_up_sqlite(engine: AsyncEngine, synchronous: str) -> None:
    """Configure every new SQLite connection, and have SQLAlchemy emit BEGIN itself."""

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, connection_record: ConnectionPoolEntry) -> None:
        # The sqlite3 driver would otherwise emit BEGIN only before DML and run SELECTs outside the
        # transaction; SQLAlchemy emits it instead (see _on_begin).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            for pragma in sqlite_pragmas(synchronous):
                cursor.execute(pragma)
        finally:
            cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get(_BEGIN_OPTION)
        if mode == "NONE":  # Database.write_alone: the driver's autocommit, each statement alone
            return
        conn.exec_driver_sql("BEGIN IMMEDIATE" if mode == "IMMEDIATE" else "BEGIN")


# Migrations ---------------------------------------------------------------------------------------------


def migrations_directory() -> Path:
    """The directory of the installed ``migrations`` package (the alembic script directory).

    Found through the import system without importing the package, so it works from any working directory
    and from a non-editable install. (Its search locations rather than its ``__file__``: a stale editable
    install may still map it as a namespace package, which has no ``__file__``.)

    Raises:
        RuntimeError: when the package is not installed or none of its directories holds ``env.py``.
    """
    spec = importlib.util.find_spec("migrations")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    for location in locations:
        path = Path(location)
        if (path / "env.py").is_file():
            return path.resolve()
    raise RuntimeError(f"no migrations package with an env.py (searched {locations})")


def _alembic_config(url: str | None = None) -> Config:
    """An alembic Config for the installed ``migrations`` package, independent of the working directory."""
    config = Config()
    config.set_main_option("script_location", str(migrations_directory()).replace("%", "%%"))
    if url is not None:
        rendered = async_url(url).render_as_string(hide_password=False)
        config.set_main_option("sqlalchemy.url", rendered.replace("%", "%%"))
    return config


def _refuse_running_loop(name: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(f"{name}() blocks: from async code call it as `await asyncio.to_thread({name}, url)`")


def upgrade_to_head(url: str) -> None:
    """Apply every migration not yet applied to the database at ``url``.

    Creates the parent directory of a SQLite file if missing. Blocks: from async code, call
    ``await asyncio.to_thread(upgrade_to_head, url)``.

    Raises:
        RuntimeError: when called on a thread that runs an event loop.
        sqlalchemy.exc.SQLAlchemyError: when the database can't be reached or a migration fails.
    """
    _refuse_running_loop("upgrade_to_head")
    command.upgrade(_alembic_config(url), "head")


def downgrade_to_base(url: str) -> None:
    """Revert every migration applied to the database at ``url``: this drops all the server's tables.

    Blocks, like `upgrade_to_head`.
    """
    _refuse_running_loop("downgrade_to_base")
    command.downgrade(_alembic_config(url), "base")


def head_revision() -> str:
    """The revision id of the newest migration in the installed ``migrations`` package.

    Raises:
        RuntimeError: when the migrations package holds no revision.
        alembic.util.CommandError: when it has several heads.
    """
    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError("the migrations package has no revision")
    return str(head)


def current_revision(url: str) -> str | None:
    """The revision the database at ``url`` is at, or None when no migration has been applied.

    A SQLite file that does not exist is at no revision, and is not created. Blocks, like `upgrade_to_head`.
    """
    _refuse_running_loop("current_revision")
    path = sqlite_file(async_url(url))
    if path is not None and not path.exists():
        return None
    return asyncio.run(_current_revision(url))


async def _current_revision(url: str) -> str | None:
    engine = create_async_engine(async_url(url), poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            revision = await conn.run_sync(
                lambda sync_conn: MigrationContext.configure(sync_conn).get_current_revision()
            )
    finally:
        await engine.dispose()
    return revision
