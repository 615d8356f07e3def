"""The pure Eight Off rules engine: stdlib only, no I/O, no clock, no unseeded randomness.

Typical use::

    game = Game.from_code("EO1-C8-AAAAAFA")
    game.play(Move.parse("t1-c5"))
    game.play(UNDO)
"""

from __future__ import annotations

from engine.cards import ALL_CARDS, Card, Rank, Suit
from engine.deal import CELL_VARIANTS, Deal, daily_deal, shuffled_deck
from engine.errors import EngineError, IllegalMoveError, InvalidCodeError, InvalidNotationError
from engine.game import UNDO_LIMIT, Game, LegalMoves, Status, Transfer
from engine.layout import FOUNDATION_ORDER, Layout
from engine.moves import UNDO, Action, Move, Undo, max_group_size, parse_action
from engine.piles import PILES, Cell, Column, Foundation, Pile, parse_pile
from engine.scoring import points_for

__all__ = [
    "ALL_CARDS",
    "CELL_VARIANTS",
    "FOUNDATION_ORDER",
    "PILES",
    "UNDO",
    "UNDO_LIMIT",
    "Action",
    "Card",
    "Cell",
    "Column",
    "Deal",
    "EngineError",
    "Foundation",
    "Game",
    "IllegalMoveError",
    "InvalidCodeError",
    "InvalidNotationError",
    "Layout",
    "LegalMoves",
    "Move",
    "Pile",
    "Rank",
    "Status",
    "Suit",
    "Transfer",
    "Undo",
    "daily_deal",
    "max_group_size",
    "parse_action",
    "parse_pile",
    "points_for",
    "shuffled_deck",
]
