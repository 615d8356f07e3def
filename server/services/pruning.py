"""The leaderboards' maintenance job: deletes the day and week buckets older than the previous one.

What is kept and why is in `server.storage.pruning`. Every node's every process runs it
(`server.app.App`: ``board-pruning``, every `PRUNE_INTERVAL` seconds, the first one interval after
the start): when nothing is left to prune a run is a few index seeks. A bucket is pruned by
single-statement transactions (`Database.write_alone`: on SQLite the statement alone holds the write
lock, no turn of the event loop), each of as many rows as fit in `PRUNE_HOLD` (2 ms) at the
quickest pace of the last few (`Rows`; at most ``batch``), with a pause between them, so that a
writer (on SQLite, the writer thread, and with it every player's ack) waits for one short delete at
most, never for a backlog (bench/bench_prune.py measures the acks while it runs); the deal codes of
its games are read in pages of ``batch`` games, outside any write. Two runners racing
(two workers, two nodes) delete the same rows one after the other and end with the same result. A run
that fails (the database away) logs it, and the next run takes up where it stopped.

Its clock is the server's, an hour late (`PRUNE_GRACE`): the previous bucket of a node whose clock is
behind, which a cursor it accepts may pin, is not yet older than the pruner's previous one.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Final, Literal

from sqlalchemy.ext.asyncio import AsyncConnection

from server.clock import utc_now
from server.storage import Database
from server.storage import pruning as storage
from server.storage.leaderboards import is_counted

__all__ = ["PRUNE_BATCH", "PRUNE_GRACE", "PRUNE_HOLD", "PRUNE_INTERVAL", "BoardPruning", "Pruned", "Rows"]

logger = logging.getLogger(__name__)

PRUNE_INTERVAL: Final = 600.0
"""Seconds between two runs (a bucket closes once a day; a run with nothing to do is a few seeks)."""
PRUNE_GRACE: Final = dt.timedelta(hours=1)
"""How late the pruner's clock is taken: the clock skew between nodes it tolerates."""
PRUNE_BATCH: Final = 500
"""Rows deleted per statement at most, and games read per page of a bucket's deal codes."""
PRUNE_PAUSE: Final = 0.005
"""Seconds between two delete statements: the writer's commits go between them."""
PRUNE_HOLD: Final = 0.002
"""Seconds a delete statement should hold the write lock at most (on SQLite a writer that finds it
taken waits that long and then some: its busy handler polls 1, 3, 8, 18 ms after): each takes as
many rows as fit in it at the pace of the last ones (`Rows`)."""
_FIRST_ROWS: Final = 50  # a run's first statement, before any pace is known
#: A statement's rows at least, however slow it seems (a wait for the lock is 1 ms at least, which a
#: small statement's pace cannot tell from its work): about half a millisecond of work.
_LEAST_ROWS: Final = 50
_PACES: Final = 8  # statements whose quickest pace sets the next one's rows
_SCOPES_PER_DELETE: Final = 300  # scopes per IN (...): well under every driver's parameter limit
_BUCKETS_PER_RUN: Final = 1000  # a bound, in case rows of a closed bucket kept coming back


_Rows = Literal["board", "stats", "counts"]  # board_bests, player_stats, rank_buckets


@dataclass(frozen=True, slots=True)
class Pruned:
    """What one run deleted: closed buckets, ``board_bests`` rows, ``player_stats`` rows, delete
    transactions, the seconds they took in all and the longest of them (what a writer waited at most;
    on SQLite a commit that checkpoints the log counts the checkpoint too, which holds no writer), and
    the ``rank_buckets`` rows of the scopes deleted."""

    buckets: int = 0
    board_rows: int = 0
    stats_rows: int = 0
    transactions: int = 0
    longest: float = 0.0
    seconds: float = 0.0
    count_rows: int = 0

    def __add__(self, other: Pruned) -> Pruned:
        return Pruned(
            self.buckets + other.buckets,
            self.board_rows + other.board_rows,
            self.stats_rows + other.stats_rows,
            self.transactions + other.transactions,
            max(self.longest, other.longest),
            self.seconds + other.seconds,
            self.count_rows + other.count_rows,
        )

    @staticmethod
    def transaction(rows: _Rows, deleted: int, seconds: float) -> Pruned:
        """One delete transaction's, of ``deleted`` rows of the kind ``rows``."""
        return Pruned(
            0,
            deleted if rows == "board" else 0,
            deleted if rows == "stats" else 0,
            1,
            seconds,
            seconds,
            deleted if rows == "counts" else 0,
        )


@dataclass(frozen=True, slots=True)
class Rows:
    """How many rows the next delete statement takes: as many as fit in ``hold`` seconds at the
    quickest pace (seconds per row) of the last `_PACES` statements, within ``least`` and ``most``,
    and at most twice as many as the last. A statement's time also counts its wait for the lock (the
    writer's commits), the event loop's turn and a checkpoint it ran, which only ever make it slower:
    the quickest is the nearest to the work alone, and a wait does not make the next one smaller."""

    next: int
    hold: float
    least: int = _LEAST_ROWS
    most: int = PRUNE_BATCH
    paces: tuple[float, ...] = ()  # seconds per row of the last statements, the newest last

    @staticmethod
    def first(hold: float, most: int) -> Rows:
        """A run's first statement: a small one."""
        return Rows(min(_FIRST_ROWS, most), hold, min(_LEAST_ROWS, most), most)

    def after(self, deleted: int, seconds: float) -> Rows:
        """The next statement's, after one that deleted ``deleted`` rows in ``seconds``."""
        if deleted == 0:
            return self
        paces = (*self.paces, seconds / deleted)[-_PACES:]
        quickest = min(paces)
        fits = self.most if quickest <= 0 else int(self.hold / quickest)
        return replace(self, next=max(self.least, min(self.most, 2 * self.next, fits)), paces=paces)


_Delete = Callable[[AsyncConnection, int], Awaitable[int]]  # deletes up to so many rows; how many


class BoardPruning:
    """Prunes the closed buckets of one database; owned by the app.

    Args:
        database: where the summaries are.
        batch: rows per delete transaction at most, and games per page of a bucket's codes.
        pause: seconds between two delete transactions.
        hold: seconds a delete transaction should hold the write lock at most (`Rows`).
        clock: the current time (aware); by default ``server.clock.utc_now``.
        timer: seconds, to time the transactions; by default ``time.perf_counter``.
    """

    def __init__(
        self,
        database: Database,
        *,
        batch: int = PRUNE_BATCH,
        pause: float = PRUNE_PAUSE,
        hold: float = PRUNE_HOLD,
        clock: Callable[[], dt.datetime] | None = None,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._database = database
        self._batch = batch
        self._pause = pause
        self._clock = clock or utc_now
        self._hold = hold
        self._timer = timer
        # The run's (each starts with a small transaction); the counts' apart, their rows being cheaper
        # (a pace of theirs would make the next statement of summary rows too long).
        self._rows = Rows.first(hold, batch)
        self._count_rows = Rows.first(hold, batch)

    def today(self) -> dt.date:
        """The UTC day the pruner keeps buckets for: the clock's, `PRUNE_GRACE` late."""
        return (self._clock() - PRUNE_GRACE).astimezone(dt.UTC).date()

    async def prune(self) -> Pruned:
        """Delete every closed bucket older than the previous one of its period, oldest first.

        Raises:
            StorageUnavailable: the database failed; what was deleted stays deleted.
        """
        today = self.today()
        self._rows = self._count_rows = Rows.first(self._hold, self._batch)
        done = Pruned()
        for period in storage.CLOSABLE_PERIODS:
            for _ in range(_BUCKETS_PER_RUN):
                async with self._database.connection() as conn:
                    start = await storage.oldest_closed_bucket(conn, period, today)
                if start is None:
                    break
                pruned = await self._prune_bucket(period, start)
                logger.info(
                    "pruned the %s bucket of %s: %d board rows, %d player rows, %d transactions "
                    "(%.1f ms on average, the longest %.1f ms)",
                    period,
                    start.isoformat(),
                    pruned.board_rows,
                    pruned.stats_rows,
                    pruned.transactions,
                    pruned.seconds / pruned.transactions * 1000,
                    pruned.longest * 1000,
                )
                done += pruned
        return done

    async def prune_forever(self) -> None:
        """Run `prune` every `PRUNE_INTERVAL` seconds until cancelled (the first one after one)."""
        while True:
            await asyncio.sleep(PRUNE_INTERVAL)
            try:
                await self.prune()
            except Exception:
                logger.exception("pruning the closed leaderboard buckets failed; retrying at the next run")

    async def _prune_bucket(self, period: storage.ClosablePeriod, start: dt.date) -> Pruned:
        """The deal boards' rows page of games by page, then the variant boards', then the players'."""
        done = Pruned(buckets=1)
        seen: set[str] = set()
        since: dt.datetime | None = None
        while True:
            async with self._database.connection() as conn:
                codes, since = await storage.bucket_codes(conn, period, start, since, self._batch)
            new = sorted(set(codes) - seen)
            seen.update(new)
            done += await self._delete_boards(storage.board_scopes(period, start, new))
            if since is None:
                break
        done += await self._delete_boards(storage.variant_scopes(period, start))
        done += await self._delete_all(
            lambda conn, rows: storage.delete_stats_counts(conn, period, start, rows), "counts"
        )
        # last: while any is left, the bucket is found again by the next run (and the counts above)
        return done + await self._delete_all(
            lambda conn, rows: storage.delete_stats_rows(conn, period, start, rows), "stats"
        )

    async def _delete_boards(self, scopes: list[str]) -> Pruned:
        done = Pruned()
        for first in range(0, len(scopes), _SCOPES_PER_DELETE):
            chunk = scopes[first : first + _SCOPES_PER_DELETE]
            done += await self._delete_all(_board_rows(chunk), "board")
            if any(map(is_counted, chunk)):  # after the rows: see storage
                done += await self._delete_all(_board_counts(chunk), "counts")
        return done

    async def _delete_all(self, delete: _Delete, kind: _Rows) -> Pruned:
        """Run ``delete`` alone (`Database.write_alone`), again and again, each time for as many rows
        as `Rows` says and a pause after, until it finds fewer rows than it may delete: all gone."""
        done = Pruned()
        while True:
            pacer = self._count_rows if kind == "counts" else self._rows
            rows = pacer.next
            async with self._database.write_alone() as conn:
                started = self._timer()
                deleted = await delete(conn, rows)  # on SQLite, the write lock held meanwhile only
                held = self._timer() - started
            if kind == "counts":
                self._count_rows = pacer.after(deleted, held)
            else:
                self._rows = pacer.after(deleted, held)
            done += Pruned.transaction(kind, deleted, held)
            await asyncio.sleep(self._pause)
            if deleted < rows:
                return done


def _board_rows(scopes: list[str]) -> _Delete:
    """Deletes up to so many ``board_bests`` rows of ``scopes``."""
    return lambda conn, rows: storage.delete_board_rows(conn, scopes, rows)


def _board_counts(scopes: list[str]) -> _Delete:
    """Deletes up to so many ``rank_buckets`` rows of the game boards' ``scopes``."""
    return lambda conn, rows: storage.delete_board_counts(conn, scopes, rows)
