"""The game hub: authoritative games in memory, one writer per game, and their audiences.

A ``GameRoom`` owns one ``engine.Game``. Its lock makes it the single writer: an action is checked
and applied, committed through the ``Committer`` and only then acknowledged and pushed, in version
order, to the owner's other connections and to every spectator. A room whose commit fails is rebuilt
from its own log minus the failed action, so memory never claims what the database does not hold.

Rooms live while someone looks at them; the database holds everything else, and ``open_room``
rebuilds any unfinished game by replaying its actions from the deal.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from engine import Action, Deal, Game, Status, Transfer, parse_action
from protocol import builders
from protocol.errors import RequestId
from server.bus import Bus, BusEvent, LocalBus
from server.committer import Committer, StorageUnavailable, Write, WriteConflict
from server.ids import new_id
from server.metrics import Metrics
from server.storage import Database, GameResult, GameStart, StoredGame, repository
from server.storage.unfinished import ABANDONED

__all__ = ["Audience", "FinishedGame", "GameHub", "GameRoom", "PlayerRef", "Pusher", "Refusal"]

logger = logging.getLogger(__name__)


class Refusal(Exception):
    """A request the server refuses; ``code`` is the protocol error code sent back."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class PlayerRef:
    id: str
    name: str

    def wire(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name}


class Audience(Protocol):
    """A connection as the hub sees it: who it is and which games it follows."""

    player: PlayerRef | None
    games: set[str]
    watching: set[str]


class Pusher(Protocol):
    """Sends one server message to many connections without waiting for any of them."""

    def __call__(self, audience: Iterable[Any], message: dict[str, Any]) -> None: ...


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(eq=False, slots=True)
class GameRoom:
    """One game in memory and the connections that follow it."""

    id: str
    game: Game
    owner: PlayerRef
    started_at: dt.datetime
    viewers: set[Audience] = field(default_factory=set)
    spectators: set[Audience] = field(default_factory=set)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def code(self) -> str:
        return self.game.deal.code()

    def is_followed(self) -> bool:
        return bool(self.viewers or self.spectators)

    def result(self, finished_at: dt.datetime) -> GameResult:
        game = self.game
        return GameResult(
            id=self.id,
            status=game.status.value,
            score=game.score,
            moves=game.moves,
            undos=game.undos,
            finished_at=finished_at,
            duration_ms=duration_ms(self.started_at, finished_at),
            won=game.status is Status.WON,
        )

    def rebuild(self, actions: Iterable[Action]) -> None:
        """Replace the game by a replay of ``actions``: the way back to what the database holds."""
        self.game = Game.replay(self.game.deal, actions)


def duration_ms(started_at: dt.datetime, finished_at: dt.datetime) -> int:
    return max(0, int((finished_at - started_at).total_seconds() * 1000))


@dataclass(frozen=True, slots=True)
class FinishedGame:
    """A game no longer in play, as stored, with its owner."""

    stored: StoredGame
    owner: PlayerRef


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an applied action produced, for the requester: the transfer and, if it ended, the end."""

    transfer: Transfer
    finished_at: dt.datetime | None


class GameHub:
    """Finds, creates, runs and forgets game rooms. Owned by the app, never a module global."""

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
        self._committer = committer
        self._metrics = metrics
        self._push = push
        self._node = node
        self._bus: Bus = bus or LocalBus()
        self._distributed = not isinstance(self._bus, LocalBus)  # no event to build for nobody
        self._rooms: dict[str, GameRoom] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._early_events: dict[str, list[BusEvent]] = {}  # bus events of games being loaded
        self._loading: dict[str, asyncio.Future[GameRoom | FinishedGame]] = {}

    # ------------------------------------------------------------------ rooms

    def rooms(self) -> Iterable[GameRoom]:
        return self._rooms.values()

    async def create(self, owner: PlayerRef, deal: Deal, *, daily_date: dt.date | None = None) -> GameRoom:
        """Start a game for ``owner``; returns once the new game is stored."""
        room = GameRoom(id=new_id(), game=Game(deal), owner=owner, started_at=utc_now())
        start = GameStart(
            id=room.id,
            player_id=owner.id,
            code=room.code,
            cells=deal.cells,
            daily_date=daily_date,
            started_at=room.started_at,
        )
        await self._committer.submit(Write(game=start))
        self._add(room)
        return room

    async def find(self, game_id: str) -> GameRoom | FinishedGame:
        """The live room of ``game_id``, loading an unfinished game from the database; a finished one
        comes back as its stored record.

        Raises:
            Refusal: not_found.
        """
        room = self._rooms.get(game_id)
        if room is not None:
            return room
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
                self._early_events.pop(game_id, None)  # applied by _load, or moot after a failure
        return await asyncio.shield(loading)

    async def _load(self, game_id: str) -> GameRoom | FinishedGame:
        async with self._database.connection() as conn:
            stored = await repository.load_game(conn, game_id)
            player = await repository.get_player(conn, stored.player_id) if stored else None
        if stored is None or player is None:
            raise Refusal("not_found", f"no game {game_id}")
        if stored.status != Status.PLAYING.value:
            return FinishedGame(stored, PlayerRef(player.id, player.name))
        room = self._rooms.get(game_id)  # another task may have loaded it meanwhile
        if room is None:
            game = replay_stored(stored)
            room = GameRoom(
                id=stored.id,
                game=game,
                owner=PlayerRef(player.id, player.name),
                started_at=stored.started_at,
            )
            self._add(room)
        for event in self._early_events.pop(game_id, ()):
            self._follow(room, event)
        return room

    def _add(self, room: GameRoom) -> None:
        self._rooms[room.id] = room
        self._metrics.live_games.set(len(self._rooms))

    def is_current(self, room: GameRoom) -> bool:
        """``room`` is the one this hub serves for its game (not ended, not replaced by a reload)."""
        return self._rooms.get(room.id) is room

    def _check_current(self, room: GameRoom) -> None:
        if not self.is_current(room):
            if room.game.is_over():
                raise Refusal("illegal_move", f"game {room.id} is over")
            raise Refusal("stale", f"game {room.id} was reloaded; resume it")

    def forget_unfollowed(self, found: GameRoom | FinishedGame) -> None:
        """Call when a request that loaded ``found`` is refused: the room must not stay in memory."""
        if isinstance(found, GameRoom):
            self.forget_if_idle(found)

    def forget_if_idle(self, room: GameRoom) -> None:
        """Drop a room nobody follows (the database keeps it) so memory stays bounded."""
        if not room.is_followed() and not room.lock.locked():
            self._forget(room)

    def unfollow(self, audience: Audience, game_id: str) -> None:
        """``audience`` stops following ``game_id``, as a viewer and as a spectator."""
        audience.games.discard(game_id)
        audience.watching.discard(game_id)
        room = self._rooms.get(game_id)
        if room is not None:
            room.viewers.discard(audience)
            room.spectators.discard(audience)
            self.forget_if_idle(room)

    def detach(self, audience: Audience) -> None:
        """Forget a closing connection everywhere it followed a game."""
        for game_id in audience.games | audience.watching:
            self.unfollow(audience, game_id)

    # ------------------------------------------------------------------ actions

    async def act(
        self,
        room: GameRoom,
        requester: Audience,
        resolve: Callable[[Game], Action],
        expected_v: int | None,
    ) -> Outcome:
        """Check, apply, commit and push one action of ``room``'s owner.

        Raises:
            Refusal: stale, illegal_move.
            engine.IllegalMoveError: the rules refuse it.
            StorageUnavailable: nothing was stored; the room is as it was before.
        """
        async with room.lock:
            self._check_current(room)
            game = room.game
            if expected_v is not None and expected_v != game.v:
                raise Refusal("stale", f"game {room.id} is at v {game.v}, not {expected_v}")
            action = resolve(game)
            transfer = game.play(action)
            notation = action.symbol()
            write = Write(actions=[(room.id, game.v, notation)])
            finished_at = utc_now() if game.is_over() else None
            if finished_at is not None:
                write.result = room.result(finished_at)
            await self._commit_or_rebuild(room, write, lambda: game.log[:-1])
            if self._distributed:
                self._bus.publish(BusEvent(self._node, room.id, game.v, notation, _epoch_ms(finished_at)))
            self._announce(room, transfer, finished_at, skip=requester)
            return Outcome(transfer, finished_at)

    async def resign(self, room: GameRoom, requester: Audience) -> dt.datetime:
        """End ``room``'s game as resigned; returns when the result is stored."""
        async with room.lock:
            self._check_current(room)
            room.game.resign()
            finished_at = utc_now()
            await self._commit_or_rebuild(room, Write(result=room.result(finished_at)), lambda: room.game.log)
            if self._distributed:
                self._bus.publish(BusEvent(self._node, room.id, room.game.v, None, _epoch_ms(finished_at)))
            self._announce(room, None, finished_at, skip=requester)
            return finished_at

    def _announce(
        self, room: GameRoom, transfer: Transfer | None, finished_at: dt.datetime | None, *, skip: object
    ) -> None:
        """Push an applied action's diff, then the game_over if it ended, to every follower but ``skip``."""
        others = [*(viewer for viewer in room.viewers if viewer is not skip), *room.spectators]
        if others and transfer is not None:
            self._push(others, builders.diff(room.id, room.game, transfer))
        if finished_at is not None:
            if others:
                self._push(others, self.game_over_message(room, finished_at))
            self._close(room)

    @staticmethod
    def game_over_message(
        room: GameRoom, finished_at: dt.datetime, request_id: RequestId | None = None
    ) -> dict[str, Any]:
        result = room.result(finished_at)
        return builders.game_over(
            room.id,
            won=result.won,
            score=result.score,
            moves=result.moves,
            duration_ms=result.duration_ms,
            request_id=request_id,
        )

    # ------------------------------------------------------------------ other nodes

    async def start_bus(self) -> None:
        await self._bus.start(self._on_bus_event)

    async def close_bus(self) -> None:
        await self._bus.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _on_bus_event(self, event: BusEvent) -> None:
        room = self._rooms.get(event.game)
        if room is not None:
            self._follow(room, event)
        elif event.game in self._loading:  # the load may have read the database before this commit
            self._early_events.setdefault(event.game, []).append(event)

    def _follow(self, room: GameRoom, event: BusEvent) -> None:
        """Apply ``event`` to ``room`` in a task; tasks take the room's FIFO lock in arrival order,
        so events stay in order (and one already in the loaded state is skipped by its v)."""
        task = asyncio.get_running_loop().create_task(self._apply_remote(room, event))
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("following another node's action failed", exc_info=task.exception())

    async def _apply_remote(self, room: GameRoom, event: BusEvent) -> None:
        """Follow an action another node committed: replay it here and push it to our followers."""
        async with room.lock:
            if not self.is_current(room) or event.v < room.game.v:
                return
            finished_at = _from_epoch_ms(event.finished_at_ms)
            if event.action is None and event.v == room.game.v:
                room.game.resign()
                self._announce(room, None, finished_at, skip=None)
            elif event.action is not None and event.v == room.game.v + 1:
                transfer = room.game.play(parse_action(event.action))
                self._announce(room, transfer, finished_at, skip=None)
            elif event.v > room.game.v:
                await self._reload(room)

    async def _reload(self, room: GameRoom) -> None:
        """We missed events: take the game as the database has it (followers resync on the v gap)."""
        async with self._database.connection() as conn:
            stored = await repository.load_game(conn, room.id)
        if stored is None:
            return
        room.game = replay_stored(stored)
        if stored.status != Status.PLAYING.value:
            self._announce(room, None, stored.finished_at or utc_now(), skip=None)

    async def _commit_or_rebuild(
        self, room: GameRoom, write: Write, stored_log: Callable[[], Iterable[Action]]
    ) -> None:
        """Commit ``write``; when it fails, rebuild the room from ``stored_log()`` (what is stored)."""
        try:
            await self._committer.submit(write)
        except StorageUnavailable:
            room.rebuild(stored_log())
            raise
        except WriteConflict:
            # Another node stored this version first: take the game as stored; our followers see
            # the jump in v and resync.
            try:
                await self._reload(room)
            except Exception:
                self._close(room)
            raise Refusal("stale", f"game {room.id} changed elsewhere; resume or watch it again") from None

    def _close(self, room: GameRoom) -> None:
        """A finished game leaves memory and its followers' lists."""
        for audience in (*room.viewers, *room.spectators):
            audience.games.discard(room.id)
            audience.watching.discard(room.id)
        room.viewers.clear()
        room.spectators.clear()
        self._forget(room)

    def _forget(self, room: GameRoom) -> None:
        if self._rooms.get(room.id) is room:
            del self._rooms[room.id]
            self._metrics.live_games.set(len(self._rooms))


def _epoch_ms(moment: dt.datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)


def _from_epoch_ms(millis: int | None) -> dt.datetime | None:
    return None if millis is None else dt.datetime.fromtimestamp(millis / 1000, dt.UTC)


def replay_stored(stored: StoredGame) -> Game:
    """Rebuild a stored game through the engine, checking every action again (a resigned game ends
    resigned: resigning is not an action of the log)."""
    game = Game.replay(Deal.from_code(stored.code), (parse_action(text) for text in stored.actions))
    if stored.status in (Status.RESIGNED.value, ABANDONED):  # abandoned: the server resigned it
        game.resign()
    return game
