"""Fixtures for storage tests: a migrated database per test, on SQLite and (when configured) PostgreSQL.

SQLite: a new file in the test's tmp_path, upgraded to head. PostgreSQL: one database for the session,
upgraded to head once, emptied before each test and dropped at the end.
"""

from __future__ import annotations

from tests.support.migrated_db import database, database_url, postgres_url  # noqa: F401 (fixtures)
