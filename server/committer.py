"""Group commit: every write of every game goes through one queue and is committed in batches.

A request's ``Write`` is atomic (a new player, a new game, an action and the result it ends the game
with commit together or not at all), and ``submit()`` returns only after its transaction committed:
that is what makes an ``ack`` mean "durable". While one commit is in flight the next batch gathers,
so commits per second stay flat while writes per commit grow with the load.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection

from server.metrics import Metrics
from server.storage import Database, GameResult, GameStart, PlayerRecord, repository

__all__ = ["Committer", "StorageUnavailable", "Write", "WriteConflict"]

logger = logging.getLogger(__name__)


class StorageUnavailable(Exception):
    """The database could not commit the write; nothing of it is stored and it may be retried."""


class WriteConflict(Exception):
    """The write breaks a constraint (a version of the game already stored, a game already finished)."""


@dataclass(slots=True)
class Write:
    """What one request stores, atomically."""

    player: PlayerRecord | None = None
    game: GameStart | None = None
    actions: list[tuple[str, int, str]] = field(default_factory=list)
    result: GameResult | None = None


_Pending = tuple[Write, "asyncio.Future[None]"]


class Committer:
    """Owns the write queue and the task that drains it in group commits."""

    def __init__(self, database: Database, metrics: Metrics, *, max_batch: int = 1024) -> None:
        self._database = database
        self._metrics = metrics
        self._max_batch = max_batch
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="committer")

    async def stop(self) -> None:
        """Commit what is queued, then stop the task."""
        while not self._queue.empty():
            await asyncio.sleep(0.005)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def submit(self, write: Write) -> None:
        """Store ``write``; return once it is committed.

        Raises:
            StorageUnavailable: the database is unreachable or failed; nothing was stored.
            WriteConflict: the write contradicts what is stored; nothing was stored.
        """
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((write, future))
        await future

    async def _run(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while len(batch) < self._max_batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            started = time.perf_counter()
            await self._commit_batch(batch)
            self._metrics.commit_latency.observe(time.perf_counter() - started)
            self._metrics.commit_batch.observe(len(batch))

    async def _commit_batch(self, batch: list[_Pending]) -> None:
        try:
            async with self._database.transaction() as conn:
                for write, _ in batch:
                    await self._apply_without_actions(conn, write)
                rows = [row for write, _ in batch for row in write.actions]
                if rows:
                    await repository.insert_actions(conn, rows)
                for write, _ in batch:
                    if write.result is not None and not await repository.finish_game(conn, write.result):
                        raise _FinishRefused
        except (IntegrityError, _FinishRefused):
            if len(batch) == 1:
                _settle(batch[0][1], WriteConflict("the write contradicts what is stored"))
                return
            for pending in batch:  # isolate the conflicting write: the others still commit
                await self._commit_batch([pending])
            return
        except (SQLAlchemyError, OSError) as exc:
            logger.warning("group commit of %d writes failed: %s", len(batch), exc)
            for _, future in batch:
                _settle(future, StorageUnavailable(str(exc)))
            return
        for _, future in batch:
            _settle(future, None)

    @staticmethod
    async def _apply_without_actions(conn: AsyncConnection, write: Write) -> None:
        if write.player is not None:
            await repository.insert_player(conn, write.player)
        if write.game is not None:
            await repository.insert_game(conn, write.game)


class _FinishRefused(Exception):
    """A batch tried to finish a game that is no longer playing."""


def _settle(future: asyncio.Future[None], error: Exception | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
