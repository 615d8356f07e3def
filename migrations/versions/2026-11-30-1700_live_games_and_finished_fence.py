"""Live games from the database, and a database that refuses actions of finished games.

Revision ID: 3b9e1f07c2d5
Revises: 7d2a5c0e9b41
Create Date: 2026-11-30 17:00:00.000000+00:00

- ``games.active_at``: when the game was last seen changing (its start, then now and then a committed
  action). The commit that stores such an action also sets the game's running ``score``, ``moves`` and
  ``undos``: the server sends these figures with at most one action per
  ``server.play.game_room.FIGURES_INTERVAL``, so an unfinished game's row is a committed state, not
  necessarily its latest; the end writes the final figures. Backfilled from ``finished_at`` or ``started_at``.
- ``ix_games_status_active_at_id``: ``live`` pages through the unfinished games active lately, most
  recent first, by walking this index: a page costs what it returns.
- A trigger on ``actions`` refuses (as an integrity error) any row for a game that is no longer
  ``playing`` (a row for a game that does not exist is the foreign key's to refuse).
  Resigning stores a ``resign`` row at the next version before the status changes, so it passes the same
  (game, v) fence as every action; afterwards the database itself refuses every later action, whichever
  node sends it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "3b9e1f07c2d5"
down_revision: str | Sequence[str] | None = "7d2a5c0e9b41"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TRIGGER = "tr_actions_refuse_finished_games"
_FUNCTION = "refuse_actions_of_finished_games"


def upgrade() -> None:
    op.add_column("games", sa.Column("active_at", sa.DateTime(timezone=True), nullable=True))
    op.execute("UPDATE games SET active_at = COALESCE(finished_at, started_at)")
    op.create_index("ix_games_status_active_at_id", "games", ["status", "active_at", "id"])
    if op.get_context().dialect.name == "sqlite":
        op.execute(
            f"CREATE TRIGGER {_TRIGGER} BEFORE INSERT ON actions "
            "WHEN (SELECT status FROM games WHERE id = NEW.game_id) <> 'playing' "
            "BEGIN SELECT RAISE(ABORT, 'the game is finished: no more actions'); END"
        )
        return
    op.execute(
        f"CREATE FUNCTION {_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN "
        "IF (SELECT status FROM games WHERE id = NEW.game_id) <> 'playing' THEN "
        "RAISE EXCEPTION 'game % is finished: no more actions', NEW.game_id "
        "USING ERRCODE = 'integrity_constraint_violation'; "
        "END IF; RETURN NEW; END $$"
    )
    op.execute(
        f"CREATE TRIGGER {_TRIGGER} BEFORE INSERT ON actions FOR EACH ROW EXECUTE FUNCTION {_FUNCTION}()"
    )


def downgrade() -> None:
    # Reverse order of upgrade().
    if op.get_context().dialect.name == "sqlite":
        op.execute(f"DROP TRIGGER {_TRIGGER}")
    else:
        op.execute(f"DROP TRIGGER {_TRIGGER} ON actions")
        op.execute(f"DROP FUNCTION {_FUNCTION}()")
    op.drop_index("ix_games_status_active_at_id", table_name="games")
    with op.batch_alter_table("games") as batch:
        batch.drop_column("active_at")
