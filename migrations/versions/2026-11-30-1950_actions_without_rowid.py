"""SQLite: the actions table clustered on its primary key (game_id, v), WITHOUT ROWID.

Revision ID: 5c2f8e0d7a13
Revises: 3b8e61d4a0c7
Create Date: 2026-11-30 19:50:00.000000+00:00

As a rowid table, every appended action was stored twice on SQLite: in the table (ordered by rowid)
and in the primary key's index (ordered by game and version, the fence). Clustered on the key, it is
stored once: one b-tree to update per action instead of two (the writer thread's hot path), about
half the file, and a game's actions read in order straight from the table. The key, its uniqueness
(the fence), the check, the foreign key and revision 3b9e1f07c2d5's trigger refusing actions of
games no longer played are the same.

SQLite changes a table's storage by copying it: the new table is filled from the old one, which is
then dropped (with its trigger, made again as it was) and the copy renamed. PostgreSQL has no rowid:
nothing changes there. The downgrade copies the rows back into a rowid table.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "5c2f8e0d7a13"
down_revision: str | Sequence[str] | None = "3b8e61d4a0c7"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Revision 3b9e1f07c2d5's SQLite trigger, as it made it.
_TRIGGER = "tr_actions_refuse_finished_games"
_SQLITE_TRIGGER = (
    f"CREATE TRIGGER {_TRIGGER} BEFORE INSERT ON actions "
    "WHEN (SELECT status FROM games WHERE id = NEW.game_id) <> 'playing' "
    "BEGIN SELECT RAISE(ABORT, 'the game is finished: no more actions'); END"
)
_COPY = "_actions_copy"


def _rebuild_actions(*, with_rowid: bool) -> None:
    """Copy ``actions`` into a table of the other storage, then put the copy in its place."""
    if op.get_context().dialect.name != "sqlite":
        return
    op.execute(f"DROP TRIGGER {_TRIGGER}")
    op.create_table(
        _COPY,
        sa.Column("game_id", sa.String(length=32), nullable=False),
        sa.Column("v", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.CheckConstraint("v >= 1", name=op.f("ck_actions_v_positive")),
        sa.ForeignKeyConstraint(["game_id"], ["games.id"], name=op.f("fk_actions_game_id_games")),
        sa.PrimaryKeyConstraint("game_id", "v", name=op.f("pk_actions")),
        sqlite_with_rowid=with_rowid,
    )
    op.execute(f"INSERT INTO {_COPY} (game_id, v, action) SELECT game_id, v, action FROM actions")
    op.drop_table("actions")
    op.rename_table(_COPY, "actions")
    op.execute(_SQLITE_TRIGGER)


def upgrade() -> None:
    _rebuild_actions(with_rowid=False)


def downgrade() -> None:
    _rebuild_actions(with_rowid=True)
