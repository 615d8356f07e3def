"""Game codes, the fixed shuffle and the deal of each cell variant (docs/rules.md; protocol/README.md
section 11 for the exact shuffle).

A code ``EO1-C8-AAAAAFA`` is the format version, the cell variant and a 35-bit deal number in seven
RFC 4648 base32 symbols (A = 0 … 7 = 31, most significant first). The card order depends on the
deal number alone; the variant only decides where the last four cards go.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass

from engine.cards import SHUFFLE_ORDER, Card
from engine.errors import InvalidCodeError, quoted
from engine.layout import Layout
from engine.piles import COLUMN_COUNT

__all__ = [
    "CELL_VARIANTS",
    "CODE_VERSION",
    "DEAL_NUMBER_BITS",
    "Deal",
    "daily_deal",
    "shuffled_deck",
    "splitmix64",
]

CODE_VERSION = "EO1"
CELL_VARIANTS = (8, 4, 2)
DEAL_NUMBER_BITS = 35
_MAX_DEAL_NUMBER = (1 << DEAL_NUMBER_BITS) - 1
_BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_SYMBOLS = DEAL_NUMBER_BITS // 5
_MASK64 = (1 << 64) - 1
_EPOCH = dt.date(1970, 1, 1)


def splitmix64(seed: int) -> _SplitMix64:
    """SplitMix64 seeded with ``seed``: each ``next()`` is the next 64-bit output."""
    return _SplitMix64(seed)


class _SplitMix64:
    def __init__(self, seed: int) -> None:
        self._state = seed & _MASK64

    def __iter__(self) -> _SplitMix64:
        return self

    def __next__(self) -> int:
        self._state = (self._state + 0x9E3779B97F4A7C15) & _MASK64
        z = self._state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        return z ^ (z >> 31)


def shuffled_deck(number: int) -> tuple[Card, ...]:
    """The 52 cards of deal ``number`` in dealing order (Fisher-Yates driven by SplitMix64)."""
    deck = list(SHUFFLE_ORDER)
    outputs = splitmix64(number)
    for i in range(51, 0, -1):
        j = next(outputs) % (i + 1)
        deck[i], deck[j] = deck[j], deck[i]
    return tuple(deck)


@dataclass(frozen=True, slots=True)
class Deal:
    """One deal: a deal number (0 .. 2^35 - 1) and a cell variant (8, 4 or 2)."""

    number: int
    cells: int = 8

    def __post_init__(self) -> None:
        if type(self.number) is not int or not 0 <= self.number <= _MAX_DEAL_NUMBER:
            raise InvalidCodeError(f"deal number {quoted(self.number)} is outside 0..{_MAX_DEAL_NUMBER}")
        if self.cells not in CELL_VARIANTS or type(self.cells) is not int:
            raise InvalidCodeError(f"cell variant {quoted(self.cells)} is not one of 8, 4, 2")

    @classmethod
    def from_code(cls, code: str) -> Deal:
        """Parse a game code, case-insensitively, surrounding blanks ignored.

        Raises:
            InvalidCodeError: names the part that is wrong.
        """
        if not isinstance(code, str):
            raise InvalidCodeError(f"a game code is text, not {type(code).__name__}")
        # Only ASCII parts are upper-cased: str.upper() turns some other letters into ASCII ones
        # ('ß' -> 'SS', 'ſ' -> 'S', 'ı' -> 'I'), which would let non-canonical text name a deal.
        parts = [part.upper() if part.isascii() else part for part in code.strip().split("-")]
        if len(parts) != 3:
            raise InvalidCodeError(f"not a game code: {quoted(code)} (expected e.g. 'EO1-C8-AAAAAFA')")
        version, variant, symbols = parts
        if version != CODE_VERSION:
            raise InvalidCodeError(
                f"unknown code version {quoted(version)} in {quoted(code)} (expected {CODE_VERSION!r})"
            )
        if variant not in ("C8", "C4", "C2"):
            raise InvalidCodeError(f"unknown cell variant {quoted(variant)} in {quoted(code)} (C8, C4 or C2)")
        if len(symbols) != _SYMBOLS or any(symbol not in _BASE32 for symbol in symbols):
            raise InvalidCodeError(
                f"deal number {quoted(symbols)} in {quoted(code)} is not {_SYMBOLS} base32 symbols (A-Z, 2-7)"
            )
        number = 0
        for symbol in symbols:
            number = number << 5 | _BASE32.index(symbol)
        return cls(number, int(variant[1]))

    @classmethod
    def random(cls, rng: random.Random, cells: int = 8) -> Deal:
        """A deal drawn from ``rng`` (pass ``secrets.SystemRandom()`` for real games)."""
        return cls(rng.getrandbits(DEAL_NUMBER_BITS), cells)

    def code(self) -> str:
        """The canonical code, e.g. ``EO1-C8-AAAAAFA``."""
        symbols = "".join(
            _BASE32[(self.number >> shift) & 31] for shift in range(DEAL_NUMBER_BITS - 5, -1, -5)
        )
        return f"{CODE_VERSION}-C{self.cells}-{symbols}"

    def layout(self) -> Layout:
        """The opening layout of this deal."""
        deck = shuffled_deck(self.number)
        columns = [list(deck[i:48:COLUMN_COUNT]) for i in range(COLUMN_COUNT)]
        extra = deck[48:]
        if self.cells == 8:
            cells: list[Card | None] = [*extra, None, None, None, None]
        elif self.cells == 4:
            cells = list(extra)
        else:  # the seeds put the last two cards at the bottom ("spodok") of columns 3 and 4
            cells = list(extra[:2])
            columns[2].insert(0, extra[2])
            columns[3].insert(0, extra[3])
        return Layout(
            columns=tuple(tuple(column) for column in columns),
            cells=tuple(cells),
            foundations=(0, 0, 0, 0),
        )

    def __str__(self) -> str:
        return self.code()

    def __repr__(self) -> str:
        return f"Deal.from_code({self.code()!r})"


def daily_deal(date: dt.date, cells: int = 8) -> Deal:
    """The first candidate of the daily challenge of a UTC ``date`` (the daily deal itself is the first
    candidate proven winnable: ``solver.winnable_daily_deal``).

    Rule: d = days from 1970-01-01 to ``date``; the deal number is the top 35 bits of the first
    SplitMix64 output seeded with d (``next(splitmix64(d)) >> 29``).
    """
    days = (date - _EPOCH).days
    return Deal(next(splitmix64(days)) >> (64 - DEAL_NUMBER_BITS), cells)
