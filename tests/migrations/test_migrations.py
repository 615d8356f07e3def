"""The migrations: they run up and down and up again, and they agree with server.storage.tables."""

from __future__ import annotations

import asyncio
import importlib.util
import io
import itertools
import re
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from server.storage import current_revision, downgrade_to_base, head_revision, upgrade_to_head
from server.storage.db import _alembic_config, migrations_directory
from server.storage.tables import Base

TABLES = {"players", "games", "actions"}
FILE_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}-\d{4}_[a-z0-9_]+\.py$")


def run_on(url: str, work: Any) -> Any:
    """Run ``work(sync_connection)`` on a connection of its own, outside any test event loop."""

    async def main() -> Any:
        engine = create_async_engine(url, poolclass=NullPool)
        try:
            async with engine.connect() as conn:
                return await conn.run_sync(work)
        finally:
            await engine.dispose()

    return asyncio.run(main())


def table_names(connection: Connection) -> set[str]:
    return set(inspect(connection).get_table_names())


def schema_differences(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, Base.metadata))


def test_upgrade_downgrade_upgrade(empty_database_url: str) -> None:
    url = empty_database_url
    assert current_revision(url) is None

    upgrade_to_head(url)
    assert current_revision(url) == head_revision()
    assert run_on(url, table_names) >= TABLES

    downgrade_to_base(url)
    assert current_revision(url) is None
    assert run_on(url, table_names) <= {"alembic_version"}

    upgrade_to_head(url)
    assert current_revision(url) == head_revision()
    assert run_on(url, table_names) >= TABLES


def test_upgrade_to_head_twice_is_harmless(empty_database_url: str) -> None:
    upgrade_to_head(empty_database_url)
    upgrade_to_head(empty_database_url)
    assert current_revision(empty_database_url) == head_revision()


def test_models_and_migrations_agree(empty_database_url: str) -> None:
    upgrade_to_head(empty_database_url)
    assert run_on(empty_database_url, schema_differences) == []


def test_migrations_run_from_any_working_directory(
    empty_database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    upgrade_to_head(empty_database_url)
    assert current_revision(empty_database_url) == head_revision()


def test_current_revision_of_a_missing_sqlite_file_is_none(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "e.db"
    assert current_revision(f"sqlite+aiosqlite:///{path}") is None
    assert not path.parent.exists()


def test_one_head_and_a_linear_history() -> None:
    scripts = ScriptDirectory.from_config(_alembic_config())
    assert scripts.get_heads() == [head_revision()]
    revisions = list(scripts.walk_revisions())
    assert revisions[-1].down_revision is None
    for newer, older in itertools.pairwise(revisions):
        assert newer.down_revision == older.revision


def test_revision_files_are_dated_and_have_a_downgrade() -> None:
    files = sorted((migrations_directory() / "versions").glob("*.py"))
    revision_files = [path for path in files if path.name != "__init__.py"]
    assert revision_files
    for path in revision_files:
        assert FILE_NAME.match(path.name), path.name
        spec = importlib.util.spec_from_file_location(f"revision_{path.stem.replace('-', '_')}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        assert callable(module.upgrade) and callable(module.downgrade), path.name
        assert "NotImplementedError" not in path.read_text(), f"{path.name}: downgrade() not written"


@pytest.mark.parametrize("url", ["sqlite+aiosqlite:///e.db", "postgresql+asyncpg://u@h/db"])
def test_offline_sql(url: str) -> None:
    config = _alembic_config(url)
    config.output_buffer = io.StringIO()
    command.upgrade(config, "head", sql=True)
    sql = config.output_buffer.getvalue()
    for table in TABLES:
        assert f"CREATE TABLE {table}" in sql
    assert "CREATE INDEX ix_games_code_won_moves_duration_ms_finished_at" in sql


def test_config_keeps_percent_signs_in_urls() -> None:
    # A password with '%' (percent-encoded in the URL) must survive configparser interpolation.
    url = "postgresql+asyncpg://u:p%25ss%40x@h:5432/db"
    assert _alembic_config(url).get_main_option("sqlalchemy.url") == url
