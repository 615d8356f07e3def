"""Suits, ranks and cards, with their two-character text form (``TD``, ``QH``).

Cards are frozen values: equal cards compare and hash equal wherever they were made.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from engine.errors import InvalidNotationError, quoted

__all__ = ["ALL_CARDS", "SHUFFLE_ORDER", "Card", "Rank", "Suit"]


class Suit(enum.Enum):
    """The four suits; the value is the suit's letter in card text."""

    SPADES = "S"
    HEARTS = "H"
    DIAMONDS = "D"
    CLUBS = "C"

    # Members are singletons compared by identity: hash them by identity too, in C, rather than
    # Enum's Python-level hash of the name (suits key the foundations and every Card hash).
    __hash__ = object.__hash__

    @classmethod
    def parse(cls, text: str) -> Suit:
        """Parse a suit letter, case-insensitively."""
        suit = _SUITS_BY_TEXT.get(text.upper()) if isinstance(text, str) and text.isascii() else None
        if suit is None:
            raise InvalidNotationError(f"not a suit: {quoted(text)} (one of S H D C)")
        return suit


_SUITS_BY_TEXT: dict[str, Suit] = {suit.value: suit for suit in Suit}


class Rank(enum.IntEnum):
    """Ranks from Ace (low, 1) to King (high, 13)."""

    ACE = 1
    TWO = 2
    THREE = 3
    FOUR = 4
    FIVE = 5
    SIX = 6
    SEVEN = 7
    EIGHT = 8
    NINE = 9
    TEN = 10
    JACK = 11
    QUEEN = 12
    KING = 13

    @property
    def symbol(self) -> str:
        """The rank's character: ``A 2 … 9 T J Q K``."""
        return _RANK_SYMBOLS[self - 1]


_RANK_SYMBOLS = "A23456789TJQK"


@dataclass(frozen=True, slots=True)
class Card:
    """A playing card. ``str(card)`` is its text (``"TD"``); ``repr`` is the parse call."""

    rank: Rank
    suit: Suit

    @classmethod
    def parse(cls, text: str) -> Card:
        """Parse rank char + suit char (``"TD"``, ``"qh"``).

        Raises:
            InvalidNotationError: the text is not a card.
        """
        # ASCII only: str.upper() maps some other letters onto ASCII ones ('ſ' -> 'S', 'ı' -> 'I').
        card = _CARDS_BY_TEXT.get(text.upper()) if isinstance(text, str) and text.isascii() else None
        if card is None:
            raise InvalidNotationError(
                f"not a card: {quoted(text)} (rank A 2-9 T J Q K, then suit S H D C, e.g. 'TD')"
            )
        return card

    def symbol(self) -> str:
        """The two-character text of the card."""
        return self.rank.symbol + self.suit.value

    def __str__(self) -> str:
        return self.symbol()

    def __repr__(self) -> str:
        return f"Card.parse({self.symbol()!r})"


#: The deck before shuffling: AC 2C … KC, AD … KD, AH … KH, AS … KS (protocol/README.md section 11).
SHUFFLE_ORDER: tuple[Card, ...] = tuple(
    Card(rank, suit) for suit in (Suit.CLUBS, Suit.DIAMONDS, Suit.HEARTS, Suit.SPADES) for rank in Rank
)
ALL_CARDS = frozenset(SHUFFLE_ORDER)
_CARDS_BY_TEXT: dict[str, Card] = {card.symbol(): card for card in SHUFFLE_ORDER}
