"""The queries of quick match's pool: one ``quick_waits`` row per waiting player, for the deployment.

The process holding a waiting player's connection adds its row (`add_wait`), pushes its expiry
forward while it lives (`refresh_waits`) and deletes it when the player leaves, disconnects or
follows the race it was seated in (`remove_waits`, `leave_wait`, `clear_waits`). Any process reads
the live rows (`live_waits`), decides the races (`server.play.race.matchmaking.form_races`) and
claims the rows of one in the transaction that stores the race (`claim_waits`): a row claimed, or
gone, is not claimed twice, so two processes deciding at once never both seat one player. Rows past
their expiry are no waits (their process died) and are swept (`sweep_waits`). Never commits (the
caller's transaction does).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection

from sqlalchemy import delete, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from server.storage.records import QuickWait
from server.storage.tables import quick_waits

__all__ = [
    "WaitConflict",
    "add_wait",
    "claim_waits",
    "clear_waits",
    "leave_wait",
    "live_waits",
    "refresh_waits",
    "remove_waits",
    "sweep_waits",
]


class WaitConflict(Exception):
    """The player waits already: a live row of another process (`add_wait`)."""


async def add_wait(conn: AsyncConnection, wait: QuickWait) -> None:
    """Add ``wait``, first removing its player's row if that one is no wait any more: expired, or
    held by ``wait.holder`` itself (which calls this only for a player it does not hold waiting: a
    row it failed to delete).

    Raises:
        WaitConflict: the player waits already (a live row of another process; on PostgreSQL the
            transaction is then aborted: let the exception leave it).
    """
    await conn.execute(
        delete(quick_waits).where(
            quick_waits.c.player_id == wait.player_id,
            or_(quick_waits.c.expires_at < wait.since, quick_waits.c.holder == wait.holder),
        )
    )
    try:
        await conn.execute(
            insert(quick_waits).values(
                wait_id=wait.wait_id,
                player_id=wait.player_id,
                player_name=wait.player_name,
                bot=wait.bot,
                network=wait.network,
                cells=wait.cells,
                rating=wait.rating,
                since=wait.since,
                holder=wait.holder,
                expires_at=wait.expires_at,
                race_id=wait.race_id,
            )
        )
    except IntegrityError:
        raise WaitConflict(f"{wait.player_id} waits for a quick race already") from None


async def live_waits(conn: AsyncConnection, now: dt.datetime) -> list[QuickWait]:
    """The rows not expired at ``now``, claimed or not, the oldest first (ties by id, so that every
    process reads them in one order)."""
    rows = await conn.execute(
        select(quick_waits)
        .where(quick_waits.c.expires_at >= now)
        .order_by(quick_waits.c.since, quick_waits.c.wait_id)
    )
    return [
        QuickWait(
            wait_id=row.wait_id,
            player_id=row.player_id,
            player_name=row.player_name,
            bot=row.bot,
            network=row.network,
            cells=row.cells,
            rating=row.rating,
            since=row.since,
            holder=row.holder,
            expires_at=row.expires_at,
            race_id=row.race_id,
        )
        for row in rows
    ]


async def claim_waits(
    conn: AsyncConnection, wait_ids: Collection[str], race_id: str, now: dt.datetime
) -> bool:
    """Seat the waits ``wait_ids`` in race ``race_id``: True when every one of them was there,
    unclaimed and not expired at ``now``, and is now claimed; False when not (another process
    claimed one, or it left or expired): the caller must then roll the transaction back, since the
    others were claimed. (On PostgreSQL a claim meeting another's on the same row waits for it, then
    finds the row claimed.)"""
    claimed = await conn.execute(
        update(quick_waits)
        .where(
            quick_waits.c.wait_id.in_(sorted(wait_ids)),
            quick_waits.c.race_id.is_(None),
            quick_waits.c.expires_at >= now,
        )
        .values(race_id=race_id)
    )
    return claimed.rowcount == len(wait_ids)


async def refresh_waits(conn: AsyncConnection, wait_ids: Collection[str], expires_at: dt.datetime) -> int:
    """The waits ``wait_ids`` (its holder's, alive) expire at ``expires_at`` now; how many are there."""
    if not wait_ids:
        return 0
    refreshed = await conn.execute(
        update(quick_waits).where(quick_waits.c.wait_id.in_(sorted(wait_ids))).values(expires_at=expires_at)
    )
    return refreshed.rowcount


async def remove_waits(conn: AsyncConnection, wait_ids: Collection[str]) -> None:
    """The waits ``wait_ids`` are over (left, disconnected, or followed to their race)."""
    if wait_ids:
        await conn.execute(delete(quick_waits).where(quick_waits.c.wait_id.in_(sorted(wait_ids))))


async def leave_wait(conn: AsyncConnection, player_id: str) -> bool:
    """``player_id`` waits no longer, wherever its wait is held: True when it waited (unclaimed);
    False when it did not, or a race claimed its wait first (it is seated there)."""
    left = await conn.execute(
        delete(quick_waits).where(quick_waits.c.player_id == player_id, quick_waits.c.race_id.is_(None))
    )
    return left.rowcount == 1


async def sweep_waits(conn: AsyncConnection, now: dt.datetime) -> int:
    """Delete the rows expired at ``now`` (their processes died without a goodbye); how many."""
    swept = await conn.execute(delete(quick_waits).where(quick_waits.c.expires_at < now))
    return swept.rowcount


async def clear_waits(conn: AsyncConnection, holder: str) -> None:
    """``holder`` holds no wait any more (its process stops)."""
    await conn.execute(delete(quick_waits).where(quick_waits.c.holder == holder))
