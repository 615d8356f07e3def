"""One race as a state machine without I/O, on the same driver as a game (`server.play.driver`).

A race goes lobby → countdown → running → finished (or lobby → cancelled when its last seat
leaves). Its seats' games are ordinary games (`server.play.game_room.GameRoom`): the race only
observes their commits (`SeatChanged`) and keeps the standings, a versioned stream like a game's:
every follower gets the race's snapshot (`protocol.Race`), then one `protocol.RaceDiff` per change
(``v`` + 1 each). What changes the race's phase, seats or ready flags is stored first (`Commit` of
the whole race, fenced by its ``revision``); a seat's progress and the boards are not (the games hold
the progress).

Several nodes may each hold a copy of one race (docs/races.md, Across nodes); the database is its
authority. A copy that stored a change tells the others (`Publish` of a `RaceEvent`); a copy behind
it (`RaceChanged`), or whose write lost the fence, reads the race as stored (`LoadRace`, `RaceLoaded`)
and tells its followers the difference as an ordinary diff; a request whose write lost is handled
again against the race as stored (up to `TRIES` writes).

Time comes from ``clock``; the room asks to be woken (`Wake`) at the end of the countdown, at the
time limit and when a delayed board is due, and acts on the `Tick`.

A finished race stays in memory a while for its followers (the registry keeps it: ``kept``), so that
a player's ``race_rematch`` (`RaceRematch`) reaches the others: the new race is stored with the
finished race's link to it, fenced by its revision, and a `RaceDiff` naming it goes to every follower.

Fair play (docs/races.md): a connection whose player holds a seat sees the other seats' standings
only; a spectator who holds none gets each seat's board ``board_delay`` seconds late
(`protocol.RaceBoard`); once the race is over everyone gets the final boards.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field

from engine import Deal, Status
from protocol import (
    Foundations,
    Ok,
    Race,
    RaceBoard,
    RaceDiff,
    RaceLink,
    RaceSeat,
    RatingShift,
    ServerMessage,
    Snapshot,
)
from protocol.errors import RequestId
from server.clock import utc_now
from server.errors import ErrorCode, Refusal
from server.ids import new_id
from server.play.bus import RaceEvent
from server.play.commands import Committed, Follower, ReplyTo, Unfollow
from server.play.effects import Commit, Effect, Hold, Leave, LoadRace, LoadRatings, Publish, Push, Reply, Wake
from server.play.game_room import PlayerRef
from server.play.race_boards import DelayedBoards
from server.play.race_commands import (
    RaceChanged,
    RaceCommand,
    RaceJoin,
    RaceLeave,
    RaceLoaded,
    RaceReady,
    RaceRematch,
    RaceStart,
    RaceWatch,
    RatingsLoaded,
    Rematch,
    SeatChanged,
    SeatProgress,
    Tick,
)
from server.play.race_places import Figures, places
from server.storage import GameStart
from server.storage.commit_backends import StoreRace, WriteConflict
from server.storage.records import RaceRecord, RaceSeatRecord, RaceWrite

__all__ = ["LOBBY_TIMEOUT", "TRIES", "RaceRoom", "Seat"]

#: Seconds a race may stay in its lobby: then it is cancelled (a race made and never started must not
#: hold memory, a row and a timer for ever; races are made at most 30 an hour per player).
LOBBY_TIMEOUT = 3600.0

_OVER = ("finished", "cancelled")
#: Writes of one request at most when other nodes' copies of the race win the fence meanwhile: each
#: lost write reads the race and handles the request again on it. One retry is enough against one
#: other node; seats on several nodes acting at the same instant (everyone ready at once) may need a
#: retry per node that wrote first, and a player told stale would only send it again.
TRIES = 3


@dataclass(slots=True)
class Seat:
    """One seat: its player and, from the reveal, its game's figures as last committed."""

    player: PlayerRef
    ready: bool = False
    game: str | None = None
    status: str = "waiting"  # waiting, playing, won, resigned, left
    cards_home: int = 0
    moves: int = 0
    score: int = 0
    time_ms: int = 0
    place: int | None = None
    progress: SeatProgress | None = None  # the game's last commit seen
    rating: tuple[int, int] | None = None  # shown rating before and after, once the race rated it

    def row(self, number: int) -> RaceSeat:
        return RaceSeat(
            number,
            self.player,
            self.ready,
            self.game,
            self.status,
            self.cards_home,
            self.moves,
            self.score,
            self.time_ms,
            self.place,
            None if self.rating is None else RatingShift(*self.rating),
        )

    def copy(self) -> Seat:
        return dataclasses.replace(self)

    @classmethod
    def of(cls, stored: RaceSeatRecord) -> Seat:
        """The seat as stored (its figures as of the race's last write)."""
        player = PlayerRef.of(stored.player_id, stored.player_name, bot=stored.player_bot)
        return cls(
            player,
            ready=stored.ready,
            game=stored.game_id,
            status=stored.status,
            cards_home=stored.cards_home,
            moves=stored.moves,
            score=stored.score,
            time_ms=stored.time_ms,
            place=stored.place,
        )

    def keep_figures(self, mine: Seat) -> None:
        """Take this copy's figures of a seat still playing as stored (the race is written at changes of
        phase or seats, not per action: its games are the figures' source, seen here as committed)."""
        self.status, self.cards_home, self.moves = mine.status, mine.cards_home, mine.moves
        self.score, self.time_ms, self.progress = mine.score, mine.time_ms, mine.progress


_Request = RaceJoin | RaceReady | RaceStart | RaceLeave | RaceRematch


@dataclass(slots=True)
class _Pending:
    """A stored change being committed: what to answer once it is, and what to restore if it is not."""

    reply_to: ReplyTo | None
    reply: Callable[[], list[ServerMessage]] | None
    skip: Follower | None  # got a snapshot as its reply: no diff
    saved: tuple[str, str, dict[int, Seat], dt.datetime | None, dt.datetime | None, dt.datetime | None]
    wake: dt.datetime | None = None
    rematch: bool = False  # the write of the race's rematch link (`RaceRoom._rematch`)
    command: _Request | None = None  # the request that made the change (handled again if it loses)
    tries: int = 1  # the request's writes so far: past `TRIES` a lost fence answers stale


@dataclass(slots=True)
class _Reload:
    """The race being read as stored: another node's change was told, or ``lost`` lost the fence."""

    lost: _Pending | None


@dataclass(eq=False, slots=True)
class RaceRoom:
    """One race and the connections that follow it; see the module docstring."""

    id: str
    code: str
    creator: PlayerRef
    cells: int
    seats: int
    time_limit_s: int
    public: bool
    deal: Deal  # secret until the reveal
    created_at: dt.datetime
    countdown_s: float = 5.0
    board_delay_s: float = 30.0
    state: str = "lobby"
    seated: dict[int, Seat] = field(default_factory=dict)
    starts_at: dt.datetime | None = None
    ends_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    v: int = 0
    followers: dict[Follower, str] = field(default_factory=dict)  # connection → its player's id
    awaiting: _Pending | _Reload | None = None
    replaced: bool = False  # written by the race registry alone
    kept: bool = False  # a finished race kept for its followers (its rematch); the registry's, too
    rematch: RaceLink | None = None  # the race made as this finished one's rematch, once asked
    revision: int = 0  # of the race as stored (see `RaceRecord.revision`)
    node: str = "node-1"  # what this copy's `RaceEvent`s say it is
    publishes: bool = False  # other nodes may hold copies: stored changes are published, seats held
    clock: Callable[[], dt.datetime] = utc_now
    make_id: Callable[[], str] = new_id
    _announced: dict[int, RaceSeat] = field(default_factory=dict)
    _held: DelayedBoards = field(init=False)  # the boards not old enough for the spectators
    _boards: dict[int, RaceBoard] = field(default_factory=dict)  # the latest shown, per seat
    _armed: set[dt.datetime] = field(default_factory=set)  # the times a Wake is out for
    _holding: bool = False  # a `Hold` of the seats' games is out

    def __post_init__(self) -> None:
        self._held = DelayedBoards(self.board_delay_s)
        self.settle()

    def settle(self) -> None:
        """The rows as they are now are the ones the next diff is made against (a race made or
        read from storage: what its first follower's snapshot shows)."""
        self._announced = self._rows()

    # ------------------------------------------------------------------ RoomState

    @property
    def owner(self) -> PlayerRef:
        return self.creator

    @property
    def spectators(self) -> set[Follower]:
        """The followers that hold no seat (the ones delayed boards go to)."""
        players = self._players()
        return {follower for follower, player in self.followers.items() if player not in players}

    def is_open(self) -> bool:
        """Live in memory: a race not over, or a finished one kept for its followers."""
        return (self.state not in _OVER or self.kept) and not self.replaced

    def is_followed(self) -> bool:
        return bool(self.followers)

    def snapshot(self, request_id: RequestId | None) -> Race:
        return Race(
            race=self.id,
            v=self.v,
            code=self.code,
            creator=self.creator.id,
            cells=self.cells,
            seats=self.seats,
            time_limit=self.time_limit_s,
            public=self.public,
            state=self.state,
            starts_at=self.starts_at,
            ends_at=self.ends_at,
            deal=self._revealed_deal(),
            rows=tuple(self._rows().values()),
            request_id=request_id,
            rematch=self.rematch,
            board_delay_ms=round(self.board_delay_s * 1000),
        )

    def seat_of(self, player_id: str) -> int | None:
        return next((n for n, seat in self.seated.items() if seat.player.id == player_id), None)

    # ------------------------------------------------------------------ the one entry

    def handle(self, command: RaceCommand | Committed | Unfollow) -> list[Effect]:
        """What ``command`` causes, in order (requests never while ``awaiting``: the driver holds them).
        A room let go (``replaced``) takes nothing more: its callers find the race again."""
        if isinstance(command, Committed):
            return self._committed(command.error)
        if isinstance(command, RatingsLoaded):
            return self._rated(command.shifts)
        if isinstance(command, RaceLoaded):
            return self._reloaded(command)
        if isinstance(command, Unfollow):
            self.followers.pop(command.follower, None)
            return []
        if self.replaced:
            reply_to = getattr(command, "reply_to", None)
            return [Reply(reply_to, None)] if reply_to is not None else []
        if isinstance(command, SeatChanged):
            return self._seat_changed(command.progress)
        if isinstance(command, Tick):
            return self._tick(command.at) if self.state not in _OVER else []  # a kept race: nothing is due
        if isinstance(command, RaceWatch):
            return self._watch(command)
        if isinstance(command, RaceChanged):
            return self._changed(command.revision)
        return self._request(command)

    def _request(self, command: _Request, *, tries: int = 1) -> list[Effect]:
        """A request that may change the race; a stored change remembers it (handled again if
        its write loses the fence)."""
        try:
            if isinstance(command, RaceJoin):
                effects = self._join(command)
            elif isinstance(command, RaceReady):
                effects = self._ready(command)
            elif isinstance(command, RaceStart):
                effects = self._start(command)
            elif isinstance(command, RaceRematch):
                effects = self._rematch(command)
            else:
                effects = self._leave(command)
        except Refusal as refused:
            return [Reply(command.reply_to, refused)]
        if isinstance(self.awaiting, _Pending):
            self.awaiting.command, self.awaiting.tries = command, tries
        return effects

    # ------------------------------------------------------------------ requests

    def _watch(self, command: RaceWatch) -> list[Effect]:
        self.followers[command.follower] = command.player.id
        replies: list[ServerMessage] = [self.snapshot(command.request_id)]
        if self.state in _OVER or self.seat_of(command.player.id) is None:
            replies += self._boards.values()
        return [Reply(command.reply_to, replies)]

    def _join(self, command: RaceJoin) -> list[Effect]:
        self._check_open()
        if self.seat_of(command.player.id) is not None:  # its seat again (another connection)
            again = RaceWatch(command.follower, command.player, command.request_id, command.reply_to)
            return self._watch(again)
        if self.state != "lobby":
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"race {self.id} has started: race_watch it")
        if len(self.seated) >= self.seats:
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"race {self.id} is full ({self.seats} seats)")
        saved = self._save()
        number = min(set(range(1, self.seats + 1)) - set(self.seated))
        self.seated[number] = Seat(command.player)
        self.followers[command.follower] = command.player.id
        return self._store(
            command.reply_to, lambda: [self.snapshot(command.request_id)], saved, skip=command.follower
        )

    def _ready(self, command: RaceReady) -> list[Effect]:
        seat = self._own_seat(command.player)
        if self.state != "lobby":
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"race {self.id} is {self.state}: ready is for the lobby")
        saved = self._save()  # copies of the seats: what a failed write restores
        seat.ready = command.ready
        return self._store(command.reply_to, _ok(command.request_id), saved)

    def _start(self, command: RaceStart) -> list[Effect]:
        self._check_open()
        if command.player.id != self.creator.id:
            raise Refusal(ErrorCode.FORBIDDEN, f"only the race's creator starts race {self.id}")
        if self.state != "lobby":
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"race {self.id} is {self.state} already")
        if len(self.seated) < 2:
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"race {self.id} needs 2 seats taken to start")
        waiting = [str(n) for n, seat in sorted(self.seated.items()) if not seat.ready]
        if waiting:
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"race {self.id}: seat(s) {', '.join(waiting)} not ready")
        saved = self._save()
        self.state = "countdown"
        self.starts_at = self.clock() + dt.timedelta(seconds=self.countdown_s)
        return self._store(command.reply_to, _ok(command.request_id), saved, wake=self.starts_at)

    def _leave(self, command: RaceLeave) -> list[Effect]:
        number = self.seat_of(command.player.id)
        if number is None or self.seated[number].status == "left" or self.state in _OVER:
            return self._unfollow(command)  # nothing to give up: it stops following
        saved = self._save()
        self.followers.pop(command.follower, None)
        if self.state == "lobby":
            del self.seated[number]
            if not self.seated:
                self.state = "cancelled"
            elif command.player.id == self.creator.id:
                self.creator = self.seated[min(self.seated)].player
        else:
            self.seated[number].status = "left"
            if self.state == "running" and not self._playing():
                self._finish()
        return self._store(command.reply_to, _ok(command.request_id), saved)

    def _unfollow(self, command: RaceLeave) -> list[Effect]:
        """A race_leave that gives no seat up: the connection stops following (a race over: ``ok``
        even when it no longer did, as nothing is left to give up)."""
        if self.followers.pop(command.follower, None) is None and self.state not in _OVER:
            message = f"you hold no seat in race {self.id} to give up, and do not follow it"
            raise Refusal(ErrorCode.ILLEGAL_MOVE, message)
        return [Reply(command.reply_to, [Ok(request_id=command.request_id)])]

    def _rematch(self, command: RaceRematch) -> list[Effect]:
        """The first ask stores ``made`` with the link to it (fenced by the revision: of two asks at
        once on two nodes one makes it); a later ask is answered the rematch made, to join."""
        if self.state != "finished":
            raise Refusal(
                ErrorCode.ILLEGAL_MOVE, f"race {self.id} is {self.state}: a rematch follows a finished race"
            )
        if self.seat_of(command.player.id) is None:
            raise Refusal(
                ErrorCode.ILLEGAL_MOVE, f"you held no seat in race {self.id}: its players ask a rematch"
            )
        if self.rematch is not None:
            return [Reply(command.reply_to, Rematch(self.rematch.race, self.rematch.code, made=False))]
        self.rematch = RaceLink(command.made.id, command.made.code)
        self.revision += 1
        self.awaiting = _Pending(command.reply_to, None, None, self._save().saved, rematch=True)
        return [Commit(StoreRace(RaceWrite(self.record(), rematch=command.made)))]

    def _rematch_stored(self, pending: _Pending) -> list[Effect]:
        """The link is stored: the asker is told (first: the registry takes the new race up) and every
        follower gets the diff that names it. (Not stored: `_committed` forgets the link; a lost fence
        reads the race, and the ask, handled again, joins the rematch it names.)"""
        assert pending.reply_to is not None and self.rematch is not None
        made = Rematch(self.rematch.race, self.rematch.code, made=True)
        return [Reply(pending.reply_to, made), *self._announce(None)]

    # ------------------------------------------------------------------ seats' games and time

    def _seat_changed(self, progress: SeatProgress) -> list[Effect]:
        number = next((n for n, seat in self.seated.items() if seat.game == progress.game), None)
        if self.state != "running" or number is None:
            return []
        seat = self.seated[number]
        if seat.status != "playing" or _not_newer(progress, seat.progress):
            return []
        assert self.starts_at is not None
        seat.progress = progress
        seat.cards_home = sum(progress.layout.foundations)
        seat.moves, seat.score = progress.moves, progress.score
        seat.time_ms = max(0, int((progress.at - self.starts_at).total_seconds() * 1000))
        if progress.status is not Status.PLAYING:
            seat.status = progress.status.value
        if self._decided():  # the first to win takes the race
            saved = self._save()  # with this progress: a failed write is retried from it (_tick)
            self._finish()  # every board opens now: none is kept for later
            return self._store(None, None, saved)
        return self._delay_board(number, progress) + self._announce(None)

    def _tick(self, woken: dt.datetime | None) -> list[Effect]:
        """Whatever is due now; and the next time the race must be woken, unless a Wake is out for
        it (a race taken up again after a restart is sent a first Tick to arm its timers)."""
        now = self.clock()
        # The Wake of ``woken`` is no longer out, whatever the clock says: a timer may fire a little
        # before its time (uvloop's did, by up to a millisecond, 1 in 200), and a time not yet due
        # is then armed again below; a race once stayed in its countdown for ever.
        if woken is not None:
            self._armed.discard(woken)
        self._armed = {at for at in self._armed if at > now}
        effects = self._release_boards(now)
        if self.state == "lobby":
            closes = self.created_at + dt.timedelta(seconds=LOBBY_TIMEOUT)
            if now < closes:
                return effects + self._arm(closes)
            saved = self._save()
            self.state = "cancelled"
            return effects + self._store(None, None, saved)
        if self.state == "countdown" and self.starts_at is not None:
            return effects + (self._reveal() if now >= self.starts_at else self._arm(self.starts_at))
        if self.state == "running" and self.ends_at is not None:
            effects += self._hold()
            if now < self.ends_at and not self._decided():
                return effects + self._arm(self.ends_at)
            saved = self._save()
            self._finish()
            return effects + self._store(None, None, saved)
        return effects

    def _arm(self, at: dt.datetime) -> list[Effect]:
        if at in self._armed:
            return []
        self._armed.add(at)
        return [Wake(max(0.0, (at - self.clock()).total_seconds()), at)]

    def _reveal(self) -> list[Effect]:
        """The countdown is over: every seat still there gets its game of the deal, stored together;
        the diff that names them goes to everyone at once."""
        saved = self._save()
        assert self.starts_at is not None
        self.state = "running"
        self.ends_at = self.starts_at + dt.timedelta(seconds=self.time_limit_s)
        games = []
        for seat in self.seated.values():
            if seat.status == "waiting":
                seat.game, seat.status = self.make_id(), "playing"
                games.append(
                    GameStart(
                        seat.game, seat.player.id, self.deal.code(), self.cells, None, self.starts_at, self.id
                    )
                )
        if not games:
            self.state = "cancelled"
        return self._store(None, None, saved, wake=self.ends_at, games=tuple(games))

    def _finish(self) -> None:
        self.state = "finished"
        self.finished_at = self.clock()
        figures = {
            n: Figures(seat.status, seat.cards_home, seat.moves, seat.time_ms)
            for n, seat in self.seated.items()
        }
        for number, place in places(figures).items():
            self.seated[number].place = place

    # ------------------------------------------------------------------ boards

    def _delay_board(self, number: int, progress: SeatProgress) -> list[Effect]:
        due = self._held.keep(number, progress)
        return self._arm(due) if due is not None else []

    def _release_boards(self, now: dt.datetime) -> list[Effect]:
        released = self._held.release(now)
        effects: list[Effect] = []
        for number, progress in released.items():
            effects += self._show_board(number, progress, self.spectators)
        due = self._held.next_due()
        if released and due is not None:
            effects += self._arm(due)
        return effects

    def _show_board(self, number: int, progress: SeatProgress, audience: set[Follower]) -> list[Effect]:
        seat = self.seated[number]
        assert seat.game is not None and self.starts_at is not None
        layout = progress.layout
        board = Snapshot(
            seat.game,
            progress.v,
            self.deal.code(),
            seat.player,
            layout.columns,
            layout.cells,
            Foundations.of(layout),
            progress.score,
            progress.moves,
            progress.status,
            self.starts_at,
        )
        message = self._boards[number] = RaceBoard(self.id, number, board)
        return [Push(tuple(audience), lambda: message)] if audience else []

    # ------------------------------------------------------------------ stored changes

    def _save(self) -> _Pending:
        seats = {n: seat.copy() for n, seat in self.seated.items()}
        saved = (self.state, self.creator.id, seats, self.starts_at, self.ends_at, self.finished_at)
        return _Pending(None, None, None, saved)

    def _store(
        self,
        reply_to: ReplyTo | None,
        reply: Callable[[], list[ServerMessage]] | None,
        pending: _Pending,
        *,
        skip: Follower | None = None,
        wake: dt.datetime | None = None,
        games: tuple[GameStart, ...] = (),
    ) -> list[Effect]:
        pending.reply_to, pending.reply, pending.skip, pending.wake = reply_to, reply, skip, wake
        self.awaiting = pending
        self.revision += 1
        write = RaceWrite(self.record(), games=games)
        return [Commit(StoreRace(write))]

    def _committed(self, error: Exception | None) -> list[Effect]:
        pending = self.awaiting
        assert isinstance(pending, _Pending), "a commit's outcome with none awaited"
        self.awaiting = None
        if error is not None:
            self.revision -= 1
            self._restore(pending)
            if pending.rematch:  # the link is not stored: a lost fence reads it (it may name one)
                self.rematch = None
            if isinstance(error, WriteConflict):  # another copy stored this revision first
                self.awaiting = _Reload(pending)
                return [LoadRace(self.id)]
            return self._failed(pending, error)
        told = [Publish(RaceEvent(self.node, self.id, self.revision))] if self.publishes else []
        if pending.rematch:
            return told + self._rematch_stored(pending)
        if self.state == "finished":  # rated in the same write: its changes go out with the result
            self.awaiting = pending
            return [*told, LoadRatings(self.id)]
        return told + self._stored(pending)

    def _rated(self, shifts: dict[str, tuple[int, int]]) -> list[Effect]:
        """The finishing write's rating changes were read (none when it could not be): the seats of
        rated players carry them in the result."""
        pending = self.awaiting
        assert isinstance(pending, _Pending), "ratings read with no finishing write awaited"
        self.awaiting = None
        for seat in self.seated.values():
            seat.rating = shifts.get(seat.player.id)
        return self._stored(pending)

    def _stored(self, pending: _Pending) -> list[Effect]:
        """A change is stored: its diff, its reply, its timer; at the end the boards open."""
        diff = self._announce(pending.skip)  # first: a snapshot in the reply has this change's v
        effects: list[Effect] = []
        if pending.reply_to is not None and pending.reply is not None:
            effects.append(Reply(pending.reply_to, pending.reply()))
        effects += diff
        if pending.wake is not None:
            effects += self._arm(pending.wake)
        effects += self._hold()
        if self.state == "finished":
            for number, seat in sorted(self.seated.items()):  # the boards open to everyone
                if seat.progress is not None:
                    effects += self._show_board(number, seat.progress, set(self.followers))
        if self.state in _OVER:
            effects.append(Leave())
        return effects

    def _restore(self, pending: _Pending) -> None:
        """Nothing was stored: the race is as it was before the change."""
        state, creator_id, seats, self.starts_at, self.ends_at, self.finished_at = pending.saved
        self.state, self.seated = state, seats
        self.creator = next((s.player for s in seats.values() if s.player.id == creator_id), self.creator)

    def _failed(self, pending: _Pending, error: Exception) -> list[Effect]:
        """The requester is told why; a timed change (the reveal, the end) is tried again in a second."""
        if pending.reply_to is not None:
            return [Reply(pending.reply_to, error)]
        return self._arm(self.clock() + dt.timedelta(seconds=1))

    # ------------------------------------------------------------------ other nodes' copies

    def _changed(self, revision: int) -> list[Effect]:
        """Another node stored ``revision``: a copy behind it reads the race again."""
        if revision <= self.revision:
            return []
        self.awaiting = _Reload(None)
        return [LoadRace(self.id)]

    def _reloaded(self, loaded: RaceLoaded) -> list[Effect]:
        """The race as stored: its followers get the difference as a diff; a request that lost the fence
        is handled again against it (up to `TRIES` writes, then stale); a timed change that lost takes the
        stored state (another copy did it). A race over ends here as if this copy had stored it."""
        reload = self.awaiting
        assert isinstance(reload, _Reload), "a race read with none awaited"
        self.awaiting = None
        lost, record = reload.lost, loaded.record
        if record is None or loaded.error is not None:  # unread: a request is stale, a timed change retried
            if lost is None:  # behind until the next event, or its next write (which reads it then)
                return []
            if lost.reply_to is not None:
                return [Reply(lost.reply_to, _stale(self.id))]
            return self._arm(self.clock() + dt.timedelta(seconds=1))
        if record.revision <= self.revision and lost is None:
            return []  # this copy stored it meanwhile
        self._adopt(record)
        if self.state == "finished":  # stored (and rated) by another copy: the result as a change of ours
            again = self._again(lost)  # refused: the race is over
            self.awaiting = self._save()
            return [*again, LoadRatings(self.id)]
        if self.state == "cancelled":
            return [*self._announce(None), *self._again(lost), Leave()]
        diff = self._announce(None)  # before the request is handled again: it changes the race
        return diff + self._arm_next() + self._hold() + self._again(lost)

    def _again(self, lost: _Pending | None) -> list[Effect]:
        """The request whose write lost, handled again on the race as read, up to `TRIES` writes in all."""
        if lost is None or lost.command is None:
            return []
        if lost.tries >= TRIES:
            return [Reply(lost.command.reply_to, _stale(self.id))]
        return self._request(lost.command, tries=lost.tries + 1)

    def _adopt(self, record: RaceRecord) -> None:
        """Take the race as stored; a seat still playing there keeps what this copy saw of its game."""
        mine = {seat.game: seat for seat in self.seated.values() if seat.game is not None}
        seated = {stored.seat: Seat.of(stored) for stored in record.seated}
        for seat in seated.values():
            seen = mine.get(seat.game) if seat.game is not None else None
            if seen is None:
                continue
            if record.state == "running" and seat.status == "playing" and seen.progress is not None:
                seat.keep_figures(seen)
            seat.progress = seat.progress or seen.progress  # its board, shown at the end
        self.seated = seated
        self.creator = next(
            (seat.player for seat in seated.values() if seat.player.id == record.creator_id), self.creator
        )
        self.state, self.revision = record.state, record.revision
        self.starts_at, self.ends_at, self.finished_at = record.starts_at, record.ends_at, record.finished_at
        if record.rematch_id is not None:  # another copy made the rematch
            self.rematch = RaceLink(record.rematch_id, record.rematch_code or "")

    def _arm_next(self) -> list[Effect]:
        """A Wake for the race's next timed change (a copy that read the race arms what it stores); at
        once when a seat it saw won, or none plays, and the stored race is not over (its end lost the
        fence to another change: it is written again)."""
        if self.state == "lobby":
            return self._arm(self.created_at + dt.timedelta(seconds=LOBBY_TIMEOUT))
        if self.state == "countdown" and self.starts_at is not None:
            return self._arm(self.starts_at)
        if self.state == "running" and self.ends_at is not None:
            return self._arm(self.clock() if self._decided() else self.ends_at)
        return []

    def _hold(self) -> list[Effect]:
        """Once running, the seats' games are held on this node when other nodes may play them."""
        if self.state != "running" or self._holding or not self.publishes:
            return []
        self._holding = True
        games = tuple(seat.game for seat in self.seated.values() if seat.game and seat.status == "playing")
        return [Hold(self.id, games)] if games else []

    def record(self) -> RaceRecord:
        """The race as stored."""
        return RaceRecord(
            id=self.id,
            code=self.code,
            creator_id=self.creator.id,
            cells=self.cells,
            seats=self.seats,
            time_limit_s=self.time_limit_s,
            public=self.public,
            state=self.state,
            deal_code=self.deal.code(),
            created_at=self.created_at,
            starts_at=self.starts_at,
            ends_at=self.ends_at,
            finished_at=self.finished_at,
            revision=self.revision,
            rematch_id=None if self.rematch is None else self.rematch.race,
            seated=tuple(
                RaceSeatRecord(
                    n,
                    s.player.id,
                    s.player.name,
                    bool(s.player.bot),
                    s.game,
                    s.status,
                    s.cards_home,
                    s.moves,
                    s.score,
                    s.time_ms,
                    s.place,
                    s.ready,
                )
                for n, s in sorted(self.seated.items())
            ),
        )

    # ------------------------------------------------------------------ what a change sends

    def _announce(self, skip: Follower | None) -> list[Effect]:
        """The one place a change's diff is made: ``v`` + 1, the rows that changed since the last
        one and the seats freed, to every follower but ``skip`` (which got a snapshot at this v)."""
        self.v += 1
        rows = self._rows()
        changed = tuple(row for n, row in rows.items() if self._announced.get(n) != row)
        gone = tuple(n for n in self._announced if n not in rows)
        self._announced = rows
        diff = RaceDiff(
            self.id,
            self.v,
            self.creator.id,
            self.state,
            self.starts_at,
            self.ends_at,
            self._revealed_deal(),
            changed,
            gone,
            self.rematch,
        )
        audience = tuple(follower for follower in self.followers if follower is not skip)
        return [Push(audience, lambda: diff)] if audience else []

    def _rows(self) -> dict[int, RaceSeat]:
        return {n: seat.row(n) for n, seat in sorted(self.seated.items())}

    def _revealed_deal(self) -> str | None:
        return self.deal.code() if self.state in ("running", "finished") and self.ends_at else None

    # ------------------------------------------------------------------ checks

    def _players(self) -> set[str]:
        return {seat.player.id for seat in self.seated.values()} if self.state not in _OVER else set()

    def _decided(self) -> bool:
        """A seat won, or none is still playing: the race is over before its time."""
        return any(seat.status == "won" for seat in self.seated.values()) or not self._playing()

    def _playing(self) -> bool:
        return any(seat.status == "playing" for seat in self.seated.values())

    def _check_open(self) -> None:
        if self.state in _OVER:
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"race {self.id} is {self.state}")

    def _own_seat(self, player: PlayerRef) -> Seat:
        number = self.seat_of(player.id)
        if number is None:
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"you hold no seat in race {self.id}")
        return self.seated[number]


def _ok(request_id: RequestId | None) -> Callable[[], list[ServerMessage]]:
    return lambda: [Ok(request_id=request_id)]


def _not_newer(progress: SeatProgress, seen: SeatProgress | None) -> bool:
    """``progress`` is what the race saw already: an older version, or the same one still playing (a
    resignation keeps its game's version: the same version, resigned, is news)."""
    if seen is None:  # a game read with nothing played yet is no news either (its time would change)
        return progress.v == 0 and progress.status is Status.PLAYING
    return progress.v < seen.v or (progress.v == seen.v and progress.status is seen.status)


def _stale(race_id: str) -> Refusal:
    return Refusal(ErrorCode.STALE, f"race {race_id} changed elsewhere meanwhile; race_watch it again")
