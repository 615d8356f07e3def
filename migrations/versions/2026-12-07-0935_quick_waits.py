"""quick_waits: quick match's pool, one row per waiting player for the whole deployment.

Revision ID: 79c38107f9c4
Revises: c30328233f01
Create Date: 2026-12-07 09:35:00.000000+00:00

Quick match kept its pool in the memory of each process, so with ``--workers N`` or several nodes
two players were matched only if their connections reached the same process. Every process now
reads this table, decides the races from it by the same rules, and claims a race's rows in the
transaction that stores the race (`server.play.race.quick_match`). The table starts empty: players
waiting when it is made were waiting in a process that the migration's restart stopped. The
downgrade drops it (whoever waits then asks again).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "79c38107f9c4"
down_revision: str | Sequence[str] | None = "c30328233f01"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "quick_waits",
        sa.Column("wait_id", sa.String(length=32), nullable=False),
        sa.Column("player_id", sa.String(length=32), nullable=False),
        sa.Column("player_name", sa.String(length=64), nullable=False),
        sa.Column("bot", sa.Boolean(), nullable=False),
        sa.Column("cells", sa.SmallInteger(), nullable=False),
        sa.Column("rating", sa.Double(), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.Column("holder", sa.String(length=80), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("race_id", sa.String(length=32), nullable=True),
        sa.CheckConstraint("cells IN (8, 4, 2)", name=op.f("ck_quick_waits_cells")),
        sa.PrimaryKeyConstraint("wait_id", name=op.f("pk_quick_waits")),
        sa.UniqueConstraint("player_id", name=op.f("uq_quick_waits_player_id")),
    )


def downgrade() -> None:
    op.drop_table("quick_waits")
