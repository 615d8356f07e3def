"""The boards, read through `LeaderboardService` on SQLite and PostgreSQL: orders, each player's best
game once, ties, periods across UTC midnight, cursors (also while games keep finishing), ``around`` at
both edges, and agreement with an oracle that ranks from the definitions."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import random

import pytest

from engine import daily_deal
from server.errors import Refusal
from server.storage import Database
from tests.leaderboard.leaderboard_support import (
    CODE,
    T0,
    Finished,
    Recorder,
    ask,
    expected_game_board,
    expected_players_board,
    game_rows,
    in_period,
    player_rows,
    service,
    whole_board,
)

UTC = dt.UTC
MINUTE = dt.timedelta(minutes=1)


# --------------------------------------------------------------------------- orders and best games


async def test_default_order_is_won_then_moves_then_time_then_earliest_finish(database: Database) -> None:
    games = Recorder(database)
    await games.add(
        Finished("g-lost-few", "lost", won=False, moves=10, duration_ms=1_000),
        Finished("g-slow", "slow", moves=90, duration_ms=500_000),
        Finished("g-fast", "fast", moves=90, duration_ms=400_000),
        Finished("g-few", "few", moves=80, duration_ms=900_000),
        Finished("g-late", "late", moves=90, duration_ms=400_000, finished_at=T0 + MINUTE),
    )
    rows = (await ask(service(database), board="deal", code=CODE))["rows"]
    assert [(row["rank"], row["game"]) for row in rows] == [
        (1, "g-few"),
        (2, "g-fast"),
        (2, "g-late"),  # same figures: same rank, the earlier finish first
        (4, "g-slow"),
        (5, "g-lost-few"),  # every won game comes before any lost one
    ]
    first = rows[0]
    assert first["player"] == {"id": "few", "name": "name-few"}
    assert (first["code"], first["cells"], first["won"], first["moves"], first["duration_ms"]) == (
        CODE,
        8,
        True,
        80,
        900_000,
    )
    assert first["finished_at"] == "2026-11-30T12:00:00.000Z"


async def test_each_player_once_with_their_best_game_of_each_order(database: Database) -> None:
    games = Recorder(database)
    await games.add(
        Finished("a-fewest-moves", "ann", moves=70, duration_ms=900_000, score=100),
        Finished("a-fastest", "ann", moves=95, duration_ms=100_000, score=200, finished_at=T0 + MINUTE),
        Finished("a-top-score", "ann", won=False, moves=300, duration_ms=2_000_000, score=990),
        Finished("b-only", "bob", moves=80, duration_ms=200_000, score=500),
    )
    svc = service(database, T0 + MINUTE)
    by = {
        order: [
            (row["player"]["id"], row["game"])
            for row in (await ask(svc, board="variant", order=order))["rows"]
        ]
        for order in ("moves", "time", "score")
    }
    assert by["moves"] == [("ann", "a-fewest-moves"), ("bob", "b-only")]
    assert by["time"] == [("ann", "a-fastest"), ("bob", "b-only")]
    assert by["score"] == [("ann", "a-top-score"), ("bob", "b-only")]


async def test_a_worse_game_later_keeps_the_best(database: Database) -> None:
    games = Recorder(database)
    await games.add(Finished("best", "ann", moves=80))
    await games.add(Finished("worse", "ann", moves=81, finished_at=T0 + MINUTE))
    await games.add(Finished("tied-later", "ann", moves=80, finished_at=T0 + 2 * MINUTE))
    rows = (await ask(service(database, T0), board="deal", code=CODE))["rows"]
    assert [row["game"] for row in rows] == ["best"]


async def test_players_board_orders_by_wins_then_win_rate_then_games(database: Database) -> None:
    games = Recorder(database)
    plan = {  # player: (played, won)
        "three-of-9": (9, 3),
        "three-of-4": (4, 3),
        "two-of-2": (2, 2),
        "two-of-2-too": (2, 2),
        "none-of-5": (5, 0),
        "none-of-1": (1, 0),
    }
    number = 0
    for player, (played, won) in plan.items():
        for index in range(played):
            number += 1
            await games.add(Finished(f"g{number}", player, won=index < won, score=10 * number))
    rows = (await ask(service(database), board="players"))["rows"]
    assert player_rows(rows) == [
        (1, "three-of-4", 4, 3),
        (2, "three-of-9", 9, 3),
        (3, "two-of-2", 2, 2),
        (3, "two-of-2-too", 2, 2),
        (5, "none-of-5", 5, 0),  # no wins: more games first
        (6, "none-of-1", 1, 0),
    ]
    assert rows[0]["win_rate"] == 0.75 and rows[4]["win_rate"] == 0.0
    by_score = (await ask(service(database), board="players", order="score"))["rows"]
    assert by_score[0]["player"]["id"] == "none-of-1" and by_score[0]["best_score"] == 10 * number


# --------------------------------------------------------------------------- ties and pages


async def test_ties_share_a_rank_across_pages(database: Database) -> None:
    games = Recorder(database)
    await games.add(
        *(
            Finished(f"g{index}", f"p{index}", moves=80 + index // 3, finished_at=T0 + index * MINUTE)
            for index in range(9)
        )
    )
    svc = service(database)
    first = await ask(svc, board="variant", limit=4)
    second = await ask(svc, board="variant", limit=4, after=first["next"])
    third = await ask(svc, board="variant", limit=4, after=second["next"])
    ranks = [row["rank"] for page in (first, second, third) for row in page["rows"]]
    assert ranks == [1, 1, 1, 4, 4, 4, 7, 7, 7]
    assert "next" not in third
    assert [row["game"] for row in second["rows"]] == ["g4", "g5", "g6", "g7"]


async def test_boards_agree_with_the_oracle(database: Database) -> None:
    """Random games; every board, order and period, read in pages of 7, is what the definitions say."""
    rng = random.Random(20261130)
    codes = [CODE, "EO1-C8-AAAAAAB", "EO1-C4-AAAAAFA", "EO1-C2-AAAAAFA"]
    days = [T0.date() - dt.timedelta(days=offset) for offset in range(10)]
    batch = []
    for index in range(240):
        day = rng.choice(days)
        daily = rng.random() < 0.3
        cells = rng.choice((8, 4, 2))
        code = daily_deal(day, cells).code() if daily else rng.choice(codes)
        finished_at = dt.datetime.combine(day, dt.time(), UTC) + dt.timedelta(seconds=rng.randrange(86_400))
        batch.append(
            Finished(
                f"g{index:03d}",
                f"p{rng.randrange(25):02d}",
                code=code,
                daily_date=day if daily else None,
                won=rng.random() < 0.6,
                moves=rng.choice((90, 100, 110)),  # few values: many ties
                duration_ms=rng.choice((60_000, 90_000)),
                score=rng.choice((0, 300, 520)),
                finished_at=finished_at,
            )
        )
    recorder = Recorder(database)
    await recorder.add(*batch)
    now = dt.datetime.combine(T0.date(), dt.time(18), UTC)
    svc = service(database, now)
    for period in ("day", "week", "all"):
        recent = [game for game in batch if in_period(game, period, now)]
        for order in ("moves", "time", "score"):
            for code in codes:
                rows = await whole_board(svc, limit=7, board="deal", code=code, period=period, order=order)
                expected = expected_game_board([g for g in recent if g.code == code], order)
                assert game_rows(rows) == expected, (code, period, order)
            for cells in (8, 4, 2):
                rows = await whole_board(
                    svc, limit=7, board="variant", cells=cells, period=period, order=order
                )
                expected = expected_game_board([g for g in recent if g.cells == cells], order)
                assert game_rows(rows) == expected, (cells, period, order)
        for players_order in ("wins", "score"):
            rows = await whole_board(svc, limit=7, board="players", period=period, order=players_order)
            assert player_rows(rows) == expected_players_board(recent, players_order), (period, players_order)
    for day in days[:4]:
        for cells in (8, 4, 2):
            rows = await whole_board(svc, limit=7, board="daily", date=day.isoformat(), cells=cells)
            of_the_day = [g for g in batch if g.daily_date == day and g.cells == cells]
            assert game_rows(rows) == expected_game_board(of_the_day, "moves"), (day, cells)


# --------------------------------------------------------------------------- periods


async def test_periods_split_at_utc_midnight_and_on_monday(database: Database) -> None:
    sunday_last_ms = dt.datetime(2026, 11, 29, 23, 59, 59, 999_000, tzinfo=UTC)
    monday_first_ms = dt.datetime(2026, 11, 30, 0, 0, tzinfo=UTC)
    # 01:00 in UTC+02:00 is still Sunday 23:00 UTC: periods follow UTC, not the writer's offset.
    sunday_in_another_zone = dt.datetime(2026, 11, 30, 1, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    games = Recorder(database)
    await games.add(
        Finished("sun", "sun", finished_at=sunday_last_ms),
        Finished("sun-tz", "sun-tz", finished_at=sunday_in_another_zone),
        Finished("mon", "mon", finished_at=monday_first_ms),
    )

    async def listed(now: dt.datetime, board: str, period: str) -> set[str]:
        svc = service(database, now)
        fields = {"board": board, "period": period, **({"code": CODE} if board == "deal" else {})}
        return {row["player"]["id"] for row in (await ask(svc, **fields))["rows"]}

    for board in ("deal", "variant", "players"):
        assert await listed(sunday_last_ms, board, "day") == {"sun", "sun-tz"}
        assert await listed(monday_first_ms, board, "day") == {"mon"}
        # Monday starts a new ISO week; Sunday ends the old one.
        assert await listed(monday_first_ms, board, "week") == {"mon"}
        assert await listed(sunday_last_ms, board, "week") == {"sun", "sun-tz"}
        assert await listed(monday_first_ms + dt.timedelta(days=6, hours=23), board, "week") == {"mon"}
        assert await listed(monday_first_ms + dt.timedelta(days=7), board, "week") == set()
        assert await listed(monday_first_ms, board, "all") == {"sun", "sun-tz", "mon"}


async def test_the_best_of_a_period_is_the_best_within_it(database: Database) -> None:
    games = Recorder(database)
    yesterday = T0 - dt.timedelta(days=1)
    await games.add(
        Finished("old-great", "ann", moves=60, finished_at=T0 - dt.timedelta(days=8)),
        Finished("yesterday-good", "ann", moves=70, finished_at=yesterday),
        Finished("today-fair", "ann", moves=90, finished_at=T0),
    )
    svc = service(database, T0)
    game_of = {
        period: [row["game"] for row in (await ask(svc, board="variant", period=period))["rows"]]
        for period in ("day", "week", "all")
    }
    assert game_of == {"day": ["today-fair"], "week": ["today-fair"], "all": ["old-great"]}
    # T0 is a Monday: yesterday belongs to last week. On Tuesday both fall in the week and the day moves.
    tuesday = service(database, T0 + dt.timedelta(days=1))
    assert (await ask(tuesday, board="variant", period="day"))["rows"] == []
    assert [row["game"] for row in (await ask(tuesday, board="variant", period="week"))["rows"]] == [
        "today-fair"
    ]


async def test_a_cursor_keeps_its_day_across_midnight(database: Database) -> None:
    games = Recorder(database)
    await games.add(
        *(Finished(f"g{index}", f"p{index}", moves=80 + index, finished_at=T0) for index in range(5))
    )
    await games.add(Finished("tomorrow", "late", moves=1, finished_at=T0 + dt.timedelta(days=1)))
    first = await ask(service(database, T0), board="variant", period="day", limit=2)
    after_midnight = service(database, T0 + dt.timedelta(days=1))
    rest = await whole_board(after_midnight, limit=2, board="variant", period="day", after=first["next"])
    assert [row["player"]["id"] for row in first["rows"] + rest] == [f"p{index}" for index in range(5)]
    fresh = await ask(after_midnight, board="variant", period="day")
    assert [row["player"]["id"] for row in fresh["rows"]] == ["late"]


async def test_daily_board_of_a_date_and_of_today(database: Database) -> None:
    today, yesterday = T0.date(), T0.date() - dt.timedelta(days=1)
    games = Recorder(database)
    await games.add(
        Finished("d-today", "ann", code=daily_deal(today).code(), daily_date=today),
        Finished("d-yesterday", "bob", code=daily_deal(yesterday).code(), daily_date=yesterday),
        Finished("d-today-c4", "cy", code=daily_deal(today, 4).code(), daily_date=today),
        # The same deal played by its code is not the daily challenge.
        Finished("by-code", "dan", code=daily_deal(today).code()),
    )
    svc = service(database, T0)
    assert [row["game"] for row in (await ask(svc, board="daily"))["rows"]] == ["d-today"]
    assert [row["game"] for row in (await ask(svc, board="daily", cells=4))["rows"]] == ["d-today-c4"]
    dated = await ask(svc, board="daily", date=yesterday.isoformat())
    assert [row["game"] for row in dated["rows"]] == ["d-yesterday"]
    assert dated["rows"][0]["code"] == daily_deal(yesterday).code()
    deal_board = await ask(svc, board="deal", code=daily_deal(today).code())
    assert {row["game"] for row in deal_board["rows"]} == {"d-today", "by-code"}


# --------------------------------------------------------------------------- cursors


async def test_cursor_pages_stay_correct_while_games_finish(database: Database) -> None:
    """New games arrive between pages (better, worse, and improvements of rows already seen): every row
    present at the start is listed once, and each page's ranks are those of the board at that moment."""
    games = Recorder(database)
    await games.add(
        *(
            Finished(f"start{index}", f"p{index:02d}", moves=100 + index, finished_at=T0 - MINUTE)
            for index in range(30)
        )
    )
    svc = service(database)
    seen: list[str] = []
    after: dict[str, str] = {}
    newcomer = 0

    async def finish_more() -> None:
        nonlocal newcomer
        newcomer += 1
        extra = [
            Finished(f"new-top{newcomer}", f"top{newcomer}", moves=50 + newcomer, finished_at=T0),
            Finished(f"new-low{newcomer}", f"low{newcomer}", moves=500 + newcomer, finished_at=T0),
        ]
        if seen:  # a player already listed improves: their row moves up, behind the cursor
            extra.append(Finished(f"better{newcomer}", seen[0], moves=40, finished_at=T0))
        await games.add(*extra)

    while True:
        page, _ = await asyncio.gather(ask(svc, board="variant", limit=4, **after), finish_more())
        rows = page["rows"]
        # Ranks of the page agree with the whole board as it is now (reading it after the insert
        # finished: a row's rank can only grow as better games arrive).
        board_now = {row["game"]: row["rank"] for row in await whole_board(svc, limit=100, board="variant")}
        for row in rows:
            assert row["rank"] <= board_now[row["game"]] or row["game"] not in board_now
        seen.extend(row["player"]["id"] for row in rows if row["player"]["id"].startswith("p"))
        if "next" not in page:
            break
        after = {"after": page["next"]}
    assert sorted(seen) == [f"p{index:02d}" for index in range(30)]
    assert len(seen) == len(set(seen))


async def test_cursor_of_another_board_or_garbage_is_a_bad_request(database: Database) -> None:
    games = Recorder(database)
    await games.add(*(Finished(f"g{index}", f"p{index}", moves=80 + index) for index in range(3)))
    svc = service(database)
    cursor = (await ask(svc, board="variant", limit=1))["next"]
    for fields in (
        {"board": "variant", "order": "time"},
        {"board": "variant", "cells": 4},
        {"board": "variant", "period": "week"},
        {"board": "deal", "code": CODE},
        {"board": "players"},
    ):
        with pytest.raises(Refusal) as refused:
            await ask(svc, **fields, after=cursor)
        assert refused.value.code == "bad_request" and refused.value.message.startswith("after:"), fields
    for garbage in ("x", "AAAA", "not!base64", cursor[:-3], "Aa" * 50):
        with pytest.raises(Refusal) as refused:
            await ask(svc, board="variant", after=garbage)
        assert refused.value.code == "bad_request" and refused.value.message.startswith("after:"), garbage
    players_by_wins = (await ask(svc, board="players", limit=1))["next"]
    with pytest.raises(Refusal) as refused:  # the players board's order is part of its cursor too
        await ask(svc, board="players", order="score", after=players_by_wins)
    assert refused.value.code == "bad_request"
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    forged = base64.urlsafe_b64encode(raw[:-2] + b"\x00x").rstrip(b"=").decode()  # a NUL in the id
    with pytest.raises(Refusal) as refused:
        await ask(svc, board="variant", after=forged)
    assert refused.value.code == "bad_request"


# --------------------------------------------------------------------------- around


async def _ten_players(database: Database) -> None:
    games = Recorder(database)
    await games.add(
        *(Finished(f"g{index}", f"p{index}", moves=80 + index, finished_at=T0) for index in range(10))
    )
    await games.add(*(Finished(f"h{index}", f"p{index}", won=index < 5) for index in range(1, 10)))


async def test_around_centres_the_player(database: Database) -> None:
    await _ten_players(database)
    svc = service(database)
    reply = await ask(svc, board="variant", around="p5", limit=5)
    assert [(row["rank"], row["player"]["id"]) for row in reply["rows"]] == [
        (4, "p3"),
        (5, "p4"),
        (6, "p5"),
        (7, "p6"),
        (8, "p7"),
    ]
    rest = await ask(svc, board="variant", after=reply["next"])
    assert [row["player"]["id"] for row in rest["rows"]] == ["p8", "p9"]
    # Players: p1..p4 won 2 of 2, p0 1 of 1, p5..p9 1 of 2.
    players = await ask(svc, board="players", around="p5", limit=3)
    assert [(row["rank"], row["player"]["id"]) for row in players["rows"]] == [
        (5, "p0"),
        (6, "p5"),
        (6, "p6"),
    ]


async def test_around_at_the_top_and_bottom_edges(database: Database) -> None:
    await _ten_players(database)
    svc = service(database)
    top = await ask(svc, board="variant", around="p0", limit=5)
    assert [(row["rank"], row["player"]["id"]) for row in top["rows"]] == [
        (1, "p0"),
        (2, "p1"),
        (3, "p2"),
        (4, "p3"),
        (5, "p4"),
    ]
    assert "next" in top
    bottom = await ask(svc, board="variant", around="p9", limit=5)
    assert [(row["rank"], row["player"]["id"]) for row in bottom["rows"]] == [
        (6, "p5"),
        (7, "p6"),
        (8, "p7"),
        (9, "p8"),
        (10, "p9"),
    ]
    assert "next" not in bottom
    assert [
        row["player"]["id"] for row in (await ask(svc, board="variant", around="p1", limit=4))["rows"]
    ] == [
        "p0",
        "p1",
        "p2",
        "p3",
    ]
    alone = await ask(svc, board="variant", around="p9", limit=1)
    assert [(row["rank"], row["player"]["id"]) for row in alone["rows"]] == [(10, "p9")]
    everyone = await ask(svc, board="variant", around="p4", limit=100)
    assert len(everyone["rows"]) == 10 and "next" not in everyone


async def test_around_a_player_without_a_row_is_empty(database: Database) -> None:
    await _ten_players(database)
    svc = service(database)
    assert (await ask(svc, board="variant", around="nobody"))["rows"] == []
    assert (await ask(svc, board="variant", cells=4, around="p1"))["rows"] == []
    assert (await ask(svc, board="players", period="day", around="p1"))["rows"] != []


async def test_around_on_the_players_board_edges(database: Database) -> None:
    await _ten_players(database)
    svc = service(database)
    everyone = await whole_board(svc, limit=100, board="players")
    ids = [row["player"]["id"] for row in everyone]
    top = await ask(svc, board="players", around=ids[0], limit=4)
    assert [row["player"]["id"] for row in top["rows"]] == ids[:4]
    bottom = await ask(svc, board="players", around=ids[-1], limit=4)
    assert [row["player"]["id"] for row in bottom["rows"]] == ids[-4:]
    middle = await ask(svc, board="players", around=ids[5], limit=3)
    assert [row["player"]["id"] for row in middle["rows"]] == ids[4:7]
    assert [row["rank"] for row in middle["rows"]] == [row["rank"] for row in everyone[4:7]]
