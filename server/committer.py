"""Group commit: every write of every game is queued and committed in batches.

A request's ``Write`` is atomic (a new player, a new game, an action and the result it ends the game
with commit together or not at all), and ``submit()`` returns only after its transaction committed:
that is what makes an ``ack`` mean "durable". While one commit is in flight the next batch gathers,
so commits per second stay flat while writes per commit grow with the load. On SQLite, writes that
only append actions (the hot path) go to ``SqliteActionLog``, whose own thread group-commits them.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from dataclasses import dataclass, field

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from server.metrics import Metrics
from server.storage import (
    ActionRecord,
    Database,
    GameResult,
    GameStart,
    PlayerRecord,
    StorageUnavailable,
    repository,
)
from server.storage.action_log import ActionAppendConflict, SqliteActionLog

__all__ = ["Committer", "Write", "WriteConflict"]

logger = logging.getLogger(__name__)


class WriteConflict(Exception):
    """The write breaks a constraint (a version of the game already stored, a game already finished)."""


@dataclass(slots=True)
class Write:
    """What one request stores, atomically."""

    player: PlayerRecord | None = None
    game: GameStart | None = None
    actions: list[ActionRecord] = field(default_factory=list)
    result: GameResult | None = None

    def is_actions_only(self) -> bool:
        return self.player is None and self.game is None and self.result is None


_Pending = tuple[Write, "asyncio.Future[None]"]
_STOP = object()  # queued by stop(): commit what came before, then end


class Committer:
    """Owns the write queue and the task that drains it in group commits."""

    def __init__(
        self,
        database: Database,
        metrics: Metrics,
        *,
        max_batch: int = 1024,
        action_log: SqliteActionLog | None = None,
    ) -> None:
        """``action_log``, for SQLite, takes the writes that only append actions (the hot path)."""
        self._database = database
        self._action_log = action_log
        self._metrics = metrics
        self._max_batch = max_batch
        self._queue: asyncio.Queue[_Pending | object] = asyncio.Queue()  # object: _STOP
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="committer")

    async def stop(self) -> None:
        """Commit everything already submitted, then stop (new submissions are refused)."""
        self._stopping = True
        if self._task is not None and not self._task.done():
            self._queue.put_nowait(_STOP)
            await asyncio.gather(self._task, return_exceptions=True)
        while not self._queue.empty():  # only if the task had died: nothing may wait forever
            pending = self._queue.get_nowait()
            if isinstance(pending, tuple):
                _settle(pending[1], StorageUnavailable("the server is stopping"))
        if self._action_log is not None:
            await self._action_log.close()

    async def submit(self, write: Write) -> None:
        """Store ``write``; return once it is committed.

        Raises:
            StorageUnavailable: the database is unreachable or failed; nothing was stored.
            WriteConflict: the write contradicts what is stored; nothing was stored.
        """
        if self._stopping:
            raise StorageUnavailable("the server is stopping")
        if self._action_log is not None and write.is_actions_only():
            await self._append_actions(self._action_log, write)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((write, future))
        await future

    async def _append_actions(self, action_log: SqliteActionLog, write: Write) -> None:
        """The hot path: plain action appends go straight to the SQLite writer thread, which groups
        them in commits of its own."""
        try:
            await action_log.append(write.actions)
        except ActionAppendConflict:
            raise WriteConflict("that version of the game is already stored") from None
        except (sqlite3.Error, OSError) as exc:
            raise StorageUnavailable(str(exc)) from None

    async def _run(self) -> None:
        """Drain the queue in batches until ``stop()``; a batch that fails in an unexpected way is
        answered ``unavailable`` and the loop goes on (one bug must not freeze every game)."""
        stopping = False
        while not stopping:
            batch: list[_Pending] = []
            item = await self._queue.get()
            while True:
                if not isinstance(item, tuple):  # _STOP
                    stopping = True
                    break
                batch.append(item)
                if len(batch) >= self._max_batch or self._queue.empty():
                    break
                item = self._queue.get_nowait()
            if not batch:
                continue
            started = time.perf_counter()
            try:
                await self._commit_batch(batch)
            except Exception:
                logger.exception("group commit of %d writes failed unexpectedly", len(batch))
                for _, future in batch:
                    _settle(future, StorageUnavailable("the server failed to store this; retry"))
            self._metrics.observe_commit(len(batch), time.perf_counter() - started)

    async def _commit_batch(self, batch: list[_Pending]) -> None:
        try:
            async with self._database.transaction() as conn:
                for write, _ in batch:
                    await self._apply_without_actions(conn, write)
                rows = [row for write, _ in batch for row in write.actions]
                if rows:
                    await repository.append_actions(conn, rows)
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
        except StorageUnavailable as exc:
            logger.warning("group commit of %d writes failed: %s", len(batch), exc)
            for _, future in batch:
                _settle(future, exc)
            return
        self._metrics.actions.inc(sum(len(write.actions) for write, _ in batch))
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
