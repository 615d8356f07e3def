"""A game room: one game in memory, the connections that follow it, and every operation on it.

The room is the single writer of its game. Each operation (act, resign, watch, view, a remote commit, a
reload) runs in the room's ``turn``, so they happen one at a time in arrival order (first come, first
served), and every reader of ``room.game`` holds the turn: what they see is committed state. An action
is applied in place by the operation holding the turn, committed through the write pipeline, and only
then acknowledged and pushed; if the commit fails, the game is rebuilt without it before the turn is
released (rare, and a bounded replay: `MAX_GAME_ACTIONS`). So a given (game, v) means one position
everywhere, and nothing a client sees was refused by the database. (Applying to a copy instead would
cost every action a copy of the whole game, its log included.)

An action is the hot path, so it needs no task: when the turn is free, ``try_act`` takes it, checks,
applies and submits the action at once, and the commit's callback announces it (or undoes it), releases
the turn and answers the requester. ``act`` is the same pieces for a caller that awaits (the room was
busy). A write conflict is the one outcome that needs awaiting (the stored game is read again): a task
then holds the turn until the room has taken the stored game.

Every change of a game passes the (game, v) fence of the ``actions`` table: a move, an undo, and a
resignation too (stored as a ``resign`` row at the next version, see `RESIGN`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from engine import Action, Deal, EngineError, Game, Layout, Status, Transfer, parse_action
from protocol import Ack, Diff, GameOver, Player, ServerMessage, Snapshot
from protocol.errors import RequestId
from protocol.limits import MAX_GAME_ACTIONS
from server.bus import BusEvent
from server.clock import utc_now
from server.committer import Done, Write, WriteConflict
from server.errors import ErrorCode, Refusal
from server.storage import ActionRecord, GameProgress, GameResult, StoredGame
from server.storage.unfinished import ABANDONED

__all__ = [
    "RESIGN",
    "Answer",
    "FinishedGame",
    "Follower",
    "GameRoom",
    "PlayerRef",
    "Pusher",
    "RoomServices",
    "Turn",
    "UnreplayableAction",
    "WriteSink",
    "replay_stored",
]

logger = logging.getLogger(__name__)

#: The notation of a resignation in the action log: the row that puts resigning behind the fence.
RESIGN = "resign"
#: Seconds at least between two updates of a game's row (score, moves, undos, ``active_at``) while it is
#: played: the first action after the interval carries the game's figures, the others none. What ``live``
#: lists is always committed state, but not always the latest: a game paused after a burst of actions
#: keeps the figures of the burst's first action until it is played again or ends (the end writes the
#: final ones).
PROGRESS_INTERVAL = 10.0
#: A failed action of a game longer than this is taken back by a replay in a worker thread, not on the
#: event loop: a database outage fails every action in flight at once, and replaying each of a thousand
#: long games (up to `MAX_GAME_ACTIONS`) inline would stall every connection for seconds.
REPLAY_INLINE_ACTIONS = 100

#: Who plays a game or a connection: the protocol's ``{id, name}``.
PlayerRef = Player


class Follower(Protocol):
    """A connection as a room sees it: something messages are pushed to (see `server.session.Session`)."""

    subprotocol: Any
    transport: Any
    last_seen: float


class WriteSink(Protocol):
    """Stores writes: `server.committer.Committer`, the node's group-commit pipeline. ``submit`` calls
    ``done`` on the event loop with the outcome (never from inside ``submit``); ``stored``'s awaitable
    is done once the write is committed."""

    def submit(self, write: Write, done: Done) -> None: ...

    def stored(self, write: Write) -> Awaitable[None]: ...


#: Told an action's outcome, once: the requester's replies, or why it was refused (`Refusal`,
#: `StorageUnavailable`, or a bug's exception).
Answer = Callable[[list[ServerMessage] | Exception], None]


class Pusher(Protocol):
    """Sends one server message to many connections without waiting for any of them."""

    def __call__(self, audience: Iterable[Any], message: ServerMessage) -> None: ...


@dataclass(frozen=True, slots=True)
class RoomServices:
    """What a room needs from the node: storing, pushing, telling other nodes, reading what is stored,
    and being told that it ended."""

    node: str
    committer: WriteSink
    push: Pusher
    publish: Callable[[BusEvent], None] | None
    load: Callable[[str], Awaitable[StoredGame | None]]
    ended: Callable[[GameRoom], None]


@dataclass(frozen=True, slots=True)
class FinishedGame:
    """A game no longer in play, with its final position: immutable, so it is cached and shared."""

    id: str
    owner: PlayerRef
    started_at: dt.datetime
    game: Game

    def snapshot(self, request_id: RequestId | None) -> Snapshot:
        return Snapshot.of(
            self.id, self.game, player=self.owner, started_at=self.started_at, request_id=request_id
        )


@dataclass(eq=False, slots=True)
class GameRoom:
    """One unfinished game in memory and the connections that follow it; see the module docstring."""

    id: str
    game: Game
    owner: PlayerRef
    started_at: dt.datetime
    services: RoomServices
    viewers: set[Follower] = field(default_factory=set)
    spectators: set[Follower] = field(default_factory=set)
    turn: Turn = field(default_factory=lambda: Turn())
    ended: FinishedGame | None = None
    replaced: bool = False  # the registry let it go (idle, or its reload failed): find the game again
    hinted: bool = False  # this room stored the game as hinted (a hint is asked once more per reload)
    progress_due: float = 0.0  # time.monotonic() after which an action row carries the game's figures
    reloading: asyncio.Task[None] | None = None  # taking the stored game after a conflict, or taking a
    # long game's failed action back (holds the turn)

    @property
    def code(self) -> str:
        return self.game.deal.code()

    def is_followed(self) -> bool:
        return bool(self.viewers or self.spectators)

    def is_open(self) -> bool:
        return self.ended is None and not self.replaced

    def is_busy(self) -> bool:
        """An operation holds the room's turn or waits for it (an action in flight holds it until its
        commit's outcome is handled)."""
        return self.turn.is_busy()

    # ------------------------------------------------------------------ followers

    async def view(self, viewer: Follower, request_id: RequestId | None) -> Snapshot | None:
        """``viewer`` (a connection of the owner) follows the game; its snapshot, taken in the turn so
        that the next diff it gets is of the next version. None when the room closed meanwhile (the game
        ended or was reloaded): find the game again."""
        async with self.turn:
            if not self.is_open():
                return None
            self.viewers.add(viewer)
            return self.snapshot(request_id)

    async def watch(self, spectator: Follower, request_id: RequestId | None) -> Snapshot | None:
        """``spectator`` follows the game; its snapshot (as ``view``)."""
        async with self.turn:
            if not self.is_open():
                return None
            self.spectators.add(spectator)
            return self.snapshot(request_id)

    def unfollow(self, follower: Follower) -> None:
        self.viewers.discard(follower)
        self.spectators.discard(follower)

    def snapshot(self, request_id: RequestId | None) -> Snapshot:
        """The committed position; call in the turn (or where no action can be in flight)."""
        return Snapshot.of(
            self.id, self.game, player=self.owner, started_at=self.started_at, request_id=request_id
        )

    async def hint_position(self, requester: Follower) -> tuple[int, Layout]:
        """The committed position a hint is about, (v, layout); the game is first stored as hinted (once
        per room), through the fence's pipeline, while it is still being played.

        Raises:
            Refusal: illegal_move (the game is over), stale (reloaded, or finished on another node).
            StorageUnavailable: the mark was not stored.
        """
        async with self.turn:
            self._check_open()
            if not self.hinted:
                cancelled = await self._commit(Write(hinted=self.id), requester)
                self.hinted = True
                if cancelled is not None:
                    raise cancelled
            return self.game.v, self.game.layout()

    # ------------------------------------------------------------------ changes

    def try_act(
        self,
        requester: Follower,
        resolve: Callable[[Game], Action],
        expected_v: int | None,
        request_id: RequestId | None,
        answer: Answer,
    ) -> bool:
        """``act`` without awaiting, when the room's turn is free (and nobody waits for it): the action
        is checked, applied and submitted now, and ``answer`` gets the outcome from the commit's
        callback (or at once when the pipeline refuses it). False, and nothing done, when the room is
        busy: await ``act`` instead.

        Raises (at once, with nothing changed):
            Refusal: stale, illegal_move (the game is over or at `MAX_GAME_ACTIONS`).
            engine.IllegalMoveError: the rules refuse it.
        """
        if not self.turn.try_enter():
            return False
        self._begin(requester, resolve, expected_v, request_id, answer)
        return True

    async def act(
        self,
        requester: Follower,
        resolve: Callable[[Game], Action],
        expected_v: int | None,
        request_id: RequestId | None,
    ) -> list[ServerMessage]:
        """Check, apply, commit and announce one action of the owner; the requester's replies (its ack,
        and game_over when the action won). The requester becomes a viewer of the game. Once its
        write is submitted, the room follows the commit's outcome even if the caller is cancelled (the
        cancellation is raised once the room agrees with the database).

        Raises:
            Refusal: stale, illegal_move (the game is over or at `MAX_GAME_ACTIONS`).
            engine.IllegalMoveError: the rules refuse it.
            StorageUnavailable: nothing was stored; the room is as it was before.
        """
        await self.turn.enter()
        outcome: asyncio.Future[list[ServerMessage]] = asyncio.get_running_loop().create_future()
        self._begin(requester, resolve, expected_v, request_id, functools.partial(_settle, outcome))
        return await _outcome(outcome)

    # ------------------------------------------------------------------ an action, in the turn

    def _begin(
        self,
        requester: Follower,
        resolve: Callable[[Game], Action],
        expected_v: int | None,
        request_id: RequestId | None,
        answer: Answer,
    ) -> None:
        """In the turn: apply the action and submit its write; the commit's callback ends the turn. A
        refusal ends it here and is raised."""
        try:
            pending = self._apply(requester, resolve, expected_v, request_id, answer)
        except BaseException:
            self.turn.leave()
            raise
        try:
            self.services.committer.submit(pending.write, functools.partial(self._committed, pending))
        except Exception as refused:  # the pipeline is stopping: nothing was stored. Answered from
            # the next loop iteration, as after a commit: never from inside the caller's call
            asyncio.get_running_loop().call_soon(self._committed, pending, refused)

    def _apply(
        self,
        requester: Follower,
        resolve: Callable[[Game], Action],
        expected_v: int | None,
        request_id: RequestId | None,
        answer: Answer,
    ) -> _PendingAction:
        self._check_open()
        self.viewers.add(requester)
        self._check_version(expected_v)
        if self.game.v >= MAX_GAME_ACTIONS:
            raise Refusal(
                ErrorCode.ILLEGAL_MOVE,
                f"game {self.id} has its {MAX_GAME_ACTIONS} actions, the most a game may have; resign it",
            )
        game = self.game
        action = resolve(game)
        transfer = game.play(action)  # in place: nobody else reads it before the turn is released
        notation = action.symbol()
        write = Write(actions=[self._record(game, game.v, notation)])
        if game.is_over():
            write.result = self._result(game, utc_now())
        return _PendingAction(requester, request_id, answer, game, transfer, notation, write)

    def _committed(self, pending: _PendingAction, error: Exception | None) -> None:
        """The commit's outcome: announce the action (or undo it), end the turn, answer the requester
        (whose connection may have closed meanwhile: the room follows the commit all the same). A
        conflict first takes the game as stored, in a task that holds the turn until it is done."""
        if isinstance(error, WriteConflict):
            self.reloading = asyncio.get_running_loop().create_task(self._take_stored_game(pending))
            return
        if error is not None and pending.game.v > REPLAY_INLINE_ACTIONS:
            self.reloading = asyncio.get_running_loop().create_task(self._take_back(pending, error))
            return
        outcome: list[ServerMessage] | Exception
        try:
            if error is None:
                outcome = self._announce_action(pending)
            else:
                self._undo_in_place(pending.game)
                outcome = error
        except Exception as bug:  # the requester is answered all the same (internal)
            outcome = bug
        finally:
            self.turn.leave()
        pending.answer(outcome)

    def _announce_action(self, pending: _PendingAction) -> list[ServerMessage]:
        """The action is committed: tell the other nodes and the followers; the requester's replies."""
        game, transfer, write, requester = pending.game, pending.transfer, pending.write, pending.requester
        self._publish(game.v, pending.notation, write.result)
        replies: list[ServerMessage] = [Ack.of(self.id, game, transfer, pending.request_id)]
        self._announce(lambda: Diff.of(self.id, game, transfer), skip=requester)
        if write.result is not None:
            replies.append(self._end(write.result, skip=requester))
        return replies

    async def _take_stored_game(self, pending: _PendingAction) -> None:
        """Another node stored this version first: take the game as stored (the other followers get its
        snapshot), end the turn, and refuse the action as stale."""
        try:
            await self._reload_after_conflict(pending.requester)
        finally:
            self._undo_in_place(pending.game)
            self.reloading = None
            self.turn.leave()
            pending.answer(_stale_after_conflict(self.id))

    async def _take_back(self, pending: _PendingAction, error: Exception) -> None:
        """A long game's failed action is taken back by a replay in a worker thread, the turn held
        meanwhile (inline if cancelled: the room must never keep an action the database refused)."""
        game = pending.game
        try:
            replayed = await asyncio.to_thread(Game.replay, game.deal, game.log[:-1])
            if self.game is game:
                self.game = replayed
        finally:
            self._undo_in_place(game)  # a no-op once replaced above
            self.reloading = None
            self.turn.leave()
            pending.answer(error)

    def _undo_in_place(self, game: Game) -> None:
        """Take back the uncommitted action applied to ``game``, unless the room holds another game now
        (the stored one, after a conflict)."""
        if self.game is game:
            self.game = Game.replay(game.deal, game.log[:-1])

    async def resign(self, requester: Follower, request_id: RequestId | None) -> GameOver:
        """End the game as resigned, through the fence (a ``resign`` row at the next version); the
        requester's game_over.

        Raises:
            Refusal: stale, illegal_move (the game is over).
            StorageUnavailable: nothing was stored.
        """
        async with self.turn:
            self._check_open()
            game = self.game.copy()
            game.resign()
            now = utc_now()
            result = self._result(game, now)
            write = Write(actions=[self._record(game, game.v + 1, RESIGN, now)], result=result)
            cancelled = await self._commit(write, requester)
            self.game = game
            self._publish(game.v, None, result)
            self._end(result, skip=requester)
            if cancelled is not None:
                raise cancelled  # resigned and announced: the room matches the database
            return _game_over(result, request_id)

    async def apply_remote(self, event: BusEvent) -> None:
        """Follow an action another node committed: replay it here and push it to our followers. Events
        come in commit order; one this room already holds (it loaded after the commit) is skipped by v."""
        async with self.turn:
            if not self.is_open() or event.v < self.game.v:
                return
            finished_at = None if event.finished_at_ms is None else _from_epoch_ms(event.finished_at_ms)
            game = self.game  # changed in place: it is already committed (by the other node)
            if event.action is None and event.v == game.v:
                game.resign()
                self._end(self._result(game, finished_at or utc_now()), skip=None)
            elif event.action is not None and event.v == game.v + 1:
                transfer = game.play(parse_action(event.action))
                self._announce(lambda: Diff.of(self.id, game, transfer), skip=None)
                if game.is_over():
                    self._end(self._result(game, finished_at or utc_now()), skip=None)
            elif event.v > self.game.v:
                await self._reload()

    # ------------------------------------------------------------------ in the turn

    def _check_open(self) -> None:
        if self.ended is not None:
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"game {self.id} is over")
        if self.replaced:
            raise Refusal(ErrorCode.STALE, f"game {self.id} was reloaded; resume it")

    def _check_version(self, expected_v: int | None) -> None:
        if expected_v is not None and expected_v != self.game.v:
            raise Refusal(ErrorCode.STALE, f"game {self.id} is at v {self.game.v}, not {expected_v}")

    async def _commit(self, write: Write, requester: Follower) -> asyncio.CancelledError | None:
        """Commit ``write``, waiting for the outcome even when our caller is cancelled meanwhile: once
        submitted, the write commits or fails whatever happens to us, and the room must follow the
        database. Returns the cancellation to raise once the room agrees with a commit.

        On a conflict (another node stored this version first) take the game as stored and refuse the
        request as stale (the other followers get the stored game's snapshot). Other failures
        propagate: the room is unchanged. A failure after a cancellation raises the cancellation."""
        stored = asyncio.ensure_future(self.services.committer.stored(write))  # its future: no task
        cancelled: asyncio.CancelledError | None = None
        while not stored.done():
            try:
                await asyncio.wait((stored,))  # unlike awaiting it, never cancels the write's future
            except asyncio.CancelledError as exc:
                cancelled = exc
        try:
            stored.result()
        except WriteConflict:
            await self._reload_after_conflict(requester)
            if cancelled is not None:
                raise cancelled from None
            raise _stale_after_conflict(self.id) from None
        except BaseException as failure:
            if cancelled is not None:
                raise cancelled from failure
            raise
        return cancelled

    async def _reload_after_conflict(self, requester: Follower) -> None:
        """Take the game as stored after a write conflict; if even that fails, the room is let go (its
        callers find the game again)."""
        try:
            await self._reload(skip=requester)
        except Exception:
            logger.warning("reloading game %s after a conflict failed", self.id, exc_info=True)
            self.replaced = True
            self.services.ended(self)

    async def _reload(self, *, skip: Follower | None = None) -> None:
        """We missed commits of another node (a version gap, or a write conflict): take the game as the
        database has it, which is ahead of what our followers saw. They (but ``skip``, a requester
        refused as stale) get a fresh snapshot, pushed without a request id, so that every follower
        stays at the committed version; a game found finished ends here instead, with its game_over."""
        stored = await self.services.load(self.id)
        if stored is None:
            return
        game = await asyncio.to_thread(replay_stored, stored)
        self.game = game
        if game.is_over():
            finished_at = stored.finished_at or utc_now()
            self._end(self._result(game, finished_at), skip=None)  # the requester too: the game is over
        else:
            self._announce(lambda: self.snapshot(None), skip=skip)

    def _publish(self, v: int, notation: str | None, result: GameResult | None) -> None:
        if self.services.publish is not None:
            finished_ms = None if result is None else int(result.finished_at.timestamp() * 1000)
            self.services.publish(BusEvent(self.services.node, self.id, v, notation, finished_ms))

    def _announce(self, message: Callable[[], ServerMessage], *, skip: Follower | None) -> None:
        """Push ``message()`` to every follower but ``skip`` (the requester, who has its reply: a
        connection that both plays and watches the game gets its ack, never also a diff). Built only
        when someone gets it: most games are followed by their player alone."""
        if not self.spectators and self.viewers.issubset((skip,)):
            return  # the common case, checked without building a set: only the requester follows
        others = (
            (self.viewers | self.spectators) - {skip} if skip is not None else self.viewers | self.spectators
        )
        if others:
            self.services.push(others, message())

    def _end(self, result: GameResult, *, skip: Follower | None) -> GameOver:
        """The game ended: tell the followers (but ``skip``), let them go, leave the node's rooms."""
        self._announce(lambda: _game_over(result, None), skip=skip)
        self.ended = FinishedGame(self.id, self.owner, self.started_at, self.game)
        self.viewers.clear()
        self.spectators.clear()
        self.services.ended(self)
        return _game_over(result, None)

    def _record(self, game: Game, v: int, notation: str, at: dt.datetime | None = None) -> ActionRecord:
        """The row of an action; it carries the game's figures for its row (what ``live`` lists), as of
        ``at`` (default now), when `PROGRESS_INTERVAL` has passed since the last ones: an update of the
        game's row with every action would cost the hot path a second statement per game per commit
        (and the clock is read only then)."""
        moment = time.monotonic()
        if moment < self.progress_due:
            return ActionRecord(self.id, v, notation)
        self.progress_due = moment + PROGRESS_INTERVAL
        progress = GameProgress(game.score, game.moves, game.undos, at or utc_now())
        return ActionRecord(self.id, v, notation, progress)

    def _result(self, game: Game, finished_at: dt.datetime) -> GameResult:
        return GameResult(
            id=self.id,
            status=game.status.value,
            score=game.score,
            moves=game.moves,
            undos=game.undos,
            finished_at=finished_at,
            duration_ms=max(0, int((finished_at - self.started_at).total_seconds() * 1000)),
            won=game.status is Status.WON,
        )


class Turn:
    """A room's turn: one operation at a time, first come, first served.

    ``try_enter`` takes it at once, without awaiting, but only when it is free and nobody waits for it
    (so the hot path never jumps ahead of a waiting operation); ``enter`` awaits it (``async with``
    does both ends). ``leave`` hands it straight to the first waiter, so it never looks free between a
    release and that waiter's wake-up: ``is_busy`` is what the registry asks before letting a room go.
    """

    __slots__ = ("held", "waiters")

    def __init__(self) -> None:
        self.held = False
        self.waiters: deque[asyncio.Future[None]] = deque()

    def is_busy(self) -> bool:
        """An operation holds the turn or waits for it."""
        return self.held or bool(self.waiters)

    def try_enter(self) -> bool:
        if self.held or self.waiters:
            return False
        self.held = True
        return True

    async def enter(self) -> None:
        if self.try_enter():
            return
        handed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append(handed)
        try:
            await handed
        except asyncio.CancelledError:
            if not handed.cancelled():  # cancelled after the turn was handed to us: pass it on
                self.leave()
            elif handed in self.waiters:  # else leave() has dropped it already
                self.waiters.remove(handed)
            raise

    def leave(self) -> None:
        while self.waiters:
            handed = self.waiters.popleft()
            if not handed.done():  # a cancelled waiter leaves its future behind until it runs
                handed.set_result(None)
                return
        self.held = False

    async def __aenter__(self) -> None:
        await self.enter()

    async def __aexit__(self, *exc_info: object) -> None:
        self.leave()


@dataclass(slots=True)
class _PendingAction:
    """An action applied in place and submitted, its commit's outcome awaited (the turn is held)."""

    requester: Follower
    request_id: RequestId | None
    answer: Answer
    game: Game
    transfer: Transfer
    notation: str
    write: Write


def _settle(outcome: asyncio.Future[list[ServerMessage]], answer: list[ServerMessage] | Exception) -> None:
    """An `Answer` for ``act``: into the future it awaits."""
    if isinstance(answer, Exception):
        outcome.set_exception(answer)
    else:
        outcome.set_result(answer)


async def _outcome(outcome: asyncio.Future[list[ServerMessage]]) -> list[ServerMessage]:
    """``outcome``'s result, awaited through cancellations (the room follows the commit whatever its
    caller does): a cancellation is raised once it is done."""
    cancelled: asyncio.CancelledError | None = None
    while not outcome.done():
        try:
            await asyncio.wait((outcome,))  # unlike awaiting it, never cancels the future
        except asyncio.CancelledError as exc:
            cancelled = exc
    if cancelled is not None:
        raise cancelled from outcome.exception()
    return outcome.result()


def _stale_after_conflict(game_id: str) -> Refusal:
    return Refusal(ErrorCode.STALE, f"game {game_id} changed elsewhere; resume or watch it again")


def _game_over(result: GameResult, request_id: RequestId | None) -> GameOver:
    return GameOver(
        request_id=request_id,
        game=result.id,
        won=result.won,
        score=result.score,
        moves=result.moves,
        duration_ms=result.duration_ms,
    )


def _from_epoch_ms(millis: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(millis / 1000, dt.UTC)


_RESIGNED_OR_ABANDONED = frozenset({Status.RESIGNED.value, ABANDONED})


class UnreplayableAction(EngineError):
    """An action of a stored log (``v`` counts from 1) that does not replay where it stands."""

    def __init__(self, v: int, text: str, reason: EngineError) -> None:
        super().__init__(f"action v={v} {text!r} does not replay: {reason}")
        self.v = v


def replay_stored(stored: StoredGame) -> Game:
    """Rebuild a stored game through the engine, checking every action again; a ``resign`` row (the
    last one) resigns it. Blocking for a long log: call it through ``asyncio.to_thread``.

    Raises:
        InvalidCodeError: the stored code is not a game code.
        UnreplayableAction: an action (a resign row included) is not legal where it stands.
    """
    game = Game(Deal.from_code(stored.code))
    for v, text in enumerate(stored.actions, start=1):
        try:
            if text == RESIGN and v == len(stored.actions):
                game.resign()  # the row that put resigning behind the (game, v) fence
            else:
                game.play(parse_action(text))
        except EngineError as exc:
            raise UnreplayableAction(v, text, exc) from exc
    if stored.status in _RESIGNED_OR_ABANDONED and game.status is Status.PLAYING:
        game.resign()  # games resigned before resigning was a row of the log have none; an
        # abandoned game (server.quotas) reads as resigned: the server gave up on it
    return game
