"""games: a (player_id, daily_date) index, for the sealing of shared deals.

Revision ID: 604bb49ebbb6
Revises: 5c2f8e0d7a13
Create Date: 2026-12-01 21:30:00.000000+00:00

Before another player's daily game is shown (``watch``, a ``live`` page), the server asks what the
asker has played of that day's daily (`server.services.sealing`, `repository.daily_standings`). Without this
index the question walks every finished game of the asker (16.6 ms on SQLite, 7.1 ms on PostgreSQL
for a player with 20,000 games); with it, only their games of that day.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "604bb49ebbb6"
down_revision: str | Sequence[str] | None = "5c2f8e0d7a13"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_games_player_id_daily_date", "games", ["player_id", "daily_date"])


def downgrade() -> None:
    op.drop_index("ix_games_player_id_daily_date", table_name="games")
