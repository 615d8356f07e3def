"""races and race_seats; games.race_id: the same-deal races (issue 19).

Revision ID: 3c1f0a9e5d27
Revises: 7b936593044a
Create Date: 2026-12-02 05:00:00.000000+00:00

A race is stored whole at each change of phase or seats (``server.storage.races``); a seat keeps its
place once the race ends, what a rating is computed from (the rating changes get a table of their
own). ``games.race_id`` names the race a game is a seat of. The downgrade drops all three: races and
their results are lost, the seats' games stay as games of their own.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "3c1f0a9e5d27"
down_revision: str | Sequence[str] | None = "7b936593044a"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "races",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("code", sa.String(16), nullable=False),
        sa.Column("creator_id", sa.String(32), nullable=False),
        sa.Column("cells", sa.SmallInteger(), nullable=False),
        sa.Column("seats", sa.SmallInteger(), nullable=False),
        sa.Column("time_limit_s", sa.Integer(), nullable=False),
        sa.Column("public", sa.Boolean(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("deal_code", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("starts_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.CheckConstraint(
            "state IN ('lobby', 'countdown', 'running', 'finished', 'cancelled')", name=op.f("ck_races_state")
        ),
        sa.CheckConstraint("cells IN (8, 4, 2)", name=op.f("ck_races_cells")),
        sa.CheckConstraint("seats BETWEEN 2 AND 8", name=op.f("ck_races_seats")),
        sa.ForeignKeyConstraint(["creator_id"], ["players.id"], name=op.f("fk_races_creator_id_players")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_races")),
        sa.UniqueConstraint("code", name=op.f("uq_races_code")),
    )
    op.create_index("ix_races_state", "races", ["state"])
    op.create_table(
        "race_seats",
        sa.Column("race_id", sa.String(32), nullable=False),
        sa.Column("seat", sa.SmallInteger(), autoincrement=False, nullable=False),
        sa.Column("player_id", sa.String(32), nullable=False),
        sa.Column("game_id", sa.String(32), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("cards_home", sa.SmallInteger(), nullable=False),
        sa.Column("moves", sa.Integer(), nullable=False),
        sa.Column("score", sa.Integer(), nullable=False),
        sa.Column("time_ms", sa.BigInteger(), nullable=False),
        sa.Column("place", sa.SmallInteger(), nullable=True),
        sa.CheckConstraint(
            "status IN ('waiting', 'playing', 'won', 'resigned', 'left')", name=op.f("ck_race_seats_status")
        ),
        sa.ForeignKeyConstraint(["race_id"], ["races.id"], name=op.f("fk_race_seats_race_id_races")),
        sa.ForeignKeyConstraint(["player_id"], ["players.id"], name=op.f("fk_race_seats_player_id_players")),
        sa.ForeignKeyConstraint(["game_id"], ["games.id"], name=op.f("fk_race_seats_game_id_games")),
        sa.PrimaryKeyConstraint("race_id", "seat", name=op.f("pk_race_seats")),
    )
    op.create_index("ix_race_seats_player_id", "race_seats", ["player_id"])
    if op.get_bind().dialect.name == "sqlite":
        # In place (no copy of the table, whose triggers stay): SQLite takes a REFERENCES clause on
        # ADD COLUMN when the column defaults to null.
        op.execute(
            "ALTER TABLE games ADD COLUMN race_id VARCHAR(32)"
            " CONSTRAINT fk_games_race_id_races REFERENCES races (id)"
        )
    else:
        op.add_column("games", sa.Column("race_id", sa.String(32), nullable=True))
        op.create_foreign_key(op.f("fk_games_race_id_races"), "games", "races", ["race_id"], ["id"])


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":  # SQLite drops the column's clause with it
        op.drop_constraint(op.f("fk_games_race_id_races"), "games", type_="foreignkey")
    op.drop_column("games", "race_id")
    op.drop_index("ix_race_seats_player_id", table_name="race_seats")
    op.drop_table("race_seats")
    op.drop_index("ix_races_state", table_name="races")
    op.drop_table("races")
