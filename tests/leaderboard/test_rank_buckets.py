"""Ranks from ``rank_buckets``: for random boards (ties, improvements, bots, keys on both sides of a
bucket's edge, closed buckets pruned), the counts are exactly the rows' and every rank read, page by
page and around each player, is the brute-force competition rank of the stored rows."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from server.services.pruning import BoardPruning
from server.storage import Database, PlayerRecord, repository
from server.storage import leaderboards as boards
from server.storage.tables import board_bests, player_stats, rank_buckets
from tests.leaderboard.leaderboard_support import T0, Finished, Recorder
from tests.support import dbutil

CODES = ("EO1-C8-AAAAAFA", "EO1-C4-AAAAAAB")
PLAYERS = ("p0", "p1", "p2", "p3", "b0", "b1")  # b…: bots
#: Keys on both sides of the buckets' edges: time buckets are 8,192 ms, score buckets 8 points.
DURATIONS = (8_191, 8_192, 8_193, 16_384, 60_000)
SCORES = (-3, 0, 5, 7, 8, 16, 600)
#: Days before T0 (a Monday): this week, the last, the one before (closed, pruned at T0 + 1 day).
DAYS = (0, 1, 8, 9)

games_strategy = st.lists(
    st.tuples(
        st.sampled_from(PLAYERS),
        st.sampled_from(CODES),
        st.booleans(),  # won
        st.sampled_from((70, 71, 100)),
        st.sampled_from(DURATIONS),
        st.sampled_from(SCORES),
        st.sampled_from(DAYS),
        st.booleans(),  # a daily game
    ),
    min_size=1,
    max_size=24,
)


def _finished(index: int, figures: tuple[Any, ...]) -> Finished:
    player, code, won, moves, duration, score, days, daily = figures
    finished_at = T0 - dt.timedelta(days=days, seconds=index)
    return Finished(
        f"g{index}",
        player,
        code=code,
        daily_date=finished_at.date() if daily else None,
        won=won,
        moves=moves,
        duration_ms=duration,
        score=score,
        finished_at=finished_at,
    )


async def _record(database: Database, games: list[Finished]) -> None:
    recorder = Recorder(database)
    async with database.transaction() as conn:
        for player in PLAYERS:
            record = PlayerRecord(
                player, player, f"{player:0>64}", T0 - dt.timedelta(days=400), player[0] == "b"
            )
            await repository.insert_player(conn, record)
    recorder.players.update(PLAYERS)
    for game in games:  # a transaction each, as the committer finishes them
        await recorder.add(game)


_KEY_COLUMNS: dict[boards.Counted, str] = {"g": "sort_key", "w": "wins_key", "s": "score_key"}


def _kind_key(row: Any, board: boards.Counted) -> int:
    """The row's key on ``board``."""
    return int(getattr(row, _KEY_COLUMNS[board]))


async def _stored(database: Database) -> dict[tuple[str, boards.Counted], list[Any]]:
    """The rows of each (scope, board), as stored."""
    boards_rows: dict[tuple[str, boards.Counted], list[Any]] = {}
    async with database.connection() as conn:
        for row in await conn.execute(select(board_bests)):
            boards_rows.setdefault((row.scope, "g"), []).append(row)
        for row in await conn.execute(select(player_stats)):
            boards_rows.setdefault((row.scope, "w"), []).append(row)
            boards_rows.setdefault((row.scope, "s"), []).append(row)
    return boards_rows


async def _assert_counts_exact(
    database: Database, stored: dict[tuple[str, boards.Counted], list[Any]]
) -> None:
    """Every bucket's ``n`` is its rows' count; no count of a scope without rows, or not counted."""
    expected = Counter(
        (scope, board, boards.bucket_floor(board, scope, _kind_key(row, board)))
        for (scope, board), rows in stored.items()
        if board != "g" or boards.is_counted(scope)
        for row in rows
    )
    async with database.connection() as conn:
        counted = {(row.scope, row.board, row.lo): row.n for row in await conn.execute(select(rank_buckets))}
    assert {key: n for key, n in counted.items() if n} == dict(expected)
    assert all(n >= 0 for n in counted.values())
    assert {(scope, board) for scope, board, _ in counted} <= set(stored)


def _brute_ranks(rows: list[Any], board: boards.Counted) -> dict[str, int]:
    keys = [_kind_key(row, board) for row in rows]
    return {
        row.player_id: 1 + sum(other < key for other in keys) for row, key in zip(rows, keys, strict=True)
    }


async def _read_ranks(
    conn: Any, scope: str, board: boards.Counted, player: str | None, limit: int
) -> dict[str, int]:
    """player -> rank as the board reads them: the whole board page by page, or the page around."""
    order = "wins" if board == "w" else "score"
    ranks: dict[str, int] = {}
    after = None
    while True:
        if board == "g":
            page: Any = (
                await boards.game_around(conn, scope, player, limit=limit)
                if player
                else await boards.game_page(conn, scope, after=after, limit=limit)
            )
        elif player:
            page = await boards.player_around(conn, scope, order, player, limit=limit)  # type: ignore[arg-type]
        else:
            page = await boards.player_page(conn, scope, order, after=after, limit=limit)  # type: ignore[arg-type]
        ranks.update((row.player_id, row.rank) for row in page.rows)
        if player or not page.has_more:
            return ranks
        after = page.rows[-1].key


async def _assert_ranks_exact(database: Database) -> None:
    stored = await _stored(database)
    await _assert_counts_exact(database, stored)
    async with database.connection() as conn:
        await boards.use_one_snapshot(conn)
        for (scope, board), rows in stored.items():
            expected = _brute_ranks(rows, board)
            assert await _read_ranks(conn, scope, board, None, 2) == expected, (scope, board)
            for player in expected:
                around = await _read_ranks(conn, scope, board, player, 3)
                assert around.items() <= expected.items() and player in around, (scope, board, player)


async def _scenario(url: str, first: list[Finished], later: list[Finished]) -> None:
    database = Database.create(url, sqlite_synchronous="OFF")
    try:
        async with database.transaction() as conn:
            await dbutil.clear_tables(conn)
        await _record(database, first)
        await _assert_ranks_exact(database)
        # A day later the week before last closes: its scopes go, with their counts.
        await BoardPruning(database, pause=0, clock=lambda: T0 + dt.timedelta(days=1, hours=2)).prune()
        await _assert_ranks_exact(database)
        recorder = Recorder(database, players=set(PLAYERS))
        for game in later:
            await recorder.add(game)
        await _assert_ranks_exact(database)
    finally:
        await database.dispose()


@settings(max_examples=10, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=games_strategy, later=games_strategy)
def test_every_rank_read_is_the_brute_force_rank(
    database_url: str, first: list[tuple[Any, ...]], later: list[tuple[Any, ...]]
) -> None:
    """Random boards: ties, a player's later games better or worse, bots, closed buckets pruned, then
    more games (improving rows the pruning kept); counts and ranks always exact."""
    later_games = [_finished(len(first) + index, figures) for index, figures in enumerate(later)]
    later_games = [game for game in later_games if game.finished_at >= T0 - dt.timedelta(days=1)]
    asyncio.run(_scenario(database_url, [_finished(i, f) for i, f in enumerate(first)], later_games))


@pytest.mark.parametrize(
    ("board", "scope", "key", "floor"),
    [
        ("g", "V/8/m/a", (1 << 62) | 7 << 41 | 5, (1 << 62) | 7 << 41),
        ("g", "B/D/EO1-C8-AAAAAFA/t/d2026-11-30", 3 << 34 | 17, 3 << 34),
        ("g", "Y/2026-11-30/8/s", -7, -8),
        ("g", "Y/2026-11-30/8/s", -8, -8),
        ("w", "a", boards.wins_key(played=9, won=4), boards.wins_key(played=0, won=4)),
        ("w", "B/a", boards.wins_key(played=9, won=0), boards.wins_key(played=9, won=0)),
        ("s", "d2026-11-30", -601, -608),
    ],
)
def test_bucket_floor(board: boards.Counted, scope: str, key: int, floor: int) -> None:
    assert boards.bucket_floor(board, scope, key) == floor


@pytest.mark.parametrize(
    ("scope", "counted"),
    [
        ("V/8/m/d2026-11-30", True),
        ("B/V/2/t/w2026-11-30", True),
        ("Y/2026-11-30/8/s", True),
        ("D/EO1-C8-AAAAAFA/m/a", True),
        ("B/D/EO1-C8-AAAAAFA/s/a", True),
        ("D/EO1-C8-AAAAAFA/m/d2026-11-30", False),
        ("B/D/EO1-C8-AAAAAFA/t/w2026-11-30", False),
    ],
)
def test_deal_boards_of_a_day_or_a_week_are_not_counted(scope: str, counted: bool) -> None:
    assert boards.is_counted(scope) is counted
