"""players.bot: the player is a program, declared in the hello that made it, for life.

Revision ID: 7b936593044a
Revises: 604bb49ebbb6
Create Date: 2026-12-01 22:00:00.000000+00:00

Every player stored so far is a person (there were no bots): the column starts false. A bot's games
rank on boards of their own: the same scopes of ``board_bests`` and ``player_stats`` with ``B/`` in
front (``server.storage.leaderboards``), so the summary tables need no column of their own.

The downgrade makes the bots people again, as the schema before it knew only people: their rows move
to the people's scopes (``B/`` taken off). A player is a bot or not for life, so a bot has no row in
a people's scope and nothing collides.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "7b936593044a"
down_revision: str | Sequence[str] | None = "604bb49ebbb6"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("players", sa.Column("bot", sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade() -> None:
    for table in ("board_bests", "player_stats"):
        op.execute(f"UPDATE {table} SET scope = substr(scope, 3) WHERE scope LIKE 'B/%'")
    op.drop_column("players", "bot")  # SQLite >= 3.35 drops a column in place
