"""Abandoned games: status ``abandoned``, and ``games.active_at`` (when last seen played or open).

Revision ID: 3b8e61d4a0c7
Revises: 7d2a5c0e9b41
Create Date: 2026-11-30 17:30:00.000000+00:00

- ``games.status`` may also be ``abandoned``: an unfinished game the server gave up on (idle for longer
  than its ``abandon_after``, or the oldest of a player over the unfinished-games cap). Its actions stay;
  its figures and ``finished_at`` are never written, so no board or profile counts it.
- ``games.active_at``: nullable, NULL meaning "not seen since it started" (existing rows start so).
- ``ix_games_status_active_at`` finds the idle unfinished games.

The downgrade turns abandoned games back into unfinished ones (the old schema has no such status).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "3b8e61d4a0c7"
down_revision: str | Sequence[str] | None = "7d2a5c0e9b41"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD_STATUSES = "status IN ('playing', 'won', 'resigned')"
_NEW_STATUSES = "status IN ('playing', 'won', 'resigned', 'abandoned')"


def _games(statuses: str, *, active_at: bool) -> sa.Table:
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
        *([sa.Column("active_at", sa.DateTime(timezone=True), nullable=True)] if active_at else []),
        sa.CheckConstraint(statuses, name="ck_games_status"),
        sa.CheckConstraint("cells IN (8, 4, 2)", name="ck_games_cells"),
        sa.ForeignKeyConstraint(["player_id"], ["players.id"], name="fk_games_player_id_players"),
        sa.PrimaryKeyConstraint("id", name="pk_games"),
        sa.Index("ix_games_player_id_status", "player_id", "status"),
        sa.Index("ix_games_player_id_finished_at", "player_id", "finished_at"),
        sa.Index("ix_games_finished_at", "finished_at"),
    )


def upgrade() -> None:
    with op.batch_alter_table("games", copy_from=_games(_OLD_STATUSES, active_at=False)) as batch:
        batch.add_column(sa.Column("active_at", sa.DateTime(timezone=True), nullable=True))
        batch.drop_constraint(op.f("ck_games_status"), type_="check")
        batch.create_check_constraint("status", _NEW_STATUSES)
    op.create_index("ix_games_status_active_at", "games", ["status", "active_at"])


def downgrade() -> None:
    op.drop_index("ix_games_status_active_at", table_name="games")
    op.execute("UPDATE games SET status = 'playing' WHERE status = 'abandoned'")
    with op.batch_alter_table("games", copy_from=_games(_NEW_STATUSES, active_at=True)) as batch:
        batch.drop_constraint(op.f("ck_games_status"), type_="check")
        batch.create_check_constraint("status", _OLD_STATUSES)
        batch.drop_column("active_at")
