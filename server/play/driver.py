"""The one driver of a room: it hands the room its commands one at a time, runs the effects that come
out in order, and feeds their outcomes back.

Requests queue per room and are drained synchronously while the room waits for nothing: an action on
a free room is handled, its write submitted and (from the commit's callback) its replies sent, with
no task, future or lock of its own. While the room waits for an outcome (a commit, a load, a rebuild)
later requests stay queued, in arrival order; the outcome goes first, then the queue drains again.
Effects are run in the order the room gave them, before anything else reaches the room: a reply that
makes its connection send the next request only queues it.

What a room needs from the node (`RoomServices`) is all the I/O there is: the write pipeline, the
pusher, the bus, reading the stored game, and the registry that holds the room.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from engine import Game
from protocol import ServerMessage
from server.play.bus import Event
from server.play.commands import Command, Committed, Follower, Loaded, Outcome, Rebuilt, Request
from server.play.effects import (
    Commit,
    Effect,
    Hold,
    Leave,
    Load,
    LoadRace,
    LoadRatings,
    Observe,
    Publish,
    Push,
    Rebuild,
    Reply,
    Wake,
)
from server.play.game_room import PlayerRef
from server.play.race_commands import RaceCommand, RaceLoaded, RatingsLoaded, SeatProgress, Tick
from server.play.replay import replay_stored
from server.storage import StoredGame
from server.storage.commit_backends import Write
from server.storage.records import RaceRecord

__all__ = ["Done", "Pusher", "RoomDriver", "RoomServices", "WriteSink"]

logger = logging.getLogger(__name__)

_OUTCOMES = (Committed, Loaded, Rebuilt, RatingsLoaded, RaceLoaded)
_STORED = Committed(None)  # a value: one for every commit that stored its write

#: Told a write's outcome, on the event loop: None once it is committed, else why nothing was stored.
Done = Callable[[Exception | None], None]


class WriteSink(Protocol):
    """Stores writes (`server.storage.committer.Committer`): ``done`` is called on the event loop with the
    outcome, never from inside ``submit``."""

    def submit(self, write: Write, done: Done) -> None: ...


class Pusher(Protocol):
    """Sends one server message to many connections without waiting for any of them."""

    def __call__(self, audience: Iterable[Any], message: ServerMessage) -> None: ...


class RoomState(Protocol):
    """What the driver needs of a room: a state machine that turns each command into effects and
    says when it waits for an outcome (`server.play.game_room.GameRoom`; a race room is another)."""

    @property
    def id(self) -> str: ...

    @property
    def owner(self) -> PlayerRef: ...

    @property
    def spectators(self) -> set[Follower]: ...

    @property
    def awaiting(self) -> object:
        """What outcome the room waits for before its next request (None: nothing)."""

    def handle(self, command: Any) -> list[Effect]:
        """The effects of ``command``: one of the room's own commands (`server.play.commands`, or
        for a race `server.play.race_commands`), or the outcome of an effect it asked for."""

    def is_open(self) -> bool: ...

    def is_followed(self) -> bool: ...


Room = TypeVar("Room", bound=RoomState)


@dataclass(frozen=True, slots=True)
class RoomServices:
    """What the rooms of a node need from it: storing, pushing, telling other nodes (None: no other
    node follows), reading a stored game, and the registry's word that a room left or went idle."""

    committer: WriteSink
    push: Pusher
    publish: Callable[[Event], None] | None
    load: Callable[[str], Awaitable[StoredGame | None]]
    left: Callable[[Any], None]
    idle: Callable[[Any], None]
    #: Tells a race of its seat's commit (None: the node has no races).
    observe: Callable[[str, SeatProgress], None] | None = None
    #: Reads a finished race's rating changes: player id → shown rating (before, after).
    load_ratings: Callable[[str], Awaitable[dict[str, tuple[int, int]]]] | None = None
    #: Reads a race as stored (a copy behind another node's change, or that lost its fence).
    load_race: Callable[[str], Awaitable[RaceRecord | None]] | None = None
    #: Keeps a running race's seats' games in memory on this node (`Hold`).
    hold: Callable[[str, tuple[str, ...]], None] | None = None


class RoomDriver(Generic[Room]):
    """Runs one room: the node's handle on it (what the registry holds and sessions follow)."""

    __slots__ = ("_draining", "_queue", "_task", "room", "services")

    def __init__(self, room: Room, services: RoomServices) -> None:
        self.room = room
        self.services = services
        self._queue: collections.deque[Command | RaceCommand] = collections.deque()
        self._draining = False
        self._task: asyncio.Task[None] | None = None  # a load or a rebuild under way

    @property
    def id(self) -> str:
        return self.room.id

    @property
    def owner(self) -> PlayerRef:
        return self.room.owner

    @property
    def spectators(self) -> set[Follower]:
        """Who watches the game (``live`` counts them); read it, never change it: the room does."""
        return self.room.spectators

    def is_open(self) -> bool:
        return self.room.is_open()

    def is_busy(self) -> bool:
        """A command is queued, being handled, or the room waits for an outcome."""
        return bool(self._queue) or self._draining or self.room.awaiting is not None

    def send(self, command: Request | RaceCommand) -> None:
        """Queue a request; it is handled now when the room waits for nothing (then without passing
        through the queue)."""
        if self._draining or self._queue or self.room.awaiting is not None:
            self._queue.append(command)
            self._drain()
        else:
            self._drain(command)

    def ask(self, make: Callable[[Callable[[Any], None]], Request | RaceCommand]) -> asyncio.Future[Any]:
        """Send ``make(reply_to)`` and return a future of its reply (for callers that await: watch,
        resume, resign, hints; an action's caller passes its own ``reply_to`` to ``send``). Cancelling
        the future withdraws nothing: the room goes on as if its caller were still there."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def reply_to(outcome: Any) -> None:
            if not future.done():
                future.set_result(outcome)

        self.send(make(reply_to))
        return future

    # ------------------------------------------------------------------ the loop

    def _outcome(self, outcome: Outcome | RatingsLoaded | RaceLoaded) -> None:
        """An outcome the room waits for: it goes before every queued request."""
        if self._draining:
            self._queue.appendleft(outcome)  # the loop below takes it in turn
        else:
            self._drain(outcome)

    def _drain(self, first: Command | RaceCommand | None = None) -> None:
        """Hand the room ``first`` (a request it may take now, or the outcome it waits for), then what
        is queued, until it waits for an outcome or nothing is left."""
        if self._draining:
            return  # sent from one of our effects: the loop below takes it in turn
        self._draining = True
        room, queue = self.room, self._queue
        command = first
        try:
            while command is not None or (
                queue and (room.awaiting is None or isinstance(queue[0], _OUTCOMES))
            ):
                if command is None:
                    command = queue.popleft()
                try:
                    effects = room.handle(command)
                except Exception as bug:  # the room's bug: the requester is answered all the same
                    logger.exception("game %s failed on %s", room.id, type(command).__name__)
                    effects = _answer_bug(command, bug)
                command = None
                self._run(effects)
        finally:
            self._draining = False
        if not queue and room.awaiting is None and not room.is_followed():
            self.services.idle(self)

    def _run(self, effects: list[Effect]) -> None:
        for effect in effects:
            try:
                if isinstance(effect, Commit):
                    self._commit(effect.write)
                elif isinstance(effect, Reply):
                    effect.reply_to(effect.outcome)
                elif isinstance(effect, Push):
                    self.services.push(effect.audience, effect.message())
                elif isinstance(effect, Publish):
                    if self.services.publish is not None:
                        self.services.publish(effect.event)
                elif isinstance(effect, Leave):
                    self.services.left(self)
                elif isinstance(effect, Observe):
                    if self.services.observe is not None:
                        self.services.observe(effect.race, effect.progress)
                elif isinstance(effect, Wake):
                    asyncio.get_running_loop().call_later(effect.delay, self.send, Tick(effect.at))
                elif isinstance(effect, Load):
                    self._start(self._load())
                elif isinstance(effect, LoadRatings):
                    self._start(self._load_ratings(effect.race))
                elif isinstance(effect, LoadRace):
                    self._start(self._load_race(effect.race))
                elif isinstance(effect, Hold):
                    if self.services.hold is not None:
                        self.services.hold(effect.race, effect.games)
                else:
                    self._start(self._rebuild(effect))
            except Exception:  # a bug in what an effect calls: the room's other effects still run
                logger.exception("game %s failed on %s", self.room.id, type(effect).__name__)

    # ------------------------------------------------------------------ effects with an outcome

    def _commit(self, write: Write) -> None:
        try:
            self.services.committer.submit(write, self._committed)
        except Exception as refused:  # the pipeline is stopping: nothing was stored. Fed back from
            # the next loop iteration, as a commit's outcome: never from inside the room's handling
            asyncio.get_running_loop().call_soon(self._committed, refused)

    def _committed(self, error: Exception | None) -> None:
        self._outcome(_STORED if error is None else Committed(error))

    def _start(self, work: Awaitable[Outcome | RatingsLoaded | RaceLoaded]) -> None:
        async def run() -> None:
            outcome = await work
            self._task = None
            self._outcome(outcome)

        self._task = asyncio.get_running_loop().create_task(run())

    async def _load(self) -> Loaded:
        """The game as stored, rebuilt off the event loop (a long log must not stall it)."""
        try:
            stored = await self.services.load(self.room.id)
            if stored is None:
                return Loaded(None)
            game = await asyncio.to_thread(replay_stored, stored)
        except Exception as exc:
            logger.warning("reading game %s as stored failed", self.room.id, exc_info=True)
            return Loaded(None, error=exc)
        return Loaded(game, stored.finished_at)

    async def _load_ratings(self, race_id: str) -> RatingsLoaded:
        try:
            assert self.services.load_ratings is not None, "a race room on services that read no ratings"
            return RatingsLoaded(await self.services.load_ratings(race_id))
        except Exception as exc:
            logger.warning("reading race %s's rating changes failed", race_id, exc_info=True)
            return RatingsLoaded({}, error=exc)

    async def _load_race(self, race_id: str) -> RaceLoaded:
        try:
            assert self.services.load_race is not None, "a race room on services that read no races"
            return RaceLoaded(await self.services.load_race(race_id))
        except Exception as exc:
            logger.warning("reading race %s as stored failed", race_id, exc_info=True)
            return RaceLoaded(None, error=exc)

    async def _rebuild(self, effect: Rebuild) -> Rebuilt:
        try:
            return Rebuilt(await asyncio.to_thread(Game.replay, effect.deal, effect.log))
        except asyncio.CancelledError:  # shutting down: the room must still never keep the action
            return Rebuilt(Game.replay(effect.deal, effect.log))


def _answer_bug(command: Command | RaceCommand, bug: Exception) -> list[Effect]:
    """A request the room failed on is answered with the failure (an outcome has no one to tell)."""
    reply_to = getattr(command, "reply_to", None)
    return [Reply(reply_to, bug)] if reply_to is not None else []
