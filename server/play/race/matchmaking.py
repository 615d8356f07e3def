"""Quick match: who races whom, without I/O (no asyncio, no clock, no socket, no database).

`form_races` is the decision: given everyone waiting (oldest first) and the time ``now``, the list
of `FormRace`, each a public race of one variant to open with these players (empty: everyone keeps
waiting). It is a function of its arguments alone, so that the deployment's one pool, the rows of
``quick_waits`` that every process reads (`server.play.race.quick_match`), is decided by the same
rules whichever process ticks: ``since`` and ``now`` are then seconds of wall time (POSIX), the one
clock the processes share.

`Matchmaker` is the same rules as a state machine over a pool it keeps itself: commands go in
(`Matchmaker.enqueue`, `Matchmaker.leave`, `Matchmaker.tick`, each with the time ``now`` in seconds
of a clock that never goes back), the races `form_races` finds come out and their players wait no
longer.

The rules, with the parameters of `MatchRules` (the ``quick_match_*`` Settings):

- A waiting player's **band** is ``band`` rating points either side of its own rating when it
  starts waiting, widening by ``widening`` points a second; from ``wait`` seconds on it is
  unlimited.
- Players are served **oldest first**: the longest-waiting player (the *anchor*) gathers the
  waiting players of its variant whose rating is within the anchor's band, nearest first (the
  anchor, having waited longest, has the widest band of them all), up to ``max_players`` in all.
- A race is **formed** as soon as that group has ``enough`` players, or, once the anchor has waited
  ``wait`` seconds, with whoever is waiting in its variant (at least two): nobody waits past the
  limit while another player of its variant waits. Otherwise the next oldest player tries, and so on.
- Ratings are the shown ratings (`server.storage.records.Rating.display`; a newcomer's is 1000).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["FormRace", "MatchRules", "Matchmaker", "Waiting", "form_races"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MatchRules:
    """The parameters of quick match (operators set them as the ``quick_match_*`` Settings).

    Attributes:
        band: rating points either side of a player's own when it starts waiting.
        widening: points the band widens by each second of waiting.
        enough: players that start a race at once (2..max_players).
        max_players: seats of a race formed by quick match at most (2..8).
        wait: seconds after which a player races whoever waits in its variant.
    """

    band: float = 100.0
    widening: float = 10.0
    enough: int = 4
    max_players: int = 8
    wait: float = 30.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.band) and self.band >= 0):
            raise ValueError(f"band {self.band!r} is not a number of at least 0")
        if not (math.isfinite(self.widening) and self.widening >= 0):
            raise ValueError(f"widening {self.widening!r} is not a number of at least 0")
        if not 2 <= self.max_players <= 8:
            raise ValueError(f"max_players {self.max_players!r} is not in 2..8")
        if not 2 <= self.enough <= self.max_players:
            raise ValueError(f"enough {self.enough!r} is not in 2..{self.max_players} (max_players)")
        if not (math.isfinite(self.wait) and self.wait > 0):
            raise ValueError(f"wait {self.wait!r} is not a positive number")


class Waiting(NamedTuple):
    """A player waiting for a quick race.

    Attributes:
        player: the player id.
        rating: its shown rating in the variant.
        cells: the variant (8, 4 or 2).
        since: when it started waiting (seconds, the matchmaker's clock; the pool's: wall time).
    """

    player: str
    rating: float
    cells: int
    since: float

    def band(self, rules: MatchRules, now: float) -> float:
        """The rating distance this player accepts at ``now`` (``inf`` from the wait limit on). A
        ``since`` after ``now`` (another process's clock a little ahead) counts as no wait yet."""
        waited = max(0.0, now - self.since)
        if waited >= rules.wait:
            return math.inf
        return rules.band + rules.widening * waited


class FormRace(NamedTuple):
    """Open a public race of variant ``cells`` and seat ``players`` (the anchor first, then by rating
    distance to it); they wait no longer."""

    cells: int
    players: tuple[Waiting, ...]
    at: float


@dataclass(slots=True)
class Matchmaker:
    """The waiting players of every variant, in the order they came: `form_races` over a pool kept in
    memory. (Quick match's shell keeps its pool in the database, shared by every process, and calls
    `form_races` on its rows; this is the same rules with a pool of one's own, as the tests script it.)"""

    rules: MatchRules = field(default_factory=MatchRules)
    _waiting: dict[str, Waiting] = field(default_factory=dict, init=False)  # insertion order: oldest first
    _now: float = field(default=-math.inf, init=False)

    def waiting(self) -> tuple[Waiting, ...]:
        """Everyone waiting, oldest first."""
        return tuple(self._waiting.values())

    def is_waiting(self, player: str) -> bool:
        return player in self._waiting

    def enqueue(self, player: str, rating: float, cells: int, now: float) -> list[FormRace]:
        """``player`` asks for a quick race of variant ``cells``. Asked again for the same variant, it
        keeps its place; for another variant, it waits there instead, from ``now``.

        Returns:
            The races formed at once (the player may be in one).

        Raises:
            ValueError: ``now`` earlier than a previous command's, or a rating that is not finite.
        """
        self._advance(now)
        if not math.isfinite(rating):
            raise ValueError(f"rating {rating!r} of {player} is not a finite number")
        known = self._waiting.get(player)
        if known is None or known.cells != cells:
            self._waiting.pop(player, None)
            self._waiting[player] = Waiting(player, rating, cells, now)
        return self._match(now)

    def leave(self, player: str) -> bool:
        """``player`` no longer waits (it left, or disconnected); False when it was not waiting."""
        return self._waiting.pop(player, None) is not None

    def tick(self, now: float) -> list[FormRace]:
        """Time passed: the races that bands widened by now, or the wait limit, allow.

        Raises:
            ValueError: ``now`` earlier than a previous command's.
        """
        self._advance(now)
        return self._match(now)

    def _advance(self, now: float) -> None:
        if now < self._now:
            raise ValueError(f"time went back from {self._now} to {now}")
        self._now = now

    def _match(self, now: float) -> list[FormRace]:
        formed = form_races(self._waiting.values(), now, self.rules)
        for race in formed:
            for seat in race.players:
                del self._waiting[seat.player]
        return formed


def form_races(waiting: Iterable[Waiting], now: float, rules: MatchRules) -> list[FormRace]:
    """The races the players ``waiting`` form at ``now`` (the rules of the module docstring): the
    oldest player who can have a race forms it, its players are out of the pool, and so on until
    nobody can. Nothing is changed: the caller takes the players of each race out of its own pool.

    Args:
        waiting: everyone waiting, the oldest first (the order they came in: ties of ``since`` are
            served in this order), one entry per player.
        now: the time, on the clock of ``since``.
        rules: the parameters.

    Raises:
        ValueError: a player twice in ``waiting``.
    """
    pool: dict[str, Waiting] = {}
    for player in waiting:
        if pool.setdefault(player.player, player) is not player:
            raise ValueError(f"{player.player} waits twice")
    formed: list[FormRace] = []
    while (race := _next_race(pool, now, rules)) is not None:
        for seat in race.players:
            del pool[seat.player]
        formed.append(race)
    return formed


def _next_race(pool: dict[str, Waiting], now: float, rules: MatchRules) -> FormRace | None:
    """The race the oldest player of ``pool`` (oldest first) who can have one forms now, or None.

    Each player's band is searched in its variant's players sorted by rating (a bisection), so a
    round costs O(n log n) for n waiting players; only a group that forms is sorted by distance.
    """
    by_rating = _ByRating(pool.values())
    for anchor in pool.values():
        band = anchor.band(rules, now)
        near = by_rating.within(anchor, band)
        if len(near) + 1 < rules.enough and not (band == math.inf and near):
            continue
        near.sort(key=lambda other: (abs(other.rating - anchor.rating), other.since))
        return FormRace(anchor.cells, (anchor, *near[: rules.max_players - 1]), now)
    return None


class _ByRating:
    """The waiting players of each variant sorted by rating, for band searches by bisection."""

    def __init__(self, waiting: Iterable[Waiting]) -> None:
        self._order: dict[str, int] = {}  # the order players came in (oldest first)
        self._players: dict[int, list[Waiting]] = {}
        for order, player in enumerate(waiting):
            self._players.setdefault(player.cells, []).append(player)
            self._order[player.player] = order
        for players in self._players.values():
            players.sort(key=lambda player: (player.rating, self._order[player.player]))
        self._ratings = {cells: [p.rating for p in players] for cells, players in self._players.items()}

    def within(self, anchor: Waiting, band: float) -> list[Waiting]:
        """The other players of ``anchor``'s variant at most ``band`` from its rating, in the order
        they came (the oldest first: a stable sort by distance then keeps it among equals)."""
        ratings = self._ratings[anchor.cells]
        slack = abs(anchor.rating) * 1e-12 + 1e-12  # the window is cut exactly below
        low = bisect.bisect_left(ratings, anchor.rating - band - slack)
        high = bisect.bisect_right(ratings, anchor.rating + band + slack)
        found = [
            other
            for other in self._players[anchor.cells][low:high]
            if other.player != anchor.player and abs(other.rating - anchor.rating) <= band
        ]
        found.sort(key=lambda other: self._order[other.player])
        return found
