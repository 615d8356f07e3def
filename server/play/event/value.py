"""An event and its standings as values: `Event` and `Standings` are frozen, and every rule is a
function that returns the next value or raises a `Refusal` (the race's shape, bigger: DESIGN §10).

Pure: no clock, no I/O. The instants come in as arguments, and the deal sequence as a function that
draws it (`Event.advance`), so that the sequence exists only from the start. docs/events.md is the
rule; `server.play.event.scoring` scores a game.
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import NamedTuple

from protocol import Player as PlayerRef
from server.errors import ErrorCode, Refusal
from server.play.event.scoring import NO_FIGURES, Figures, ScoringRules

__all__ = [
    "LIMITS",
    "Entry",
    "Event",
    "EventPlan",
    "Phase",
    "Row",
    "Standings",
    "StandingsDiff",
]


class Phase(StrEnum):
    """Where an event is in its life (docs/events.md, Its life); the value is its wire and stored name."""

    SCHEDULED = "scheduled"
    OPEN = "open"
    RUNNING = "running"
    REVIEW = "review"
    FINAL = "final"
    CANCELLED = "cancelled"

    @property
    def over(self) -> bool:
        return self in (Phase.FINAL, Phase.CANCELLED)

    @property
    def dealt(self) -> bool:
        """The deal sequence exists (drawn at the start)."""
        return self in (Phase.RUNNING, Phase.REVIEW, Phase.FINAL)


class _Bounds(NamedTuple):
    cells: tuple[int, ...] = (8, 4, 2)
    max_players: tuple[int, int] = (1, 100_000)
    deals: tuple[int, int] = (1, 200)
    game_time_s: tuple[int, int] = (60, 3600)
    review_s: tuple[int, int] = (0, 7 * 86_400)
    name_length: int = 64


#: What an event may be made with (docs/events.md, An event).
LIMITS = _Bounds()

#: Why an event whose start was missed by more than half its play time is cancelled.
MISSED_START = "missed_start"


class EventPlan(NamedTuple):
    """What an operator asks for: an event before it has an id."""

    name: str
    cells: int
    opens_at: dt.datetime
    starts_at: dt.datetime
    closes_at: dt.datetime
    ends_at: dt.datetime
    max_players: int
    deals: int
    game_time_s: int = 600
    review_s: int = 600

    def check(self, now: dt.datetime) -> None:
        """Refuse (``bad_request``) a plan docs/events.md does not allow, with what is wrong."""
        problem = self._problem(now)
        if problem is not None:
            raise Refusal(ErrorCode.BAD_REQUEST, f"event {self.name!r}: {problem}")

    def _problem(self, now: dt.datetime) -> str | None:
        if not self.name.strip() or len(self.name) > LIMITS.name_length:
            return f"name: 1 to {LIMITS.name_length} characters"
        if self.cells not in LIMITS.cells:
            return "cells: 8, 4 or 2"
        for field, (lo, hi) in (
            ("max_players", LIMITS.max_players),
            ("deals", LIMITS.deals),
            ("game_time_s", LIMITS.game_time_s),
            ("review_s", LIMITS.review_s),
        ):
            value = getattr(self, field)
            if not lo <= value <= hi:
                return f"{field}: {lo} to {hi}, not {value}"
        if any(t.tzinfo is None for t in (self.opens_at, self.starts_at, self.closes_at, self.ends_at)):
            return "instants must carry a time zone"
        if not self.opens_at <= self.starts_at <= self.closes_at <= self.ends_at:
            return "opens_at <= starts_at <= closes_at <= ends_at"
        if self.starts_at >= self.ends_at:
            return "starts_at must be before ends_at"
        if self.ends_at <= now:
            return "ends_at is past"
        return None


@dataclass(frozen=True, slots=True)
class Event:
    """One event; see the module docstring. ``deal_codes`` is empty until the start (secret: there is
    nothing to leak), ``revision`` the stored row's fence (a stored change is one more)."""

    id: str
    name: str
    cells: int
    opens_at: dt.datetime
    starts_at: dt.datetime
    closes_at: dt.datetime
    ends_at: dt.datetime
    max_players: int
    deals: int
    game_time_s: int
    review_s: int
    created_at: dt.datetime
    phase: Phase = Phase.SCHEDULED
    deal_codes: tuple[str, ...] = ()
    started_at: dt.datetime | None = None
    revision: int = 0
    cancel_reason: str | None = None

    @classmethod
    def planned(cls, event_id: str, plan: EventPlan, now: dt.datetime) -> Event:
        """A new event of ``plan`` (checked), scheduled: `advance` moves it on as any other."""
        plan.check(now)
        return cls(
            event_id,
            plan.name.strip(),
            plan.cells,
            plan.opens_at,
            plan.starts_at,
            plan.closes_at,
            plan.ends_at,
            plan.max_players,
            plan.deals,
            plan.game_time_s,
            plan.review_s,
            now,
        )

    @property
    def final_at(self) -> dt.datetime:
        return self.ends_at + dt.timedelta(seconds=self.review_s)

    @property
    def rules(self) -> ScoringRules:
        return ScoringRules(self.ends_at, self.game_time_s)

    def due_phase(self, now: dt.datetime) -> Phase:
        """The phase the instants give at ``now`` (a cancelled event stays cancelled)."""
        if self.phase is Phase.CANCELLED:
            return Phase.CANCELLED
        for phase, since in (
            (Phase.FINAL, self.final_at),
            (Phase.REVIEW, self.ends_at),
            (Phase.RUNNING, self.starts_at),
            (Phase.OPEN, self.opens_at),
        ):
            if now >= since:
                return phase
        return Phase.SCHEDULED

    def missed_start(self, now: dt.datetime) -> bool:
        """Not started, and less than half of its play time is left: cancelled, not started late."""
        if self.phase.dealt or self.phase.over:
            return False
        return now > self.starts_at + (self.ends_at - self.starts_at) / 2

    def advance(self, now: dt.datetime, draw: Callable[[int, int], tuple[str, ...]]) -> Event:
        """The event moved to the phase due at ``now`` (itself when none is due), as one stored change:
        the start draws the sequence (``draw(cells, deals)``), a missed start cancels it."""
        due = self.due_phase(now)
        order = list(Phase)
        if self.phase.over or order.index(due) <= order.index(self.phase):
            return self
        if self.missed_start(now):
            return self._stored(phase=Phase.CANCELLED, cancel_reason=MISSED_START)
        changes: dict[str, object] = {"phase": due}
        if due.dealt and not self.phase.dealt:
            codes = draw(self.cells, self.deals)
            assert len(codes) == self.deals, "the draw gives the event's number of deals"
            changes.update(deal_codes=tuple(codes), started_at=now)
        return self._stored(**changes)

    def cancel(self, reason: str) -> Event:
        if self.phase.over:
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"event {self.id} is {self.phase} already")
        return self._stored(phase=Phase.CANCELLED, cancel_reason=reason)

    def check_entry(self, now: dt.datetime, entrants: int) -> None:
        """Refuse an entry at ``now`` with ``entrants`` already in: before the entry opens, after it
        closes, or with the cap reached."""
        if self.phase.over or self.due_phase(now) in (Phase.REVIEW, Phase.FINAL):
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"event {self.id} is over: entry is closed")
        if now < self.opens_at:
            raise Refusal(
                ErrorCode.ILLEGAL_MOVE, f"event {self.id}: entry opens at {self.opens_at.isoformat()}"
            )
        if now >= self.closes_at:
            raise Refusal(
                ErrorCode.ILLEGAL_MOVE, f"event {self.id}: entry closed at {self.closes_at.isoformat()}"
            )
        if entrants >= self.max_players:
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"event {self.id} is full ({self.max_players} players)")

    def deal_code(self, index: int) -> str | None:
        """Deal ``index`` (from 1) of the sequence; None before the start or past the last deal."""
        if not self.phase.dealt or not 1 <= index <= len(self.deal_codes):
            return None
        return self.deal_codes[index - 1]

    def _stored(self, **changes: object) -> Event:
        return dataclasses.replace(self, revision=self.revision + 1, **changes)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------- standings


@dataclass(frozen=True, slots=True)
class Entry:
    """An entrant: its player, its entry number (join order, from 1) and its figures."""

    player: PlayerRef
    number: int
    figures: Figures = NO_FIGURES
    voided: bool = False

    def merit(self) -> tuple[int, int, int, int, int, dt.datetime]:
        """What ranks it (smaller is better; docs/events.md, The order): equal merits share a place."""
        f = self.figures
        reached = f.reached_at or dt.datetime.max.replace(tzinfo=dt.UTC)
        return (int(self.voided), -f.points, -f.wins, f.win_ms, int(f.reached_at is None), reached)

    def sort_key(self) -> tuple[tuple[int, int, int, int, int, dt.datetime], int]:
        return self.merit(), self.number


class Row(NamedTuple):
    """One entrant's line of the standings: ``position`` in the listed order (from 1), ``place``
    shared by a tie (None when voided)."""

    position: int
    place: int | None
    player: PlayerRef
    number: int
    points: int
    wins: int
    win_ms: int
    games: int
    streak: int
    voided: bool


class StandingsDiff(NamedTuple):
    """What a follower at ``since`` needs to be at ``version``: the changed rows and the players gone."""

    since: int
    version: int
    rows: tuple[Row, ...]
    removed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Standings:
    """An event's standings at ``version``: its entries in listed order. Every change returns the
    next version; a batch of changes (`with_entries`) is one version, as a coalescing tick wants."""

    version: int = 0
    ranked: tuple[Entry, ...] = ()
    _positions: Mapping[str, int] = dataclasses.field(init=False, repr=False, compare=False)
    _places: tuple[int | None, ...] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        positions = {entry.player.id: n for n, entry in enumerate(self.ranked)}
        assert len(positions) == len(self.ranked), "one entry per player"
        object.__setattr__(self, "_positions", MappingProxyType(positions))
        object.__setattr__(self, "_places", _places(self.ranked))

    @classmethod
    def of(cls, entries: Iterable[Entry], version: int = 0) -> Standings:
        return cls(version, tuple(sorted(entries, key=Entry.sort_key)))

    def __len__(self) -> int:
        return len(self.ranked)

    def entry(self, player_id: str) -> Entry | None:
        position = self._positions.get(player_id)
        return None if position is None else self.ranked[position]

    def next_number(self) -> int:
        return max((entry.number for entry in self.ranked), default=0) + 1

    def with_entries(self, entries: Iterable[Entry]) -> Standings:
        """The next version with ``entries`` added or replacing the player's entry."""
        keys = [entry.sort_key() for entry in self.ranked]
        ranked = list(self.ranked)
        changed = False
        for entry in entries:
            position = self._positions.get(entry.player.id) if not changed else _find(ranked, entry.player.id)
            if position is not None:
                if ranked[position] == entry:
                    continue
                del ranked[position], keys[position]
            key = entry.sort_key()
            at = bisect.bisect_left(keys, key)
            ranked.insert(at, entry)
            keys.insert(at, key)
            changed = True
        return Standings(self.version + 1, tuple(ranked)) if changed else self

    def void(self, player_id: str) -> Standings:
        """The player's result voided: no place, listed last, everyone else re-ranked."""
        entry = self.entry(player_id)
        if entry is None:
            raise Refusal(ErrorCode.NOT_FOUND, f"no entrant {player_id}")
        return self.with_entries([dataclasses.replace(entry, voided=True)])

    def rows(self, start: int = 0, stop: int | None = None) -> tuple[Row, ...]:
        """The rows from position ``start`` (from 0) up to ``stop``."""
        stop = len(self.ranked) if stop is None else min(stop, len(self.ranked))
        return tuple(self._row(n) for n in range(max(0, start), stop))

    def page(self, start: int, limit: int) -> tuple[tuple[Row, ...], int | None]:
        """A page of ``limit`` rows from position ``start`` (0-based), and the next page's start."""
        rows = self.rows(start, start + limit)
        following = start + limit
        return rows, following if following < len(self.ranked) else None

    def around(self, player_id: str, radius: int) -> tuple[Row, ...]:
        """The player's row with ``radius`` rows on each side; nothing when it has not entered."""
        position = self._positions.get(player_id)
        if position is None:
            return ()
        return self.rows(position - radius, position + radius + 1)

    def place_of(self, player_id: str) -> int | None:
        position = self._positions.get(player_id)
        return None if position is None else self._places[position]

    def places(self) -> dict[str, int]:
        """Player id → place, for every entrant not voided."""
        return {
            entry.player.id: place
            for entry, place in zip(self.ranked, self._places, strict=True)
            if place is not None
        }

    def diff(self, old: Standings) -> StandingsDiff:
        """What changed since ``old``: each row of this version that differs from its row there."""
        before = {row.player.id: row for row in old.rows()}
        rows = tuple(row for row in self.rows() if before.get(row.player.id) != row)
        removed = tuple(player for player in before if player not in self._positions)
        return StandingsDiff(old.version, self.version, rows, removed)

    def _row(self, position: int) -> Row:
        entry, figures = self.ranked[position], self.ranked[position].figures
        return Row(
            position + 1,
            self._places[position],
            entry.player,
            entry.number,
            figures.points,
            figures.wins,
            figures.win_ms,
            figures.games,
            figures.streak,
            entry.voided,
        )


def _find(ranked: list[Entry], player_id: str) -> int | None:
    return next((n for n, entry in enumerate(ranked) if entry.player.id == player_id), None)


def _places(ranked: tuple[Entry, ...]) -> tuple[int | None, ...]:
    """Competition places (1, 1, 3) of entries in listed order; None for a voided one."""
    places: list[int | None] = []
    previous: tuple[object, ...] | None = None
    for position, entry in enumerate(ranked):
        merit = entry.merit()
        if entry.voided:
            places.append(None)
        elif merit == previous:
            places.append(places[-1])
        else:
            places.append(position + 1)
        previous = merit
    return tuple(places)
