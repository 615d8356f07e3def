"""Ranks from ``rank_buckets``: for random boards (ties, improvements, bots, keys on both sides of a
bucket's edge, closed buckets pruned), the counts are exactly the rows' and every rank read, page by
page and around each player, is the brute-force competition rank of the stored rows."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import insert, select

from server.services.pruning import BoardPruning
from server.storage import Database, PlayerRecord, repository
from server.storage import leaderboards as boards
from server.storage.tables import board_bests, games, player_stats, players, rank_buckets
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


async def _assert_ranks_exact(database: Database, *, page_limit: int = 2, around_limit: int = 3) -> None:
    stored = await _stored(database)
    await _assert_counts_exact(database, stored)
    async with database.connection() as conn:
        await boards.use_one_snapshot(conn)
        for (scope, board), rows in stored.items():
            expected = _brute_ranks(rows, board)
            assert await _read_ranks(conn, scope, board, None, page_limit) == expected, (scope, board)
            for player in expected:
                around = await _read_ranks(conn, scope, board, player, around_limit)
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
        ("w", "a", boards.wins_key(played=9, won=4), boards.wins_key(played=9, won=4)),
        ("w", "a", boards.wins_key(played=31, won=4), boards.wins_key(played=31, won=4)),
        ("w", "a", boards.wins_key(played=32, won=4), boards.wins_key(played=32, won=4)),
        ("w", "a", boards.wins_key(played=900, won=4), boards.wins_key(played=32, won=4)),
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


# --------------------------------------------------------------------------- many ties

#: Rows written straight to the summary tables (the triggers count them), drawn from few keys so that
#: most rows tie: players' (won, played) with no win, few games and many (each side of the wins
#: buckets' edge), and game keys tied on the sort key alone or on the sort key and the finish.
TIED_WINS = ((0, 1), (0, 2), (1, 1), (1, 2), (2, 31), (2, 32), (2, 40), (3, 3))
TIED_SCORES = (0, 5, 7, 8)
TIED_SORT_KEYS = (5 << 41, 5 << 41 | 1, 6 << 41)
TIED_FINISHES = (T0, T0 + dt.timedelta(seconds=1))
#: A counted game board, and one whose rank is the plain count (a deal board's week).
TIED_GAME_SCOPES = ("V/8/m/a", "D/EO1-C8-AAAAAFA/m/w2026-11-30")

tied_rows_strategy = st.lists(
    st.tuples(
        st.sampled_from(TIED_WINS),
        st.sampled_from(TIED_SCORES),
        st.sampled_from(TIED_SORT_KEYS),
        st.sampled_from(TIED_FINISHES),
    ),
    min_size=1,
    max_size=40,
)


async def _write_tied(conn: Any, rows: list[tuple[Any, ...]]) -> None:
    """One player per row, with a game, a row on each game board and one on the players board."""
    names = [f"t{index:03d}" for index in range(len(rows))]
    await conn.execute(
        insert(players),
        [{"id": name, "name": name, "token_hash": f"{name:0>64}", "created_at": T0} for name in names],
    )
    await conn.execute(
        insert(games),
        [
            {
                "id": f"g{name}",
                "player_id": name,
                "code": CODES[0],
                "cells": 8,
                "status": "won",
                "won": True,
                "moves": 100,
                "duration_ms": 60_000,
                "started_at": finished_at,
                "finished_at": finished_at,
            }
            for name, (_, _, _, finished_at) in zip(names, rows, strict=True)
        ],
    )
    await conn.execute(
        insert(board_bests),
        [
            {"scope": scope, "player_id": name, "sort_key": key, "finished_at": at, "game_id": f"g{name}"}
            for name, (_, _, key, at) in zip(names, rows, strict=True)
            for scope in TIED_GAME_SCOPES
        ],
    )
    await conn.execute(
        insert(player_stats), [_stats_row("a", name, *row[:2]) for name, row in zip(names, rows, strict=True)]
    )


def _stats_row(scope: str, player: str, wins: tuple[int, int], best_score: int) -> dict[str, Any]:
    won, played = wins
    return {
        "scope": scope,
        "player_id": player,
        "played": played,
        "won": won,
        "best_score": best_score,
        "wins_key": boards.wins_key(played=played, won=won),
        "score_key": -best_score,
    }


@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=tied_rows_strategy, limit=st.integers(1, 6))
def test_ranks_among_many_ties_are_the_brute_force_ranks(
    database_url: str, rows: list[tuple[Any, ...]], limit: int
) -> None:
    """Groups of tied rows longer than a page, starting and ending anywhere on it: every page and the
    page around every player rank as the brute force does (a tie shares its rank, "1224")."""

    async def scenario() -> None:
        database = Database.create(database_url, sqlite_synchronous="OFF")
        try:
            async with database.transaction() as conn:
                await dbutil.clear_tables(conn)
                await _write_tied(conn, rows)
            await _assert_ranks_exact(database, page_limit=limit, around_limit=limit)
        finally:
            await database.dispose()

    asyncio.run(scenario())


async def _vm_steps(conn: Any, read: Any) -> int:
    """SQLite virtual machine instructions (by hundreds) that ``read()`` made the database run."""
    driver = (await conn.get_raw_connection()).driver_connection
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0  # go on

    await driver.set_progress_handler(count, 100)
    try:
        await read()
    finally:
        await driver.set_progress_handler(None, 0)
    return steps


async def test_reading_around_a_tied_player_does_not_walk_the_ties(tmp_path: Path) -> None:
    """The page around a player in the middle of a group of tied rows (most of a week's players
    share one or two (wins, games)) costs about as much with 2,000 ties as with 100: neither the rows
    next to the player nor its rank walk the group (they did: 10 ms p99 at 1M games, issue of the
    players' week board)."""
    database = Database.create(await asyncio.to_thread(dbutil.migrated_sqlite_url, tmp_path))
    tied = {"d2026-11-30": 100, "w2026-11-30": 2_000}
    try:
        async with database.transaction() as conn:
            names = [f"t{index:04d}" for index in range(max(tied.values()) + 20)]
            await conn.execute(
                insert(players),
                [
                    {"id": name, "name": name, "token_hash": f"{name:0>64}", "created_at": T0}
                    for name in names
                ],
            )
            for scope, count in tied.items():  # 10 players before the group, 10 after it
                wins = [(2, 2)] * 10 + [(1, 1)] * count + [(1, 2)] * 10
                await conn.execute(
                    insert(player_stats),
                    [_stats_row(scope, name, won, 0) for name, won in zip(names, wins, strict=False)],
                )
            await conn.exec_driver_sql("ANALYZE")
        steps = {}
        async with database.connection() as conn:
            for scope, count in tied.items():
                middle = names[10 + count // 2]
                await boards.player_around(conn, scope, "wins", middle)  # warm
                page = await boards.player_around(conn, scope, "wins", middle)
                assert [row.rank for row in page.rows] == [11] * 20, scope
                steps[scope] = await _vm_steps(
                    conn, lambda scope=scope, middle=middle: boards.player_around(conn, scope, "wins", middle)
                )
    finally:
        await database.dispose()
    assert steps["w2026-11-30"] < 1.5 * steps["d2026-11-30"], steps


async def _game_around_steps(directory: Path, tied: int) -> int:
    """VM steps of the rows around the middle one of ``tied`` game rows of one sort key, half of them
    finished at the same moment too."""
    database = Database.create(await asyncio.to_thread(dbutil.migrated_sqlite_url, directory))
    rows = [((1, 1), 0, 5 << 41, TIED_FINISHES[index % 2]) for index in range(tied)]
    try:
        async with database.transaction() as conn:
            await _write_tied(conn, rows)
            await conn.exec_driver_sql("ANALYZE")
        async with database.connection() as conn:
            middle = f"t{tied // 2:03d}"
            key = (5 << 41, TIED_FINISHES[tied // 2 % 2], f"g{middle}")
            around = boards.statements("games", TIED_GAME_SCOPES[0], key, middle, limit=20)
            statement = around["rows around a player"]
            assert len((await conn.execute(statement)).all()) == 40
            return await _vm_steps(conn, lambda: conn.execute(statement))
    finally:
        await database.dispose()


async def test_the_rows_around_a_tied_game_are_index_ranges(tmp_path: Path) -> None:
    """The rows around a game tied with 2,000 others on its sort key (and with half of them on its
    finish too) take about as much work as among 100: each side bounds every column of the key."""
    for name in ("few", "many"):
        (tmp_path / name).mkdir()
    few = await _game_around_steps(tmp_path / "few", 100)
    many = await _game_around_steps(tmp_path / "many", 2_000)
    assert many < 1.5 * few, (few, many)
