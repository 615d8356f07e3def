"""games.hinted: the game asked the solver for a hint, so it ranks on no leaderboard.

Revision ID: 3b8e1f6a2c57
Revises: 3b9e1f07c2d5
Create Date: 2026-11-30 17:30:00.000000+00:00

Every game stored so far was played without hints (there were none): the column starts false.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "3b8e1f6a2c57"
down_revision: str | Sequence[str] | None = "3b9e1f07c2d5"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("games", sa.Column("hinted", sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade() -> None:
    op.drop_column("games", "hinted")  # SQLite >= 3.35 drops a column in place
