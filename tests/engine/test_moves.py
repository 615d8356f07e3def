"""Move and undo notation (the stored action log), and the group-size formula."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import engine
from engine import (
    UNDO,
    Cell,
    Column,
    Foundation,
    InvalidNotationError,
    Move,
    Pile,
    Suit,
    Undo,
    max_group_size,
    parse_action,
)
from tests.engine.seed_tables import GROUP_TABLE

ENGINE_NAMES: dict[str, Any] = {name: getattr(engine, name) for name in engine.__all__}
ALL_PILES: list[Pile] = [
    *(Column(i) for i in range(1, 9)),
    *(Cell(i) for i in range(1, 9)),
    *(Foundation(suit) for suit in Suit),
]
moves = st.builds(Move, st.sampled_from(ALL_PILES), st.sampled_from(ALL_PILES), st.integers(1, 13))


def test_move_notation_examples() -> None:
    assert Move(Column(3), Cell(1)).symbol() == "t3-c1"
    assert Move(Cell(2), Column(5)).symbol() == "c2-t5"
    assert Move(Column(1), Column(4), 3).symbol() == "t1-t4:3"
    assert Move(Foundation(Suit.HEARTS), Cell(2)).symbol() == "fH-c2"
    assert str(Move(Column(6), Foundation(Suit.SPADES))) == "t6-fS"
    assert parse_action("t1-t4:3") == Move(Column(1), Column(4), 3)
    assert parse_action("t6-fS") == Move(Column(6), Foundation(Suit.SPADES), 1)
    assert Move.parse("c2-t5") == Move(Cell(2), Column(5))


@given(moves)
def test_move_parse_format_round_trip(move: Move) -> None:
    assert parse_action(move.symbol()) == move
    assert Move.parse(str(move)) == move
    assert parse_action(move.symbol().upper()) == move
    assert parse_action(move.symbol().lower()) == move


@given(moves, st.integers(0, 2**8 - 1))
def test_move_parse_is_case_insensitive(move: Move, mask: int) -> None:
    text = move.symbol()
    flipped = "".join(ch.swapcase() if mask >> i & 1 else ch for i, ch in enumerate(text))
    assert parse_action(flipped) == move


@given(moves)
def test_move_repr_pastes_back(move: Move) -> None:
    assert eval(repr(move), ENGINE_NAMES) == move
    assert repr(move) == f"Move.parse({move.symbol()!r})"


@pytest.mark.parametrize("text", ["undo", "UNDO", "Undo", "uNdO"])
def test_undo_parse_round_trip(text: str) -> None:
    assert parse_action(text) is UNDO
    assert UNDO.symbol() == "undo" == str(UNDO)
    assert eval(repr(UNDO), ENGINE_NAMES) == UNDO
    assert Undo() == UNDO


def test_move_parse_refuses_undo() -> None:
    with pytest.raises(InvalidNotationError, match="not a move"):
        Move.parse("undo")


def test_move_values_are_frozen_and_hashable() -> None:
    move = Move.parse("t1-t4:3")
    assert {move, Move(Column(1), Column(4), 3)} == {move}
    with pytest.raises(AttributeError):
        move.count = 2  # type: ignore[misc]


BAD_ACTIONS: list[tuple[object, str]] = [
    ("", "not an action"),
    ("t1", "not an action"),
    ("t1t2", "not an action"),
    ("t1 t2", "not an action"),
    ("t1-t2:1", "written without ':1'"),
    ("t1-t2:0", "bad card count"),
    ("t1-t2:01", "bad card count"),
    ("t1-t2:x", "bad card count"),
    ("t1-t2:", "bad card count"),
    ("t1-t2:-3", "bad card count"),
    ("t1-t2:+3", "bad card count"),
    ("t1-t2: 3", "bad card count"),
    ("t1-t2:²", "bad card count"),
    ("t1-t2:３", "bad card count"),
    ("t1-t2:3:4", "bad card count"),
    ("t0-t1", "not a pile"),
    ("t1-t9", "not a pile"),
    ("c9-t1", "not a pile"),
    ("t1-fX", "not a pile"),
    ("x1-t1", "not a pile"),
    ("-t1", "not a pile"),
    ("t1-", "not a pile"),
    ("t1-t2-t3", "not a pile"),
    ("t1--t2", "not a pile"),
    ("undo:2", "not an action"),
    (" undo", "not an action"),
    ("undo ", "not an action"),
    ("t1-t2" * 5000, "not an action"),
    (None, "not an action"),
    (12, "not an action"),
    (b"t1-t2", "not an action"),
    (Move.parse("t1-t2"), "not an action"),
]


@pytest.mark.parametrize(("bad", "reason"), BAD_ACTIONS, ids=lambda bad: repr(bad)[:20])
def test_parse_action_refuses_bad_text(bad: object, reason: str) -> None:
    with pytest.raises(InvalidNotationError, match=reason) as raised:
        parse_action(bad)  # type: ignore[arg-type]
    message = str(raised.value)
    assert len(message) < 200
    if isinstance(bad, str) and len(bad) < 20 and reason != "not a pile":
        assert repr(bad) in message  # the message names the text it refuses


@given(st.text(max_size=12))
def test_parse_action_is_exact_inverse_of_symbol(text: str) -> None:
    """Any text that parses is the canonical notation of its action, up to ASCII case."""
    try:
        action = parse_action(text)
    except InvalidNotationError:
        return
    assert text.isascii()
    assert action.symbol().lower() == text.lower()


@pytest.mark.parametrize("empty_cells", sorted(GROUP_TABLE))
def test_max_group_size_matches_the_seeds_table(empty_cells: int) -> None:
    row = (
        max_group_size(empty_cells, 0),
        max_group_size(empty_cells, 1),
        max_group_size(empty_cells, 2),
        max_group_size(empty_cells, 1, into_empty_column=True),
        max_group_size(empty_cells, 2, into_empty_column=True),
    )
    assert row == GROUP_TABLE[empty_cells]


@given(st.integers(0, 8), st.integers(0, 8))
def test_max_group_size_formula(empty_cells: int, empty_columns: int) -> None:
    assert max_group_size(empty_cells, empty_columns) == (empty_cells + 1) * 2**empty_columns
    if empty_columns:
        assert max_group_size(empty_cells, empty_columns, into_empty_column=True) == max_group_size(
            empty_cells, empty_columns - 1
        )
