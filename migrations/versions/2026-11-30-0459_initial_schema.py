"""Initial schema: players, games and their actions.

Revision ID: f1c0b3814649
Revises:
Create Date: 2026-11-30 04:59:52.517095+00:00

- ``players``: the token is never stored, only its hex SHA-256 (unique: it is how a player logs in).
- ``games``: one row per game, its final figures written when it ends; indexed for "a player's unfinished
  games" and for the leaderboards (per deal code, per cell count, per daily date, per period).
- ``actions``: every accepted action; the primary key (game_id, v) is the fence that stops two writers
  from both committing the same version of a game.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "f1c0b3814649"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "players",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_players")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_players_token_hash")),
    )
    op.create_table(
        "games",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("player_id", sa.String(length=32), nullable=False),
        sa.Column("code", sa.String(length=16), nullable=False),
        sa.Column("cells", sa.SmallInteger(), nullable=False),
        sa.Column("daily_date", sa.Date(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("score", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("moves", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("undos", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("duration_ms", sa.BigInteger(), nullable=True),
        sa.Column("won", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.CheckConstraint("status IN ('playing', 'won', 'resigned')", name=op.f("ck_games_status")),
        sa.CheckConstraint("cells IN (8, 4, 2)", name=op.f("ck_games_cells")),
        sa.ForeignKeyConstraint(["player_id"], ["players.id"], name=op.f("fk_games_player_id_players")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_games")),
    )
    op.create_index("ix_games_player_id_status", "games", ["player_id", "status"])
    op.create_index(
        "ix_games_code_won_moves_duration_ms_finished_at",
        "games",
        ["code", "won", "moves", "duration_ms", "finished_at"],
    )
    op.create_index("ix_games_cells_finished_at", "games", ["cells", "finished_at"])
    op.create_index(
        "ix_games_daily_date_won_moves_duration_ms", "games", ["daily_date", "won", "moves", "duration_ms"]
    )
    op.create_index("ix_games_finished_at", "games", ["finished_at"])
    op.create_table(
        "actions",
        sa.Column("game_id", sa.String(length=32), nullable=False),
        sa.Column("v", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.CheckConstraint("v >= 1", name=op.f("ck_actions_v_positive")),
        sa.ForeignKeyConstraint(["game_id"], ["games.id"], name=op.f("fk_actions_game_id_games")),
        sa.PrimaryKeyConstraint("game_id", "v", name=op.f("pk_actions")),
    )


def downgrade() -> None:
    # Reverse order of upgrade(): dependents first. Dropping a table drops its indexes.
    op.drop_table("actions")
    op.drop_index("ix_games_finished_at", table_name="games")
    op.drop_index("ix_games_daily_date_won_moves_duration_ms", table_name="games")
    op.drop_index("ix_games_cells_finished_at", table_name="games")
    op.drop_index("ix_games_code_won_moves_duration_ms_finished_at", table_name="games")
    op.drop_index("ix_games_player_id_status", table_name="games")
    op.drop_table("games")
    op.drop_table("players")
