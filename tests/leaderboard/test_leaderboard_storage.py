"""The summaries behind the boards: the migration rebuilds exactly what finishing games maintains, the
queries use their indexes, the packed keys order like the figures, profiles and streaks, and the HTTP
query strings parse with the protocol's rules."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, select

import protocol
from engine import daily_deal
from server.errors import Refusal
from server.services.rankings import daily_streaks, parse_leaderboard_query, parse_profile_path
from server.storage import Database, upgrade_to_head
from server.storage import leaderboards as boards
from server.storage.db import _alembic_config
from server.storage.tables import board_bests, player_stats
from tests.leaderboard.leaderboard_support import CODE, T0, Finished, Recorder, service
from tests.support import dbutil

UTC = dt.UTC


# --------------------------------------------------------------------------- the migration's backfill


async def _summaries(database: Database) -> tuple[list[Any], list[Any]]:
    async with database.connection() as conn:
        bests = (
            await conn.execute(select(board_bests).order_by(board_bests.c.scope, board_bests.c.player_id))
        ).all()
        stats = (
            await conn.execute(select(player_stats).order_by(player_stats.c.scope, player_stats.c.player_id))
        ).all()
    return [tuple(row) for row in bests], [tuple(row) for row in stats]


@pytest.fixture(params=dbutil.BACKENDS)
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database of its own, upgraded to head (PostgreSQL ones are dropped afterwards)."""
    with dbutil.fresh_database(request.param, tmp_path) as url:
        yield url


#: The revision before the summaries' (``7d2a5c0e9b41``, whose upgrade builds them from ``games``).
BEFORE_SUMMARIES = "f1c0b3814649"


def test_the_revision_before_the_summaries_is_the_one_downgraded_to() -> None:
    scripts = ScriptDirectory.from_config(_alembic_config())
    made = [
        script
        for script in scripts.walk_revisions()
        if 'op.create_table(\n        "board_bests"' in Path(str(script.path)).read_text()
    ]
    assert [script.down_revision for script in made] == [BEFORE_SUMMARIES]


async def test_migration_backfill_rebuilds_what_finishing_games_maintains(fresh_url: str) -> None:
    """Games finished through the server's path, then the summaries dropped (downgrade to the revision
    before them) and rebuilt from ``games`` by the migration's SQL: the same rows, key for key."""
    database = Database.create(fresh_url)
    rng = random.Random(7)
    games = []
    for index in range(150):
        day = T0.date() - dt.timedelta(days=rng.randrange(12))
        daily = rng.random() < 0.3
        cells = rng.choice((8, 4, 2))
        finished_at = dt.datetime.combine(day, dt.time(), UTC) + dt.timedelta(
            microseconds=rng.randrange(86_400_000_000)
        )
        games.append(
            Finished(
                f"g{index}",
                f"p{rng.randrange(12)}",
                code=daily_deal(day, cells).code() if daily else rng.choice((CODE, "EO1-C4-AAAAAAB")),
                daily_date=day if daily else None,
                won=rng.random() < 0.5,
                moves=rng.choice((1, 95, 96, 3_000_000)),  # 3,000,000 saturates
                duration_ms=rng.choice((0, 61_000, 2**45)),  # so does 2^45
                score=rng.randrange(0, 700, 5),
                finished_at=finished_at,
            )
        )
    await Recorder(database).add(*games)
    maintained = await _summaries(database)
    await database.dispose()
    assert len(maintained[0]) > 100 and len(maintained[1]) > 12

    await asyncio.to_thread(command.downgrade, _alembic_config(fresh_url), BEFORE_SUMMARIES)
    assert await _tables(fresh_url) >= {"games"} and not await _tables(fresh_url) & {
        "board_bests",
        "player_stats",
    }
    await asyncio.to_thread(upgrade_to_head, fresh_url)
    database = Database.create(fresh_url)
    try:
        assert await _summaries(database) == maintained
    finally:
        await database.dispose()


async def _tables(url: str) -> set[str]:
    database = Database.create(url)
    try:
        async with database.connection() as conn:
            return set(await conn.run_sync(lambda sync: inspect(sync).get_table_names()))
    finally:
        await database.dispose()


# --------------------------------------------------------------------------- keys and plans


def test_packed_keys_order_like_the_figures() -> None:
    rng = random.Random(1)
    figures = [
        (rng.random() < 0.5, rng.randrange(0, 400), rng.randrange(0, 10**7), rng.randrange(0, 2000))
        for _ in range(2000)
    ]
    for order, natural in (
        ("moves", lambda f: (not f[0], f[1], f[2])),
        ("time", lambda f: (not f[0], f[2], f[1])),
        ("score", lambda f: (-f[3],)),
    ):

        def packed(f: tuple[bool, int, int, int], order: Any = order) -> int:
            return boards.game_sort_key(order, won=f[0], moves=f[1], duration_ms=f[2], score=f[3])

        for a, b in itertools.pairwise(figures):
            assert (packed(a) < packed(b)) == (natural(a) < natural(b)), (order, a, b)
            assert (packed(a) == packed(b)) == (natural(a) == natural(b)), (order, a, b)
    assert 0 <= boards.game_sort_key("moves", won=False, moves=10**9, duration_ms=10**15, score=0) < 2**63
    pairs = [(played, won) for played in range(0, 30) for won in range(0, played + 1)]
    for (p1, w1), (p2, w2) in zip(pairs, pairs[::-1], strict=True):
        if p1 == 0 or p2 == 0:
            continue
        natural1 = (-w1, -w1 / p1, -p1)
        natural2 = (-w2, -w2 / p2, -p2)
        key1, key2 = boards.wins_key(played=p1, won=w1), boards.wins_key(played=p2, won=w2)
        assert (key1 < key2) == (natural1 < natural2) and (key1 == key2) == (natural1 == natural2)


def test_scopes_and_buckets() -> None:
    monday, sunday = dt.date(2026, 11, 30), dt.date(2026, 12, 6)
    assert boards.period_bucket("week", sunday) == boards.period_bucket("week", monday) == "w2026-11-30"
    assert boards.period_bucket("week", dt.date(2026, 11, 29)) == "w2026-11-23"
    assert boards.period_bucket("day", sunday) == "d2026-12-06"
    assert boards.period_bucket("all", sunday) == "a"
    assert boards.deal_scope(CODE, "moves", "a") == "D/EO1-C8-AAAAAFA/m/a"
    assert boards.variant_scope(4, "time", "w2026-11-30") == "V/4/t/w2026-11-30"
    assert boards.daily_scope(monday, 2, "score") == "Y/2026-11-30/2/s"


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return dbutil.migrated_sqlite_url(tmp_path)


async def test_queries_use_their_indexes_on_sqlite(sqlite_url: str) -> None:
    database = Database.create(sqlite_url)
    await Recorder(database).add(*(Finished(f"g{i}", f"p{i}", moves=80 + i) for i in range(20)))
    game_key = (boards.game_sort_key("moves", won=True, moves=85, duration_ms=60_000, score=0), T0, "g5")
    try:
        async with database.connection() as conn:
            plans = {}
            for kind, scope, key in (
                ("games", "V/8/m/a", game_key),
                ("wins", "a", (boards.wins_key(played=1, won=1), "p5")),
                ("score", "a", (0, "p5")),
            ):
                for name, statement in boards.statements(kind, scope, key, "p5", limit=20).items():  # type: ignore[arg-type]
                    plans[kind, name] = await boards.explain(conn, statement)
    finally:
        await database.dispose()
    for (kind, name), plan in plans.items():
        text = "\n".join(plan)
        assert "SCAN board_bests" not in text and "SCAN player_stats" not in text, (kind, name, text)
        assert "SCAN games" not in text and "SCAN players" not in text, (kind, name, text)
        assert "SCAN rank_buckets" not in text, (kind, name, text)
        # No sort of a board's rows: the index gives the order. The page around a player reads the
        # rows before it and the rows from it in one statement, each side in index order, and puts
        # the two sides' results (at most 2 x limit rows) in board order: that sort alone is allowed.
        assert _sorted_nodes(plan) <= _parents_of_subquery_scans(plan), (kind, name, text)
        assert name == "rows around a player" or "TEMP B-TREE" not in text, (kind, name, text)
    assert "COVERING INDEX ix_board_bests_scope_sort_key_finished_at_game_id" in "\n".join(
        plans["games", "rank of a row"]
    )
    # A rank sums the buckets before the row's: a range of their primary key (scope, board, lo < ?).
    for kind in ("games", "wins", "score"):
        rank_plan = "\n".join(plans[kind, "rank of a row"])
        assert "SEARCH rank_buckets USING PRIMARY KEY (scope=? AND board=? AND lo<?)" in rank_plan, rank_plan


def _parent(line: str) -> str:
    """The parent node of a line of `boards.explain` on SQLite ("id:parent detail")."""
    return line.split()[0].split(":")[1]


def _sorted_nodes(plan: list[str]) -> set[str]:
    return {_parent(line) for line in plan if "TEMP B-TREE" in line}


def _parents_of_subquery_scans(plan: list[str]) -> set[str]:
    """The nodes that read a subquery's results (``SCAN anon_N``), not a table or an index."""
    return {_parent(line) for line in plan if re.search(r"\bSCAN anon_\d+$", line)}


# --------------------------------------------------------------------------- profiles


def test_daily_streaks() -> None:
    day = dt.date(2026, 11, 30)

    def days(*offsets: int) -> list[dt.date]:
        return sorted(day - dt.timedelta(days=offset) for offset in offsets)

    assert daily_streaks([], day) == (0, 0)
    assert daily_streaks(days(0), day) == (1, 1)
    assert daily_streaks(days(1, 2), day) == (2, 2)  # today's not won yet: the streak holds
    assert daily_streaks(days(2, 3), day) == (0, 2)  # yesterday missed: over
    assert daily_streaks(days(0, 1, 2, 5, 6, 7, 8), day) == (3, 4)
    assert daily_streaks(days(10, 11, 12, 13, 14, 15, 0), day) == (1, 6)


async def test_profile_figures_best_games_streak_and_recent(database: Database) -> None:
    today = T0.date()
    games = Recorder(database)
    played = [
        Finished(
            "c8-good", "ann", moves=90, duration_ms=300_000, score=520, finished_at=T0 - dt.timedelta(days=9)
        ),
        Finished(
            "c8-best", "ann", moves=80, duration_ms=900_000, score=100, finished_at=T0 - dt.timedelta(days=8)
        ),
        Finished("c8-lost", "ann", won=False, moves=10, score=990, finished_at=T0 - dt.timedelta(days=7)),
        Finished(
            "c2-lost", "ann", code="EO1-C2-AAAAAFA", won=False, moves=5, finished_at=T0 - dt.timedelta(days=7)
        ),
        Finished("c4-won", "ann", code="EO1-C4-AAAAAFA", moves=120, finished_at=T0 - dt.timedelta(days=6)),
    ]
    # Daily wins on days -5, -4 (a run of 2, broken), then -1 and today (the current run of 2); a lost
    # daily on day -3 and a daily won twice on day -1 count once.
    for offset, won in ((5, True), (4, True), (3, False), (1, True), (1, True), (0, True)):
        day = today - dt.timedelta(days=offset)
        played.append(
            Finished(
                f"daily-{offset}-{len(played)}",
                "ann",
                code=daily_deal(day).code(),
                daily_date=day,
                won=won,
                moves=150,
                finished_at=T0 - dt.timedelta(days=offset, minutes=len(played)),
            )
        )
    played += [
        Finished(f"bob{index}", "bob", finished_at=T0 + dt.timedelta(minutes=index)) for index in range(12)
    ]
    await games.add(*played)
    svc = service(database, T0 + dt.timedelta(hours=1))
    profile: dict[str, Any] = (await svc.profile("ann", request_id=3)).to_wire()
    protocol.validate_server_message(profile)
    assert profile["id"] == 3 and profile["player"] == {"id": "ann", "name": "name-ann"}
    assert (profile["played"], profile["won"], profile["best_score"]) == (11, 8, 990)
    assert profile["win_rate"] == 8 / 11
    assert [(game["cells"], game["game"]) for game in profile["best"]] == [(8, "c8-best"), (4, "c4-won")]
    assert profile["streak"] == {"current": 2, "best": 2}
    recent = [game["game"] for game in profile["recent"]]
    assert len(recent) == 10 and recent[0].startswith("daily-0") and recent[-1] == "c8-best"
    bob: dict[str, Any] = (await svc.profile("bob")).to_wire()
    assert [game["game"] for game in bob["recent"]] == [f"bob{index}" for index in range(11, 1, -1)]
    assert bob["streak"] == {"current": 0, "best": 0}
    with pytest.raises(Refusal) as refused:
        await svc.profile("nobody")
    assert refused.value.code == "not_found"


async def test_profile_of_a_player_without_finished_games(database: Database) -> None:
    games = Recorder(database)
    await games.add(Finished("g1", "ann"))
    async with database.transaction() as conn:
        from server.storage import PlayerRecord, repository

        await repository.insert_player(conn, PlayerRecord("new", "New", "f" * 64, T0))
    profile = (await service(database).profile("new")).to_wire()
    protocol.validate_server_message(profile)
    assert (profile["played"], profile["won"], profile["win_rate"], profile["best"], profile["recent"]) == (
        0,
        0,
        0.0,
        [],
        [],
    )


# --------------------------------------------------------------------------- HTTP query strings


def test_query_string_takes_the_message_fields() -> None:
    request = parse_leaderboard_query("board=variant&cells=4&period=week&order=time&limit=5")
    assert request == protocol.LeaderboardRequest(
        protocol.Board.VARIANT, cells=4, period=protocol.Period.WEEK, order=protocol.Order.TIME, limit=5
    )
    daily = parse_leaderboard_query("board=daily&date=2026-11-30&around=p_3fQ9")
    assert daily.date == dt.date(2026, 11, 30) and daily.around == "p_3fQ9" and daily.period is None
    coded = parse_leaderboard_query("board=deal&code=EO1-C8-AAAAAFA&after=abc")
    assert coded.deal is not None and coded.deal.code() == CODE and coded.after == "abc"


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("", "leaderboard: missing field 'board'"),
        (
            "board=weekly",
            "board must be one of deal, variant, daily, players, rating, not the string 'weekly'",
        ),
        ("board=variant&cells=3", "cells must be 8, 4 or 2, not 3"),
        ("board=variant&cells=eight", "cells must be 8, 4 or 2, not the string 'eight'"),
        ("board=variant&limit=0", "limit must be in 1..100, not 0"),
        ("board=variant&limit=-1", "limit must be an integer, not the string '-1'"),
        ("board=variant&limit=99999999999999999999", "limit must be an integer, not the string"),
        ("board=variant&period=month", "period must be one of day, week, all, not the string 'month'"),
        ("board=players&order=moves", "order of the players board must be one of wins, score"),
        ("board=daily&date=2026-02-30", "date must be a real date YYYY-MM-DD"),
        ("board=deal", "leaderboard: the deal board needs a 'code'"),
        ("board=variant&code=EO1-C8-AAAAAFA", "leaderboard: the variant board takes no 'code'"),
        ("board=variant&around=a%20b", "around must be 1..32 characters"),
        ("board=variant&after=x&around=p1", "'after' and 'around' exclude each other"),
        ("board=variant&board=players", "board: given more than once"),
        ("board=variant&type=leaderboard", "unexpected parameter 'type'"),
        ("board=variant&id=1", "unexpected parameter 'id'"),
        ("board=variant&colour=red", "unexpected field(s) 'colour'"),
        ("board", "malformed query"),
        ("&".join(f"x{index}=1" for index in range(40)), "malformed query"),
    ],
)
def test_query_string_errors_name_the_parameter(query: str, message: str) -> None:
    with pytest.raises(protocol.ProtocolError) as refused:
        parse_leaderboard_query(query)
    assert refused.value.code is protocol.ErrorCode.BAD_REQUEST
    assert message in refused.value.message


def test_profile_path_checks_the_player_id() -> None:
    assert parse_profile_path("p_3fQ9") == "p_3fQ9"
    for bad in ("", "a b", "x" * 33, "p/1"):
        with pytest.raises(protocol.ProtocolError, match="player must be"):
            parse_profile_path(bad)
