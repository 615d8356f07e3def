"""Pile references: ``t1``..``t8``, ``c1``..``c8``, ``fS fH fD fC``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import engine
from engine import Cell, Column, Foundation, InvalidNotationError, Pile, Suit, parse_pile

ENGINE_NAMES: dict[str, Any] = {name: getattr(engine, name) for name in engine.__all__}
ALL_PILES: list[Pile] = [
    *(Column(i) for i in range(1, 9)),
    *(Cell(i) for i in range(1, 9)),
    *(Foundation(suit) for suit in Suit),
]
PILE_TEXTS = [*(f"t{i}" for i in range(1, 9)), *(f"c{i}" for i in range(1, 9)), "fS", "fH", "fD", "fC"]


def test_pile_texts_are_the_protocol_names() -> None:
    assert [pile.symbol() for pile in ALL_PILES] == PILE_TEXTS
    assert [str(pile) for pile in ALL_PILES] == PILE_TEXTS


@pytest.mark.parametrize("pile", ALL_PILES, ids=str)
def test_pile_parse_format_round_trip(pile: Pile) -> None:
    assert parse_pile(pile.symbol()) == pile
    assert parse_pile(pile.symbol().upper()) == pile
    assert parse_pile(pile.symbol().lower()) == pile
    assert eval(repr(pile), ENGINE_NAMES) == pile


@given(st.sampled_from(PILE_TEXTS), st.integers(0, 3))
def test_pile_parse_is_case_insensitive(text: str, mask: int) -> None:
    flipped = "".join(ch.swapcase() if mask >> i & 1 else ch for i, ch in enumerate(text))
    assert parse_pile(flipped).symbol() == text


def test_pile_reprs() -> None:
    assert repr(Column(3)) == "Column(3)"
    assert repr(Cell(1)) == "Cell(1)"
    assert repr(Foundation(Suit.HEARTS)) == "Foundation(Suit.HEARTS)"


def test_pile_values_compare_and_hash_equal() -> None:
    assert Column(3) == parse_pile("T3")
    assert parse_pile("t3") != parse_pile("c3")
    assert len({Column(1), parse_pile("t1"), Cell(1), parse_pile("C1"), Foundation(Suit.SPADES)}) == 3


BAD_PILE_TEXTS: list[object] = [
    "",
    "t",
    "c",
    "f",
    "t0",
    "t9",
    "t10",
    "t01",
    "c0",
    "c9",
    "fX",
    "fs ",
    " t1",
    "x1",
    "t1t2",
    "t-1",
    "t1-t2",
    "ff",
    "t１",
    "fſ",
    "t1" * 5000,
    None,
    1,
    b"t1",
    Column(1),
]


@pytest.mark.parametrize("bad", BAD_PILE_TEXTS, ids=lambda bad: repr(bad)[:20])
def test_pile_parse_refuses_bad_text(bad: object) -> None:
    with pytest.raises(InvalidNotationError, match="not a pile") as raised:
        parse_pile(bad)  # type: ignore[arg-type]
    assert "t1..t8" in str(raised.value)
    assert len(str(raised.value)) < 200


@pytest.mark.parametrize("index", [0, 9, -1, 100, True, 1.0, "1", None])
def test_pile_index_out_of_range_refused(index: object) -> None:
    with pytest.raises(InvalidNotationError, match="no column"):
        Column(index)  # type: ignore[arg-type]
    with pytest.raises(InvalidNotationError, match="no cell"):
        Cell(index)  # type: ignore[arg-type]


def test_pile_index_huge_int_refused_with_short_message() -> None:
    with pytest.raises(InvalidNotationError, match="no column") as raised:
        Column(10**5000)
    assert len(str(raised.value)) < 200
