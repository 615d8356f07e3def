"""One game as a state machine without I/O: commands in, effects out (in the manner of websockets'
``Protocol`` and h11's ``Connection``).

`GameRoom.handle` takes a command (`server.play.commands`) and returns the effects it causes
(`server.play.effects`), in the order they must happen; it never awaits, sleeps, locks or touches a
socket. The room is the single writer of its game. An action is applied in place and its write
handed out as a `Commit`; until the commit's outcome comes back (`Committed`) the room takes no
other request (`awaiting`), so every reader sees committed state and requests are served one at a
time in arrival order. If the commit fails, the action is taken back before the next request; a
conflict (another node stored this version first) has the room `Load` the stored game first.

`_announce` is the one place that orders what a committed change sends: the requester's reply
first (its ack, then game_over when the change ended the game), then the diff to every other
follower, then their game_over; `tests/server/test_game_room.py` states it for every command.

Every change of a game passes the (game, v) fence of the ``actions`` table: a move, an undo, and a
resignation too (stored as a ``resign`` row at the next version, see `RESIGN`).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from engine import Game, IllegalMoveError, Status, Transfer, parse_action
from protocol import Ack, Diff, GameOver, Player, ServerMessage, Snapshot
from protocol.errors import RequestId
from protocol.limits import MAX_GAME_ACTIONS
from server.clock import epoch_ms, utc_now
from server.errors import ErrorCode, Refusal
from server.play.bus import BusEvent
from server.play.commands import (
    Act,
    Command,
    Committed,
    Follower,
    HintPosition,
    Loaded,
    Rebuilt,
    RemoteCommit,
    ReplyTo,
    Resign,
    Unfollow,
    View,
    Watch,
)
from server.play.effects import (
    Commit,
    Effect,
    HintSpot,
    Leave,
    Load,
    Observe,
    Publish,
    Push,
    Rebuild,
    Reply,
    SeatProgress,
)
from server.play.replay import RESIGN
from server.storage import ActionRecord, GameFigures, GameResult
from server.storage.commit_backends import AppendActions, MarkHinted, WriteConflict

__all__ = ["FIGURES_INTERVAL", "REPLAY_INLINE_ACTIONS", "FinishedGame", "GameRoom", "PlayerRef"]

#: Seconds at least between two updates of a game's row (score, moves, undos, ``active_at``) while it is
#: played: the first action after the interval carries the game's figures, the others none. What ``live``
#: lists is always committed state, but not always the latest: a game paused after a burst of actions
#: keeps the figures of the burst's first action until it is played again or ends (the end writes the
#: final ones).
FIGURES_INTERVAL = 10.0
#: A failed action of a game longer than this is taken back by a `Rebuild` off the event loop: a
#: database outage fails every action in flight at once, and replaying each of a thousand long games
#: (up to `MAX_GAME_ACTIONS`) inline would stall every connection for seconds.
REPLAY_INLINE_ACTIONS = 100

#: Who plays a game or a connection: the protocol's ``{id, name}``.
PlayerRef = Player


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


@dataclass(slots=True)
class _Change:
    """A change applied (an action in place, or a resignation on a copy) whose commit is awaited."""

    reply_to: ReplyTo
    request_id: RequestId | None
    follower: Follower | None  # the requester (gets its reply, never also a push)
    game: Game  # the game as changed
    transfer: Transfer | None  # the action's cards (None: a resignation)
    notation: str | None
    write: AppendActions


@dataclass(slots=True)
class _HintMark:
    """The game's hinted mark, being stored."""

    reply_to: ReplyTo
    follower: Follower


@dataclass(slots=True)
class _Loading:
    """The stored game, being read: after a write conflict (``refused`` is then told stale once it is
    taken) or a gap in other nodes' commits."""

    refused: _Change | _HintMark | None
    skip: Follower | None


@dataclass(slots=True)
class _TakeBack:
    """A long game's refused action, being taken back off the event loop; ``error`` is its answer."""

    change: _Change
    error: Exception


_Awaited = _Change | _HintMark | _Loading | _TakeBack


@dataclass(eq=False, slots=True)
class GameRoom:
    """One unfinished game and the connections that follow it; see the module docstring.

    ``replaced`` is written by the node's registry alone (`server.play.registry`), when it lets the
    room go: a room so let go, or ended, takes no more requests (their callers find the game again).
    """

    id: str
    game: Game
    owner: PlayerRef
    started_at: dt.datetime
    node: str = "node-1"
    publishes: bool = False  # other nodes follow: committed changes are published
    viewers: set[Follower] = field(default_factory=set)
    spectators: set[Follower] = field(default_factory=set)
    ended: FinishedGame | None = None
    replaced: bool = False
    hinted: bool = False  # this room stored the game as hinted (a hint is asked once more per reload)
    awaiting: _Awaited | None = None  # the outcome the room waits for before its next request
    figures_due: float = 0.0  # monotonic time after which an action row carries the game's figures
    clock: Callable[[], dt.datetime] = utc_now
    race: str | None = None  # the race this game is a seat of: its commits feed the standings
    closes_at: dt.datetime | None = None  # its race's end: no action after it (resign still)

    @property
    def code(self) -> str:
        return self.game.deal.code()

    def is_followed(self) -> bool:
        return bool(self.viewers or self.spectators)

    def is_open(self) -> bool:
        return self.ended is None and not self.replaced

    def snapshot(self, request_id: RequestId | None) -> Snapshot:
        """The committed position (what a follower that joins now sees first)."""
        return Snapshot.of(
            self.id, self.game, player=self.owner, started_at=self.started_at, request_id=request_id
        )

    # ------------------------------------------------------------------ the one entry

    def handle(self, command: Command) -> list[Effect]:
        """What ``command`` causes, in order. A request must not be handed in while ``awaiting`` (the
        driver holds it back); an outcome only then."""
        if isinstance(command, Act):
            return self._act(command)
        if isinstance(command, Committed):
            return self._committed(command.error)
        if isinstance(command, View | Watch):
            return self._follow(command)
        if isinstance(command, Unfollow):
            self.viewers.discard(command.follower)
            self.spectators.discard(command.follower)
            return []
        if isinstance(command, Resign):
            return self._resign(command)
        if isinstance(command, HintPosition):
            return self._hint_position(command)
        if isinstance(command, RemoteCommit):
            return self._remote(command.event)
        if isinstance(command, Loaded):
            return self._loaded(command)
        return self._rebuilt(command)

    # ------------------------------------------------------------------ requests

    def _act(self, command: Act) -> list[Effect]:
        """Check the action, apply it in place and hand its write out; refused at once, with nothing
        changed, when the room is closed, the version is not current, the game is at its length
        bound or the rules say no. The requester becomes a viewer."""
        game = self.game
        try:  # each check is called only when it refuses: this runs for every action
            if self.ended is not None or self.replaced:
                self._check_open()
            self.viewers.add(command.follower)
            if command.expected_v is not None and command.expected_v != game.v:
                self._check_version(command.expected_v)
            if self.closes_at is not None and self.clock() >= self.closes_at:
                raise Refusal(
                    ErrorCode.ILLEGAL_MOVE, f"game {self.id}: its race is over (time is up, or a seat won)"
                )
            if game.v >= MAX_GAME_ACTIONS:
                raise Refusal(
                    ErrorCode.ILLEGAL_MOVE,
                    f"game {self.id} has its {MAX_GAME_ACTIONS} actions, the most a game may have; resign it",
                )
            action = command.resolve(game)
            transfer = game.play(action)  # in place: nobody reads it before its commit's outcome
        except (Refusal, IllegalMoveError) as refused:
            return [Reply(command.reply_to, refused)]
        notation = action.symbol()
        now = self.clock()  # the action's time, stored with it: one read of the clock per action
        result = self._result(game, now) if game.is_over() else None
        write = AppendActions((self._record(game, game.v, notation, now),), result)
        self.awaiting = _Change(
            command.reply_to, command.request_id, command.follower, game, transfer, notation, write
        )
        return [Commit(write)]

    def _resign(self, command: Resign) -> list[Effect]:
        """End the game as resigned, through the fence (a ``resign`` row at the next version); the
        room takes the resigned game once it is stored."""
        try:
            self._check_open()
        except Refusal as refused:
            return [Reply(command.reply_to, refused)]
        game = self.game.copy()
        game.resign()
        now = self.clock()
        result = self._result(game, now)
        write = AppendActions((self._record(game, game.v + 1, RESIGN, now),), result)
        self.awaiting = _Change(
            command.reply_to, command.request_id, command.follower, game, None, None, write
        )
        return [Commit(write)]

    def _follow(self, command: View | Watch) -> list[Effect]:
        """The follower's snapshot, then every change after it; None when the room closed (the caller
        finds the game again)."""
        if not self.is_open():
            return [Reply(command.reply_to, None)]
        followers = self.viewers if isinstance(command, View) else self.spectators
        followers.add(command.follower)
        return [Reply(command.reply_to, [self.snapshot(command.request_id)])]

    def _hint_position(self, command: HintPosition) -> list[Effect]:
        """The position as committed; the game is first stored as hinted, while it is still played. A
        race seat's game takes no hint: a race is rated, and the server's solver must not win it."""
        try:
            self._check_open()
            if self.race is not None:
                raise Refusal(
                    ErrorCode.FORBIDDEN, f"game {self.id} is a seat of race {self.race}: races take no hints"
                )
        except Refusal as refused:
            return [Reply(command.reply_to, refused)]
        if self.hinted:
            return [Reply(command.reply_to, HintSpot(self.game.v, self.game.layout()))]
        self.awaiting = _HintMark(command.reply_to, command.follower)
        return [Commit(MarkHinted(self.id))]

    def _remote(self, event: BusEvent) -> list[Effect]:
        """Follow a change another node committed: replay it here and push it to our followers. Events
        come in commit order; one this room holds already (it loaded after the commit) is skipped by
        v, and a gap has the room load the stored game."""
        game = self.game
        if not self.is_open() or event.v < game.v:
            return []
        finished_at = None if event.finished_at_ms is None else _from_epoch_ms(event.finished_at_ms)
        if event.action is None and event.v == game.v:
            game.resign()  # in place: it is committed already (by the other node)
            return self._observed() + self._end(self._result(game, finished_at or self.clock()))
        if event.action is not None and event.v == game.v + 1:
            transfer = game.play(parse_action(event.action))
            result = self._result(game, finished_at or self.clock()) if game.is_over() else None
            return self._announce(None, None, transfer, result)
        if event.v > game.v:
            self.awaiting = _Loading(None, None)
            return [Load()]
        return []

    # ------------------------------------------------------------------ outcomes

    def _committed(self, error: Exception | None) -> list[Effect]:
        awaited = self.awaiting
        if isinstance(awaited, _HintMark):
            return self._hint_marked(awaited, error)
        assert isinstance(awaited, _Change), awaited
        if error is not None:
            if isinstance(error, WriteConflict):
                self.awaiting = _Loading(awaited, awaited.follower)
                return [Load()]
            return self._refused(awaited, error)
        self.awaiting = None
        if awaited.transfer is None:  # a resignation, stored: the room takes the resigned game
            self.game = awaited.game
        return self._announce(awaited.reply_to, awaited, awaited.transfer, awaited.write.result)

    def _refused(self, change: _Change, error: Exception) -> list[Effect]:
        """Nothing of the change was stored: take it back (a resignation changed only a copy)."""
        if change.transfer is not None and change.game.v > REPLAY_INLINE_ACTIONS:
            self.awaiting = _TakeBack(change, error)
            return [Rebuild(change.game.deal, change.game.log[:-1])]
        self.awaiting = None
        if change.transfer is not None:
            self._take_back(change.game, Game.replay(change.game.deal, change.game.log[:-1]))
        return [Reply(change.reply_to, error)]

    def _hint_marked(self, mark: _HintMark, error: Exception | None) -> list[Effect]:
        if isinstance(error, WriteConflict):
            self.awaiting = _Loading(mark, mark.follower)
            return [Load()]
        self.awaiting = None
        if error is not None:
            return [Reply(mark.reply_to, error)]
        self.hinted = True
        return [Reply(mark.reply_to, HintSpot(self.game.v, self.game.layout()))]

    def _loaded(self, loaded: Loaded) -> list[Effect]:
        """Take the game as the database has it, ahead of what our followers saw. They (but the
        requester refused as stale) get a fresh snapshot without a request id; a game found finished
        ends here instead, with its game_over to everyone. If even the read failed, the room closes
        (its callers find the game again)."""
        loading = self.awaiting
        assert isinstance(loading, _Loading), loading
        self.awaiting = None
        effects: list[Effect] = []
        if loaded.error is not None:
            effects.append(Leave())
        elif loaded.game is not None:
            self.game = loaded.game
            effects += self._observed()
            if loaded.game.is_over():
                effects += self._end(self._result(loaded.game, loaded.finished_at or self.clock()))
            else:
                effects += self._push(lambda: self.snapshot(None), skip=loading.skip)
        refused = loading.refused
        if isinstance(refused, _Change) and refused.transfer is not None and self.game is refused.game:
            # the stored game was not found or not read: the refused action is taken back all the same
            self.game = Game.replay(refused.game.deal, refused.game.log[:-1])
        if refused is not None:
            effects.append(Reply(refused.reply_to, _stale_after_conflict(self.id, self.game.v)))
        return effects

    def _rebuilt(self, rebuilt: Rebuilt) -> list[Effect]:
        take_back = self.awaiting
        assert isinstance(take_back, _TakeBack), take_back
        self.awaiting = None
        self._take_back(take_back.change.game, rebuilt.game)
        return [Reply(take_back.change.reply_to, take_back.error)]

    def _take_back(self, changed: Game, rebuilt: Game) -> None:
        """The game without its refused action, unless the room holds another game by now."""
        if self.game is changed:
            self.game = rebuilt

    # ------------------------------------------------------------------ what a change sends

    def _announce(
        self,
        reply_to: ReplyTo | None,
        change: _Change | None,
        transfer: Transfer | None,
        result: GameResult | None,
    ) -> list[Effect]:
        """The one place the order of a committed change's messages is decided: published to the other
        nodes; the requester's reply (its ack, or for a resignation its game_over; game_over after the
        ack when the action ended the game); the diff to every other follower; their game_over; the
        room leaves the node once its game is over."""
        game = self.game if change is None else change.game
        request_id = None if change is None else change.request_id
        requester = None if change is None else change.follower
        effects: list[Effect] = []
        if self.publishes and change is not None:
            finished_ms = None if result is None else int(result.finished_at.timestamp() * 1000)
            effects.append(Publish(BusEvent(self.node, self.id, game.v, change.notation, finished_ms)))
        if reply_to is not None:
            replies: list[ServerMessage] = []
            if transfer is not None:
                replies.append(Ack.of(self.id, game, transfer, request_id))
            if result is not None:
                replies.append(_game_over(result, request_id if transfer is None else None))
            effects.append(Reply(reply_to, replies))
        if transfer is not None and self._followed_by_others(requester):  # else no diff is made
            effects += self._push(lambda: Diff.of(self.id, game, transfer), skip=requester)
        if self.race is not None:
            effects.append(Observe(self.race, self.progress(game)))
        if result is not None:
            effects += self._end(result, skip=requester)
        return effects

    def progress(self, game: Game | None = None) -> SeatProgress:
        """What the race is told of this game's commit (its layout is immutable: nothing copied)."""
        return SeatProgress.of(self.id, game or self.game, self.clock())

    def _observed(self) -> list[Effect]:
        """A race seat's game tells its race what it took from elsewhere (a resignation or a reload)."""
        return [Observe(self.race, self.progress())] if self.race is not None else []

    def _end(self, result: GameResult, *, skip: Follower | None = None) -> list[Effect]:
        """The game ended: game_over to the followers (but ``skip``), who are let go; the room leaves."""
        effects = self._push(lambda: _game_over(result, None), skip=skip)
        self.ended = FinishedGame(self.id, self.owner, self.started_at, self.game)
        self.viewers.clear()
        self.spectators.clear()
        effects.append(Leave())
        return effects

    def _push(self, message: Callable[[], ServerMessage], *, skip: Follower | None) -> list[Effect]:
        """``message()`` to every follower but ``skip`` (the requester, who has its reply: a connection
        that both plays and watches the game gets its ack, never also a diff); nothing when nobody else
        follows (most games are followed by their player alone: checked without building a set)."""
        if not self._followed_by_others(skip):
            return []
        audience = (self.viewers | self.spectators) - {skip}
        return [Push(tuple(audience), message)] if audience else []

    def _followed_by_others(self, skip: Follower | None) -> bool:
        """Someone but ``skip`` follows the game (checked without building a set)."""
        viewers = self.viewers
        return bool(self.spectators) or len(viewers) > 1 or (bool(viewers) and skip not in viewers)

    # ------------------------------------------------------------------ checks and records

    def _check_open(self) -> None:
        if self.ended is not None:
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"game {self.id} is over")
        if self.replaced:
            raise Refusal(ErrorCode.STALE, f"game {self.id} was reloaded; resume it")

    def _check_version(self, expected_v: int | None) -> None:
        if expected_v is not None and expected_v != self.game.v:
            raise Refusal(
                ErrorCode.STALE, f"game {self.id} is at v {self.game.v}, not {expected_v}", v=self.game.v
            )

    def _record(self, game: Game, v: int, notation: str, at: dt.datetime) -> ActionRecord:
        """The row of an action accepted ``at``, its time stored with it; it carries the game's
        figures for its row (what ``live`` lists) when `FIGURES_INTERVAL` has passed since the last
        ones: an update of the game's row with every action would cost the hot path a second
        statement per game per commit."""
        at_ms = epoch_ms(at)
        moment = time.monotonic()
        if moment < self.figures_due:
            return ActionRecord(self.id, v, notation, at_ms)
        self.figures_due = moment + FIGURES_INTERVAL
        figures = GameFigures(game.score, game.moves, game.undos, at)
        return ActionRecord(self.id, v, notation, at_ms, figures)

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


def _stale_after_conflict(game_id: str, v: int) -> Refusal:
    return Refusal(ErrorCode.STALE, f"game {game_id} changed elsewhere; resume or watch it again", v=v)


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
