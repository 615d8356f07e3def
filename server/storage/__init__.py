"""Storage: SQLAlchemy 2 async on SQLite (aiosqlite) or PostgreSQL (asyncpg).

Use::

    database = Database.create(url)
    async with database.transaction() as conn:      # commits at the end of the block
        await repository.insert_actions(conn, [(game_id, v, "t1-c5")])

Repository functions never commit; they take and return the frozen records of
`server.storage.records`. The schema is made only by the migrations: `upgrade_to_head(url)`. What
the server writes while it plays goes through one group-commit pipeline
(`server.storage.committer`, with a backend per database in `server.storage.commit_backends`).
"""

from __future__ import annotations

from server.storage import repository
from server.storage.db import (
    Database,
    StorageUnavailable,
    current_revision,
    downgrade_to_base,
    head_revision,
    upgrade_to_head,
)
from server.storage.records import (
    ActionRecord,
    DailyStanding,
    GameDaily,
    GameFigures,
    GameResult,
    GameStart,
    LiveGame,
    PlayerRecord,
    StoredGame,
)

__all__ = [
    "ActionRecord",
    "DailyStanding",
    "Database",
    "GameDaily",
    "GameFigures",
    "GameResult",
    "GameStart",
    "LiveGame",
    "PlayerRecord",
    "StorageUnavailable",
    "StoredGame",
    "current_revision",
    "downgrade_to_base",
    "head_revision",
    "repository",
    "upgrade_to_head",
]
