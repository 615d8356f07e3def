"""Actions as values, with the compact text the server stores in its action log.

Notation (stable: stored games depend on it):

- a move is ``SOURCE-TARGET`` with ``:N`` appended when it carries N > 1 cards: ``t3-c1``, ``c2-t5``,
  ``t1-t4:3``, ``fH-c2`` (a take-back), ``t6-fS``;
- an undo is ``undo``.

Tap and double tap are not actions of their own: the game resolves them to the move they make, and
that move is what is logged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from engine.errors import InvalidNotationError, quoted
from engine.piles import Pile, parse_pile

__all__ = ["UNDO", "Action", "Move", "Undo", "max_group_size", "parse_action"]


@dataclass(frozen=True, slots=True)
class Move:
    """``count`` cards from the top of ``source`` onto ``target``."""

    source: Pile
    target: Pile
    count: int = 1

    @classmethod
    def parse(cls, text: str) -> Move:
        """Parse ``t1-t4`` or ``t1-t4:3``.

        Raises:
            InvalidNotationError: not a move.
        """
        action = parse_action(text)
        if not isinstance(action, Move):
            raise InvalidNotationError(f"not a move: {quoted(text)}")
        return action

    def symbol(self) -> str:
        text = f"{self.source.symbol()}-{self.target.symbol()}"
        return text if self.count == 1 else f"{text}:{self.count}"

    def __str__(self) -> str:
        return self.symbol()

    def __repr__(self) -> str:
        return f"Move.parse({self.symbol()!r})"


@dataclass(frozen=True, slots=True)
class Undo:
    """Take back the last action still in the undo history."""

    def symbol(self) -> str:
        return "undo"

    def __str__(self) -> str:
        return "undo"

    def __repr__(self) -> str:
        return "UNDO"


UNDO = Undo()
Action: TypeAlias = Move | Undo


def parse_action(text: str) -> Action:
    """Parse the stored notation of a move or an undo.

    Raises:
        InvalidNotationError: not an action.
    """
    if not isinstance(text, str) or len(text) > 16:
        raise InvalidNotationError(f"not an action: {quoted(text)}")
    if text.lower() == "undo":
        return UNDO
    piles, colon, count_text = text.partition(":")
    source_text, dash, target_text = piles.partition("-")
    if not dash:
        raise InvalidNotationError(
            f"not an action: {quoted(text)} (expected e.g. 't1-t4', 't1-t4:3' or 'undo')"
        )
    count = 1
    if colon:
        if not count_text.isdigit() or count_text.startswith("0") or not count_text.isascii():
            raise InvalidNotationError(f"bad card count in {quoted(text)}")
        count = int(count_text)
        if count < 2:
            raise InvalidNotationError(f"a count of 1 is written without ':1' in {quoted(text)}")
    return Move(parse_pile(source_text), parse_pile(target_text), count)


def max_group_size(empty_cells: int, empty_columns: int, *, into_empty_column: bool = False) -> int:
    """Largest group one action may carry: ``(empty cells + 1) × 2^(empty columns)``.

    When the group goes into an empty column, that column does not count (it cannot serve as a
    stop on the way into itself), as the seeds' table has it.
    """
    usable_columns = empty_columns - 1 if into_empty_column else empty_columns
    return (empty_cells + 1) << max(usable_columns, 0)
