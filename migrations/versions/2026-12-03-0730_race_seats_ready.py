"""race_seats.ready: a seat's ready flag is stored, so every node's copy of a race knows it.

Revision ID: 5a7c2e9d1f40
Revises: 3e1d5a9c0b27
Create Date: 2026-12-03 07:30:00.000000+00:00

A race's state used to live on the one node that held it, and a seat's ready flag in its memory
alone. Seats of one race may now be on several nodes (docs/races.md, Across nodes): a ready is a
fenced write of the race like a join, and a node that reloads the race reads it. Rows stored before
take the flag the old code gave a race read back: ready once the seat plays or the race has left its
lobby. The downgrade drops the column (a lobby read by the old code shows its seats not ready).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "5a7c2e9d1f40"
down_revision: str | Sequence[str] | None = "3e1d5a9c0b27"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("race_seats", sa.Column("ready", sa.Boolean(), server_default=sa.false(), nullable=False))
    op.execute(
        "UPDATE race_seats SET ready = true WHERE status <> 'waiting'"
        " OR race_id IN (SELECT id FROM races WHERE state <> 'lobby')"
    )


def downgrade() -> None:
    op.drop_column("race_seats", "ready")  # SQLite >= 3.35 drops a column in place
