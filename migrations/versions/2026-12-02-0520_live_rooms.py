"""live_rooms: which server process holds which game's room (someone follows the game there).

Revision ID: 3e1d5a9c0b27
Revises: 3c1f0a9e5d27
Create Date: 2026-12-02 05:20:00.000000+00:00

``live`` used to list every unfinished game active in the live window (10 minutes), so a game whose
browser had closed stayed listed for up to 10 minutes. It now lists only games with a row here: each
process mirrors its rooms into this table (``server.play.presence``). The table starts empty: rooms
held when it is made are written again as they are next taken up, and until then those games are off
the list (a restart, which running a migration implies, drops every room anyway).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "3e1d5a9c0b27"
down_revision: str | Sequence[str] | None = "3c1f0a9e5d27"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "live_rooms",
        sa.Column("game_id", sa.String(length=32), nullable=False),
        sa.Column("holder", sa.String(length=80), nullable=False),
        sa.PrimaryKeyConstraint("game_id", "holder", name=op.f("pk_live_rooms")),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("live_rooms")
