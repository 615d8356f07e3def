"""The points table of the seeds: +10 onto a foundation, +5 from a cell onto the tableau, 0 otherwise.

Undo takes back exactly what its action brought and the score never drops below 0 (``Game.pop``).
Nothing here stops a player farming points by repetition (cell → column → cell …): leaderboards
must not rank by raw score alone.
"""

from __future__ import annotations

from engine.moves import Move
from engine.piles import Cell, Column, Foundation

__all__ = ["POINTS_CELL_TO_TABLEAU", "POINTS_TO_FOUNDATION", "points_for"]

POINTS_TO_FOUNDATION = 10
POINTS_CELL_TO_TABLEAU = 5


def points_for(move: Move) -> int:
    """Points a legal ``move`` brings (a take-back from a foundation brings none)."""
    if isinstance(move.target, Foundation):
        return POINTS_TO_FOUNDATION
    if isinstance(move.source, Cell) and isinstance(move.target, Column):
        return POINTS_CELL_TO_TABLEAU
    return 0
