"""race_seats.network and players.networks_met: ratings tell networks apart, and who is established.

Revision ID: 7b3f1c8e2a65
Revises: 79c38107f9c4
Create Date: 2026-12-07 09:40:00.000000+00:00

A rated race between two seats of one network (one address, or one IPv6 /64) can be one player
against its own second account; docs/ratings.md (Farming) rates only seats of distinct networks and
counts how often two networks met in rated races. The column holds a digest of the network, never
the address (`server.play.race.ratings.network_of`). Seats stored before have none: they race
unrated when the rule is on. The index finds a network's recent rated races. A player's
``networks_met`` counts the networks of its rivals up to the number that establishes it; players
stored before start at 0 and are counted again at their next finished race. A quick match wait
carries its player's network to the seat a race gives it (the race may be stored by another
process); waits stored before have none. The downgrade drops all four.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "7b3f1c8e2a65"
down_revision: str | Sequence[str] | None = "79c38107f9c4"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("race_seats", sa.Column("network", sa.String(16), nullable=True))
    op.create_index("ix_race_seats_network", "race_seats", ["network"])
    op.add_column("quick_waits", sa.Column("network", sa.String(16), nullable=True))
    op.add_column(
        "players", sa.Column("networks_met", sa.SmallInteger(), server_default=sa.text("0"), nullable=False)
    )


def downgrade() -> None:
    op.drop_column("quick_waits", "network")
    op.drop_column("players", "networks_met")
    op.drop_index("ix_race_seats_network", table_name="race_seats")
    op.drop_column("race_seats", "network")  # SQLite >= 3.35 drops a column in place
