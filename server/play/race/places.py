"""The places of a race, from its standings: pure, and the one statement of the race's order.

Winners first, by the time they won; then every seat that did not give up (still playing when the
race ended), then those that resigned or left: each by most cards home, then fewer moves, then the
earlier last action (``time_ms``). Seats equal on every key share a place, and the next place skips
(1, 1, 3): a race of N is one match of N, ties included (what a rating needs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

__all__ = ["Figures", "places"]

#: A seat's status → its group in the order (lower first).
_GROUP = {"won": 0, "playing": 1, "waiting": 1, "resigned": 2, "left": 2}


class Figures(NamedTuple):
    """What a seat's place is decided on."""

    status: str
    cards_home: int
    moves: int
    time_ms: int

    def key(self) -> tuple[int, int, int, int]:
        if self.status == "won":
            return (0, 0, 0, self.time_ms)
        return (_GROUP[self.status], -self.cards_home, self.moves, self.time_ms)


def places(seats: Mapping[int, Figures]) -> dict[int, int]:
    """Seat number → place (from 1; ties share the better place)."""
    ordered = sorted(seats, key=lambda seat: (seats[seat].key(), seat))
    result: dict[int, int] = {}
    for index, seat in enumerate(ordered):
        previous = ordered[index - 1] if index else None
        tied = previous is not None and seats[previous].key() == seats[seat].key()
        result[seat] = result[previous] if tied and previous is not None else index + 1
    return result
