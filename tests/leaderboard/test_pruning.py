"""Pruning the closed day and week buckets: the current and the previous bucket of each period are kept
and the older ones deleted, in bounded batches, by racing pruners alike; the boards of the current
periods read the same; a cursor of the previous bucket pages on, one of an older bucket is refused."""

from __future__ import annotations

import asyncio
import datetime as dt
import random
from typing import Any

import pytest
from sqlalchemy import select

from engine import daily_deal
from server.clock import utc_now
from server.errors import Refusal
from server.services import pruning as pruning_service
from server.services.pruning import PRUNE_GRACE, BoardPruning, Pruned, Rows
from server.storage import Database, PlayerRecord, StorageUnavailable, repository
from server.storage import pruning as storage
from server.storage.tables import board_bests, player_stats
from tests.leaderboard.leaderboard_support import CODE, T0, Finished, Recorder, ask, service, whole_board
from tests.support import serverutil

UTC = dt.UTC
#: Wednesday 2026-12-16, noon: the kept buckets are the days 12-15 and 12-16, the weeks of 12-07 and 12-14.
NOW = T0 + dt.timedelta(days=16)
KEPT_DAYS = {"2026-12-15", "2026-12-16"}
KEPT_WEEKS = {"2026-12-07", "2026-12-14"}
CODES = (CODE, "EO1-C4-AAAAAAB", "EO1-C2-AAAAAAC")


async def _summaries(database: Database) -> tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]:
    async with database.connection() as conn:
        bests = (await conn.execute(select(board_bests))).all()
        stats = (await conn.execute(select(player_stats))).all()
    return {tuple(row) for row in bests}, {tuple(row) for row in stats}


def _kept(scope: str) -> bool:
    """Whether a row of ``scope`` outlives the pruning at `NOW`, from the scope's text alone."""
    bucket = (
        scope.removeprefix("B/").split("/")[-1] if scope.startswith(("D/", "B/D/", "V/", "B/V/")) else None
    )
    if scope.removeprefix("B/").startswith("Y/"):
        return True  # any day's daily board can be asked for by its date
    if bucket is None:  # a players board's scope is its bucket
        bucket = scope.removeprefix("B/")
    if bucket == "a":
        return True
    return bucket[1:] in (KEPT_DAYS if bucket[0] == "d" else KEPT_WEEKS)


async def _three_weeks_of_games(database: Database, *, count: int = 240) -> Recorder:
    """Games of people and bots over the 17 days to `NOW`, on three deals and the dailies."""
    rng = random.Random(23)
    games = []
    for index in range(count):
        day = T0.date() + dt.timedelta(days=rng.randrange(17))
        daily = rng.random() < 0.25
        cells = rng.choice((8, 4, 2))
        finished_at = dt.datetime.combine(day, dt.time(), UTC) + dt.timedelta(
            microseconds=rng.randrange(12 * 3_600_000_000)  # before noon: NOW's day too
        )
        games.append(
            Finished(
                f"g{index}",
                f"{'bot' if index % 5 == 0 else 'p'}{rng.randrange(15)}",
                code=daily_deal(day, cells).code() if daily else rng.choice(CODES),
                daily_date=day if daily else None,
                won=rng.random() < 0.5,
                moves=rng.randrange(60, 200),
                duration_ms=rng.randrange(30_000, 900_000),
                score=rng.randrange(0, 700, 5),
                finished_at=finished_at,
            )
        )
    recorder = Recorder(database)
    await _add_bots(database, recorder)
    await recorder.add(*games)
    return recorder


async def _add_bots(database: Database, recorder: Recorder) -> None:
    """The players ``bot0`` .. ``bot14``, bots: their games rank on the ``B/`` scopes."""
    async with database.transaction() as conn:
        for index in range(15):
            player = f"bot{index}"
            await repository.insert_player(
                conn, PlayerRecord(player, player, f"{player:0>64}", T0 - dt.timedelta(days=400), bot=True)
            )
            recorder.players.add(player)


async def _boards_now(database: Database, now: dt.datetime) -> dict[str, list[dict[str, Any]]]:
    """Every board of the current periods, read whole, people's and bots'."""
    svc = service(database, now)
    asked: list[dict[str, Any]] = []
    for bots in (False, True):
        for period in ("day", "week", "all"):
            asked += [
                {"board": "deal", "code": code, "period": period, "order": order, "bots": bots}
                for code in CODES
                for order in ("moves", "time", "score")
            ]
            asked += [
                {"board": "variant", "cells": cells, "period": period, "bots": bots} for cells in (8, 4, 2)
            ]
            asked += [
                {"board": "players", "period": period, "order": order, "bots": bots}
                for order in ("wins", "score")
            ]
        asked += [
            {"board": "daily", "cells": cells, "date": "2026-12-01", "bots": bots} for cells in (8, 4, 2)
        ]
    return {repr(fields): await whole_board(svc, limit=3, **fields) for fields in asked}


def _pruner(database: Database, now: dt.datetime = NOW, **options: Any) -> BoardPruning:
    return BoardPruning(database, clock=lambda: now, pause=0, **options)


# --------------------------------------------------------------------------- what is kept


def test_kept_buckets_are_the_current_and_the_previous() -> None:
    wednesday = dt.date(2026, 12, 16)
    assert storage.kept_from("day", wednesday) == dt.date(2026, 12, 15)
    assert storage.kept_from("week", wednesday) == dt.date(2026, 12, 7)
    assert storage.kept_from("week", dt.date(2026, 12, 14)) == dt.date(2026, 12, 7)  # a Monday
    assert storage.is_kept("week", dt.date(2026, 12, 13), wednesday)  # last week's Sunday
    assert not storage.is_kept("week", dt.date(2026, 12, 6), wednesday)
    assert storage.is_kept("day", dt.date(2026, 12, 15), wednesday)
    assert not storage.is_kept("day", dt.date(2026, 12, 14), wednesday)


async def test_pruning_keeps_current_and_previous_buckets_and_deletes_older(database: Database) -> None:
    await _three_weeks_of_games(database)
    before = await _summaries(database)
    boards_before = await _boards_now(database, NOW)

    # The pruner's day is an hour late: half an hour after midnight, the day before yesterday stays.
    half_past_midnight = dt.datetime.combine(NOW.date(), dt.time(0, 30), UTC)
    assert _pruner(database, half_past_midnight).today() == NOW.date() - dt.timedelta(days=1)
    assert _pruner(database, half_past_midnight + PRUNE_GRACE).today() == NOW.date()

    pruned = await _pruner(database, batch=4).prune()

    after = await _summaries(database)
    assert after == ({row for row in before[0] if _kept(row[0])}, {row for row in before[1] if _kept(row[0])})
    deleted_bests, deleted_stats = before[0] - after[0], before[1] - after[1]
    assert len(deleted_bests) > 300 and len(deleted_stats) > 50  # the test is not vacuous
    assert any(row[0].startswith("B/") for row in deleted_bests | deleted_stats)  # bots' buckets too
    assert (pruned.board_rows, pruned.stats_rows) == (len(deleted_bests), len(deleted_stats))
    # 15 days and 2 weeks closed; every batch deleted 4 rows at most.
    assert pruned.buckets == 15 + 1
    assert pruned.transactions >= (len(deleted_bests) + len(deleted_stats)) / 4
    assert await _boards_now(database, NOW) == boards_before
    assert await _pruner(database).prune() == Pruned()  # nothing left: idempotent


def test_rows_fit_the_hold_at_the_last_transactions_pace() -> None:
    first = Rows.first(hold=0.002, most=500)
    assert first.next == 50  # before any pace is known: a small statement
    assert first.after(50, 0.001).next == 100  # twice as fast as needed: twice as many, no more
    assert first.after(50, 0.0001).next == 100
    assert Rows(200, 0.002).after(200, 0.004).next == 100  # twice too slow: half as many
    assert Rows(200, 0.002).after(0, 0.004).next == 200  # nothing found: no pace learnt
    assert Rows(200, 0.002).after(200, 1.0).next == 50  # however slow, a run goes on
    # A statement that waited for the lock (50 ms for 100 rows) after quick ones keeps their pace.
    quick = Rows(100, 0.002, paces=(0.00002,))
    assert quick.after(100, 0.050).next == 100
    waited_long_ago = Rows(100, 0.002, paces=(0.00002,) + (0.0001,) * 7)
    assert waited_long_ago.after(100, 0.005).next == 50  # eight slow ones: the pace is slower now
    assert Rows(400, 0.002).after(400, 0.0001).next == 500  # at most the batch
    assert Rows.first(hold=0.002, most=4) == Rows(4, 0.002, least=4, most=4)


async def test_the_pruner_holds_the_lock_no_longer_than_its_bound(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows that cost the same each (a fake clock: 0.5 ms a statement and 20 µs a row): no delete
    holds the lock past the 2 ms bound, and every closed bucket is pruned all the same."""
    await _three_weeks_of_games(database)
    before = await _summaries(database)
    now = 0.0

    def costly(delete: Any) -> Any:
        async def timed(*args: Any) -> int:
            nonlocal now
            deleted: int = await delete(*args)
            now += 0.0005 + 0.00002 * deleted
            return deleted

        return timed

    monkeypatch.setattr(storage, "delete_board_rows", costly(storage.delete_board_rows))
    monkeypatch.setattr(storage, "delete_stats_rows", costly(storage.delete_stats_rows))
    pruned = await _pruner(database, hold=0.002, timer=lambda: now).prune()

    assert pruned.longest <= 0.002
    after = await _summaries(database)
    assert after == ({row for row in before[0] if _kept(row[0])}, {row for row in before[1] if _kept(row[0])})
    rows = pruned.board_rows + pruned.stats_rows
    assert rows > 300
    assert pruned.transactions >= rows / 75  # 75 rows fit in 2 ms: none took more


async def test_pruners_racing_delete_the_same_set(database: Database) -> None:
    await _three_weeks_of_games(database, count=120)
    before = await _summaries(database)
    runs = await asyncio.gather(*(_pruner(database, batch=3).prune() for _ in range(3)))
    after = await _summaries(database)
    assert after == ({row for row in before[0] if _kept(row[0])}, {row for row in before[1] if _kept(row[0])})
    assert sum(run.board_rows for run in runs) == len(before[0] - after[0])  # each row deleted once
    assert sum(run.stats_rows for run in runs) == len(before[1] - after[1])


async def test_a_prune_stopped_half_way_is_taken_up_by_the_next(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _three_weeks_of_games(database, count=120)
    before = await _summaries(database)
    real = storage.delete_stats_rows
    calls = 0

    async def fails_the_third_time(*args: Any, **kwargs: Any) -> int:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise StorageUnavailable("the database is away")
        return await real(*args, **kwargs)

    monkeypatch.setattr(storage, "delete_stats_rows", fails_the_third_time)
    with pytest.raises(StorageUnavailable):
        await _pruner(database, batch=2).prune()
    half_way = await _summaries(database)
    assert half_way != before
    monkeypatch.setattr(storage, "delete_stats_rows", real)
    await _pruner(database, batch=2).prune()
    after = await _summaries(database)
    assert after == ({row for row in before[0] if _kept(row[0])}, {row for row in before[1] if _kept(row[0])})


# --------------------------------------------------------------------------- cursors


async def test_a_cursor_pages_across_midnight_after_the_pruning(database: Database) -> None:
    """A day board's first page served just before midnight; the pruner runs the next day at noon
    (the board is the previous day's: kept); the next pages carry on where the first stopped."""
    evening = NOW.replace(hour=23, minute=59)
    games = Recorder(database)
    await games.add(
        *(Finished(f"g{index}", f"p{index}", moves=80 + index, finished_at=NOW) for index in range(7)),
        Finished("older", "p0", moves=1, finished_at=NOW - dt.timedelta(days=2)),
    )
    whole = await whole_board(service(database, evening), limit=3, board="variant", period="day")
    first = await ask(service(database, evening), board="variant", period="day", limit=3)
    week_first = await ask(service(database, evening), board="variant", period="week", limit=3)

    tomorrow = NOW + dt.timedelta(days=1)
    pruned = await _pruner(database, tomorrow).prune()
    assert pruned.buckets == 1 and pruned.board_rows > 0  # the day of "older" went, the 16th stayed
    after_midnight = service(database, tomorrow)
    rest = await whole_board(after_midnight, limit=3, board="variant", period="day", after=first["next"])
    assert first["rows"] + rest == whole
    assert [row["player"]["id"] for row in whole] == [f"p{index}" for index in range(7)]
    week_rest = await whole_board(
        after_midnight, limit=3, board="variant", period="week", after=week_first["next"]
    )
    assert len(week_first["rows"] + week_rest) == 7


async def test_a_cursor_of_an_older_bucket_is_not_found(database: Database) -> None:
    """Two days on, a day board's cursor is refused ``not_found``, whether or not the pruner ran; a
    week board's two weeks on; all-time and daily boards' cursors never."""
    games = Recorder(database)
    await games.add(
        *(
            Finished(f"g{index}", f"p{index}", moves=80 + index, finished_at=NOW, daily_date=NOW.date(),
                     code=daily_deal(NOW.date()).code())
            for index in range(5)
        )
    )  # fmt: skip
    svc = service(database, NOW)
    cursors = {
        period: (await ask(svc, board="variant", period=period, limit=2))["next"]
        for period in ("day", "week", "all")
    }
    players = (await ask(svc, board="players", period="day", limit=2))["next"]
    daily = (await ask(svc, board="daily", limit=2))["next"]
    in_two_days = service(database, NOW + dt.timedelta(days=2))
    with pytest.raises(Refusal) as refused:
        await ask(in_two_days, board="variant", period="day", after=cursors["day"])
    assert refused.value.code == "not_found"
    assert refused.value.message.startswith("after: the day board of the day 2026-12-16 is closed"), (
        refused.value.message
    )
    with pytest.raises(Refusal) as refused:
        await ask(in_two_days, board="players", period="day", after=players)
    assert refused.value.code == "not_found"
    # The week (Monday 12-14) is the previous one until Sunday 12-27, older from Monday 12-28.
    sunday = service(database, dt.datetime(2026, 12, 27, 23, 0, tzinfo=UTC))
    rest = ["p2", "p3", "p4"]
    assert _players(await ask(sunday, board="variant", period="week", after=cursors["week"])) == rest
    monday = service(database, dt.datetime(2026, 12, 28, 1, 0, tzinfo=UTC))
    with pytest.raises(Refusal) as refused:
        await ask(monday, board="variant", period="week", after=cursors["week"])
    assert refused.value.code == "not_found" and "week of 2026-12-14" in refused.value.message
    a_year_on = service(database, NOW + dt.timedelta(days=365))
    assert _players(await ask(a_year_on, board="variant", period="all", after=cursors["all"])) == rest
    assert _players(await ask(a_year_on, board="daily", after=daily)) == rest


def _players(page: dict[str, Any]) -> list[str]:
    return [row["player"]["id"] for row in page["rows"]]


async def test_games_of_one_instant_past_a_page_are_pruned_all(database: Database) -> None:
    """A bucket's deal codes are read a page of games at a time in finishing order: games finished at
    one instant, more of them than a page holds, on a page boundary and alone on a page, all count."""
    instant = NOW - dt.timedelta(days=3)
    codes = [f"EO1-C8-AAAAA{letter}A" for letter in "BCDEFGHJK"]
    games = [
        Finished("first", "p0", code=CODE, finished_at=instant - dt.timedelta(seconds=1)),
        *(
            Finished(f"g{index}", f"p{index}", code=code, finished_at=instant)
            for index, code in enumerate(codes)
        ),
        Finished("last", "p0", code="EO1-C8-AAAAAMA", finished_at=instant + dt.timedelta(seconds=1)),
    ]
    await Recorder(database).add(*games)
    await _pruner(database, batch=3).prune()
    bests, stats = await _summaries(database)
    day = f"d{instant.date().isoformat()}"
    assert [row for row in bests if row[0].endswith(day)] == []
    assert [row for row in stats if row[0] == day] == []
    assert {row[0] for row in bests if row[0].startswith("D/") and row[0].endswith("/m/a")} == {
        f"D/{code}/m/a" for code in (CODE, *codes, "EO1-C8-AAAAAMA")
    }


async def test_the_server_prunes_in_the_background(
    server_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A running server's ``board-pruning`` task deletes a bucket three days old (its own clock)."""
    monkeypatch.setattr(pruning_service, "PRUNE_INTERVAL", 0.05)
    three_days_ago = utc_now() - dt.timedelta(days=3)
    day = f"d{three_days_ago.date().isoformat()}"
    async with serverutil.running_app(server_database_url, sqlite_synchronous="OFF") as app:
        await Recorder(app.database).add(Finished("old", "p0", finished_at=three_days_ago))
        for _ in range(200):
            bests, stats = await _summaries(app.database)
            if not any(row[0] == day for row in stats):
                break
            await asyncio.sleep(0.05)
        assert [row for row in bests if row[0].endswith(day)] == []
        assert [row for row in stats if row[0] == day] == []
        assert {row[0] for row in bests} >= {f"D/{CODE}/m/a", "V/8/m/a"}  # all time stays
        assert app.pruner.get_name() == "board-pruning" and not app.pruner.done()
    assert app.pruner.cancelled()
