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
from protocol import Player as PlayerRef
from protocol import ServerMessage
from server.play.bus import Event, RaceEvent
from server.play.commands import (
    Committed,
    Follower,
    Loaded,
    Outcome,
    RaceLoaded,
    RatingsLoaded,
    Rebuilt,
    Tick,
)
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
    SeatProgress,
    Wake,
)
from server.play.replay import replay_stored
from server.storage import StoredGame
from server.storage.commit_backends import Write
from server.storage.committer import Done
from server.storage.records import RaceRecord

__all__ = ["NO_RACES", "NoRaces", "Pusher", "RaceHooks", "RoomDriver", "RoomServices", "WriteSink"]

logger = logging.getLogger(__name__)

#: A command of the room's own kind: a game's (`server.play.commands`) or a race's
#: (`server.play.race.commands`); the room's ``handle`` says which it takes.
_Command = Any
_OUTCOMES = (Committed, Loaded, Rebuilt, RatingsLoaded, RaceLoaded)
_STORED = Committed(None)  # a value: one for every commit that stored its write


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
        for a race `server.play.race.commands`), or the outcome of an effect it asked for."""

    def is_open(self) -> bool: ...

    def is_followed(self) -> bool: ...


Room = TypeVar("Room", bound=RoomState)


class RaceHooks(Protocol):
    """What the rooms of a node ask of its races (`server.play.race.registry.RaceRegistry`; a node
    without races has `NO_RACES`)."""

    def observe(self, race_id: str, progress: SeatProgress) -> None:
        """A seat's game committed ``progress``: its race, held here, is told."""

    def ensure(self, race_id: str) -> None:
        """A seat's game is played on this node: a copy of its race is held here too."""

    def race_changed(self, event: RaceEvent) -> None:
        """Another node stored a change of a race: the copy held here catches up."""

    async def load_ratings(self, race_id: str) -> dict[str, tuple[int, int]]:
        """What a finished race did to its players' shown ratings: player id → (before, after)."""

    async def load_race(self, race_id: str) -> RaceRecord | None:
        """The race as stored (a copy behind another node's change, or that lost its fence)."""

    def hold(self, race_id: str, games: tuple[str, ...]) -> None:
        """Keep a running race's seats' games in memory on this node (`Hold`)."""


class NoRaces:
    """The races of a node that has none: games are told nothing, and no room reads a race."""

    def observe(self, race_id: str, progress: SeatProgress) -> None:
        return None

    def ensure(self, race_id: str) -> None:
        return None

    def race_changed(self, event: RaceEvent) -> None:
        return None

    async def load_ratings(self, race_id: str) -> dict[str, tuple[int, int]]:
        raise LookupError(f"this node holds no races: race {race_id}")

    async def load_race(self, race_id: str) -> RaceRecord | None:
        raise LookupError(f"this node holds no races: race {race_id}")

    def hold(self, race_id: str, games: tuple[str, ...]) -> None:
        return None


NO_RACES: RaceHooks = NoRaces()


@dataclass(frozen=True, slots=True)
class RoomServices:
    """What the rooms of a node need from it: storing, pushing, telling other nodes, reading a stored
    game, the registry's word that a room left or went idle, and the node's races."""

    committer: WriteSink
    push: Pusher
    publish: Callable[[Event], None]
    load: Callable[[str], Awaitable[StoredGame | None]]
    left: Callable[[Any], None]
    idle: Callable[[Any], None]
    races: RaceHooks = NO_RACES


class RoomDriver(Generic[Room]):
    """Runs one room: the node's handle on it (what the registry holds and sessions follow)."""

    __slots__ = ("_answered", "_draining", "_queue", "_task", "room", "services")

    def __init__(self, room: Room, services: RoomServices) -> None:
        self.room = room
        self.services = services
        self._queue: collections.deque[_Command] = collections.deque()
        self._draining = False
        self._answered = False  # a command's effects resolved an `ask`: its awaiting caller goes next
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

    def send(self, command: _Command) -> None:
        """Queue a request; it is handled now when the room waits for nothing (then without passing
        through the queue)."""
        if self._draining or self._queue or self.room.awaiting is not None:
            self._queue.append(command)
            self._drain()
        else:
            self._drain(command)

    def ask(self, make: Callable[[Callable[[Any], None]], _Command]) -> asyncio.Future[Any]:
        """Send ``make(reply_to)`` and return a future of its reply (for callers that await: watch,
        resume, resign, hints; an action's caller passes its own ``reply_to`` to ``send``). Cancelling
        the future withdraws nothing: the room goes on as if its caller were still there."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def reply_to(outcome: Any) -> None:
            if not future.done():
                future.set_result(outcome)
                self._answered = True

        self.send(make(reply_to))
        return future

    # ------------------------------------------------------------------ the loop

    def _outcome(self, outcome: Outcome | RatingsLoaded | RaceLoaded) -> None:
        """An outcome the room waits for: it goes before every queued request."""
        if self._draining:
            self._queue.appendleft(outcome)  # the loop below takes it in turn
        else:
            self._drain(outcome)

    def _drain(self, first: _Command | None = None) -> None:
        """Hand the room ``first`` (a request it may take now, or the outcome it waits for), then what
        is queued, until it waits for an outcome or nothing is left.

        After a command whose effects answered an awaited request (`ask`), the rest waits for the
        next turn of the loop, so that the caller's reply is written first: a connection's reply
        (the snapshot of a ``watch``, the ``race`` of a ``race_join``) then comes before every push
        the room makes after it, which the connection, following the room from its reply on, gets
        too (protocol section 4, Order)."""
        if self._draining:
            return  # sent from one of our effects: the loop below takes it in turn
        self._draining = True
        room, queue = self.room, self._queue
        command = first
        paused = False
        try:
            while command is not None or self._may_take(queue):
                if command is None:
                    command = queue.popleft()
                try:
                    effects = room.handle(command)
                except Exception as bug:  # the room's bug: the requester is answered all the same
                    logger.exception("game %s failed on %s", room.id, type(command).__name__)
                    effects = _answer_bug(command, bug)
                command = None
                self._answered = False
                self._run(effects)
                if self._answered and self._may_take(queue):
                    paused = True  # still draining, for `send` and `_outcome`: they only queue
                    asyncio.get_running_loop().call_soon(self._resume)
                    return
        finally:
            self._answered = False
            self._draining = paused
        if not queue and room.awaiting is None and not room.is_followed():
            self.services.idle(self)

    def _may_take(self, queue: collections.deque[_Command]) -> bool:
        """The room may take the first queued command now: it waits for nothing, or it is the outcome."""
        return bool(queue) and (self.room.awaiting is None or isinstance(queue[0], _OUTCOMES))

    def _resume(self) -> None:
        """Drain on, the awaiting caller having run (see `_drain`)."""
        self._draining = False
        self._drain()

    def _run(self, effects: list[Effect]) -> None:
        services = self.services
        for effect in effects:
            try:
                match effect:
                    case Commit(write):
                        self._commit(write)
                    case Reply(reply_to, outcome):
                        reply_to(outcome)
                    case Push(audience, message):
                        services.push(audience, message())
                    case Publish(event):
                        services.publish(event)
                    case Leave():
                        services.left(self)
                    case Observe(race, progress):
                        services.races.observe(race, progress)
                    case Wake(delay, at):
                        asyncio.get_running_loop().call_later(delay, self.send, Tick(at))
                    case Load():
                        self._start(self._load())
                    case LoadRatings(race):
                        self._start(self._load_ratings(race))
                    case LoadRace(race):
                        self._start(self._load_race(race))
                    case Hold(race, games):
                        services.races.hold(race, games)
                    case Rebuild():
                        self._start(self._rebuild(effect))
                    case _:
                        raise TypeError(f"no room effect {effect!r}")
            except Exception:  # a bug in what an effect calls: the room's other effects still run
                logger.exception("room %s failed on %s", self.room.id, type(effect).__name__)

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
            return RatingsLoaded(await self.services.races.load_ratings(race_id))
        except Exception as exc:
            logger.warning("reading race %s's rating changes failed", race_id, exc_info=True)
            return RatingsLoaded({}, error=exc)

    async def _load_race(self, race_id: str) -> RaceLoaded:
        try:
            return RaceLoaded(await self.services.races.load_race(race_id))
        except Exception as exc:
            logger.warning("reading race %s as stored failed", race_id, exc_info=True)
            return RaceLoaded(None, error=exc)

    async def _rebuild(self, effect: Rebuild) -> Rebuilt:
        try:
            return Rebuilt(await asyncio.to_thread(Game.replay, effect.deal, effect.log))
        except asyncio.CancelledError:  # shutting down: the room must still never keep the action
            return Rebuilt(Game.replay(effect.deal, effect.log))


def _answer_bug(command: _Command, bug: Exception) -> list[Effect]:
    """A request the room failed on is answered with the failure (an outcome has no one to tell)."""
    reply_to = getattr(command, "reply_to", None)
    return [Reply(reply_to, bug)] if reply_to is not None else []
