"""actions.at_ms and action_journal.at_ms: the server's time of every action.

Revision ID: 4c7e2a9d1f38
Revises: 7b3f1c8e2a65
Create Date: 2026-12-07 13:20:00.000000+00:00

A stored game kept its start, finish and duration only, so no timing of its actions (splits,
ghosts, a fair-play review) could be read back. Each action now carries when the server accepted
it, in milliseconds since the Unix epoch (UTC): an integer, a few bytes a row on the hot path. The
compaction moves it from the journal with the action. Actions stored before have none (NULL):
their time is unknown, and every reader says so rather than inventing one. The downgrade drops
both columns, and the times with them.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "4c7e2a9d1f38"
down_revision: str | Sequence[str] | None = "7b3f1c8e2a65"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("actions", sa.Column("at_ms", sa.BigInteger(), nullable=True))
    op.add_column("action_journal", sa.Column("at_ms", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    op.drop_column("action_journal", "at_ms")  # SQLite >= 3.35 drops a column in place
    op.drop_column("actions", "at_ms")
