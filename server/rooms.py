"""The node's rooms: which unfinished games are in memory, loading them, and finished games' positions.

`RoomRegistry` is the only owner of the map from game id to `GameRoom`. A room lives while someone
follows it (or an operation holds it); the database keeps everything else. Loading a game reads it
from the database and replays its log in a worker thread, so a long game never stalls the event loop;
finished games' final positions are kept in a bounded cache, so watching one again costs no replay.

`RemoteCommits` applies the other nodes' commits: their committed actions arrive on the bus and are handed, in
order, to the room of this node that holds the game (or kept until a load in progress finishes).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections import OrderedDict
from typing import Final

from engine import Deal, Game, Status
from server.bus import Bus, BusEvent, LocalBus
from server.clock import utc_now
from server.committer import Committer, Write
from server.errors import ErrorCode, Refusal
from server.ids import new_id
from server.metrics import Metrics
from server.room import FinishedGame, GameRoom, PlayerRef, Pusher, RoomServices, replay_stored
from server.storage import Database, GameStart, StoredGame, repository

__all__ = ["FINISHED_CACHE_SIZE", "RemoteCommits", "RoomRegistry"]

logger = logging.getLogger(__name__)

#: Finished games whose final position a node keeps (a few KB each).
FINISHED_CACHE_SIZE: Final = 1024


class RoomRegistry:
    """Finds, creates, loads and forgets the node's rooms. Owned by the app, never a module global."""

    def __init__(
        self,
        database: Database,
        committer: Committer,
        metrics: Metrics,
        push: Pusher,
        *,
        node: str = "node-1",
        bus: Bus | None = None,
    ) -> None:
        self._database = database
        self._metrics = metrics
        bus = bus or LocalBus()
        self.services = RoomServices(
            node=node,
            committer=committer,
            push=push,
            publish=None if isinstance(bus, LocalBus) else bus.publish,  # no event built for nobody
            load=self._read,
            ended=self._forget,
        )
        self._rooms: dict[str, GameRoom] = {}
        self._finished: OrderedDict[str, FinishedGame] = OrderedDict()
        self._loading: dict[str, asyncio.Future[GameRoom | FinishedGame]] = {}
        self._awaiting: dict[str, int] = {}  # finds of a game waiting on its load (or about to resume)
        self.remote = RemoteCommits(self, bus)

    def rooms(self) -> list[GameRoom]:
        return list(self._rooms.values())

    def room(self, game_id: str) -> GameRoom | None:
        """The room of ``game_id`` if it is in memory."""
        return self._rooms.get(game_id)

    def is_loading(self, game_id: str) -> bool:
        return game_id in self._loading

    async def create(self, owner: PlayerRef, deal: Deal, *, daily_date: dt.date | None = None) -> GameRoom:
        """Start a game for ``owner``; returns once the new game is stored."""
        started_at = utc_now()
        room = GameRoom(new_id(), Game(deal), owner, started_at, self.services)
        await self.services.committer.stored(
            Write(
                game=GameStart(
                    id=room.id,
                    player_id=owner.id,
                    code=room.code,
                    cells=deal.cells,
                    daily_date=daily_date,
                    started_at=started_at,
                )
            )
        )
        self._add(room)
        return room

    async def find(self, game_id: str) -> GameRoom | FinishedGame:
        """The room of ``game_id``, loading an unfinished game from the database; a finished game comes
        back as its final position. Concurrent finds of one game share one load.

        Raises:
            Refusal: not_found.
            StorageUnavailable: the database could not be read.
        """
        room = self._rooms.get(game_id)
        if room is not None:
            return room
        finished = self._finished.get(game_id)
        if finished is not None:
            self._finished.move_to_end(game_id)
            return finished
        loading = self._loading.get(game_id)
        if loading is None:
            loading = asyncio.get_running_loop().create_future()
            self._loading[game_id] = loading
            try:
                loading.set_result(await self._load(game_id))
            except BaseException as exc:
                loading.set_exception(exc)
                loading.exception()  # retrieved: waiters re-raise it below
            finally:
                del self._loading[game_id]
                self.remote.drop_early(game_id)  # applied by _load, or moot after a failure
            return loading.result()
        self._awaiting[game_id] = self._awaiting.get(game_id, 0) + 1
        try:  # until this find resumes, the loaded room is in use: see forget_if_idle
            return await asyncio.shield(loading)
        finally:
            if self._awaiting[game_id] == 1:
                del self._awaiting[game_id]
            else:
                self._awaiting[game_id] -= 1

    async def _read(self, game_id: str) -> StoredGame | None:
        async with self._database.connection() as conn:
            return await repository.load_game(conn, game_id)

    async def _load(self, game_id: str) -> GameRoom | FinishedGame:
        async with self._database.connection() as conn:
            stored = await repository.load_game(conn, game_id)
            player = await repository.get_player(conn, stored.player_id) if stored else None
        if stored is None or player is None:
            raise Refusal(ErrorCode.NOT_FOUND, f"no game {game_id}")
        owner = PlayerRef(player.id, player.name)
        game = await asyncio.to_thread(replay_stored, stored)  # a long log must not stall the loop
        if stored.status != Status.PLAYING.value or game.is_over():
            finished = FinishedGame(stored.id, owner, stored.started_at, game)
            self._cache(finished)
            return finished
        room = GameRoom(stored.id, game, owner, stored.started_at, self.services)
        self._add(room)
        for event in self.remote.take_early(game_id):
            self.remote.deliver_to(room, event)
        return room

    def _add(self, room: GameRoom) -> None:
        self._rooms[room.id] = room
        self._metrics.live_games.set(len(self._rooms))

    def _cache(self, finished: FinishedGame) -> None:
        self._finished[finished.id] = finished
        self._finished.move_to_end(finished.id)
        while len(self._finished) > FINISHED_CACHE_SIZE:
            self._finished.popitem(last=False)

    def forget_if_idle(self, room: GameRoom) -> None:
        """Drop a room nobody follows, no operation holds or waits for, and no find waits to be handed
        (the database keeps it): memory stays bounded by what is followed. Callers of `find` call this
        once done with the room."""
        if not room.is_followed() and not room.is_busy() and room.id not in self._awaiting:
            self._drop(room)

    def _forget(self, room: GameRoom) -> None:
        """A room ended (its game finished) or was replaced: it leaves the map; a finished one's final
        position goes to the cache."""
        if room.ended is not None:
            self._cache(room.ended)
        self._drop(room)

    def _drop(self, room: GameRoom) -> None:
        """Let ``room`` go, closed: a caller still holding it (view, watch) is sent back to `find`,
        which loads the game again, so nobody follows a room the registry no longer holds."""
        room.replaced = True
        if self._rooms.get(room.id) is room:
            del self._rooms[room.id]
            self._metrics.live_games.set(len(self._rooms))


class RemoteCommits:
    """Hands the actions other nodes commit (from the bus) to this node's rooms, in arrival order."""

    def __init__(self, registry: RoomRegistry, bus: Bus) -> None:
        self._registry = registry
        self._bus = bus
        self._early: dict[str, list[BusEvent]] = {}  # events of games being loaded
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        await self._bus.start(self._on_event)

    async def close(self) -> None:
        await self._bus.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _on_event(self, event: BusEvent) -> None:
        room = self._registry.room(event.game)
        if room is not None:
            self.deliver_to(room, event)
        elif self._registry.is_loading(event.game):  # the load may have read before this commit
            self._early.setdefault(event.game, []).append(event)

    def take_early(self, game_id: str) -> list[BusEvent]:
        return self._early.pop(game_id, [])

    def drop_early(self, game_id: str) -> None:
        self._early.pop(game_id, None)

    def deliver_to(self, room: GameRoom, event: BusEvent) -> None:
        """Apply ``event`` in a task; tasks take the room's FIFO turn in creation order, so the room
        sees events in order."""
        task = asyncio.get_running_loop().create_task(room.apply_remote(event))
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("following another node's action failed", exc_info=task.exception())
