"""SQLite: actions appended to a journal, fenced by a small table of the games being played.

Revision ID: 8f3a6c1d2e90
Revises: 5d2b8e4f1a63
Create Date: 2026-12-03 17:30:00.000000+00:00

On SQLite every appended action used to land on its own game's leaf page of ``actions`` (clustered
on (game_id, v)): a commit of B actions wrote about B pages to the write-ahead log, most of the
writer's CPU (issue 23 item 2, docs/benchmarks.md). Now:

- ``action_journal``: the writer appends actions here, keyed by a sequence, so the rows of a commit
  share a page or two. Every so often (`server.storage.commit_backends.compact_journal`) the
  journal is moved into ``actions`` in key order, where a game's rows then share its pages, and
  emptied. Reads see both tables (`server.storage.repository`).
- ``game_fences``: one row per game being played, its ``v`` the version of its last action. A commit
  moves each of its games from the version before its first action to its last with one
  compare-and-set statement; a game not at that version (another writer got there first, in this
  process or another) or with no row (no such game, or it ended) makes the commit fail. Triggers on
  ``games`` make a game's row as the game is inserted and delete it as its status leaves
  ``playing``: every path that starts or ends a game keeps the fence without knowing of it.
  The table is small (the games being played) and clustered on the game: a commit changes few pages.
- The trigger refusing actions of games no longer played (revision 3b9e1f07c2d5) goes: the fence
  does its work, and the compaction must move a game's last actions after it ended.

The primary key of ``actions`` stays, a check on the compaction. PostgreSQL writes ``actions``
directly as before (its writes are not per page): the two tables are made there too, as one model,
and stay empty. The downgrade moves the journal into ``actions`` and puts the trigger back.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "8f3a6c1d2e90"
down_revision: str | Sequence[str] | None = "5d2b8e4f1a63"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Revision 3b9e1f07c2d5's SQLite trigger, as it made it.
_ACTIONS_TRIGGER = "tr_actions_refuse_finished_games"
_SQLITE_ACTIONS_TRIGGER = (
    f"CREATE TRIGGER {_ACTIONS_TRIGGER} BEFORE INSERT ON actions "
    "WHEN (SELECT status FROM games WHERE id = NEW.game_id) <> 'playing' "
    "BEGIN SELECT RAISE(ABORT, 'the game is finished: no more actions'); END"
)
_FENCE_ON_START = (
    "CREATE TRIGGER tr_games_fence_on_start AFTER INSERT ON games WHEN NEW.status = 'playing' "
    "BEGIN INSERT INTO game_fences (game_id, v) VALUES (NEW.id, 0); END"
)
_FENCE_ON_END = (
    "CREATE TRIGGER tr_games_fence_on_end AFTER UPDATE OF status ON games "
    "WHEN OLD.status = 'playing' AND NEW.status <> 'playing' "
    "BEGIN DELETE FROM game_fences WHERE game_id = NEW.id; END"
)
_MOVE_JOURNAL = (
    "INSERT INTO actions (game_id, v, action) "
    "SELECT game_id, v, action FROM action_journal ORDER BY game_id, v"
)


def upgrade() -> None:
    op.create_table(
        "action_journal",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("game_id", sa.String(length=32), nullable=False),
        sa.Column("v", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_action_journal")),
    )
    op.create_table(
        "game_fences",
        sa.Column("game_id", sa.String(length=32), nullable=False),
        sa.Column("v", sa.Integer(), autoincrement=False, nullable=False),
        sa.PrimaryKeyConstraint("game_id", name=op.f("pk_game_fences")),
        sqlite_with_rowid=False,
    )
    if op.get_context().dialect.name != "sqlite":
        return
    op.execute(f"DROP TRIGGER {_ACTIONS_TRIGGER}")
    op.execute(
        "INSERT INTO game_fences (game_id, v) SELECT games.id, "
        "(SELECT COALESCE(MAX(actions.v), 0) FROM actions WHERE actions.game_id = games.id) "
        "FROM games WHERE games.status = 'playing'"
    )
    op.execute(_FENCE_ON_START)
    op.execute(_FENCE_ON_END)


def downgrade() -> None:
    # Reverse order of upgrade().
    if op.get_context().dialect.name == "sqlite":
        op.execute("DROP TRIGGER tr_games_fence_on_end")
        op.execute("DROP TRIGGER tr_games_fence_on_start")
        op.execute(_MOVE_JOURNAL)
        op.execute(_SQLITE_ACTIONS_TRIGGER)
    op.drop_table("game_fences")
    op.drop_table("action_journal")
