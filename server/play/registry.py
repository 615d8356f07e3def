"""The node's rooms: which unfinished games are in memory, loading them, and finished games' positions.

`RoomRegistry` is the only owner of the map from game id to room (`GameRoomDriver`), and the only writer
of a game room's ``replaced``. A room lives while someone follows it or it is busy; the database keeps
everything else. Loading a game reads it from the database and replays its log in a worker thread, so
a long game never stalls the event loop; finished games' final positions are kept in a bounded cache,
so watching one again costs no replay.

`RemoteCommits` hands the other nodes' commits (from the bus), in arrival order, to the room of this
node that holds the game (or keeps them until a load in progress finishes), their races' stored
changes to the node's races, and quick match's seatings to the node's quick match.

A running race held on this node pins its seats' games (`pin`): their rooms stay though nobody
follows them here, so the other nodes' commits replay through them and reach the race.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Final, TypeAlias

from engine import Deal, Game, Status
from server.clock import utc_now
from server.errors import ErrorCode, Refusal
from server.ids import new_id
from server.metrics import Metrics
from server.play.bus import Bus, BusEvent, Event, LocalBus, QuickRaceEvent, RaceEvent
from server.play.commands import RemoteCommit
from server.play.driver import NO_RACES, Pusher, RaceHooks, RoomDriver, RoomServices
from server.play.game_room import FinishedGame, GameRoom, PlayerRef
from server.play.presence import Presence
from server.play.replay import replay_stored
from server.storage import Database, GameStart, StoredGame, races, repository
from server.storage.committer import AddGame, Committer

__all__ = ["FINISHED_CACHE_SIZE", "GameRoomDriver", "RemoteCommits", "RoomRegistry"]

logger = logging.getLogger(__name__)

#: The node's handle on a game's room.
GameRoomDriver: TypeAlias = RoomDriver[GameRoom]
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
        races: RaceHooks = NO_RACES,
        quick_races: Callable[[QuickRaceEvent], None] | None = None,
    ) -> None:
        """``quick_races``: told of the quick races other processes formed (the node's quick match,
        `server.play.race.quick_match`; None: a node without one ignores them)."""
        self._database = database
        self._committer = committer
        self._metrics = metrics
        self.node = node
        bus = bus or LocalBus()
        self._publishes = not isinstance(bus, LocalBus)  # no event built for nobody
        self._races = races
        self.services = RoomServices(
            committer=committer,
            push=push,
            publish=bus.publish,
            load=self._read,
            left=self._left,
            idle=self.forget_if_idle,
            races=races,
        )
        self._pinned: set[str] = set()  # games a running race of this node holds (see `pin`)
        self._rooms: dict[str, GameRoomDriver] = {}
        self._finished: OrderedDict[str, FinishedGame] = OrderedDict()
        self._loading: dict[str, asyncio.Future[GameRoomDriver | FinishedGame]] = {}
        self._awaiting: dict[str, int] = {}  # finds of a game waiting on its load (or about to resume)
        self.remote = RemoteCommits(self, bus, races, quick_races)
        self.presence = Presence(committer.stored, database, node)  # the map below, mirrored for `live`

    @property
    def publishes(self) -> bool:
        """Other nodes may hold the same rooms: committed changes are told on the bus."""
        return self._publishes

    def pin(self, game_id: str) -> None:
        """Keep ``game_id``'s room in memory though nobody follows it (a race seat's game whose race
        this node holds), until `unpin`."""
        self._pinned.add(game_id)

    def unpin(self, game_id: str) -> None:
        self._pinned.discard(game_id)
        room = self._rooms.get(game_id)
        if room is not None:
            self.forget_if_idle(room)

    def close_at(self, game_id: str, at: dt.datetime) -> None:
        """A race seat's game in memory here takes no action from ``at`` on (its race ended then)."""
        room = self._rooms.get(game_id)
        if room is not None and (room.room.closes_at is None or at < room.room.closes_at):
            room.room.closes_at = at

    def rooms(self) -> list[GameRoomDriver]:
        return list(self._rooms.values())

    def room(self, game_id: str) -> GameRoomDriver | None:
        """The room of ``game_id`` if it is in memory."""
        return self._rooms.get(game_id)

    def is_loading(self, game_id: str) -> bool:
        return game_id in self._loading

    async def create(
        self, owner: PlayerRef, deal: Deal, *, daily_date: dt.date | None = None
    ) -> GameRoomDriver:
        """Start a game for ``owner``; returns once the new game is stored."""
        started_at = utc_now()
        room = self._room(GameRoom(new_id(), Game(deal), owner, started_at))
        start = GameStart(room.id, owner.id, room.room.code, deal.cells, daily_date, started_at)
        await self._committer.stored(AddGame(start))
        self._add(room)
        return room

    async def find(self, game_id: str) -> GameRoomDriver | FinishedGame:
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
        self._awaiting[game_id] = self._awaiting.get(game_id, 0) + 1
        try:  # until this find is back with its caller, the loaded room is in use: see forget_if_idle
            if loading is not None:
                return await asyncio.shield(loading)
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
        finally:
            if self._awaiting[game_id] == 1:
                del self._awaiting[game_id]
            else:
                self._awaiting[game_id] -= 1

    async def _read(self, game_id: str) -> StoredGame | None:
        async with self._database.connection() as conn:
            return await repository.load_game(conn, game_id)

    async def _load(self, game_id: str) -> GameRoomDriver | FinishedGame:
        async with self._database.connection() as conn:
            stored = await repository.load_game(conn, game_id)
            player = await repository.get_player(conn, stored.player_id) if stored else None
            race_id = stored.race_id if stored else None
            closes_at = await races.race_ends_at(conn, race_id) if race_id else None
        if stored is None or player is None:
            raise Refusal(ErrorCode.NOT_FOUND, f"no game {game_id}")
        owner = PlayerRef.of(player.id, player.name, bot=player.bot)
        game = await asyncio.to_thread(replay_stored, stored)  # a long log must not stall the loop
        if stored.status != Status.PLAYING.value or game.is_over():
            finished = FinishedGame(stored.id, owner, stored.started_at, game)
            self._cache(finished)
            return finished
        room = self._room(GameRoom(stored.id, game, owner, stored.started_at))
        if race_id is not None:  # a race seat's game: it tells the race, and closes at the time limit
            room.room.race, room.room.closes_at = race_id, closes_at
            self._races.ensure(race_id)  # the race is held here too, so its commits reach it
        self._add(room)
        for event in self.remote.take_early(game_id):
            room.send(RemoteCommit(event))
        return room

    def _room(self, room: GameRoom) -> GameRoomDriver:
        room.node, room.publishes = self.node, self._publishes
        return RoomDriver(room, self.services)

    def _add(self, room: GameRoomDriver) -> None:
        self._rooms[room.id] = room
        self.presence.held(room.id)
        self._metrics.live_games.set(len(self._rooms))

    def _cache(self, finished: FinishedGame) -> None:
        self._finished[finished.id] = finished
        self._finished.move_to_end(finished.id)
        while len(self._finished) > FINISHED_CACHE_SIZE:
            self._finished.popitem(last=False)

    def forget_if_idle(self, room: GameRoomDriver) -> None:
        """Drop a room nobody follows, that is not busy and that no find waits to be handed (the
        database keeps it): memory stays bounded by what is followed. Its driver asks this each
        time it goes idle; a caller that found a room and did not follow it asks it too."""
        if (
            not room.room.is_followed()
            and not room.is_busy()
            and room.id not in self._awaiting
            and room.id not in self._pinned
        ):
            self._drop(room)

    def _left(self, room: GameRoomDriver) -> None:
        """A room closed (its game finished, or its stored game could not be read): it leaves the map;
        a finished one's final position goes to the cache."""
        if room.room.ended is not None:
            self._cache(room.room.ended)
        self._drop(room)

    def _drop(self, room: GameRoomDriver) -> None:
        """Let ``room`` go, closed: a caller still holding it (view, watch) is sent back to `find`,
        which loads the game again, so nobody follows a room the registry no longer holds."""
        room.room.replaced = True
        if self._rooms.get(room.id) is room:
            del self._rooms[room.id]
            self.presence.released(room.id)
            self._metrics.live_games.set(len(self._rooms))


class RemoteCommits:
    """Hands the changes other nodes commit (from the bus) to this node's rooms, in arrival order."""

    def __init__(
        self,
        registry: RoomRegistry,
        bus: Bus,
        races: RaceHooks,
        quick_races: Callable[[QuickRaceEvent], None] | None = None,
    ) -> None:
        self._registry = registry
        self._bus = bus
        self._races = races
        self._quick_races = quick_races
        self._early: dict[str, list[BusEvent]] = {}  # events of games being loaded

    async def start(self) -> None:
        await self._bus.start(self._on_event)

    async def close(self) -> None:
        await self._bus.close()

    def _on_event(self, event: Event) -> None:
        if isinstance(event, RaceEvent):
            self._races.race_changed(event)
            return
        if isinstance(event, QuickRaceEvent):
            if self._quick_races is not None:
                self._quick_races(event)
            return
        room = self._registry.room(event.game)
        if room is not None:
            room.send(RemoteCommit(event))
        elif self._registry.is_loading(event.game):  # the load may have read before this commit
            self._early.setdefault(event.game, []).append(event)

    def take_early(self, game_id: str) -> list[BusEvent]:
        return self._early.pop(game_id, [])

    def drop_early(self, game_id: str) -> None:
        self._early.pop(game_id, None)
