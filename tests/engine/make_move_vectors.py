"""Write ``protocol/vectors/moves.json``: positions with their full legal-move list, each move's ops and
points, the refusals at the edges, and what a tap and a double tap make, for move generators in any
language.

Run ``.venv/bin/python -m tests.engine.make_move_vectors`` from the project root to rewrite the file;
``test_move_vectors.py`` checks that the file is what this writes and replays every entry through the
engine, so the file changes only when the rules or the wire ops change on purpose.

The positions: the opening of one deal in each variant; every entry of the seeds' group-size table
(``seed_tables.GROUP_TABLE``: rows 0, 2, 4, 6 and 8 empty cells, onto an occupied column with 0, 1 and 2
empty columns and a King run into an empty column with 1 and 2 in all), in every variant that has that
many cells, each with a group at the limit and, where a run that long exists, one card over it; an empty
column that takes only a King; take-backs from foundations (an ace, a King into an empty column); and
the tap and double-tap cases (each step of the order, the King already at the bottom of its column, a
cell's card that never goes to another cell).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import protocol
from engine import (
    ALL_CARDS,
    FOUNDATION_ORDER,
    PILES,
    Card,
    Deal,
    Foundation,
    Game,
    IllegalMoveError,
    Layout,
    Move,
    Pile,
    Rank,
    max_group_size,
)
from tests.engine.seed_tables import GROUP_KINDS, GROUP_TABLE

__all__ = ["PATH", "build", "render"]

PATH = Path(__file__).parents[2] / "protocol" / "vectors" / "moves.json"

DESCRIPTION = (
    "Eight Off rules vectors (protocol/README.md section 13, docs/rules.md). Each position is in the "
    "shape of a snapshot (tableau bottom card first, cells, foundation tops) with its counts of empty "
    "cells and columns, the largest group it allows (onto a column with cards, into an empty column), "
    "every legal move (undo aside) with the ops of its ack and the points it brings, some illegal moves "
    "with the engine's reason (for people: never parse it), and the move each tap and double tap makes "
    "(null: nothing moves, the server answers illegal_move)."
)

_RANKS = "A23456789TJQK"
_FILLERS = tuple(f"{rank}{suit}" for rank in "KQJT987654" for suit in "DC")
GAME_ID = "g_vectors"


def run_of(suit: str, top_rank: str, length: int) -> list[str]:
    """``length`` cards of ``suit`` descending from ``top_rank``, bottom first."""
    start = _RANKS.index(top_rank)
    return [f"{_RANKS[start - i]}{suit}" for i in range(length)]


@dataclass
class Spec:
    """A position to write: named columns and cells; every other card on its foundation, which must then
    hold A..h of each suit (the named cards of a suit are its high ranks), or at the bottom of ``rest``."""

    name: str
    about: str
    columns: list[list[str]]
    cells: list[str | None]
    heights: dict[str, int] | None = None
    rest: int | None = None
    illegal: list[str] = field(default_factory=list)


def layout_of(spec: Spec) -> Layout:
    columns = [[Card.parse(text) for text in column] for column in spec.columns]
    cells = tuple(Card.parse(text) if text else None for text in spec.cells)
    named = [card for column in columns for card in column] + [card for card in cells if card]
    if len(set(named)) != len(named):
        raise ValueError(f"{spec.name}: a card is named twice")
    heights = []
    for suit in FOUNDATION_ORDER:
        if spec.heights is not None:
            heights.append(spec.heights.get(suit.value, 0))
            continue
        off = sorted(rank for rank in Rank if Card(rank, suit) not in named)
        if off != list(range(1, len(off) + 1)):
            raise ValueError(f"{spec.name}: the unnamed {suit.name} are not A..h")
        heights.append(len(off))
    on_foundations = {
        Card(Rank(rank), suit)
        for suit, h in zip(FOUNDATION_ORDER, heights, strict=True)
        for rank in range(1, h + 1)
    }
    leftover = sorted(ALL_CARDS - on_foundations - set(named), key=lambda c: (c.rank, c.suit.value))
    if leftover:
        if spec.rest is None:
            raise ValueError(f"{spec.name}: say which column takes {sorted(map(str, leftover))}")
        columns[spec.rest - 1][:0] = leftover
    return Layout(tuple(map(tuple, columns)), cells, (heights[0], heights[1], heights[2], heights[3]))


# --------------------------------------------------------------------------- the positions


def openings() -> Iterator[Spec]:
    for cells in (8, 4, 2):
        deal = Deal(160, cells)
        layout = deal.layout()
        yield Spec(
            f"opening {deal.code()}",
            f"the deal of {deal.code()} as dealt: the {cells}-cell variant",
            [[str(card) for card in column] for column in layout.columns],
            [str(card) if card else None for card in layout.cells],
        )


def _count(number: int, thing: str) -> str:
    return f"{number} {thing}{'' if number == 1 else 's'}"


def group_edge(cells: int, empty_cells: int, into_empty: bool, empty_columns: int) -> Spec:
    """One entry of the seeds' table: a spades group at the limit (or the longest run there is) that
    moves, and a hearts group one card over it that is refused, where such a run exists."""
    limit = max_group_size(empty_cells, empty_columns, into_empty_column=into_empty)
    fillers = iter(_FILLERS)
    illegal: list[str] = []
    if into_empty:
        target = 9 - empty_columns  # the leftmost empty column
        columns = [[next(fillers), *run_of("S", "K", min(limit, 13))]]
        if limit + 1 <= 13:
            columns.append([next(fillers), *run_of("H", "K", limit + 1)])
            illegal.append(f"t2-t{target}:{limit + 1}")
        kind = f"a King run into an empty column, {empty_columns} empty in all"
    else:
        columns = [["KS"], run_of("S", "Q", min(limit, 12))]
        if limit + 1 <= 12:
            columns += [["KH"], run_of("H", "Q", limit + 1)]
            illegal.append(f"t4-t3:{limit + 1}")
        kind = f"onto a column with cards, {empty_columns} empty column(s)"
    columns += [[next(fillers)] for _ in range(8 - len(columns) - empty_columns)]
    columns += [[] for _ in range(empty_columns)]
    cell_cards: list[str | None] = [next(fillers) for _ in range(cells - empty_cells)]
    over = "one card more is refused" if illegal else "every run that exists fits"
    return Spec(
        f"group C{cells}, {_count(empty_cells, 'empty cell')}, "
        f"{'a King run into an empty column' if into_empty else 'onto a column'}, "
        f"{_count(empty_columns, 'empty column')}",
        f"seeds' table row {empty_cells} empty cells, {kind}: at most {limit} cards; {over}",
        columns,
        cell_cards + [None] * empty_cells,
        illegal=illegal,
    )


def group_edges() -> Iterator[Spec]:
    for cells in (8, 4, 2):
        for empty_cells in sorted(GROUP_TABLE):
            if empty_cells <= cells:
                for into_empty, empty_columns in GROUP_KINDS:
                    yield group_edge(cells, empty_cells, into_empty, empty_columns)


def hand_written() -> Iterator[Spec]:
    yield Spec(
        "empty column takes a King only",
        "t8 is empty: t2's KH (on 3D) and c1's KC may go there, t1's QD and c2's JS may not",
        [["9C", "QD"], ["3D", "KH"], ["QS"], ["TC"], ["8C"], ["7C"], ["6C"], []],
        ["KC", "JS", None, None],
        heights={"S": 10, "H": 0, "D": 2, "C": 5},
        rest=1,
        illegal=["t1-t8", "c2-t8", "t1-t1"],
    )
    yield Spec(
        "take-backs from foundations",
        "foundation tops 5S, AH, KD, 9C: each may go into the empty cell or onto a column that takes it, "
        "KD into the empty column; AH leaves its foundation empty (top null); a take-back brings 0 points",
        [["6S"], ["2H"], ["TC"], [], ["7S"], ["8S"], ["9S"], ["JC"]],
        ["QC", None],
        heights={"S": 5, "H": 1, "D": 13, "C": 9},
        rest=1,
        illegal=["fD-t5", "fC-c1", "fS-t7"],
    )
    yield Spec(
        "double tap order: foundation, column, empty column, cell",
        "2S goes to its foundation though t1's 3S takes it; 8H goes onto 9H, not into a cell; KD with QD "
        "on it goes to t7, the leftmost empty column; 5C goes into c1, the first empty cell; c3's JH has "
        "nowhere to go (a cell's card never goes to another cell)",
        [["3S"], ["2S"], ["9H"], ["8H"], ["TS", "KD", "QD"], ["5C"], [], []],
        [None, None, "JH", None],
        heights={"S": 1, "H": 6, "D": 11, "C": 3},
        rest=1,
    )
    yield Spec(
        "double tap: a King already at the bottom of its column",
        "KS alone in t1 and KH under QH in t2 are the bottom cards of their columns: a double tap never "
        "moves them into the empty t8 (t1's KS goes into the first empty cell instead, t2's KH with QH "
        "nowhere); KC on JD does go to t8, and so does c1's KD",
        [["KS"], ["KH", "QH"], ["JD", "KC"], ["9S"], ["8H"], ["7D"], ["6C"], []],
        ["KD", None],
        heights={"S": 7, "H": 6, "D": 4, "C": 4},
        rest=4,
        illegal=["t2-c2:2"],
    )
    yield Spec(
        "tap: to the foundations, every cell full",
        "a tap sends t1's 4D, c1's 6C and c2's 5H to their foundations; t2's 9S has none to go to, and a "
        "double tap on it finds nothing (no column takes it, no cell is empty)",
        [["4D"], ["9S"], ["TH"], ["8C"], ["JS"], ["QC"], ["7H"], ["KS"]],
        ["6C", "5H", "QS", "9H"],
        heights={"S": 7, "H": 4, "D": 3, "C": 5},
        rest=3,
    )


# --------------------------------------------------------------------------- the entries


def _wire_move(move: Move) -> dict[str, Any]:
    return {"from": move.source.symbol(), "to": move.target.symbol(), "n": move.count}


def _ops(game: Game, move: Move) -> tuple[list[Any], int]:
    """The ops of ``move``'s ack and its points, from a copy of ``game``."""
    after = game.copy()
    transfer = after.play(move)
    wire = protocol.Diff.of(GAME_ID, after, transfer).to_wire()
    return wire["ops"], transfer.points  # type: ignore[return-value]


def _sources(game: Game) -> Iterator[Pile]:
    yield from (pile for pile in PILES if not isinstance(pile, Foundation) and game.cards_in(pile))


def _run_length(cards: Sequence[Card]) -> int:
    length = 1
    while length < len(cards):
        upper, lower = cards[-length], cards[-length - 1]
        if upper.suit is not lower.suit or lower.rank != upper.rank + 1:
            break
        length += 1
    return length


def _resolved(make: Any, *args: Any) -> dict[str, Any] | None:
    try:
        return _wire_move(make(*args))
    except IllegalMoveError:
        return None


def entry(spec: Spec) -> dict[str, Any]:
    layout = layout_of(spec)
    game = Game.from_layout(layout, Deal(0, len(layout.cells)))
    snapshot = protocol.Snapshot.of(
        GAME_ID, game, player=protocol.Player("p_1", "Ann"), started_at=protocol.parse_timestamp(
            "2026-11-30T04:48:59.123Z")
    ).to_wire()  # fmt: skip
    empty_cells, empty_columns = game.empty_cells(), game.empty_columns()
    moves = []
    for move in game.legal_moves:
        ops, points = _ops(game, move)
        moves.append({**_wire_move(move), "ops": ops, "points": points})
    illegal = []
    for text in spec.illegal:
        move = Move.parse(text)
        reason = game.illegal_reason(move)
        if reason is None:
            raise ValueError(f"{spec.name}: {text} is legal")
        illegal.append({**_wire_move(move), "reason": reason})
    taps = [{"from": source.symbol(), "move": _resolved(game.tap_move, source)} for source in _sources(game)]
    double_taps = [
        {"from": source.symbol(), "n": n, "move": _resolved(game.double_tap_move, source, n)}
        for source in _sources(game)
        for n in range(1, _run_length(game.cards_in(source)) + 1)
    ]
    return {
        "name": spec.name,
        "about": spec.about,
        "cell_count": game.cell_count,
        "tableau": snapshot["tableau"],
        "cells": snapshot["cells"],
        "foundations": snapshot["foundations"],
        "empty_cells": empty_cells,
        "empty_columns": empty_columns,
        "largest_group": {
            "onto_column": max_group_size(empty_cells, empty_columns),
            "into_empty_column": max_group_size(empty_cells, empty_columns, into_empty_column=True)
            if empty_columns
            else None,
        },
        "moves": moves,
        "illegal": illegal,
        "taps": taps,
        "double_taps": double_taps,
    }


def build() -> list[dict[str, Any]]:
    return [entry(spec) for specs in (openings(), group_edges(), hand_written()) for spec in specs]


def render(positions: list[dict[str, Any]]) -> str:
    """JSON with one line per field, move, tap and double tap, so that a diff shows what changed."""

    def line(value: object) -> str:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    parts = []
    for position in positions:
        fields = []
        for key, value in position.items():
            if isinstance(value, list) and value and isinstance(value[0], dict):
                items = ",\n".join(f"        {line(item)}" for item in value)
                fields.append(f'      "{key}": [\n{items}\n      ]')
            else:
                fields.append(f'      "{key}": {line(value)}')
        parts.append("    {\n" + ",\n".join(fields) + "\n    }")
    return (
        '{\n  "description": '
        + line(DESCRIPTION)
        + ',\n  "positions": [\n'
        + ",\n".join(parts)
        + "\n  ]\n}\n"
    )


def main() -> None:
    positions = build()
    PATH.write_text(render(positions), encoding="utf-8")
    moves = sum(len(position["moves"]) for position in positions)
    print(f"wrote {len(positions)} positions, {moves} legal moves, to {PATH}")


if __name__ == "__main__":
    main()
