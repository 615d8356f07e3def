"""events, event_entries and event_games: events of a fixed start and end (docs/events.md).

Revision ID: 5e2a9d4c7b13
Revises: 4c7e2a9d1f38
Create Date: 2026-12-07 13:30:00.000000+00:00

An event is stored at each change of phase, fenced by its revision; its deal sequence is null
until the start (docs/events.md). An entrant's row carries its join order (unique per event) and
its figures; ``event_games`` links each of its games (ordinary ``games`` rows) to the event and
the deal's index, one game per deal. The downgrade drops the three tables: the games stay as
games of their own.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "5e2a9d4c7b13"
down_revision: str | Sequence[str] | None = "4c7e2a9d1f38"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("cells", sa.SmallInteger(), nullable=False),
        sa.Column("opens_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("starts_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closes_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("max_players", sa.Integer(), nullable=False),
        sa.Column("deals", sa.SmallInteger(), nullable=False),
        sa.Column("game_time_s", sa.Integer(), nullable=False),
        sa.Column("review_s", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("deal_codes", sa.Text(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(16), nullable=False),
        sa.Column("cancel_reason", sa.String(32), nullable=True),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.CheckConstraint(
            "state IN ('scheduled', 'open', 'running', 'review', 'final', 'cancelled')",
            name=op.f("ck_events_state"),
        ),
        sa.CheckConstraint("cells IN (8, 4, 2)", name=op.f("ck_events_cells")),
        sa.CheckConstraint("max_players >= 1", name=op.f("ck_events_max_players_positive")),
        sa.CheckConstraint("deals BETWEEN 1 AND 200", name=op.f("ck_events_deals")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
    )
    op.create_index("ix_events_state_starts_at", "events", ["state", "starts_at"])
    op.create_table(
        "event_entries",
        sa.Column("event_id", sa.String(32), nullable=False),
        sa.Column("player_id", sa.String(32), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("joined_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("points", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("wins", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("win_ms", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("games", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("streak", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("reached_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("place", sa.Integer(), nullable=True),
        sa.Column("voided", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.CheckConstraint("number >= 1", name=op.f("ck_event_entries_number_positive")),
        sa.ForeignKeyConstraint(["event_id"], ["events.id"], name=op.f("fk_event_entries_event_id_events")),
        sa.ForeignKeyConstraint(
            ["player_id"], ["players.id"], name=op.f("fk_event_entries_player_id_players")
        ),
        sa.PrimaryKeyConstraint("event_id", "player_id", name=op.f("pk_event_entries")),
        sa.UniqueConstraint("event_id", "number", name=op.f("uq_event_entries_event_id_number")),
    )
    op.create_index("ix_event_entries_player_id", "event_entries", ["player_id"])
    op.create_table(
        "event_games",
        sa.Column("event_id", sa.String(32), nullable=False),
        sa.Column("player_id", sa.String(32), nullable=False),
        sa.Column("deal", sa.SmallInteger(), autoincrement=False, nullable=False),
        sa.Column("game_id", sa.String(32), nullable=False),
        sa.Column("berserk", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.CheckConstraint("deal >= 1", name=op.f("ck_event_games_deal_positive")),
        sa.ForeignKeyConstraint(["event_id"], ["events.id"], name=op.f("fk_event_games_event_id_events")),
        sa.ForeignKeyConstraint(["player_id"], ["players.id"], name=op.f("fk_event_games_player_id_players")),
        sa.ForeignKeyConstraint(["game_id"], ["games.id"], name=op.f("fk_event_games_game_id_games")),
        sa.PrimaryKeyConstraint("event_id", "player_id", "deal", name=op.f("pk_event_games")),
        sa.UniqueConstraint("game_id", name=op.f("uq_event_games_game_id")),
    )


def downgrade() -> None:
    op.drop_table("event_games")
    op.drop_index("ix_event_entries_player_id", table_name="event_entries")
    op.drop_table("event_entries")
    op.drop_index("ix_events_state_starts_at", table_name="events")
    op.drop_table("events")
