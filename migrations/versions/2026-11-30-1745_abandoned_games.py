"""Abandoned games: a status for unfinished games the server gave up on.

Revision ID: 3b8e61d4a0c7
Revises: 3b8e1f6a2c57
Create Date: 2026-11-30 17:45:00.000000+00:00

``games.status`` may also be ``abandoned``: an unfinished game idle for longer than the server's
``abandon_after``, or the least recently played of a player over the unfinished-games cap
(``server.services.quotas``). Its actions stay; its figures and ``finished_at`` are never final, so
no board or profile counts it, and the trigger of revision 3b9e1f07c2d5 refuses its later actions
(its status is no longer ``playing``). ``games.active_at`` and its index, which find the idle games,
come from revision 3b9e1f07c2d5, whose SQLite trigger this one keeps.

The downgrade turns abandoned games back into unfinished ones (the old schema has no such status).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "3b8e61d4a0c7"
down_revision: str | Sequence[str] | None = "3b8e1f6a2c57"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Revision 3b9e1f07c2d5's SQLite trigger, as it made it.
_TRIGGER = "tr_actions_refuse_finished_games"
_SQLITE_TRIGGER = (
    f"CREATE TRIGGER {_TRIGGER} BEFORE INSERT ON actions "
    "WHEN (SELECT status FROM games WHERE id = NEW.game_id) <> 'playing' "
    "BEGIN SELECT RAISE(ABORT, 'the game is finished: no more actions'); END"
)
_OLD_STATUSES = "status IN ('playing', 'won', 'resigned')"
_NEW_STATUSES = "status IN ('playing', 'won', 'resigned', 'abandoned')"


def _games(statuses: str) -> sa.Table:
    """``games`` as it stands on either side of this revision: SQLite alters a table by copying it,
    and this definition spares batch mode a reflection (so ``alembic upgrade --sql`` works)."""
    metadata = sa.MetaData()
    sa.Table("players", metadata, sa.Column("id", sa.String(length=32), primary_key=True))
    return sa.Table(
        "games",
        metadata,
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("player_id", sa.String(length=32), nullable=False),
        sa.Column("code", sa.String(length=16), nullable=False),
        sa.Column("cells", sa.SmallInteger(), nullable=False),
        sa.Column("daily_date", sa.Date(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("score", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("moves", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("undos", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("duration_ms", sa.BigInteger(), nullable=True),
        sa.Column("won", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("active_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("hinted", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.CheckConstraint(statuses, name="ck_games_status"),
        sa.CheckConstraint("cells IN (8, 4, 2)", name="ck_games_cells"),
        sa.ForeignKeyConstraint(["player_id"], ["players.id"], name="fk_games_player_id_players"),
        sa.PrimaryKeyConstraint("id", name="pk_games"),
        sa.Index("ix_games_player_id_status", "player_id", "status"),
        sa.Index("ix_games_player_id_finished_at", "player_id", "finished_at"),
        sa.Index("ix_games_finished_at", "finished_at"),
        sa.Index("ix_games_status_active_at_id", "status", "active_at", "id"),
    )


def _replace_status_check(old: str, new: str) -> None:
    """SQLite copies ``games`` to change a check, and renaming the copy fails while revision
    3b9e1f07c2d5's trigger on ``actions`` names ``games``: the trigger is dropped for the copy and made
    again as it was (PostgreSQL alters the check in place)."""
    sqlite = op.get_context().dialect.name == "sqlite"
    if sqlite:
        op.execute(f"DROP TRIGGER {_TRIGGER}")
    with op.batch_alter_table("games", copy_from=_games(old)) as batch:
        batch.drop_constraint(op.f("ck_games_status"), type_="check")
        batch.create_check_constraint("status", new)
    if sqlite:
        op.execute(_SQLITE_TRIGGER)


def upgrade() -> None:
    _replace_status_check(_OLD_STATUSES, _NEW_STATUSES)


def downgrade() -> None:
    op.execute("UPDATE games SET status = 'playing' WHERE status = 'abandoned'")
    _replace_status_check(_NEW_STATUSES, _OLD_STATUSES)
