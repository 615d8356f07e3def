"""server.storage.quick_waits: quick match's pool as rows, on SQLite and PostgreSQL: one wait per
player, a stale one replaced, the claim all or nothing, two claims at once on overlapping rows
settled by the database (two engines on one database: two processes), the expired swept."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from server.storage import Database, quick_waits
from server.storage.records import QuickWait

NOW = dt.datetime(2026, 12, 7, 9, 0, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)


def wait(wait_id: str, player: str, *, holder: str = "node-a/1", since: dt.datetime = NOW) -> QuickWait:
    return QuickWait(wait_id, player, player, False, 8, 1000.0, since, holder, since + 10 * SECOND)


async def add(database: Database, *waits: QuickWait) -> None:
    for one in waits:
        async with database.transaction() as conn:
            await quick_waits.add_wait(conn, one)


async def live(database: Database, now: dt.datetime = NOW) -> dict[str, str | None]:
    async with database.connection() as conn:
        return {row.wait_id: row.race_id for row in await quick_waits.live_waits(conn, now)}


async def claim(database: Database, wait_ids: list[str], race_id: str, now: dt.datetime = NOW) -> bool:
    """Claim in a transaction of its own, rolled back when the claim is not whole (as quick match does)."""

    class Lost(Exception):
        pass

    try:
        async with database.transaction() as conn:
            if not await quick_waits.claim_waits(conn, wait_ids, race_id, now):
                raise Lost
    except Lost:
        return False
    return True


async def test_a_wait_reads_back_whole_the_oldest_first(database: Database) -> None:
    later = wait("w2", "bo", since=NOW + SECOND)
    await add(database, later, wait("w1", "ann"))
    async with database.connection() as conn:
        rows = await quick_waits.live_waits(conn, NOW)
    assert rows == [wait("w1", "ann"), later]


async def test_one_wait_per_player_unless_the_old_one_is_stale_or_the_holders_own(database: Database) -> None:
    """A second wait of a player held live elsewhere is refused; one whose row expired, or whose row
    its own holder failed to delete, replaces it."""
    await add(database, wait("w1", "ann", holder="node-a/1"))
    with pytest.raises(quick_waits.WaitConflict):
        await add(database, wait("w2", "ann", holder="node-b/2", since=NOW + SECOND))
    await add(database, wait("w3", "ann", holder="node-a/1", since=NOW + SECOND))  # its own orphan
    assert await live(database) == {"w3": None}
    await add(database, wait("w4", "ann", holder="node-b/2", since=NOW + 12 * SECOND))  # w3 expired
    assert await live(database, NOW + 12 * SECOND) == {"w4": None}


async def test_a_claim_is_all_or_nothing(database: Database) -> None:
    """A claim of rows one of which is claimed, gone or expired claims none of them."""
    await add(database, wait("w1", "ann"), wait("w2", "bo"), wait("w3", "cy"), wait("w4", "dee"))
    assert await claim(database, ["w1", "w2"], "r1")
    assert not await claim(database, ["w2", "w3"], "r2")  # w2 is r1's
    assert not await claim(database, ["w3", "gone"], "r2")
    assert not await claim(database, ["w3", "w4"], "r2", NOW + 11 * SECOND)  # both expired by then
    assert await live(database) == {"w1": "r1", "w2": "r1", "w3": None, "w4": None}
    assert await claim(database, ["w3", "w4"], "r3")


async def test_two_claims_at_once_on_overlapping_rows_seat_each_player_once(
    database: Database, database_url: str
) -> None:
    """Two processes' transactions (two engines) claim overlapping rows at once: the second waits for
    the first (PostgreSQL's row lock, SQLite's one writer), then finds a row claimed and claims
    nothing; the row only it wanted stays unclaimed."""
    other = Database.create(database_url, sqlite_synchronous="OFF")
    try:
        await add(database, wait("w1", "ann"), wait("w2", "bo"), wait("w3", "cy"))

        async def second() -> bool:
            return await claim(other, ["w2", "w3"], "r2")

        async with database.transaction() as conn:
            assert await quick_waits.claim_waits(conn, ["w1", "w2"], "r1", NOW)
            racing = asyncio.create_task(second())
            await asyncio.sleep(0.3)
            assert not racing.done()  # it waits for this transaction
        assert await racing is False
        assert await live(database) == {"w1": "r1", "w2": "r1", "w3": None}
    finally:
        await other.dispose()


async def test_leave_removes_an_unclaimed_wait_only(database: Database) -> None:
    await add(database, wait("w1", "ann"), wait("w2", "bo"))
    assert await claim(database, ["w2"], "r1")
    async with database.write_alone() as conn:
        assert await quick_waits.leave_wait(conn, "ann")
    async with database.write_alone() as conn:
        assert not await quick_waits.leave_wait(conn, "ann")  # gone
    async with database.write_alone() as conn:
        assert not await quick_waits.leave_wait(conn, "bo")  # seated: its race has it
    assert await live(database) == {"w2": "r1"}


async def test_refreshed_waits_live_on_and_the_expired_are_swept(database: Database) -> None:
    await add(database, wait("w1", "ann", holder="node-a/1"), wait("w2", "bo", holder="dead/2"))
    async with database.write_alone() as conn:
        assert await quick_waits.refresh_waits(conn, ["w1", "gone"], NOW + 20 * SECOND) == 1
    later = NOW + 15 * SECOND
    assert await live(database, later) == {"w1": None}  # w2 no wait: expired
    async with database.write_alone() as conn:
        assert await quick_waits.sweep_waits(conn, later) == 1
    async with database.connection() as conn:
        assert [row.wait_id for row in await quick_waits.live_waits(conn, NOW)] == ["w1"]


async def test_a_stopping_process_clears_its_waits_and_removes_followed_ones(database: Database) -> None:
    await add(database, wait("w1", "ann"), wait("w2", "bo"), wait("w3", "cy", holder="node-b/2"))
    async with database.write_alone() as conn:
        await quick_waits.remove_waits(conn, ["w2"])
    async with database.write_alone() as conn:
        await quick_waits.clear_waits(conn, "node-a/1")
    assert await live(database) == {"w3": None}
