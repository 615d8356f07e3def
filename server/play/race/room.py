"""One race's room: a state machine without I/O on the same driver as a game (`server.play.driver`).

The room holds the race as a value (`server.play.race.value.Race`) and the connections that follow
it. A request or a timer makes the next value by one of the race's transitions; the room commits its
record (`Commit`, fenced by the race's ``revision``) and adopts it only once stored (`Committed(None)`),
so a failed write leaves nothing to undo. A seat's game's commits (`SeatChanged`) change the value at
once: the games hold that progress, and only the race's end is stored.

Followers keep the race as a versioned stream like a game's: the snapshot (`protocol.Race`), then one
`protocol.RaceDiff` per change (``v`` + 1 each). `_announce` is the one place that orders what a
change sends (docs/races.md, The order of what a race sends).

Several nodes may each hold a copy of one race (docs/races.md, Across nodes); the database is its
authority. A copy that stored a change tells the others (`Publish` of a `RaceEvent`); a copy behind
(`RaceChanged`), or whose write lost the fence, reads the race as stored (`LoadRace`, `RaceLoaded`),
adopts it, tells its followers the difference, and handles the request that lost again on it (up to
`TRIES` writes).

Time comes from ``clock``; the room asks to be woken (`Wake`) when its next timed change is due and
when a delayed board is, and acts on the `Tick`.

Fair play (docs/races.md): a connection whose player holds a seat sees the other seats' standings
only; a spectator who holds none gets each seat's board ``board_delay`` seconds late
(`protocol.RaceBoard`); once the race is over everyone gets the final boards.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field

from engine import Game
from protocol import Foundations, Ok, RaceBoard, RaceLink, RatingShift, ServerMessage, Snapshot
from protocol import Player as PlayerRef
from protocol import Race as RaceMessage
from protocol.errors import RequestId
from server.clock import utc_now
from server.errors import ErrorCode, Refusal
from server.ids import new_id
from server.play.bus import RaceEvent
from server.play.commands import Committed, Follower, RaceLoaded, RatingsLoaded, Tick, Unfollow
from server.play.effects import (
    Commit,
    Effect,
    Hold,
    Leave,
    LoadRace,
    LoadRatings,
    Publish,
    Push,
    Reply,
    SeatProgress,
    Wake,
)
from server.play.race.boards import DelayedBoards
from server.play.race.commands import (
    RaceChanged,
    RaceCommand,
    RaceJoin,
    RaceLeave,
    RaceReady,
    RaceRematch,
    RaceStart,
    RaceWatch,
    Rematch,
    SeatChanged,
)
from server.play.race.value import Phase, Race, SeatStatus
from server.storage.commit_backends import StoreRace, WriteConflict
from server.storage.records import RaceWrite

__all__ = ["TRIES", "RaceRoom"]

#: Writes of one request at most when other nodes' copies of the race win the fence meanwhile: each
#: lost write reads the race and handles the request again on it. One retry is enough against one
#: other node; seats on several nodes acting at the same instant (everyone ready at once) may need a
#: retry per node that wrote first, and a player told stale would only send it again.
TRIES = 3

_Request = RaceJoin | RaceReady | RaceStart | RaceLeave | RaceRematch


@dataclass(frozen=True, slots=True)
class _Proposal:
    """The race a request (None: a timer) would make, being stored."""

    race: Race
    request: _Request | None
    tries: int = 1  # the request's writes so far: past `TRIES` a lost fence answers stale


@dataclass(frozen=True, slots=True)
class _Reading:
    """The race being read as stored: another node's change was told, or ``lost`` lost the fence."""

    lost: _Proposal | None


@dataclass(frozen=True, slots=True)
class _Rating:
    """The race ended and is stored: its rating changes are being read before the result goes out;
    ``request`` is answered with it."""

    request: _Request | None


@dataclass(eq=False, slots=True)
class RaceRoom:
    """One race and the connections that follow it; see the module docstring."""

    race: Race
    countdown_s: float = 5.0
    board_delay_s: float = 30.0
    v: int = 0
    followers: dict[Follower, str] = field(default_factory=dict)  # connection → its player's id
    awaiting: _Proposal | _Reading | _Rating | None = None
    replaced: bool = False  # written by the race registry alone
    kept: bool = False  # a finished race kept for its followers (its rematch); the registry's, too
    node: str = "node-1"  # what this copy's `RaceEvent`s say it is
    publishes: bool = False  # other nodes may hold copies: stored changes are published, seats held
    clock: Callable[[], dt.datetime] = utc_now
    make_id: Callable[[], str] = new_id
    _announced: Race = field(init=False)  # the race as its followers were last told it
    _held: DelayedBoards = field(init=False)  # the boards not old enough for the spectators
    _boards: dict[int, RaceBoard] = field(default_factory=dict)  # the latest shown, per seat
    _armed: set[dt.datetime] = field(default_factory=set)  # the times a Wake is out for
    _holding: bool = False  # a `Hold` of the seats' games is out

    def __post_init__(self) -> None:
        self._announced = self.race
        self._held = DelayedBoards(self.board_delay_s)

    # ------------------------------------------------------------------ RoomState

    @property
    def id(self) -> str:
        return self.race.id

    @property
    def owner(self) -> PlayerRef:
        return self.race.creator

    @property
    def spectators(self) -> set[Follower]:
        """The followers that hold no seat (the ones delayed boards go to)."""
        players = self.race.players()
        return {follower for follower, player in self.followers.items() if player not in players}

    def is_open(self) -> bool:
        """Live in memory: a race not over, or a finished one kept for its followers."""
        return (not self.race.phase.over or self.kept) and not self.replaced

    def is_followed(self) -> bool:
        return bool(self.followers)

    def snapshot(self, request_id: RequestId | None) -> RaceMessage:
        return self.race.snapshot(self.v, request_id, round(self.board_delay_s * 1000))

    # ------------------------------------------------------------------ the one entry

    def handle(self, command: RaceCommand | Committed | Unfollow) -> list[Effect]:
        """What ``command`` causes, in order (requests never while ``awaiting``: the driver holds them).
        A room let go (``replaced``) takes nothing more: its callers find the race again."""
        match command:
            case Committed(error):
                return self._committed(error)
            case RatingsLoaded(shifts):
                return self._rated(shifts)
            case RaceLoaded():
                return self._reloaded(command)
            case Unfollow(follower):
                self.followers.pop(follower, None)
                return []
        if self.replaced:
            reply_to = getattr(command, "reply_to", None)
            return [Reply(reply_to, None)] if reply_to is not None else []
        match command:
            case SeatChanged(progress):
                return self._seat_changed(progress)
            case Tick(at):
                return [] if self.race.phase.over else self._tick(at)  # a kept race: nothing is due
            case RaceWatch():
                return self._watch(command)
            case RaceChanged(revision):
                return self._changed(revision)
            case RaceJoin() | RaceReady() | RaceStart() | RaceLeave() | RaceRematch():
                return self._request(command)
        raise TypeError(f"a race room takes no {type(command).__name__}")

    def _request(self, request: _Request, *, tries: int = 1) -> list[Effect]:
        """A request that may change the race: the value it makes is proposed (remembering the request,
        handled again if its write loses the fence); a refusal changes nothing."""
        race, now = self.race, self.clock()
        try:
            match request:
                case RaceJoin(follower, player, request_id, reply_to, network):
                    if race.seat_of(player.id) is not None:  # its seat again (another connection)
                        return self._watch(RaceWatch(follower, player, request_id, reply_to))
                    proposed = race.join(player, network)
                case RaceReady(_, player, ready):
                    proposed = race.ready(player, ready)
                case RaceStart(_, player):
                    proposed = race.start(player, now, self.countdown_s)
                case RaceLeave(_, player):
                    if not race.holds_seat_to_give_up(player.id):
                        return self._unfollow(request)
                    proposed = race.leave(player, now)
                case RaceRematch(_, player, made, _, reply_to):
                    proposed = race.rematched(player, RaceLink(made.id, made.code))
                    if proposed is race:  # it names one already: the asker joins that one
                        assert race.rematch is not None
                        return [Reply(reply_to, Rematch(race.rematch.race, race.rematch.code, made=False))]
        except Refusal as refused:
            return [Reply(request.reply_to, refused)]
        return self._propose(_Proposal(proposed, request, tries))

    # ------------------------------------------------------------------ requests not stored

    def _watch(self, command: RaceWatch) -> list[Effect]:
        self.followers[command.follower] = command.player.id
        replies: list[ServerMessage] = [self.snapshot(command.request_id)]
        if self.race.phase is Phase.FINISHED:
            replies += self.final_boards()
        elif self.race.seat_of(command.player.id) is None:  # a spectator: the boards shown so far
            replies += self._boards.values()
        return [Reply(command.reply_to, replies)]

    def _unfollow(self, command: RaceLeave) -> list[Effect]:
        """A race_leave that gives no seat up: the connection stops following (a race over: ``ok``
        even when it no longer did, as nothing is left to give up)."""
        if self.followers.pop(command.follower, None) is None and not self.race.phase.over:
            message = f"you hold no seat in race {self.id} to give up, and do not follow it"
            return [Reply(command.reply_to, Refusal(ErrorCode.ILLEGAL_MOVE, message))]
        return [Reply(command.reply_to, [Ok(request_id=command.request_id)])]

    # ------------------------------------------------------------------ seats' games and time

    def _seat_changed(self, progress: SeatProgress) -> list[Effect]:
        progressed = self.race.progressed(progress)
        if progressed is None:
            return []
        self.race = progressed  # the game holds this progress: nothing to store
        if progressed.is_decided():  # the first to win takes the race; its end is stored
            return self._propose(_Proposal(progressed.finish(self.clock()), None))
        number = progressed.seat_of_game(progress.game)
        assert number is not None
        return self._delay_board(number, progress) + self._announce(None)

    def _tick(self, woken: dt.datetime | None) -> list[Effect]:
        """Whatever is due now; and the next time the race must be woken, unless a Wake is out for
        it (a race taken up again after a restart is sent a first Tick to arm its timers)."""
        now = self.clock()
        # A timer may fire a little before its time (uvloop's by up to a millisecond): the Wake of
        # ``woken`` is no longer out whatever the clock says, and a time not yet due is armed again.
        if woken is not None:
            self._armed.discard(woken)
        self._armed = {at for at in self._armed if at > now}
        effects = self._release_boards(now)
        race = self.race
        if race.phase is Phase.RUNNING:
            effects += self._hold()
        due = race.due_at()
        if due is None:
            return effects
        if now < due and not race.is_decided():
            return effects + self._arm(due)
        return effects + self._propose(_Proposal(race.due_change(now, self.make_id), None))

    def _arm(self, at: dt.datetime) -> list[Effect]:
        if at in self._armed:
            return []
        self._armed.add(at)
        return [Wake(max(0.0, (at - self.clock()).total_seconds()), at)]

    def _arm_next(self) -> list[Effect]:
        """A Wake for the race's next timed change; at once when the race is decided but not over (its
        end lost the fence to another change: it is written again)."""
        due = self.race.due_at()
        if due is None:
            return []
        return self._arm(self.clock() if self.race.is_decided() else due)

    def _hold(self) -> list[Effect]:
        """Once running, the seats' games are held on this node when other nodes may play them."""
        if self.race.phase is not Phase.RUNNING or self._holding or not self.publishes:
            return []
        self._holding = True
        games = tuple(
            seat.game
            for seat in self.race.seated.values()
            if seat.game is not None and seat.status is SeatStatus.PLAYING
        )
        return [Hold(self.id, games)] if games else []

    # ------------------------------------------------------------------ boards

    def _delay_board(self, number: int, progress: SeatProgress) -> list[Effect]:
        self._held.keep(number, progress)
        return self._arm_boards()

    def _release_boards(self, now: dt.datetime) -> list[Effect]:
        effects: list[Effect] = []
        for number, progress in self._held.release(now).items():
            effects += self._show_board(number, progress, self.spectators)
        return effects + self._arm_boards()

    def _arm_boards(self) -> list[Effect]:
        """A Wake for the next board due, after every change of what is held: a timer that fired
        early, or a board held back a second, is woken for again."""
        due = self._held.next_due()
        return self._arm(due) if due is not None else []

    def final_boards(self) -> list[RaceBoard]:
        """Every seat's last board once the race is over (what `race_watch` of it shows)."""
        return [self._board(number, progress) for number, progress in self._final_positions()]

    def _final_positions(self) -> list[tuple[int, SeatProgress]]:
        """Each seat's last committed position; a seat that never moved shows the deal as dealt."""
        race = self.race
        if race.starts_at is None:
            return []
        return [
            (number, seat.progress or SeatProgress.of(seat.game, Game(race.deal), race.starts_at))
            for number, seat in race.seated.items()
            if seat.game is not None
        ]

    def _show_board(self, number: int, progress: SeatProgress, audience: set[Follower]) -> list[Effect]:
        message = self._boards[number] = self._board(number, progress)
        return [Push(tuple(audience), lambda: message)] if audience else []

    def _board(self, number: int, progress: SeatProgress) -> RaceBoard:
        race = self.race
        seat = race.seated[number]
        assert seat.game is not None and race.starts_at is not None
        layout = progress.layout
        board = Snapshot(
            seat.game,
            progress.v,
            race.deal.code(),
            seat.player,
            layout.columns,
            layout.cells,
            Foundations.of(layout),
            progress.score,
            progress.moves,
            progress.status,
            race.starts_at,
        )
        return RaceBoard(self.id, number, board)

    # ------------------------------------------------------------------ stored changes

    def _propose(self, proposal: _Proposal) -> list[Effect]:
        """Commit ``proposal``'s race: with the games a reveal starts, and a rematch's new race."""
        race = proposal.race
        games = (
            race.game_starts() if self.race.phase is Phase.COUNTDOWN and race.phase is Phase.RUNNING else ()
        )
        made = proposal.request.made if isinstance(proposal.request, RaceRematch) else None
        self.awaiting = proposal
        return [Commit(StoreRace(RaceWrite(race.record(), games=games, rematch=made)))]

    def _committed(self, error: Exception | None) -> list[Effect]:
        proposal = self.awaiting
        assert isinstance(proposal, _Proposal), "a commit's outcome with none awaited"
        self.awaiting = None
        if isinstance(error, WriteConflict):  # another copy stored this revision first
            self.awaiting = _Reading(proposal)
            return [LoadRace(self.id)]
        if error is not None:
            return self._failed(proposal, error)
        self.race = proposal.race
        self._follow(proposal.request)
        told = [Publish(RaceEvent(self.node, self.id, self.race.revision))] if self.publishes else []
        if self._ended():  # rated in the same write: its changes go out with the result
            self.awaiting = _Rating(proposal.request)
            return [*told, LoadRatings(self.id)]
        return told + self._announce(proposal.request)

    def _follow(self, request: _Request | None) -> None:
        """A stored join follows the race from its connection; a stored leave stops following."""
        if isinstance(request, RaceJoin):
            self.followers[request.follower] = request.player.id
        elif isinstance(request, RaceLeave):
            self.followers.pop(request.follower, None)

    def _rated(self, shifts: dict[str, tuple[int, int]]) -> list[Effect]:
        """The finishing write's rating changes were read (none when it could not be): the seats of
        rated players carry them in the result."""
        rating = self.awaiting
        assert isinstance(rating, _Rating), "ratings read with no finishing write awaited"
        self.awaiting = None
        self.race = self.race.rated({player: RatingShift(*shift) for player, shift in shifts.items()})
        return self._announce(rating.request)

    def _failed(self, proposal: _Proposal, error: Exception) -> list[Effect]:
        """The requester is told why; a timed change (the reveal, the end) is tried again in a second."""
        if proposal.request is not None:
            return [Reply(proposal.request.reply_to, error)]
        return self._arm(self.clock() + dt.timedelta(seconds=1))

    # ------------------------------------------------------------------ other nodes' copies

    def _changed(self, revision: int) -> list[Effect]:
        """Another node stored ``revision``: a copy behind it reads the race again."""
        if revision <= self.race.revision:
            return []
        self.awaiting = _Reading(None)
        return [LoadRace(self.id)]

    def _reloaded(self, loaded: RaceLoaded) -> list[Effect]:
        """The race as stored: adopted, and its followers told the difference; a request that lost the
        fence is handled again on it (up to `TRIES` writes, then stale); a timed change that lost takes
        the stored state (another copy did it). A race ended elsewhere ends here as if stored here."""
        reading = self.awaiting
        assert isinstance(reading, _Reading), "a race read with none awaited"
        self.awaiting = None
        lost, record = reading.lost, loaded.record
        if record is None or loaded.error is not None:  # unread: a request is stale, a timed change retried
            if lost is None:  # behind until the next event, or its next write (which reads it then)
                return []
            if lost.request is not None:
                return [Reply(lost.request.reply_to, _stale(self.id))]
            return self._arm(self.clock() + dt.timedelta(seconds=1))
        if record.revision <= self.race.revision and lost is None:
            return []  # this copy stored it meanwhile
        self.race = self.race.stored_as(record)
        if self._ended():  # stored (and rated) by another copy: the result as a change of ours
            again = self._again(lost)  # refused: the race is over
            self.awaiting = _Rating(None)
            return [*again, LoadRatings(self.id)]
        return self._announce(None) + self._again(lost)

    def _again(self, lost: _Proposal | None) -> list[Effect]:
        """The request whose write lost, handled again on the race as read, up to `TRIES` writes in all."""
        if lost is None or lost.request is None:
            return []
        if lost.tries >= TRIES:
            return [Reply(lost.request.reply_to, _stale(self.id))]
        return self._request(lost.request, tries=lost.tries + 1)

    # ------------------------------------------------------------------ what a change sends

    def _ended(self) -> bool:
        """The race finished since its followers were last told."""
        return self.race.phase is Phase.FINISHED and self._announced.phase is not Phase.FINISHED

    def _announce(self, request: _Request | None) -> list[Effect]:
        """The one place a change's messages are ordered, once the race is adopted: the requester's
        reply (a joiner's is its snapshot at the new ``v``, and it gets no diff), the diff to every
        other follower, the Wake of the next timed change, the Hold of the seats' games once running;
        when the change ended the race, the final boards to everyone; once over, the room leaves."""
        before, race = self._announced, self.race
        self.v += 1
        self._announced = race
        effects: list[Effect] = []
        skip = None
        if request is not None:
            skip = request.follower if isinstance(request, RaceJoin) else None
            effects.append(Reply(request.reply_to, self._reply(request)))
        diff = race.diff(before, self.v)
        audience = tuple(follower for follower in self.followers if follower is not skip)
        if audience:
            effects.append(Push(audience, lambda: diff))
        effects += self._arm_next()
        effects += self._hold()
        if race.phase.over and not before.phase.over:
            if race.phase is Phase.FINISHED:  # the boards open to everyone
                for number, progress in self._final_positions():
                    effects += self._show_board(number, progress, set(self.followers))
            effects.append(Leave())
        return effects

    def _reply(self, request: _Request) -> list[ServerMessage] | Rematch:
        """What a stored request is answered: a joiner its snapshot, a rematch's asker the race made."""
        if isinstance(request, RaceJoin):
            return [self.snapshot(request.request_id)]
        if isinstance(request, RaceRematch):
            assert self.race.rematch is not None
            return Rematch(self.race.rematch.race, self.race.rematch.code, made=True)
        return [Ok(request_id=request.request_id)]


def _stale(race_id: str) -> Refusal:
    return Refusal(ErrorCode.STALE, f"race {race_id} changed elsewhere meanwhile; race_watch it again")
