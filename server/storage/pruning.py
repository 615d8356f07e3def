"""Pruning the leaderboards' closed day and week buckets: what is kept, and the statements that delete
the rest a bounded batch at a time.

Why
---
A finished game writes its player's row in a deal board and a variant board for each order in three
period buckets (the day, the week, all time), and the players board's row of each bucket
(`leaderboards.record_finished_game`): 14.3 summary rows per finished game in
bench/bench_leaderboard.py, most of them in day and week buckets. Nothing reads a closed bucket but a
page cursor carried across midnight or the week's end, which pins the bucket the first page read
(`server.services.rankings`): so the current and the previous bucket of each period are kept, and the
older ones are deleted. The daily board's scopes (``Y/…``, any day's daily board can be asked for by
its date) and the all-time buckets are kept for ever.

What is a bucket kept
---------------------
For the UTC day ``today``: the day buckets from yesterday on, the week buckets from last week's Monday
on (`kept_from`). The pruner takes ``today`` an hour late (`server.services.pruning`), so a node whose
clock is behind still finds the bucket a cursor it accepts pins.

How the rows of a bucket are found
----------------------------------
The bucket is at the end of a game board's scope (``D/<code>/m/d2026-11-30``), so a bucket's rows are
not a range of the primary key: the deal codes come from the games that finished during the bucket
(`bucket_codes`, a range of ``ix_games_finished_at``), the variant boards' scopes are a fixed few
(`variant_scopes`). The players board's scope is the bucket itself (``d2026-11-30``), a range of its
primary key: its rows, deleted last, mark a bucket not yet pruned (`oldest_closed_bucket`), so a
prune stopped half-way is taken up again by the next one. Each delete takes at most ``limit`` rows,
in primary-key order and locked (PostgreSQL ``FOR UPDATE``), so two pruners racing delete the same
rows one after the other, never in a deadlock, and the second finds them gone.

A scope's counts (``rank_buckets``, which rank its rows) go with it, a bounded batch at a time like
its rows (`delete_board_counts`, `delete_stats_counts`), rather than through a delete trigger that
would double the cost of deleting each row: the pruner deletes a chunk of board scopes' counts after
their rows, and the players board's before its rows (which mark the bucket not yet pruned: a run
stopped half-way finds the bucket again, and its counts).

None of these functions commits: the caller owns the transaction (one per batch).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Final, Literal

from sqlalchemy import Table, delete, func, select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection

from server.storage.leaderboards import (
    GAME_ORDERS,
    bots_scope,
    deal_scope,
    period_bucket,
    player_scope,
    variant_scope,
)
from server.storage.tables import board_bests, games, player_stats, rank_buckets

__all__ = [
    "CLOSABLE_PERIODS",
    "ClosablePeriod",
    "board_scopes",
    "bucket_codes",
    "bucket_start",
    "delete_board_counts",
    "delete_board_rows",
    "delete_stats_counts",
    "delete_stats_rows",
    "is_kept",
    "kept_from",
    "oldest_closed_bucket",
    "variant_scopes",
]

ClosablePeriod = Literal["day", "week"]
CLOSABLE_PERIODS: Final[tuple[ClosablePeriod, ...]] = ("day", "week")
_SIDES: Final = (False, True)  # people, bots
_CELLS: Final = (8, 4, 2)
_DAYS: Final[dict[ClosablePeriod, int]] = {"day": 1, "week": 7}
_TAGS: Final[dict[ClosablePeriod, str]] = {"day": "d", "week": "w"}  # a bucket's first letter


def bucket_start(period: ClosablePeriod, day: dt.date) -> dt.date:
    """The first day of the bucket of ``period`` holding ``day`` (a week starts on Monday)."""
    return day if period == "day" else day - dt.timedelta(days=day.weekday())


def kept_from(period: ClosablePeriod, today: dt.date) -> dt.date:
    """The first day of the oldest bucket of ``period`` kept on ``today``: the previous one's."""
    return bucket_start(period, today) - dt.timedelta(days=_DAYS[period])


def is_kept(period: ClosablePeriod, day: dt.date, today: dt.date) -> bool:
    """Whether the bucket of ``period`` holding ``day`` is kept on ``today`` (the current or the
    previous one, or a later one)."""
    return bucket_start(period, day) >= kept_from(period, today)


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(), dt.UTC)


async def oldest_closed_bucket(
    conn: AsyncConnection, period: ClosablePeriod, today: dt.date
) -> dt.date | None:
    """The first day of the oldest bucket of ``period`` older than those kept on ``today`` that still
    has rows (people's or bots'), or None: one seek in ``player_stats``' primary key per side."""
    oldest: dt.date | None = None
    for bots in _SIDES:
        tag = bots_scope(_TAGS[period], bots)  # "d" / "B/d"
        below = bots_scope(player_scope(period_bucket(period, kept_from(period, today))), bots)
        scope = await conn.scalar(
            select(func.min(player_stats.c.scope)).where(
                player_stats.c.scope >= tag, player_stats.c.scope < below
            )
        )
        if scope is None:
            continue
        day = _bucket_day(scope.removeprefix(tag))
        if day is not None and (oldest is None or day < oldest):
            oldest = day
    return oldest


def _bucket_day(text: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:  # pragma: no cover - only the server's scopes are stored
        return None


async def bucket_codes(
    conn: AsyncConnection, period: ClosablePeriod, start: dt.date, since: dt.datetime | None, limit: int
) -> tuple[list[str], dt.datetime | None]:
    """The deal codes of up to ``limit`` games finished during the bucket of ``period`` from ``start``,
    from the instant ``since`` on (the bucket's start when None), in the order of ``ix_games_finished_at``
    (no sort); and the instant to go on from, None after the last page.

    The next page starts at the last game's instant again, not after it (the games of that instant
    past the page are not lost, those on it come twice: their codes are a set). A page of one instant
    only takes every game of that instant and goes on after it.
    """
    end = _midnight(start + dt.timedelta(days=_DAYS[period]))
    since = since or _midnight(start)
    page = (
        await conn.execute(
            select(games.c.finished_at, games.c.code)
            .where(games.c.finished_at >= since, games.c.finished_at < end)
            .order_by(games.c.finished_at)
            .limit(limit)
        )
    ).all()
    codes = [row.code for row in page]
    if len(page) < limit:
        return codes, None
    last = page[-1].finished_at
    if page[0].finished_at != last:
        return codes, last
    codes += await conn.scalars(select(games.c.code).where(games.c.finished_at == last))
    return codes, last + dt.timedelta(microseconds=1)


def board_scopes(period: ClosablePeriod, start: dt.date, codes: Sequence[str]) -> list[str]:
    """The deal boards' scopes of the bucket for ``codes``, people's and bots', in every order."""
    bucket = period_bucket(period, start)
    return [
        bots_scope(deal_scope(code, order, bucket), bots)
        for code in sorted(set(codes))
        for order in GAME_ORDERS
        for bots in _SIDES
    ]


def variant_scopes(period: ClosablePeriod, start: dt.date) -> list[str]:
    """The variant boards' scopes of the bucket, people's and bots', in every order."""
    bucket = period_bucket(period, start)
    return [
        bots_scope(variant_scope(cells, order, bucket), bots)
        for cells in _CELLS
        for order in GAME_ORDERS
        for bots in _SIDES
    ]


async def delete_board_rows(conn: AsyncConnection, scopes: Sequence[str], limit: int) -> int:
    """Delete up to ``limit`` ``board_bests`` rows of ``scopes``, the first in primary-key order;
    returns how many."""
    return await _delete_first(conn, board_bests, scopes, limit)


async def delete_board_counts(conn: AsyncConnection, scopes: Sequence[str], limit: int) -> int:
    """Delete up to ``limit`` ``rank_buckets`` rows of the game boards' ``scopes``; returns how many."""
    return await _delete_first(conn, rank_buckets, scopes, limit)


def _stats_scopes(period: ClosablePeriod, start: dt.date) -> list[str]:
    bucket = player_scope(period_bucket(period, start))
    return [bots_scope(bucket, bots) for bots in _SIDES]


async def delete_stats_rows(conn: AsyncConnection, period: ClosablePeriod, start: dt.date, limit: int) -> int:
    """Delete up to ``limit`` ``player_stats`` rows of the bucket (people's and bots'), the first in
    primary-key order; returns how many. Once none is left, the bucket is pruned."""
    return await _delete_first(conn, player_stats, _stats_scopes(period, start), limit)


async def delete_stats_counts(
    conn: AsyncConnection, period: ClosablePeriod, start: dt.date, limit: int
) -> int:
    """Delete up to ``limit`` ``rank_buckets`` rows of the bucket's players boards; returns how many."""
    return await _delete_first(conn, rank_buckets, _stats_scopes(period, start), limit)


async def _delete_first(conn: AsyncConnection, table: Table, scopes: Sequence[str], limit: int) -> int:
    """Delete the first ``limit`` rows of ``scopes`` from ``table`` (keyed by scope first), in
    primary-key order and locked first (PostgreSQL ``FOR UPDATE``): two pruners delete them one after
    the other, never in a deadlock. Returns how many."""
    columns = list(table.primary_key.columns)
    batch = (
        select(*columns).where(table.c.scope.in_(scopes)).order_by(*columns).limit(limit).with_for_update()
    )
    return (await conn.execute(delete(table).where(tuple_(*columns).in_(batch)))).rowcount
