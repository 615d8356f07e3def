"""A race as a value: `Race` and its `Seat`s are frozen, and every rule of a race is a transition that
returns the next `Race` or raises a `Refusal` (lichess's racer keeps its races so).

Pure: no clock, no I/O. The room (`server.play.race.room`) proposes the value a request or a timer
makes, commits its `record`, and adopts it once stored; a failed write leaves the room's value as it
was, so nothing is ever undone. Places (`places`) and what changed between two values (`diff`) are
functions of the value.

A race goes lobby → countdown → running → finished, or to cancelled (the last seat left the lobby,
nobody ready came back at the reveal, the lobby's time ran out).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import NamedTuple

from engine import Deal, Status
from protocol import Player as PlayerRef
from protocol import Race as RaceMessage
from protocol import RaceDiff, RaceLink, RaceSeat, RatingShift
from protocol.errors import RequestId
from server.errors import ErrorCode, Refusal
from server.play.effects import SeatProgress
from server.play.race.places import Figures, places
from server.storage import GameStart
from server.storage.records import RaceRecord, RaceSeatRecord

__all__ = ["LOBBY_TIMEOUT", "Entrant", "Phase", "Race", "Seat", "SeatStatus"]

#: Seconds a race may stay in its lobby: then it is cancelled. A race made and never started holds
#: memory, a row and a timer, and players who join and never ready hold its seats: ten minutes bound
#: both (a lobby of friends starts in a minute or two; races are made at most 30 an hour per player
#: and 60 per address).
LOBBY_TIMEOUT = 600.0


class Phase(StrEnum):
    """Where a race is in its life (its wire and stored name is the value)."""

    LOBBY = "lobby"
    COUNTDOWN = "countdown"
    RUNNING = "running"
    FINISHED = "finished"
    CANCELLED = "cancelled"

    @property
    def over(self) -> bool:
        return self in (Phase.FINISHED, Phase.CANCELLED)


class Entrant(NamedTuple):
    """Who takes a seat, and the digest of the network it comes from
    (`server.play.race.ratings.network_of`; None: unknown), which its rating is judged by."""

    player: PlayerRef
    network: str | None


class SeatStatus(StrEnum):
    """Where a seat is: waiting for the reveal, playing its game, or done with it."""

    WAITING = "waiting"
    PLAYING = "playing"
    WON = "won"
    RESIGNED = "resigned"
    LEFT = "left"


@dataclass(frozen=True, slots=True)
class Seat:
    """One seat: its player and, from the reveal, its game's figures as last committed."""

    player: PlayerRef
    ready: bool = False
    game: str | None = None
    status: SeatStatus = SeatStatus.WAITING
    cards_home: int = 0
    moves: int = 0
    score: int = 0
    time_ms: int = 0
    place: int | None = None
    progress: SeatProgress | None = None  # the game's last commit seen (its board)
    rating: RatingShift | None = None  # shown rating before and after, once the race rated it
    network: str | None = None  # the digest of the network it joined from (`ratings.network_of`)

    @classmethod
    def of(cls, stored: RaceSeatRecord) -> Seat:
        """The seat as stored (its figures as of the race's last write)."""
        return cls(
            PlayerRef.of(stored.player_id, stored.player_name, bot=stored.player_bot),
            ready=stored.ready,
            game=stored.game_id,
            status=SeatStatus(stored.status),
            cards_home=stored.cards_home,
            moves=stored.moves,
            score=stored.score,
            time_ms=stored.time_ms,
            place=stored.place,
            network=stored.network,
        )

    def row(self, number: int) -> RaceSeat:
        return RaceSeat(
            number,
            self.player,
            self.ready,
            self.game,
            self.status.value,
            self.cards_home,
            self.moves,
            self.score,
            self.time_ms,
            self.place,
            self.rating,
        )

    def record(self, number: int) -> RaceSeatRecord:
        player = self.player
        return RaceSeatRecord(
            number,
            player.id,
            player.name,
            bool(player.bot),
            self.game,
            self.status.value,
            self.cards_home,
            self.moves,
            self.score,
            self.time_ms,
            self.place,
            self.ready,
            self.network,
        )

    def progressed(self, progress: SeatProgress, starts_at: dt.datetime) -> Seat:
        """The one statement of a seat's figures from its game's commit: cards home, moves, score, the
        time of its last action since the reveal, and the game's end when it ended. A resignation moves
        no card and is no action: the seat keeps the time of its last move, as a seat that leaves or
        goes away does (docs/races.md, Giving up)."""
        status = self.status if progress.status is Status.PLAYING else SeatStatus(progress.status.value)
        time_ms = self.time_ms
        if progress.status is not Status.RESIGNED:
            time_ms = max(0, (progress.at - starts_at) // dt.timedelta(milliseconds=1))
        return dataclasses.replace(
            self,
            progress=progress,
            cards_home=sum(progress.layout.foundations),
            moves=progress.moves,
            score=progress.score,
            time_ms=time_ms,
            status=status,
        )

    def figures(self) -> Figures:
        return Figures(self.status.value, self.cards_home, self.moves, self.time_ms)

    def is_news(self, progress: SeatProgress) -> bool:
        """``progress`` is later than what this seat saw of its game: a newer version, or the same one
        ended (a resignation keeps its game's version). A game read with nothing played yet is no
        news either (its time would change)."""
        seen = self.progress
        if seen is None:
            return progress.v > 0 or progress.status is not Status.PLAYING
        return progress.v > seen.v or (progress.v == seen.v and progress.status is not seen.status)


def _seats(seated: Mapping[int, Seat] | Iterable[tuple[int, Seat]]) -> Mapping[int, Seat]:
    """Seats in seat order, read-only: a value's seats are never changed in place."""
    items = seated.items() if isinstance(seated, Mapping) else seated
    return MappingProxyType(dict(sorted(items)))


@dataclass(frozen=True, slots=True)
class Race:
    """One race; see the module docstring. ``revision`` is the stored race's (see `RaceRecord`): a
    stored transition is one more."""

    id: str
    code: str
    creator: PlayerRef
    cells: int
    seats: int
    time_limit_s: int
    public: bool
    deal: Deal  # secret until the reveal
    created_at: dt.datetime
    phase: Phase = Phase.LOBBY
    seated: Mapping[int, Seat] = dataclasses.field(default_factory=dict)
    starts_at: dt.datetime | None = None
    ends_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    revision: int = 0
    rematch: RaceLink | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "seated", _seats(self.seated))

    @classmethod
    def of(cls, record: RaceRecord, ratings: Mapping[str, RatingShift] | None = None) -> Race:
        """The race as stored; a finished one's seats with the rating changes it made."""
        ratings = ratings or {}
        seated = {
            s.seat: dataclasses.replace(Seat.of(s), rating=ratings.get(s.player_id)) for s in record.seated
        }
        creator = next(
            (seat.player for seat in seated.values() if seat.player.id == record.creator_id),
            PlayerRef.of(record.creator_id, record.creator_id[:16], bot=False),
        )
        return cls(
            id=record.id,
            code=record.code,
            creator=creator,
            cells=record.cells,
            seats=record.seats,
            time_limit_s=record.time_limit_s,
            public=record.public,
            deal=Deal.from_code(record.deal_code),
            created_at=record.created_at,
            phase=Phase(record.state),
            seated=seated,
            starts_at=record.starts_at,
            ends_at=record.ends_at,
            finished_at=record.finished_at,
            revision=record.revision,
            rematch=None
            if record.rematch_id is None
            else RaceLink(record.rematch_id, record.rematch_code or ""),
        )

    # ------------------------------------------------------------------ reading it

    def seat_of(self, player_id: str) -> int | None:
        return next((n for n, seat in self.seated.items() if seat.player.id == player_id), None)

    def seat_of_game(self, game_id: str) -> int | None:
        return next((n for n, seat in self.seated.items() if seat.game == game_id), None)

    def players(self) -> frozenset[str]:
        """The players who hold a seat while the race is not over (they see standings, not boards)."""
        if self.phase.over:
            return frozenset()
        return frozenset(seat.player.id for seat in self.seated.values())

    def is_decided(self) -> bool:
        """Running, and a seat won or none is still playing: the race is over before its time."""
        if self.phase is not Phase.RUNNING:
            return False
        statuses = {seat.status for seat in self.seated.values()}
        return SeatStatus.WON in statuses or SeatStatus.PLAYING not in statuses

    def due_at(self) -> dt.datetime | None:
        """When the race's next timed change is due: the lobby's end, the reveal, the time limit."""
        if self.phase is Phase.LOBBY:
            return self.created_at + dt.timedelta(seconds=LOBBY_TIMEOUT)
        if self.phase is Phase.COUNTDOWN:
            return self.starts_at
        if self.phase is Phase.RUNNING:
            return self.ends_at
        return None

    def revealed_deal(self) -> str | None:
        if self.phase in (Phase.RUNNING, Phase.FINISHED) and self.ends_at is not None:
            return self.deal.code()
        return None

    def places(self) -> dict[int, int]:
        return places({n: seat.figures() for n, seat in self.seated.items()})

    def rows(self) -> dict[int, RaceSeat]:
        return {n: seat.row(n) for n, seat in self.seated.items()}

    def game_starts(self) -> tuple[GameStart, ...]:
        """The games a reveal starts: one per playing seat, of the race's deal, from its start."""
        assert self.starts_at is not None, "a race's games start at its reveal"
        code = self.deal.code()
        return tuple(
            GameStart(seat.game, seat.player.id, code, self.cells, None, self.starts_at, self.id)
            for seat in self.seated.values()
            if seat.game is not None and seat.status is SeatStatus.PLAYING
        )

    def snapshot(self, v: int, request_id: RequestId | None, board_delay_ms: int) -> RaceMessage:
        return RaceMessage(
            race=self.id,
            v=v,
            code=self.code,
            creator=self.creator.id,
            cells=self.cells,
            seats=self.seats,
            time_limit=self.time_limit_s,
            public=self.public,
            state=self.phase.value,
            starts_at=self.starts_at,
            ends_at=self.ends_at,
            deal=self.revealed_deal(),
            rows=tuple(self.rows().values()),
            request_id=request_id,
            rematch=self.rematch,
            board_delay_ms=board_delay_ms,
        )

    def diff(self, old: Race, v: int) -> RaceDiff:
        """What changed since ``old`` (the value as last told), as the stream's diff at ``v``: the
        race's header whole, the rows that changed and the seats freed."""
        before, rows = old.rows(), self.rows()
        return RaceDiff(
            self.id,
            v,
            self.creator.id,
            self.phase.value,
            self.starts_at,
            self.ends_at,
            self.revealed_deal(),
            tuple(row for n, row in rows.items() if before.get(n) != row),
            tuple(n for n in before if n not in rows),
            self.rematch,
        )

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
            state=self.phase.value,
            deal_code=self.deal.code(),
            created_at=self.created_at,
            starts_at=self.starts_at,
            ends_at=self.ends_at,
            finished_at=self.finished_at,
            revision=self.revision,
            rematch_id=None if self.rematch is None else self.rematch.race,
            seated=tuple(seat.record(n) for n, seat in self.seated.items()),
        )

    # ------------------------------------------------------------------ stored transitions

    def join(self, player: PlayerRef, network: str | None) -> Race:
        """``player``, from ``network`` (`server.play.race.ratings.network_of`), takes the lowest free
        seat."""
        self._check_not_over()
        if self.phase is not Phase.LOBBY:
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"race {self.id} has started: race_watch it")
        if len(self.seated) >= self.seats:
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"race {self.id} is full ({self.seats} seats)")
        number = min(set(range(1, self.seats + 1)) - set(self.seated))
        return self._stored(seated={**self.seated, number: Seat(player, network=network)})

    def ready(self, player: PlayerRef, ready: bool) -> Race:
        number = self._own_seat(player)
        if self.phase is not Phase.LOBBY:
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"race {self.id} is {self.phase}: ready is for the lobby")
        return self._with_seat(number, ready=ready)

    def start(self, player: PlayerRef, now: dt.datetime, countdown_s: float) -> Race:
        """The creator, ready, starts the countdown with the seats that are ready (two at least); the
        seats not ready are freed, so that players who join and never ready cannot hold a lobby."""
        self._check_not_over()
        if player.id != self.creator.id:
            raise Refusal(ErrorCode.FORBIDDEN, f"only the race's creator starts race {self.id}")
        if self.phase is not Phase.LOBBY:
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"race {self.id} is {self.phase} already")
        if len(self.seated) < 2:
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"race {self.id} needs 2 seats taken to start")
        own = self._own_seat(player)
        if not self.seated[own].ready:
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"race {self.id}: your seat {own} is not ready")
        ready = {n: seat for n, seat in self.seated.items() if seat.ready}
        if len(ready) < 2:
            waiting = ", ".join(str(n) for n in self.seated if n not in ready)
            raise Refusal(
                ErrorCode.ILLEGAL_MOVE, f"race {self.id} needs 2 seats ready: seat(s) {waiting} not ready"
            )
        starts_at = now + dt.timedelta(seconds=countdown_s)
        return self._stored(seated=ready, phase=Phase.COUNTDOWN, starts_at=starts_at)

    def holds_seat_to_give_up(self, player_id: str) -> bool:
        """``player_id`` has a seat it has not left, in a race not over (`leave` gives it up)."""
        number = self.seat_of(player_id)
        return (
            number is not None and self.seated[number].status is not SeatStatus.LEFT and not self.phase.over
        )

    def leave(self, player: PlayerRef, now: dt.datetime) -> Race:
        """``player`` gives its seat up: freed in the lobby (the creator's role passes to the lowest
        seat; the last one out cancels the race), left once the countdown began (the race ends when
        nobody plays on)."""
        if not self.holds_seat_to_give_up(player.id):
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"you hold no seat in race {self.id} to give up")
        number = self._own_seat(player)
        if self.phase is Phase.LOBBY:
            seated = {n: seat for n, seat in self.seated.items() if n != number}
            if not seated:
                return self._stored(seated=seated, phase=Phase.CANCELLED)
            creator = self.creator if player.id != self.creator.id else seated[min(seated)].player
            return self._stored(seated=seated, creator=creator)
        left = self._with_seat(number, status=SeatStatus.LEFT)
        if left.phase is Phase.RUNNING and left.is_decided():
            return left._finished(now)
        return left

    def reveal(self, make_id: Callable[[], str]) -> Race:
        """The countdown is over: every seat still there gets its game (`game_starts`), and the time
        limit runs from the start; with no seat left to play, the race is cancelled."""
        assert self.phase is Phase.COUNTDOWN and self.starts_at is not None
        seated = {
            n: dataclasses.replace(seat, game=make_id(), status=SeatStatus.PLAYING)
            if seat.status is SeatStatus.WAITING
            else seat
            for n, seat in self.seated.items()
        }
        playing = any(seat.status is SeatStatus.PLAYING for seat in seated.values())
        return self._stored(
            seated=seated,
            phase=Phase.RUNNING if playing else Phase.CANCELLED,
            ends_at=self.starts_at + dt.timedelta(seconds=self.time_limit_s),
        )

    def finish(self, now: dt.datetime) -> Race:
        """The race ends (a seat won, nobody plays on, or its time is up): every seat takes its place."""
        return self._stored()._finished(now)

    def cancel(self) -> Race:
        return self._stored(phase=Phase.CANCELLED)

    def due_change(self, now: dt.datetime, make_id: Callable[[], str]) -> Race:
        """The timed change `due_at` names: the lobby cancelled, the deal revealed, the race ended."""
        if self.phase is Phase.LOBBY:
            return self.cancel()
        if self.phase is Phase.COUNTDOWN:
            return self.reveal(make_id)
        return self.finish(now)

    def rematched(self, player: PlayerRef, link: RaceLink) -> Race:
        """The finished race names ``link`` as its rematch; itself when it names one already (the asker
        joins that one)."""
        if self.phase is not Phase.FINISHED:
            raise Refusal(
                ErrorCode.ILLEGAL_MOVE, f"race {self.id} is {self.phase}: a rematch follows a finished race"
            )
        if self.seat_of(player.id) is None:
            raise Refusal(
                ErrorCode.ILLEGAL_MOVE, f"you held no seat in race {self.id}: its players ask a rematch"
            )
        return self if self.rematch is not None else self._stored(rematch=link)

    # ------------------------------------------------------------------ transitions not stored

    def progressed(self, progress: SeatProgress) -> Race | None:
        """A seat's game committed ``progress``: the race with that seat's figures, or None when it is
        no news (not running, no seat of that game, a seat done, an older version)."""
        if self.phase is not Phase.RUNNING or self.starts_at is None:
            return None
        number = self.seat_of_game(progress.game)
        if number is None:
            return None
        seat = self.seated[number]
        if seat.status is not SeatStatus.PLAYING or not seat.is_news(progress):
            return None
        return dataclasses.replace(
            self, seated={**self.seated, number: seat.progressed(progress, self.starts_at)}
        )

    def rated(self, shifts: Mapping[str, RatingShift]) -> Race:
        """The finished race's seats with the rating changes its finishing write made."""
        seated = {
            n: dataclasses.replace(seat, rating=shifts.get(seat.player.id)) for n, seat in self.seated.items()
        }
        return dataclasses.replace(self, seated=seated)

    def stored_as(self, record: RaceRecord) -> Race:
        """The race as another copy stored it: a seat still playing there keeps the figures this copy
        saw of its game (the race is written at changes of phase or seats, not per action), every seat
        its last board and its rating change."""
        stored = Race.of(record)
        mine = {seat.game: seat for seat in self.seated.values() if seat.game is not None}
        seated = {}
        for number, seat in stored.seated.items():
            seen = mine.get(seat.game) if seat.game is not None else None
            if seen is not None:
                if stored.phase is Phase.RUNNING and seat.status is SeatStatus.PLAYING and seen.progress:
                    seat = dataclasses.replace(
                        seat,
                        status=seen.status,
                        cards_home=seen.cards_home,
                        moves=seen.moves,
                        score=seen.score,
                        time_ms=seen.time_ms,
                    )
                seat = dataclasses.replace(seat, progress=seen.progress, rating=seen.rating)
            seated[number] = seat
        return dataclasses.replace(stored, deal=self.deal, seated=seated)

    # ------------------------------------------------------------------ internals

    def _stored(self, **changes: object) -> Race:
        """A change that is stored: the next revision."""
        return dataclasses.replace(self, revision=self.revision + 1, **changes)  # type: ignore[arg-type]

    def _with_seat(self, number: int, **changes: object) -> Race:
        seat = dataclasses.replace(self.seated[number], **changes)  # type: ignore[arg-type]
        return self._stored(seated={**self.seated, number: seat})

    def _finished(self, now: dt.datetime) -> Race:
        """This value ended at ``now`` (its revision already counted)."""
        ranked = self.places()
        seated = {n: dataclasses.replace(seat, place=ranked[n]) for n, seat in self.seated.items()}
        return dataclasses.replace(self, phase=Phase.FINISHED, finished_at=now, seated=seated)

    def _check_not_over(self) -> None:
        if self.phase.over:
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"race {self.id} is {self.phase}")

    def _own_seat(self, player: PlayerRef) -> int:
        number = self.seat_of(player.id)
        if number is None:
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"you hold no seat in race {self.id}")
        return number
