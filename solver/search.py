"""An exact Eight Off solver on a compact state: a depth-first search with a transposition table.

Exact under our rules (DESIGN.md section 2): groups of ``(empty cells + 1) × 2^(empty columns)``
(a destination empty column not counted), Kings only into empty columns, take-backs allowed. A
``WIN`` comes with a line of legal moves; ``LOST`` means the whole reachable space (up to the
reductions below) was searched without a win; ``UNKNOWN`` means a node or time budget ran out.

The search never sees an engine ``Game``: a state is 8 columns as ``bytes`` (bottom first) and the
cells as one ``bytes`` (0 = empty). A card is ``suit × 16 + rank`` (suit in ``FOUNDATION_ORDER``,
rank 1..13), so card ``x`` goes onto card ``y`` exactly when ``y == x + 1``.

Reductions, and why each keeps the verdict exact:

1. **Every foundation move is played at once** (auto-play). Building is by suit, so a card ``c`` of
   rank r on the tableau could only ever hold the r-1 of its suit, which is already on the foundation.
   Take any winning line from the position before ``c`` goes up, and replay it with every card of
   ``c``'s suit up to the highest rank that suit's foundation has reached (``c`` included) kept on the
   foundation: only same-suit lower cards can ever lie on such a card, so they sit at the exposed ends
   of columns or in cells and hide nothing; each other move stays legal (the same top cards, no fewer
   empty cells or columns, so no smaller group limit) and moves of the kept cards become no moves. The
   replay wins, so putting ``c`` up never loses a win.
2. **Take-backs from the foundations are never searched.** The same replay, started with every card
   that has ever been on a foundation kept there, turns any winning line with take-backs into one
   without: a take-back only moves a kept card. So foundations only grow, and they follow from the
   cards left on the table.
3. **Columns and cells are interchangeable.** No rule depends on a column's or a cell's place, so the
   transposition key is the sorted columns plus the sorted cells: a position is expanded once whatever
   its order. For the same reason a card goes only into the first empty cell, a King (run) only into
   the first empty column, a cell's card never to another cell, and a whole column never into an empty
   one: the others give the same position up to order.
4. **A group goes onto a column only as the one run that fits it**, and into an empty column only as
   the whole run from its King: any other count is illegal.

Every other legal move is searched, so a search that ends without a win has visited every position
reachable (up to 1-3) and proves the loss.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass

from engine import FOUNDATION_ORDER, PILES, Card, Deal, Layout, Move

__all__ = ["Solution", "Verdict", "solve", "solve_deal"]

_COLUMNS = 8
_FIRST_CELL = 8
_FIRST_FOUNDATION = 16
_KING = 13
_SUIT_INDEX = {suit: index for index, suit in enumerate(FOUNDATION_ORDER)}
_CLOCK_EVERY = 256  # nodes between two looks at the clock

#: An internal move: (source pile id, target pile id, card count); pile ids index ``engine.PILES``.
_Step = tuple[int, int, int]
_State = tuple[tuple[bytes, ...], bytes, tuple[int, ...]]


class Verdict(enum.Enum):
    """What the search found; the value is the wire text."""

    WIN = "win"
    LOST = "lost"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Solution:
    """A search's result: ``moves`` win from the position searched when ``verdict`` is WIN (else empty)."""

    verdict: Verdict
    moves: tuple[Move, ...]
    nodes: int
    seconds: float


def solve_deal(
    deal: Deal,
    *,
    max_nodes: float = 1_000_000,
    max_seconds: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Solution:
    """``solve`` from the opening of ``deal``."""
    return solve(deal.layout(), max_nodes=max_nodes, max_seconds=max_seconds, clock=clock)


def solve(
    layout: Layout,
    *,
    max_nodes: float = 1_000_000,
    max_seconds: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Solution:
    """Search ``layout`` for a win.

    Args:
        layout: any position of Eight Off (foundations need not be empty).
        max_nodes: positions to expand before answering UNKNOWN.
        max_seconds: seconds (by ``clock``) before answering UNKNOWN; None for no time limit.
        clock: the clock for ``max_seconds`` (injected so that callers and tests own time).

    Returns:
        The verdict, the winning moves (engine ``Move`` values, legal in order), nodes expanded and
        seconds spent.
    """
    started = clock()
    search = _Search(max_nodes, None if max_seconds is None else started + max_seconds, clock)
    verdict, steps = search.run(_encode(layout))
    moves = tuple(Move(PILES[source], PILES[target], count) for source, target, count in steps)
    return Solution(verdict, moves, search.nodes, clock() - started)


def _encode(layout: Layout) -> _State:
    def card(value: Card) -> int:
        return _SUIT_INDEX[value.suit] * 16 + int(value.rank)

    columns = tuple(bytes(card(value) for value in column) for column in layout.columns)
    cells = bytes(card(value) if value is not None else 0 for value in layout.cells)
    return columns, cells, tuple(layout.foundations)


def _key(columns: tuple[bytes, ...], cells: bytes) -> bytes:
    """The transposition key: sorted columns and sorted cells (the foundations follow from them)."""
    return b"\x00".join(sorted(columns)) + b"\xff" + bytes(sorted(cells))


def _auto_play(columns: list[bytes], cells: bytearray, foundations: list[int], steps: list[_Step]) -> None:
    """Put every card that can go to its foundation there (reduction 1), in place, noting the steps."""
    moved = True
    while moved:
        moved = False
        for index in range(_COLUMNS):
            column = columns[index]
            while column:
                top = column[-1]
                suit = top >> 4
                if top & 15 != foundations[suit] + 1:
                    break
                foundations[suit] += 1
                column = column[:-1]
                steps.append((index, _FIRST_FOUNDATION + suit, 1))
                moved = True
            columns[index] = column
        for index, top in enumerate(cells):
            if top and top & 15 == foundations[top >> 4] + 1:
                suit = top >> 4
                foundations[suit] += 1
                cells[index] = 0
                steps.append((_FIRST_CELL + index, _FIRST_FOUNDATION + suit, 1))
                moved = True


def _run_length(column: bytes) -> int:
    """Cards on top of a non-empty column that form a same-suit run (each one rank below the last)."""
    length = 1
    index = len(column) - 1
    while index and column[index - 1] == column[index] + 1:
        length += 1
        index -= 1
    return length


def _moves(columns: tuple[bytes, ...], cells: bytes) -> list[_Step]:
    """The moves the search tries from a position (reductions 2-4 applied), foundation moves aside."""
    empty_columns = [index for index in range(_COLUMNS) if not columns[index]]
    free_cell = cells.find(0)
    empty_cells = cells.count(0)
    to_column_limit = (empty_cells + 1) << len(empty_columns)
    to_empty_limit = (empty_cells + 1) << max(len(empty_columns) - 1, 0)
    first_empty = empty_columns[0] if empty_columns else -1
    # wants[card] = the column whose top card takes ``card``
    wants: dict[int, int] = {}
    for index in range(_COLUMNS):
        column = columns[index]
        if column and column[-1] & 15 > 1:
            wants[column[-1] - 1] = index
    steps: list[_Step] = []
    for source in range(_COLUMNS):
        column = columns[source]
        if not column:
            continue
        run = _run_length(column)
        for count in range(1, min(run, to_column_limit) + 1):
            target = wants.get(column[-count])
            if target is not None:
                steps.append((source, target, count))
        if first_empty >= 0 and column[-run] & 15 == _KING and run < len(column) and run <= to_empty_limit:
            steps.append((source, first_empty, run))
        if free_cell >= 0:
            steps.append((source, _FIRST_CELL + free_cell, 1))
    for index, card in enumerate(cells):
        if not card:
            continue
        target = wants.get(card)
        if target is not None:
            steps.append((_FIRST_CELL + index, target, 1))
        elif card & 15 == _KING and first_empty >= 0:
            steps.append((_FIRST_CELL + index, first_empty, 1))
    return steps


def _score(columns: list[bytes], cells: bytearray, foundations: list[int]) -> int:
    """How promising a position looks (higher first): cards home, free space, next cards near the top."""
    score = 40 * sum(foundations) + 12 * cells.count(0)
    for column in columns:
        if not column:
            score += 20
            continue
        for suit in range(4):
            wanted = suit * 16 + foundations[suit] + 1
            depth = column.find(wanted)
            if depth >= 0:
                score -= 3 * (len(column) - 1 - depth)
        # cards sitting on a lower card of their own suit block it
        score -= 2 * (len(column) - _run_length(column))
    return score


class _Search:
    """One depth-first search: its budget, its transposition table and its node count."""

    def __init__(self, max_nodes: float, deadline: float | None, clock: Callable[[], float]) -> None:
        self.max_nodes = max_nodes
        self.deadline = deadline
        self.clock = clock
        self.nodes = 0
        self.seen: set[bytes] = set()
        self.winning_steps: list[_Step] = []  # set by _expand when a child is won

    def run(self, state: _State) -> tuple[Verdict, list[_Step]]:
        columns, cells, foundations = state
        steps: list[_Step] = []
        column_list, cell_array, foundation_list = list(columns), bytearray(cells), list(foundations)
        _auto_play(column_list, cell_array, foundation_list, steps)
        if sum(foundation_list) == 52:
            return Verdict.WIN, steps
        root = (tuple(column_list), bytes(cell_array), tuple(foundation_list))
        self.seen.add(_key(root[0], root[1]))
        # frames[i] = [children of the i-th position on the path, index of the next child to try];
        # path[i] = the steps that led to it.
        path: list[list[_Step]] = [steps]
        frames: list[list[object]] = []
        children = self._expand(root)
        if children is None:
            return Verdict.WIN, [*steps, *self.winning_steps]
        frames.append([children, 0])
        while frames:
            frame = frames[-1]
            kids: list[tuple[_State, list[_Step]]] = frame[0]  # type: ignore[assignment]
            position: int = frame[1]  # type: ignore[assignment]
            if position == len(kids):
                frames.pop()
                path.pop()
                continue
            frame[1] = position + 1
            child, child_steps = kids[position]
            key = _key(child[0], child[1])
            if key in self.seen:
                continue
            self.seen.add(key)
            self.nodes += 1
            if self.nodes >= self.max_nodes or (
                self.deadline is not None and not self.nodes % _CLOCK_EVERY and self.clock() >= self.deadline
            ):
                return Verdict.UNKNOWN, []
            grandchildren = self._expand(child)
            if grandchildren is None:
                return Verdict.WIN, [step for steps in path for step in steps] + child_steps + (
                    self.winning_steps
                )
            path.append(child_steps)
            frames.append([grandchildren, 0])
        return Verdict.LOST, []

    def _expand(self, state: _State) -> list[tuple[_State, list[_Step]]] | None:
        """The unseen children of ``state``, most promising first; None when one of them is won
        (its steps are then in ``winning_steps``)."""
        columns, cells, foundations = state
        scored: list[tuple[int, int, _State, list[_Step]]] = []
        seen = self.seen
        for order, (source, target, count) in enumerate(_moves(columns, cells)):
            column_list = list(columns)
            cell_array = bytearray(cells)
            foundation_list = list(foundations)
            if source < _FIRST_CELL:
                moving = column_list[source][-count:]
                column_list[source] = column_list[source][:-count]
            else:
                moving = bytes((cell_array[source - _FIRST_CELL],))
                cell_array[source - _FIRST_CELL] = 0
            if target < _FIRST_CELL:
                column_list[target] += moving
            else:
                cell_array[target - _FIRST_CELL] = moving[0]
            steps: list[_Step] = [(source, target, count)]
            _auto_play(column_list, cell_array, foundation_list, steps)
            if sum(foundation_list) == 52:
                self.winning_steps = steps
                return None
            child_columns = tuple(column_list)
            child_cells = bytes(cell_array)
            if _key(child_columns, child_cells) in seen:
                continue
            score = _score(column_list, cell_array, foundation_list)
            scored.append((-score, order, (child_columns, child_cells, tuple(foundation_list)), steps))
        scored.sort(key=lambda entry: (entry[0], entry[1]))
        return [(state, steps) for _, _, state, steps in scored]
