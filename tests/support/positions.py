"""Build games in arbitrary, complete positions for the engine tests.

A position is written as 8 columns (card texts bottom first, blank-separated) and the cells (one entry
per usable cell: a card text or None). Every card not named goes

- onto its foundation, when ``foundations`` is not given: this is only consistent when the unnamed cards
  of each suit are its lowest ranks (a foundation of height h holds A..h), so runs and fillers are
  taken from the high cards;
- or, when ``foundations`` gives the heights (``{"S": 9, "H": 7}``, missing suits 0), onto the foundations
  up to those heights and the rest at the bottom of column ``rest``, in ascending order so that the
  dump forms no run.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from engine import ALL_CARDS, FOUNDATION_ORDER, Card, Deal, Game, Layout, Rank

__all__ = ["FILLERS", "game_at", "layout_at", "random_layout", "run_of"]

_RANKS = "A23456789TJQK"

#: High cards of hearts, diamonds and clubs, in an order that keeps every suit's unnamed cards a
#: prefix A..h whatever number of fillers a test takes from the front.
FILLERS: tuple[str, ...] = tuple(f"{rank}{suit}" for rank in "KQJT98" for suit in "HDC")


def run_of(suit: str, top_rank: str, length: int) -> list[str]:
    """``length`` cards of ``suit`` descending from ``top_rank`` (``run_of('S', 'Q', 3)`` = QS JS TS)."""
    start = _RANKS.index(top_rank)
    if not 1 <= length <= start + 1:
        raise ValueError(f"no run of {length} below {top_rank}{suit}")
    return [f"{_RANKS[start - i]}{suit}" for i in range(length)]


def layout_at(
    columns: Sequence[str | Sequence[str]],
    cells: Sequence[str | None],
    foundations: Mapping[str, int] | None = None,
    rest: int | None = None,
) -> Layout:
    """The complete layout with these columns and cells (see the module docstring for the rest)."""
    if len(columns) != 8:
        raise ValueError("8 columns")
    table_columns = [
        [Card.parse(text) for text in (column.split() if isinstance(column, str) else column)]
        for column in columns
    ]
    table_cells = tuple(Card.parse(text) if text else None for text in cells)
    named = [card for column in table_columns for card in column] + [c for c in table_cells if c]
    if len(set(named)) != len(named):
        raise ValueError(f"a card is named twice: {sorted(map(str, named))}")
    heights: list[int] = []
    if foundations is None:
        for suit in FOUNDATION_ORDER:
            off = sorted(rank for rank in Rank if Card(rank, suit) not in named)
            if off != list(range(1, len(off) + 1)):
                raise ValueError(f"the unnamed {suit.name} {off} are not A..h: not a consistent position")
            heights.append(len(off))
    else:
        heights = [foundations.get(suit.value, 0) for suit in FOUNDATION_ORDER]
        on_foundations = {
            Card(Rank(rank), suit)
            for suit, height in zip(FOUNDATION_ORDER, heights, strict=True)
            for rank in range(1, height + 1)
        }
        if on_foundations & set(named):
            raise ValueError(f"named cards on foundations: {sorted(map(str, on_foundations & set(named)))}")
        leftover = sorted(ALL_CARDS - on_foundations - set(named), key=lambda c: (c.rank, c.suit.value))
        if leftover:
            if rest is None:
                raise ValueError(f"say which column takes the rest: {sorted(map(str, leftover))}")
            table_columns[rest - 1][:0] = leftover
    return Layout(
        columns=tuple(tuple(column) for column in table_columns),
        cells=table_cells,
        foundations=tuple(heights),  # type: ignore[arg-type]
    )


def game_at(
    columns: Sequence[str | Sequence[str]],
    cells: Sequence[str | None],
    foundations: Mapping[str, int] | None = None,
    rest: int | None = None,
    deal: Deal | None = None,
) -> Game:
    """A fresh game (no history, counters 0) at the position ``layout_at(...)``."""
    return Game.from_layout(layout_at(columns, cells, foundations, rest), deal)


def random_layout(rng: random.Random, cells: int) -> Layout:
    """A random complete position, not necessarily reachable, rich in what random play rarely reaches:
    high foundations, same-suit runs (King runs too), empty columns, full and empty cells."""
    heights = [rng.choice((0, 0, 1, 2, 4, 6, 9, 11, 12, 13)) for _ in FOUNDATION_ORDER]
    on_foundations = {
        Card(Rank(rank), suit)
        for suit, height in zip(FOUNDATION_ORDER, heights, strict=True)
        for rank in range(1, height + 1)
    }
    pool = sorted(ALL_CARDS - on_foundations, key=str)
    rng.shuffle(pool)
    in_cells = pool[: rng.randint(0, min(cells, len(pool)))]
    pool = pool[len(in_cells) :]
    cell_list: list[Card | None] = [*in_cells, *[None] * (cells - len(in_cells))]
    rng.shuffle(cell_list)
    runs: list[list[Card]] = []
    left = set(pool)
    for card in pool:
        if card not in left:
            continue
        left.remove(card)
        run = [card]
        while run[-1].rank > 1 and rng.random() < 0.75:
            lower = Card(Rank(run[-1].rank - 1), card.suit)
            if lower not in left:
                break
            left.remove(lower)
            run.append(lower)
        runs.append(run)
    used = rng.sample(range(8), 8 - rng.choice((0, 0, 1, 1, 2, 3)))
    columns: list[list[Card]] = [[] for _ in range(8)]
    for run in runs:
        columns[rng.choice(used)].extend(run)
    return Layout(
        columns=tuple(tuple(column) for column in columns),
        cells=tuple(cell_list),
        foundations=tuple(heights),  # type: ignore[arg-type]
    )
