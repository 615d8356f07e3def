"""An event's scoring: a game's outcome and an entrant's figures, as docs/events.md (Scoring, every
case) states them. Pure: the instants come in as values.

The one statement of what a game earns is `outcome` plus `tally`; the standings (`value`) rank the
`Figures` it returns and nothing else.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

__all__ = [
    "BERSERK_MIN_MOVES",
    "FIRE_STREAK",
    "NO_FIGURES",
    "Figures",
    "GameResult",
    "Outcome",
    "ScoringRules",
    "outcome",
    "tally",
]

#: Actions a berserk game needs before its bonus counts: every win has them (each card reaches its
#: foundation by an action of its own), so only a win earns the bonus, never an early end.
BERSERK_MIN_MOVES = 52
#: Counted wins in a row that set an entrant on fire: its next win counts double.
FIRE_STREAK = 2
WIN_POINTS = 2
SLOW_WIN_POINTS = 1
BERSERK_BONUS = 1


class Outcome(StrEnum):
    """What a game of the event came to (its wire name is the value)."""

    WIN = "win"
    SLOW_WIN = "slow_win"
    LOSS = "loss"
    HINTED = "hinted"
    LATE = "late"  # ended after the event's end, or not at all by then: not counted


class ScoringRules(NamedTuple):
    """What scoring needs of the event: its end and a game's time allowance."""

    ends_at: dt.datetime
    game_time_s: int

    def allowance(self, berserk: bool) -> dt.timedelta:
        """A game's time allowance for a full win: half (rounded down to the second) for berserk."""
        return dt.timedelta(seconds=self.game_time_s // 2 if berserk else self.game_time_s)


@dataclass(frozen=True, slots=True)
class GameResult:
    """One game of an entrant, as its room last committed it: ``ended_at`` None while playing."""

    game: str
    started_at: dt.datetime
    ended_at: dt.datetime | None = None
    won: bool = False
    hinted: bool = False
    berserk: bool = False
    moves: int = 0

    @property
    def duration(self) -> dt.timedelta | None:
        return None if self.ended_at is None else self.ended_at - self.started_at


def outcome(result: GameResult, rules: ScoringRules) -> Outcome | None:
    """The game's outcome; None while it plays (a game still playing at the end never scores, as a
    `LATE` one: the end is a hard line)."""
    if result.ended_at is None:
        return None
    if result.ended_at > rules.ends_at:
        return Outcome.LATE
    if result.hinted:
        return Outcome.HINTED
    if not result.won:
        return Outcome.LOSS
    duration = result.ended_at - result.started_at
    if duration > rules.allowance(result.berserk):
        return Outcome.SLOW_WIN
    return Outcome.WIN


class Figures(NamedTuple):
    """An entrant's figures, what its place is decided on (docs/events.md, The order)."""

    points: int
    wins: int
    win_ms: int
    reached_at: dt.datetime | None
    games: int
    streak: int

    @property
    def on_fire(self) -> bool:
        return self.streak >= FIRE_STREAK

    def after(self, result: GameResult, decided: Outcome) -> Figures:
        """These figures and one more counted game of outcome ``decided`` (not `LATE`)."""
        if decided is Outcome.WIN:
            points = WIN_POINTS * (2 if self.on_fire else 1)
            if result.berserk and result.moves >= BERSERK_MIN_MOVES:
                points += BERSERK_BONUS
            duration = result.duration or dt.timedelta(0)
            return Figures(
                self.points + points,
                self.wins + 1,
                self.win_ms + duration // dt.timedelta(milliseconds=1),
                result.ended_at,
                self.games + 1,
                self.streak + 1,
            )
        if decided is Outcome.SLOW_WIN:
            points, reached = SLOW_WIN_POINTS, result.ended_at
        else:
            points, reached = 0, self.reached_at
        return Figures(self.points + points, self.wins, self.win_ms, reached, self.games + 1, 0)


NO_FIGURES = Figures(0, 0, 0, None, 0, 0)


def tally(results: Iterable[GameResult], rules: ScoringRules) -> Figures:
    """An entrant's figures from its games in deal order: undecided and `LATE` games count nothing
    and leave the streak as it is."""
    figures = NO_FIGURES
    for result in results:
        decided = outcome(result, rules)
        if decided is None or decided is Outcome.LATE:
            continue
        figures = figures.after(result, decided)
    return figures
