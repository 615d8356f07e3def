"""docs/rules.md cannot drift from the engine: its group-size tables, variants, undo limit and points
are read from the page and compared with the engine and with the seeds' own table."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from engine import Deal, Game, IllegalMoveError, Move
from engine.game import UNDO_LIMIT
from engine.moves import max_group_size
from engine.piles import Cell, Column, Foundation
from engine.scoring import POINTS_CELL_TO_TABLEAU, POINTS_TO_FOUNDATION
from tests.engine.seed_tables import GROUP_KINDS, GROUP_TABLE
from tests.support.positions import game_at

RULES = Path(__file__).parents[2] / "docs" / "rules.md"

ONTO_A_COLUMN = "**Onto a column that has cards**"
INTO_AN_EMPTY_COLUMN = "**A King and its run into an empty column**"


def rules_text() -> str:
    return RULES.read_text(encoding="utf-8")


def table_after(heading: str) -> list[list[str]]:
    """The cells of the first Markdown table after the paragraph starting with ``heading``."""
    text = rules_text()
    assert text.count(heading) == 1, f"{heading!r} is not once in docs/rules.md"
    lines = text.split(heading, 1)[1].splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def group_table(heading: str) -> tuple[list[int], dict[int, list[int]]]:
    """(empty-column counts of the header, {empty cells: sizes}) of one group-size table."""
    header, rule, *body = table_after(heading)
    assert header[0] == "empty cells" and set("".join(rule)) <= set("-:")
    columns = [int(re.fullmatch(r"(\d) empty", cell).group(1)) for cell in header[1:]]  # type: ignore[union-attr]
    return columns, {int(row[0]): [int(cell) for cell in row[1:]] for row in body}


@pytest.mark.parametrize(
    ("heading", "into_empty_column", "empty_columns"),
    [(ONTO_A_COLUMN, False, range(0, 7)), (INTO_AN_EMPTY_COLUMN, True, range(1, 8))],
)
def test_rules_group_tables_are_the_engine_formula(
    heading: str, into_empty_column: bool, empty_columns: range
) -> None:
    """Every empty-cell count 0..8 and every empty-column count a group move can meet."""
    columns, rows = group_table(heading)
    assert columns == list(empty_columns)
    assert sorted(rows) == list(range(9))
    for cells, sizes in rows.items():
        assert sizes == [max_group_size(cells, k, into_empty_column=into_empty_column) for k in columns]


def test_rules_group_tables_hold_the_seeds_table() -> None:
    tables = {False: group_table(ONTO_A_COLUMN), True: group_table(INTO_AN_EMPTY_COLUMN)}
    for cells, seed_sizes in GROUP_TABLE.items():
        for (into_empty_column, empty_columns), seed_size in zip(GROUP_KINDS, seed_sizes, strict=True):
            columns, rows = tables[into_empty_column]
            assert rows[cells][columns.index(empty_columns)] == seed_size


def test_rules_variants_are_the_engine_layouts() -> None:
    rows = {row[0]: row for row in table_after("The 4 cards left over go:")[2:]}
    assert set(rows) == {"**C8** (the standard game)", "**C4**", "**C2**"}
    for label, row in rows.items():
        variant = re.search(r"C(\d)", label).group(1)  # type: ignore[union-attr]
        game = Game(Deal(160, int(variant)))
        assert int(row[1]) == game.cell_count
        lengths = [len(game.cards_in(Column(i))) for i in range(1, 9)]
        if "6 cards each" in row[3]:
            assert lengths == [6] * 8
        else:
            assert row[3].replace("*", "") == ", ".join(map(str, lengths))
    assert "to the **bottom** of column 3" in rows["**C2**"][2]


def test_rules_undo_limit_and_points_are_the_engine_ones() -> None:
    text = rules_text()
    assert f"The last **{UNDO_LIMIT}** actions can be undone" in text
    points = {row[0]: row[1] for row in table_after("## Score")[2:]}
    assert points["a card put onto a foundation (from a column or a cell)"] == f"+{POINTS_TO_FOUNDATION}"
    assert points["a card from a cell onto a column"] == f"+{POINTS_CELL_TO_TABLEAU}"
    assert "+5 cycle" in text and "+10 take-back cycle" in text


def first_game(has: Callable[[Game], Move | None]) -> tuple[Game, Move]:
    """The first C8 deal (by number) whose opening offers the move ``has`` looks for."""
    for number in range(1000):
        game = Game(Deal(number, 8))
        move = has(game)
        if move is not None:
            return game, move
    raise AssertionError("no deal found")  # pragma: no cover


def test_rules_farming_cycles_raise_the_score_as_written() -> None:
    """The +5 cell -> column cycle and the +10 take-back cycle of the Score section, on real deals."""

    def run_of_two(game: Game) -> Move | None:
        for i in range(1, 9):
            *_, under, top = game.cards_in(Column(i))
            if under.suit is top.suit and under.rank == top.rank + 1:
                return Move(Column(i), Cell(5))
        return None

    game, to_cell = first_game(run_of_two)  # a column whose top card lies on its same-suit successor
    back = Move(Cell(5), to_cell.source)
    for cycle in range(1, 4):
        game.play(to_cell)
        game.play(back)
        assert game.score == cycle * POINTS_CELL_TO_TABLEAU

    def ace_on_top(game: Game) -> Move | None:
        for i in range(1, 9):
            card = game.top_card(Column(i))
            if card is not None and card.rank == 1:
                return Move(Column(i), Foundation(card.suit))
        return None

    game, to_foundation = first_game(ace_on_top)
    game.play(to_foundation)
    take_back, put_back = Move(to_foundation.target, Cell(5)), Move(Cell(5), to_foundation.target)
    for cycle in range(1, 4):
        game.play(take_back)
        assert game.score == cycle * POINTS_TO_FOUNDATION  # a take-back costs nothing
        game.play(put_back)
        assert game.score == (cycle + 1) * POINTS_TO_FOUNDATION


#: The double-tap King exception, in the same words on both pages (they once differed: "alone at the
#: bottom" here, "at the bottom" in the protocol, and the engine follows neither reading alone).
KING_EXCEPTION = "never a King that is the bottom card of its column, alone or under its run"
README = Path(__file__).parents[2] / "protocol" / "README.md"


def test_rules_double_tap_king_exception_is_one_rule_on_both_pages_and_in_the_engine() -> None:
    for page in (rules_text(), README.read_text(encoding="utf-8")):
        assert KING_EXCEPTION in " ".join(page.split())
    # KS alone in t1, KH under QH in t2 (bottom cards: never into an empty column), KC on JD in t3.
    game = game_at(
        [["KS"], ["KH", "QH"], ["JD", "KC"], ["9S"], ["8H"], ["7D"], ["6C"], []],
        ["KD", None],
        {"S": 7, "H": 6, "D": 4, "C": 4},
        rest=4,
    )
    assert game.double_tap_move(Column(1)) == Move(Column(1), Cell(2))  # alone: a cell instead
    with pytest.raises(IllegalMoveError):
        game.double_tap_move(Column(2), 2)  # under its run: nowhere (a group never goes to a cell)
    assert game.double_tap_move(Column(3)) == Move(Column(3), Column(8))  # not at the bottom: moves
    assert {Move(Column(1), Column(8)), Move(Column(2), Column(8), 2)} <= set(game.legal_moves)
