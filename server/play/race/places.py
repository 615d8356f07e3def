"""The places of a race, from its standings: pure, and the one statement of the race's order.

The winner first (the race ends at the first win), by the time it won; then every other seat by most
cards home, then fewer moves, then the earlier last move (``time_ms``). How a seat stopped does not
count: a seat that resigned, one that left and one whose player went away with the same figures are
ranked alike, since a server cannot tell a player who gave up by closing the page from one who gave
up by saying so, and a rule that told them apart would reward the gesture. Seats equal on every key
share a place, and the next place skips (1, 1, 3): a race of N is one match of N, ties included
(what a rating needs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

__all__ = ["Figures", "places"]


class Figures(NamedTuple):
    """What a seat's place is decided on."""

    status: str
    cards_home: int
    moves: int
    time_ms: int

    def key(self) -> tuple[int, int, int, int]:
        if self.status == "won":
            return (0, 0, 0, self.time_ms)
        return (1, -self.cards_home, self.moves, self.time_ms)


def places(seats: Mapping[int, Figures]) -> dict[int, int]:
    """Seat number → place (from 1; ties share the better place)."""
    ordered = sorted(seats, key=lambda seat: (seats[seat].key(), seat))
    result: dict[int, int] = {}
    for index, seat in enumerate(ordered):
        previous = ordered[index - 1] if index else None
        tied = previous is not None and seats[previous].key() == seats[seat].key()
        result[seat] = result[previous] if tied and previous is not None else index + 1
    return result
