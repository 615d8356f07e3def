"""Typed references to the piles of the table: ``Column(3)``, ``Cell(1)``, ``Foundation(Suit.HEARTS)``.

Text forms match the wire protocol: columns ``t1``..``t8``, cells ``c1``..``c8``, foundations ``fS fH fD fC``.
Whether a cell exists in a given variant is the game's business, not the reference's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from engine.cards import Suit
from engine.errors import InvalidNotationError, quoted
from engine.layout import FOUNDATION_ORDER

__all__ = ["COLUMN_COUNT", "MAX_CELLS", "PILES", "Cell", "Column", "Foundation", "Pile", "parse_pile"]

COLUMN_COUNT = 8
MAX_CELLS = 8


@dataclass(frozen=True, slots=True)
class Column:
    """Tableau column ``index`` (1-based, 1..8)."""

    index: int

    def __post_init__(self) -> None:
        if type(self.index) is not int or not 1 <= self.index <= COLUMN_COUNT:
            raise InvalidNotationError(f"no column {quoted(self.index)}: columns are t1..t{COLUMN_COUNT}")

    def symbol(self) -> str:
        return f"t{self.index}"

    def __str__(self) -> str:
        return self.symbol()

    def __repr__(self) -> str:
        return f"Column({self.index})"


@dataclass(frozen=True, slots=True)
class Cell:
    """Cell ``index`` (1-based, 1..8; a variant with fewer cells has only the first ones)."""

    index: int

    def __post_init__(self) -> None:
        if type(self.index) is not int or not 1 <= self.index <= MAX_CELLS:
            raise InvalidNotationError(f"no cell {quoted(self.index)}: cells are c1..c{MAX_CELLS}")

    def symbol(self) -> str:
        return f"c{self.index}"

    def __str__(self) -> str:
        return self.symbol()

    def __repr__(self) -> str:
        return f"Cell({self.index})"


@dataclass(frozen=True, slots=True)
class Foundation:
    """The foundation of ``suit``."""

    suit: Suit

    def symbol(self) -> str:
        return f"f{self.suit.value}"

    def __str__(self) -> str:
        return self.symbol()

    def __repr__(self) -> str:
        return f"Foundation(Suit.{self.suit.name})"


Pile: TypeAlias = Column | Cell | Foundation


def parse_pile(text: str) -> Pile:
    """Parse ``t1``..``t8``, ``c1``..``c8`` or ``fS``/``fH``/``fD``/``fC`` (case-insensitive).

    The bare ``f`` ("its own foundation") depends on the card moved: see ``Game.parse_move``.

    Raises:
        InvalidNotationError: not a pile.
    """
    pile = _PILES_BY_TEXT.get(text.lower()) if isinstance(text, str) else None
    if pile is None:
        raise InvalidNotationError(f"not a pile: {quoted(text)} (t1..t8, c1..c8, fS fH fD fC)")
    return pile


#: Every pile of the table in one fixed order: the columns, the cells (as many as the widest variant
#: has), then the foundations in ``FOUNDATION_ORDER``. The move generator numbers piles in this order.
PILES: tuple[Pile, ...] = (
    *(Column(i) for i in range(1, COLUMN_COUNT + 1)),
    *(Cell(i) for i in range(1, MAX_CELLS + 1)),
    *(Foundation(suit) for suit in FOUNDATION_ORDER),
)
_PILES_BY_TEXT: dict[str, Pile] = {pile.symbol().lower(): pile for pile in PILES}
