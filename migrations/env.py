"""The alembic environment: runs the migrations on an async engine (aiosqlite or asyncpg).

The database URL comes from ``-x url=...`` on the alembic command line, or from the ``sqlalchemy.url`` main
option that `server.storage.db` sets on its programmatic config. Autogenerate compares against
`server.storage.tables.Base.metadata`; SQLite gets batch mode, since it alters tables by copying them.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from alembic import context
from alembic.autogenerate.api import AutogenContext
from sqlalchemy import event, pool
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from server.storage.db import SQLITE_WRITE_AHEAD_LOG, async_url, ensure_sqlite_directory
from server.storage.tables import Base, UTCDateTime

config = context.config
target_metadata = Base.metadata

if config.cmd_opts is not None:
    # Run from the alembic command line (there is no logging section in pyproject.toml): say what runs.
    # Called through server.storage.db, the application's logging configuration is left alone.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)-5.5s [%(name)s] %(message)s")
    logging.getLogger("alembic").setLevel(logging.INFO)


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database URL: run `alembic -x url=sqlite+aiosqlite:///path/to/file.db ...`")
    return async_url(url).render_as_string(hide_password=False)


def _render_item(type_: str, obj: Any, autogen_context: AutogenContext) -> str | bool:
    """Render our column types as plain SQLAlchemy types, so that revisions never import server code."""
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def _configure_options(dialect_name: str) -> dict[str, Any]:
    sqlite = dialect_name == "sqlite"
    return {
        "target_metadata": target_metadata,
        "compare_type": True,
        "render_as_batch": sqlite,
        "render_item": _render_item,
        # SQLite can roll DDL back too, once SQLAlchemy rather than the sqlite3 driver emits BEGIN (see
        # _emit_sqlite_begin): a failed migration then leaves the schema as it was.
        "transactional_ddl": True if sqlite else None,
    }


def _emit_sqlite_begin(engine: AsyncEngine) -> None:
    """Make the sqlite3 driver leave BEGIN to SQLAlchemy, so that DDL runs inside the transaction; and
    put the file in write-ahead-log mode first, before any server connection opens it (see
    `SQLITE_WRITE_AHEAD_LOG`)."""

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, connection_record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(SQLITE_WRITE_AHEAD_LOG)
        finally:
            cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN")


def run_migrations_offline() -> None:
    """Write the SQL to standard output (``alembic upgrade head --sql``) instead of running it."""
    url = _url()
    context.configure(
        url=url,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        **_configure_options(async_url(url).get_backend_name()),
    )
    with context.begin_transaction():
        context.run_migrations()


def _run_migrations(connection: Connection) -> None:
    context.configure(connection=connection, **_configure_options(connection.dialect.name))
    with context.begin_transaction():
        context.run_migrations()


async def run_migrations_online() -> None:
    """Run the migrations on a connection of their own, outside the server's pool."""
    url = _url()
    ensure_sqlite_directory(url)
    engine = create_async_engine(url, poolclass=pool.NullPool)
    if engine.dialect.name == "sqlite":
        _emit_sqlite_begin(engine)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run_migrations)
            await connection.commit()
    finally:
        await engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    asyncio.run(run_migrations_online())
