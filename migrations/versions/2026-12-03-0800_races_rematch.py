"""races.rematch_id: the race made as a finished race's rematch (``race_rematch``).

Revision ID: 5d2b8e4f1a63
Revises: 5a7c2e9d1f40
Create Date: 2026-12-03 08:00:00.000000+00:00

A finished race names its rematch once a player asked one: the new race is inserted and this column
set in one transaction, fenced by the race's ``revision``, so two asks at once make one rematch.
Every race stored so far has none (null). The downgrade forgets the links (the rematches stay, as
ordinary races).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "5d2b8e4f1a63"
down_revision: str | Sequence[str] | None = "5a7c2e9d1f40"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("races", sa.Column("rematch_id", sa.String(length=32), nullable=True))


def downgrade() -> None:
    op.drop_column("races", "rematch_id")  # SQLite >= 3.35 drops a column in place
