"""ratings and race_rating_changes: a player's OpenSkill rating per variant, and what each race did to it.

Revision ID: eca617285640
Revises: 7b936593044a
Create Date: 2026-12-02 04:54:50.971162+00:00

A ``ratings`` row exists once a player has a rated race in the variant (`server.play.race.ratings`);
``races`` is its version, the fence of the next change. ``race_rating_changes`` keeps each race's
before and after, keyed (race_id, player_id) so that a race is rated once. Nothing to backfill:
there were no races before.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "eca617285640"
down_revision: str | Sequence[str] | None = "7b936593044a"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "race_rating_changes",
        sa.Column("race_id", sa.String(length=32), nullable=False),
        sa.Column("player_id", sa.String(length=32), nullable=False),
        sa.Column("cells", sa.SmallInteger(), nullable=False),
        sa.Column("place", sa.SmallInteger(), nullable=False),
        sa.Column("mu_before", sa.Double(), nullable=False),
        sa.Column("sigma_before", sa.Double(), nullable=False),
        sa.Column("races_before", sa.Integer(), nullable=False),
        sa.Column("mu_after", sa.Double(), nullable=False),
        sa.Column("sigma_after", sa.Double(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("cells IN (8, 4, 2)", name=op.f("ck_race_rating_changes_cells")),
        sa.CheckConstraint("place >= 1", name=op.f("ck_race_rating_changes_place_positive")),
        sa.ForeignKeyConstraint(
            ["player_id"], ["players.id"], name=op.f("fk_race_rating_changes_player_id_players")
        ),
        sa.PrimaryKeyConstraint("race_id", "player_id", name=op.f("pk_race_rating_changes")),
    )
    op.create_index(
        "ix_race_rating_changes_player_id_cells_at", "race_rating_changes", ["player_id", "cells", "at"]
    )

    op.create_table(
        "ratings",
        sa.Column("player_id", sa.String(length=32), nullable=False),
        sa.Column("cells", sa.SmallInteger(), nullable=False),
        sa.Column("mu", sa.Double(), nullable=False),
        sa.Column("sigma", sa.Double(), nullable=False),
        sa.Column("races", sa.Integer(), nullable=False),
        sa.Column("sort_key", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("cells IN (8, 4, 2)", name=op.f("ck_ratings_cells")),
        sa.CheckConstraint("races >= 1", name=op.f("ck_ratings_races_positive")),
        sa.ForeignKeyConstraint(["player_id"], ["players.id"], name=op.f("fk_ratings_player_id_players")),
        sa.PrimaryKeyConstraint("player_id", "cells", name=op.f("pk_ratings")),
    )
    op.create_index("ix_ratings_cells_sort_key_player_id", "ratings", ["cells", "sort_key", "player_id"])


def downgrade() -> None:
    op.drop_index("ix_ratings_cells_sort_key_player_id", table_name="ratings")
    op.drop_table("ratings")
    op.drop_index("ix_race_rating_changes_player_id_cells_at", table_name="race_rating_changes")
    op.drop_table("race_rating_changes")
