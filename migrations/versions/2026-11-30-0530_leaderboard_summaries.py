"""Leaderboard summaries: each player's best game per board scope, and players' figures per period.

Revision ID: 7d2a5c0e9b41
Revises: f1c0b3814649
Create Date: 2026-11-30 05:30:00.000000+00:00

- ``board_bests``: one row per (scope, player): the player's best game in one board, order and period
  bucket (``D/EO1-C8-AAAAAFA/m/a``, ``V/8/t/w2026-11-30``, ``Y/2026-11-30/8/s``), with its packed
  ``sort_key``; indexed by (scope, sort_key, finished_at, game_id) for pages, ranks and neighbours.
- ``player_stats``: one row per (scope, player) with ``scope`` ``a`` (all time), ``dYYYY-MM-DD`` (a UTC
  day) or ``wYYYY-MM-DD`` (the ISO week from that Monday): games played and won, best score, and the
  packed keys of the players board's two orders, each indexed.
- ``games``: a (player_id, finished_at) index for profiles. The three indexes the initial schema made
  for leaderboards read straight from ``games`` go: the summaries replace them, and every finished game
  paid for them.

Both summaries are filled from the games already stored (the same rules as
``server.storage.leaderboards``, written out here in SQL so that this revision never changes when that
module does). Both tables are derived data: the downgrade drops them and restores the three indexes.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "7d2a5c0e9b41"
down_revision: str | Sequence[str] | None = "f1c0b3814649"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The packing of server.storage.leaderboards at the time of this revision.
_LOST = 1 << 62
_MOVES_CAP = (1 << 21) - 1
_DURATION_CAP = (1 << 41) - 1
_WON_CAP = (1 << 31) - 1
_PLAYED_CAP = (1 << 32) - 1
_FINISHED = "status <> 'playing' AND finished_at IS NOT NULL"


def _dialect_sql() -> dict[str, str]:
    """SQL fragments that differ between SQLite and PostgreSQL (also in offline ``--sql`` mode)."""
    if op.get_context().dialect.name == "sqlite":
        return {
            "least": "MIN",
            "day": "substr(finished_at, 1, 10)",
            "week": "date(finished_at, '-6 days', 'weekday 1')",
            "daily": "daily_date",
            "cells": "CAST(cells AS TEXT)",
        }
    return {
        "least": "LEAST",
        "day": "to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
        "week": "to_char(date_trunc('week', finished_at AT TIME ZONE 'UTC'), 'YYYY-MM-DD')",
        "daily": "to_char(daily_date, 'YYYY-MM-DD')",
        "cells": "CAST(cells AS VARCHAR)",
    }


def _backfill_board_bests(sql: dict[str, str]) -> str:
    least = sql["least"]
    lost = f"(CASE WHEN won THEN 0 ELSE {_LOST} END)"
    moves = f"{least}(moves, {_MOVES_CAP})"
    duration = f"{least}(COALESCE(duration_ms, 0), {_DURATION_CAP})"
    keys = {
        "m": f"{lost} + {moves} * {1 << 41} + {duration}",
        "t": f"{lost} + {duration} * {1 << 21} + {moves}",
        "s": "-score",
    }
    buckets = {"a": "'a'", "d": f"'d' || {sql['day']}", "w": f"'w' || {sql['week']}"}
    contributions = []
    for tag, key in keys.items():
        for bucket in buckets.values():
            for board, board_key in (("D", "code"), ("V", sql["cells"])):
                scope = f"'{board}/' || {board_key} || '/{tag}/' || {bucket}"
                contributions.append(
                    f"SELECT {scope} AS scope, player_id, {key} AS sort_key, finished_at, id AS game_id "
                    f"FROM games WHERE {_FINISHED}"
                )
        scope = f"'Y/' || {sql['daily']} || '/' || {sql['cells']} || '/{tag}'"
        contributions.append(
            f"SELECT {scope} AS scope, player_id, {key} AS sort_key, finished_at, id AS game_id "
            f"FROM games WHERE {_FINISHED} AND daily_date IS NOT NULL"
        )
    union = "\nUNION ALL ".join(contributions)
    return (
        "INSERT INTO board_bests (scope, player_id, sort_key, finished_at, game_id)\n"
        "SELECT scope, player_id, sort_key, finished_at, game_id FROM (\n"
        "SELECT scope, player_id, sort_key, finished_at, game_id, ROW_NUMBER() OVER ("
        "PARTITION BY scope, player_id ORDER BY sort_key, finished_at, game_id) AS n FROM (\n"
        f"{union}\n) AS contributions\n) AS ranked WHERE n = 1"
    )


def _backfill_player_stats(sql: dict[str, str]) -> str:
    buckets = ["'a'", f"'d' || {sql['day']}", f"'w' || {sql['week']}"]
    union = "\nUNION ALL ".join(
        f"SELECT {bucket} AS scope, player_id, CASE WHEN won THEN 1 ELSE 0 END AS won, score "
        f"FROM games WHERE {_FINISHED}"
        for bucket in buckets
    )
    wins_key = (
        f"({_WON_CAP} - won) * {_PLAYED_CAP + 1} "
        f"+ CASE WHEN won > 0 THEN played ELSE {_PLAYED_CAP} - played END"
    )
    return (
        "INSERT INTO player_stats (scope, player_id, played, won, best_score, wins_key, score_key)\n"
        f"SELECT scope, player_id, played, won, best_score, {wins_key}, -best_score FROM (\n"
        "SELECT scope, player_id, COUNT(*) AS played, SUM(won) AS won, MAX(score) AS best_score FROM (\n"
        f"{union}\n) AS contributions GROUP BY scope, player_id\n) AS totals"
    )


def upgrade() -> None:
    op.create_table(
        "board_bests",
        sa.Column("scope", sa.String(length=40), nullable=False),
        sa.Column("player_id", sa.String(length=32), nullable=False),
        sa.Column("sort_key", sa.BigInteger(), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("game_id", sa.String(length=32), nullable=False),
        sa.PrimaryKeyConstraint("scope", "player_id", name=op.f("pk_board_bests")),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "player_stats",
        sa.Column("scope", sa.String(length=16), nullable=False),
        sa.Column("player_id", sa.String(length=32), nullable=False),
        sa.Column("played", sa.Integer(), nullable=False),
        sa.Column("won", sa.Integer(), nullable=False),
        sa.Column("best_score", sa.Integer(), nullable=False),
        sa.Column("wins_key", sa.BigInteger(), nullable=False),
        sa.Column("score_key", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("scope", "player_id", name=op.f("pk_player_stats")),
        sqlite_with_rowid=False,
    )
    sql = _dialect_sql()
    # Fill before indexing: one index build is cheaper than index maintenance row by row.
    op.execute(_backfill_board_bests(sql))
    op.execute(_backfill_player_stats(sql))
    op.create_index(
        "ix_board_bests_scope_sort_key_finished_at_game_id",
        "board_bests",
        ["scope", "sort_key", "finished_at", "game_id"],
    )
    op.create_index(
        "ix_player_stats_scope_wins_key_player_id", "player_stats", ["scope", "wins_key", "player_id"]
    )
    op.create_index(
        "ix_player_stats_scope_score_key_player_id", "player_stats", ["scope", "score_key", "player_id"]
    )
    op.create_index("ix_games_player_id_finished_at", "games", ["player_id", "finished_at"])
    op.drop_index("ix_games_code_won_moves_duration_ms_finished_at", table_name="games")
    op.drop_index("ix_games_cells_finished_at", table_name="games")
    op.drop_index("ix_games_daily_date_won_moves_duration_ms", table_name="games")


def downgrade() -> None:
    # Reverse order of upgrade(). Dropping a table drops its indexes.
    op.create_index(
        "ix_games_daily_date_won_moves_duration_ms", "games", ["daily_date", "won", "moves", "duration_ms"]
    )
    op.create_index("ix_games_cells_finished_at", "games", ["cells", "finished_at"])
    op.create_index(
        "ix_games_code_won_moves_duration_ms_finished_at",
        "games",
        ["code", "won", "moves", "duration_ms", "finished_at"],
    )
    op.drop_index("ix_games_player_id_finished_at", table_name="games")
    op.drop_table("player_stats")
    op.drop_table("board_bests")
