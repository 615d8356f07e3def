"""A small depth-first Eight Off solver for tests and benchmarks: finds *a* win, not the shortest.

It searches with the engine itself (``Game.copy`` + ``play``), so every move it returns is legal by
construction, and it prunes positions already seen up to column order and cell order.
"""

from __future__ import annotations

from engine import Cell, Column, Deal, Foundation, Game, Move

__all__ = ["solve"]


def _key(game: Game) -> tuple[object, ...]:
    layout = game.layout()
    cells = tuple(sorted(card.symbol() for card in layout.cells if card))
    columns = tuple(sorted(tuple(card.symbol() for card in column) for column in layout.columns))
    return layout.foundations, cells, columns


def _priority(game: Game, move: Move) -> int:
    if isinstance(move.target, Foundation):
        return 0
    if isinstance(move.source, Foundation):
        return 9
    if isinstance(move.target, Column):
        if not game.cards_in(move.target):
            return 4 if isinstance(move.source, Cell) or len(game.cards_in(move.source)) > move.count else 9
        return 1 if isinstance(move.source, Cell) else 2
    return 5  # into a cell


def _useful(game: Game, move: Move) -> bool:
    if isinstance(move.source, Foundation):
        return False
    if isinstance(move.source, Cell) and isinstance(move.target, Cell):
        return False
    if isinstance(move.source, Column) and isinstance(move.target, Column) and not game.cards_in(move.target):
        return len(game.cards_in(move.source)) > move.count  # a whole column moving changes nothing
    return True


def solve(deal: Deal, *, max_nodes: int = 200_000) -> list[Move] | None:
    """A list of moves that wins ``deal`` from its opening, or None if none was found in budget."""
    seen: set[tuple[object, ...]] = set()
    stack: list[tuple[Game, list[Move]]] = [(Game(deal), [])]
    nodes = 0
    while stack and nodes < max_nodes:
        game, path = stack.pop()
        key = _key(game)
        if key in seen:
            continue
        seen.add(key)
        nodes += 1
        if game.is_won():
            return path
        moves = [move for move in game.legal_moves if _useful(game, move)]
        moves.sort(key=lambda move: _priority(game, move), reverse=True)  # best popped first
        for move in moves:
            child = game.copy()
            child.play(move)
            stack.append((child, [*path, move]))
    return None
