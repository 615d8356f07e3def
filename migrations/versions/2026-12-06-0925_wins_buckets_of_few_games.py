"""Leaderboards: the players board's wins buckets, one per key for players of fewer than 32 games.

Revision ID: c30328233f01
Revises: 4e7c2a9b5d18
Create Date: 2026-12-06 09:25:00.000000+00:00

Revision 4e7c2a9b5d18 bucketed a ``wins_key`` with a win by its win count. Most of a week's players
have a win or two in a game or two, and tie: at 1M games, 15,000 of the week's 32,600 players shared
the one-win bucket, 9,000 of them one key (one win, one game), and a rank counted them one by one
(`server.storage.leaderboards`, "Ranks"). A key of fewer than 32 games now has a bucket of its own,
so that a rank counts its ties from the bucket's ``n``; the win count's keys of 32 games or more
share one bucket, starting at the key of 32 games. No-win keys keep a bucket each.

The upgrade replaces the two triggers that compute the bucket (``player_stats``' insert and its
``wins_key`` move) and rebuilds the ``w`` counts from the rows; the downgrade puts back those of
4e7c2a9b5d18 and rebuilds them its way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from alembic import op

revision: str = "c30328233f01"
down_revision: str | Sequence[str] | None = "4e7c2a9b5d18"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NO_WINS = ((1 << 31) - 1) << 32  # the smallest wins_key of a player with no win
_PLAYED = (1 << 32) - 1  # the games-played part of a wins_key with a win
_FEW_GAMES = 32  # `server.storage.leaderboards._FEW_GAMES`

Lo = Callable[[str], str]


def _wins_lo(row: str) -> str:
    """The bucket of a ``wins_key`` (``row``: NEW, OLD or the table's name): the key itself with no win
    or fewer than 32 games; otherwise the win count's keys from 32 games."""
    key = f"{row}.wins_key"
    return (
        f"(CASE WHEN {key} >= {_NO_WINS} OR ({key} & {_PLAYED}) < {_FEW_GAMES} THEN {key} "
        f"ELSE (({key} >> 32) << 32) | {_FEW_GAMES} END)"
    )


def _wins_lo_by_win_count(row: str) -> str:
    """The bucket of a ``wins_key`` in revision 4e7c2a9b5d18: the win count; with no win, the key."""
    key = f"{row}.wins_key"
    return f"(CASE WHEN {key} < {_NO_WINS} THEN ({key} >> 32) << 32 ELSE {key} END)"


def _add(board: str, lo: str) -> str:
    return (
        f"INSERT INTO rank_buckets (scope, board, lo, n) VALUES (NEW.scope, '{board}', {lo}, 1) "
        "ON CONFLICT (scope, board, lo) DO UPDATE SET n = rank_buckets.n + 1;"
    )


def _bodies(lo: Lo) -> tuple[str, str, str]:
    """(the move's condition, the move's statements, the insert's statements) of 4e7c2a9b5d18's
    ``player_stats`` triggers, with the wins bucket ``lo`` (and the insert's two counts in the order
    the moves take them)."""
    moved = f"TRUE AND (OLD.scope <> NEW.scope OR {lo('OLD')} <> {lo('NEW')})"
    take = f"UPDATE rank_buckets SET n = n - 1 WHERE scope = OLD.scope AND board = 'w' AND lo = {lo('OLD')};"
    # the score bucket before the wins bucket, as the update triggers take them (PostgreSQL fires
    # tr_player_stats_s_moved before tr_player_stats_w_moved, by name): one lock order, no cycle
    inserted = f"{_add('s', '((NEW.score_key >> 3) << 3)')} {_add('w', lo('NEW'))}"
    return moved, f"{take} {_add('w', lo('NEW'))}", inserted


def _sqlite_triggers(lo: Lo) -> list[str]:
    moved, move, inserted = _bodies(lo)
    return [
        "DROP TRIGGER tr_player_stats_w_moved",
        "DROP TRIGGER tr_player_stats_counted",
        "CREATE TRIGGER tr_player_stats_w_moved AFTER UPDATE OF scope, wins_key ON player_stats "
        f"WHEN {moved} BEGIN {move} END",
        f"CREATE TRIGGER tr_player_stats_counted AFTER INSERT ON player_stats BEGIN {inserted} END",
    ]


def _postgresql_triggers(lo: Lo) -> list[str]:
    moved, move, inserted = _bodies(lo)
    return [
        "DROP TRIGGER tr_player_stats_w_moved ON player_stats",
        "CREATE OR REPLACE FUNCTION rank_buckets_player_stats_w_moved() RETURNS trigger LANGUAGE plpgsql "
        f"AS $$ BEGIN {move} RETURN NULL; END $$",
        "CREATE TRIGGER tr_player_stats_w_moved AFTER UPDATE OF scope, wins_key ON player_stats FOR EACH ROW "
        f"WHEN ({moved}) EXECUTE FUNCTION rank_buckets_player_stats_w_moved()",
        "CREATE OR REPLACE FUNCTION rank_buckets_player_stats_counted() RETURNS trigger LANGUAGE plpgsql "
        f"AS $$ BEGIN {inserted} RETURN NULL; END $$",
    ]


def _rebuild(lo: Lo) -> None:
    """The triggers computing the wins bucket ``lo``, and the ``w`` counts rebuilt with it."""
    sqlite = op.get_context().dialect.name == "sqlite"
    for statement in _sqlite_triggers(lo) if sqlite else _postgresql_triggers(lo):
        op.execute(statement)
    op.execute("DELETE FROM rank_buckets WHERE board = 'w'")
    op.execute(
        f"INSERT INTO rank_buckets (scope, board, lo, n) SELECT scope, 'w', {lo('player_stats')}, COUNT(*) "
        f"FROM player_stats GROUP BY scope, {lo('player_stats')}"
    )


def upgrade() -> None:
    _rebuild(_wins_lo)


def downgrade() -> None:
    _rebuild(_wins_lo_by_win_count)
