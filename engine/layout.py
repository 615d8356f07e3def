"""Layout: an immutable picture of the table (8 columns, the usable cells, 4 foundations)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from engine.cards import Card, Rank, Suit

__all__ = ["FOUNDATION_ORDER", "Layout"]

#: Order of the foundations in ``Layout.foundations`` and on the wire.
FOUNDATION_ORDER: tuple[Suit, ...] = (Suit.SPADES, Suit.HEARTS, Suit.DIAMONDS, Suit.CLUBS)


@dataclass(frozen=True, slots=True)
class Layout:
    """The table at one moment.

    Attributes:
        columns: 8 columns, each bottom card first.
        cells: one entry per usable cell, a card or None.
        foundations: the rank count on each foundation (0 = empty, 13 = complete), in
            ``FOUNDATION_ORDER`` (S, H, D, C).
    """

    columns: tuple[tuple[Card, ...], ...]
    cells: tuple[Card | None, ...]
    foundations: tuple[int, int, int, int]

    def foundation_top(self, suit: Suit) -> Card | None:
        """The top card of ``suit``'s foundation, or None while it is empty."""
        height = self.foundations[FOUNDATION_ORDER.index(suit)]
        return Card(Rank(height), suit) if height else None

    def cards(self) -> Iterator[Card]:
        """Every card on the table, foundations included (always 52 in a valid layout)."""
        for column in self.columns:
            yield from column
        yield from (card for card in self.cells if card is not None)
        for suit, height in zip(FOUNDATION_ORDER, self.foundations, strict=False):
            yield from (Card(Rank(rank), suit) for rank in range(1, height + 1))

    def text(self) -> str:
        """A readable multi-line picture: cells and foundations, then the columns as rows."""
        cells = " ".join(str(card) if card else ".." for card in self.cells)
        foundations = " ".join(
            str(self.foundation_top(suit) or f".{suit.value}") for suit in FOUNDATION_ORDER
        )
        lines = [f"cells: {cells}", f"foundations: {foundations}", "  ".join(f"t{i}" for i in range(1, 9))]
        depth = max((len(column) for column in self.columns), default=0)
        for row in range(depth):
            lines.append(
                "  ".join(str(column[row]) if row < len(column) else "  " for column in self.columns).rstrip()
            )
        return "\n".join(lines)
