"""Which games this process holds a room of, mirrored into the database for ``live``.

A room lives while someone follows it (`server.play.registry`), so "held somewhere" is "someone is
there": its player or a spectator, on any node. ``live`` lists only such games; a game whose last
connection closed leaves the list as soon as this writer has run (a few milliseconds later), not
after the live window.

One writer task per process, off the request path: the registry's changes are coalesced per game (the
latest wins, so a room dropped and made again in one batch is simply held) and handed to the group
commit as one write (`store`), which commits it with the players' writes of its batch. A failed write
is kept and retried: the table converges on the rooms held. (Through the async engine, each write was
a transaction of a few turns of the event loop holding SQLite's write lock, and every commit of the
players' actions that met it waited in SQLite's busy handler, which sleeps 1, 2, 5, 10 ms and on: the
slowest 1% of writes took 7-14 ms under a flood of new games, 4-5 ms through the group commit.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from server.ids import new_id
from server.storage import Database, StorageUnavailable, repository
from server.storage.commit_backends import SetLiveRooms, Write
from server.storage.records import LiveRoomsChange

__all__ = ["Presence"]

logger = logging.getLogger(__name__)

#: Before a failed write is tried again.
RETRY_SECONDS: Final = 1.0
#: The longest a ``live`` waits for this process's latest changes to be written.
FLUSH_WAIT_SECONDS: Final = 1.0


class Presence:
    """The process's rooms as rows of ``live_rooms``; `held` and `released` never wait."""

    def __init__(self, store: Callable[[Write], Awaitable[None]], database: Database, node: str) -> None:
        """``store``: the group commit's (`server.storage.committer.Committer.stored`); ``database``:
        where `close` clears this process's rows once the group commit has stopped."""
        self._store = store
        self._database = database
        # One name per process: two processes given the same node name never share rows.
        self.holder = f"{node}/{new_id()[:12]}"
        self._pending: dict[str, bool] = {}  # game id -> held, not yet written
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: Counts the changes noted and the writes made: a ``live`` page read before it moved is stale.
        self.changes = 0

    def held(self, game_id: str) -> None:
        self._note(game_id, held=True)

    def released(self, game_id: str) -> None:
        self._note(game_id, held=False)

    def _note(self, game_id: str, *, held: bool) -> None:
        self.changes += 1
        self._pending[game_id] = held
        self._wake.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="presence")

    async def flushed(self, timeout: float = FLUSH_WAIT_SECONDS) -> bool:
        """Wait until every change noted so far is written, at most ``timeout`` seconds (the database
        may be down: a ``live`` then answers from what is written); False if it was not."""
        deadline = asyncio.get_running_loop().time() + timeout
        while self._pending or self._wake.is_set():
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(0.005)
        return True

    async def stop(self) -> None:
        """Stop the writer, before the group commit stops (which commits what it was handed)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def close(self) -> None:
        """Stop the writer and remove this process's rows: it holds nothing any more. Once the group
        commit has stopped, so that no write of the writer's comes after."""
        await self.stop()
        try:
            async with self._database.transaction() as conn:
                await repository.clear_live_rooms(conn, self.holder)
        except StorageUnavailable:  # the rows age out of the live window
            logger.warning("could not clear the live rooms of %s", self.holder, exc_info=True)

    async def _run(self) -> None:
        failing = False  # one warning per outage, not one a second
        while True:
            await self._wake.wait()
            batch, self._pending = self._pending, {}
            change = LiveRoomsChange(
                self.holder,
                held=tuple(game for game, held in batch.items() if held),
                released=tuple(game for game, held in batch.items() if not held),
            )
            try:
                await self._store(SetLiveRooms(change))
            except Exception:  # the database down, or a bug: the writer must outlive it
                if not failing:
                    logger.warning("could not write the live rooms; retrying", exc_info=True)
                failing = True
                self._pending = {**batch, **self._pending}  # changes noted meanwhile are newer
                await asyncio.sleep(RETRY_SECONDS)
                continue
            self.changes += 1
            if failing:
                logger.info("the live rooms are written again")
                failing = False
            if not self._pending:
                self._wake.clear()
