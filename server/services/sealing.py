"""Sealed shared deals: who may see another player's moves on a deal they could still play.

A shared deal is one deal several players play for one board: today's daily challenge in a variant
(and, with races, a race's deal). Watching the leader's game on it would let anyone copy their line,
so the moves of a game on a shared deal are sealed to every other player who can still play that
deal, live or finished, until they have finished it themselves or the deal has closed (the daily's
UTC day is over). A player who still has an unfinished game of the deal can still play it, closed
or not: the game still counts on the deal's board when it ends.

The policy is this module: pure values and functions, no I/O and no clock (the caller says what
time it is and what the viewer has played; `server.services.fair_play` looks that up). docs/fair-play.md
says what it promises and what it cannot.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from protocol.timestamps import format_timestamp

__all__ = ["NOT_PLAYED", "Sealed", "SharedDeal", "Standing", "may_start", "seal"]

_DAY = dt.timedelta(days=1)


@dataclass(frozen=True, slots=True)
class SharedDeal:
    """A deal (its game ``code``) played by many for one board, named for players (never by its
    code: a race's deal is secret until it starts), sealed until ``closes_at`` (aware UTC)."""

    code: str
    name: str
    closes_at: dt.datetime

    @classmethod
    def daily(cls, day: dt.date, cells: int, code: str) -> SharedDeal:
        """The daily challenge of ``day`` in ``cells``' variant, deal ``code``: it closes at the next
        UTC midnight."""
        midnight = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
        return cls(code, f"the daily of {day.isoformat()} ({cells} cells)", midnight + _DAY)

    @classmethod
    def race(cls, race_id: str, code: str, closes_at: dt.datetime) -> SharedDeal:
        """The deal of race ``race_id``: it closes when the race is over (until then, ``closes_at``
        is the end of its time limit, or far ahead before the race runs)."""
        return cls(code, f"race {race_id}", closes_at)

    def is_open(self, now: dt.datetime) -> bool:
        return now < self.closes_at


@dataclass(frozen=True, slots=True)
class Standing:
    """What one player has played of a shared deal: a finished game (won or resigned), an
    unfinished one (still being played)."""

    finished: bool = False
    playing: bool = False


#: A player who has no game of the deal.
NOT_PLAYED = Standing()


@dataclass(frozen=True, slots=True)
class Sealed:
    """Another player's game on ``deal`` is sealed to this viewer: until ``opens_at``, or until the
    viewer finishes it first; ``opens_at`` is None when only the viewer's finishing opens it (they
    have an unfinished game of the deal)."""

    deal: SharedDeal
    opens_at: dt.datetime | None

    def message(self, game_id: str) -> str:
        """Why ``game_id`` cannot be watched, and when it can, for the ``forbidden`` refusal."""
        if self.opens_at is None:
            when = "finish your own game of it first"
        else:
            when = f"finish it first, or watch after it closes at {format_timestamp(self.opens_at)}"
        sealed = f"game {game_id} plays {self.deal.name}, which you can still play: its moves are sealed"
        return f"{sealed}; {when}"


def seal(
    deal: SharedDeal | None, *, viewer: str | None, owner: str, standing: Standing, now: dt.datetime
) -> Sealed | None:
    """Whether ``viewer`` (None: anyone, not signed in) may see the moves of ``owner``'s game on
    ``deal`` (None: not a shared deal) at ``now``, ``standing`` being the viewer's own games on it.

    None means visible: one's own game, a game of no shared deal, and a deal the viewer can no
    longer play (finished by them, or closed with no unfinished game of theirs).
    """
    if deal is None or viewer == owner:
        return None
    if standing.playing:
        return Sealed(deal, None)
    if standing.finished or not deal.is_open(now):
        return None
    return Sealed(deal, deal.closes_at)


def may_start(deal: SharedDeal, standing: Standing, now: dt.datetime) -> bool:
    """A player starts a game of ``deal`` for its board only while it is open and they have not
    finished it: one finished game each, since a finished player may see everyone's moves on it."""
    return deal.is_open(now) and not standing.finished
