"""Game codes, the fixed shuffle, the deal of each cell variant, the daily deal and the deal vectors."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import engine
from engine import ALL_CARDS, Card, Deal, InvalidCodeError, InvalidNotationError, daily_deal, shuffled_deck
from engine.cards import SHUFFLE_ORDER
from engine.deal import splitmix64

ENGINE_NAMES: dict[str, Any] = {name: getattr(engine, name) for name in engine.__all__}
MAX_NUMBER = 2**35 - 1
VECTORS_PATH = Path(__file__).parents[2] / "protocol" / "vectors" / "deals.json"
numbers = st.integers(0, MAX_NUMBER)
variants = st.sampled_from([8, 4, 2])

# ----------------------------------------------------------------------------------- game codes


def test_code_example_parses() -> None:
    deal = Deal.from_code("EO1-C8-AAAAAFA")
    assert deal == Deal(160, 8)
    assert deal.code() == "EO1-C8-AAAAAFA"
    assert str(deal) == "EO1-C8-AAAAAFA"


@pytest.mark.parametrize(
    "text", ["eo1-c8-aaaaafa", "Eo1-C8-aAaAaFa", "  EO1-C8-AAAAAFA\n", "\tEO1-c8-AAAAAFA ", "EO1-C8-AAAAAFA"]
)
def test_code_parse_is_case_and_blank_insensitive_output_canonical(text: str) -> None:
    assert Deal.from_code(text).code() == "EO1-C8-AAAAAFA"


def test_code_smallest_and_largest_numbers() -> None:
    assert Deal.from_code("EO1-C8-AAAAAAA").number == 0
    assert Deal.from_code("EO1-C2-7777777").number == MAX_NUMBER == 2**35 - 1
    assert Deal(0, 4).code() == "EO1-C4-AAAAAAA"
    assert Deal(MAX_NUMBER).code() == "EO1-C8-7777777"
    assert Deal.from_code("EO1-C8-AAAAAAB").number == 1
    assert Deal.from_code("EO1-C8-AAAAABA").number == 32
    assert Deal.from_code("EO1-C8-BAAAAAA").number == 2**30
    assert Deal.from_code("EO1-C8-AAAAAA7").number == 31


@pytest.mark.parametrize(("variant", "cells"), [("C8", 8), ("C4", 4), ("C2", 2)])
def test_code_variants(variant: str, cells: int) -> None:
    deal = Deal.from_code(f"EO1-{variant}-AAAAAFA")
    assert deal.cells == cells
    assert deal.code() == f"EO1-{variant}-AAAAAFA"


@given(numbers, variants)
def test_code_round_trip(number: int, cells: int) -> None:
    deal = Deal(number, cells)
    code = deal.code()
    assert len(code) == 14
    assert Deal.from_code(code) == deal
    assert Deal.from_code(code.lower()) == deal
    assert Deal.from_code(f" {code} ").code() == code
    assert eval(repr(deal), ENGINE_NAMES) == deal


BAD_CODES: list[tuple[object, str]] = [
    ("EO2-C8-AAAAAFA", "'EO2'"),
    ("EO0-C8-AAAAAFA", "'EO0'"),
    ("XX1-C8-AAAAAFA", "'XX1'"),
    ("-C8-AAAAAFA", "version ''"),
    ("EO1-C3-AAAAAFA", "'C3'"),
    ("EO1-C9-AAAAAFA", "'C9'"),
    ("EO1-C-AAAAAFA", "'C'"),
    ("EO1-C08-AAAAAFA", "'C08'"),
    ("EO1-8-AAAAAFA", "'8'"),
    ("EO1-C16-AAAAAFA", "'C16'"),
    ("EO1-C8-AAAAAF", "'AAAAAF'"),
    ("EO1-C8-AAAAAFAA", "'AAAAAFAA'"),
    ("EO1-C8-", "deal number ''"),
    ("EO1-C8-AAAAAA0", "'AAAAAA0'"),
    ("EO1-C8-AAAAAA1", "'AAAAAA1'"),
    ("EO1-C8-AAAAAA8", "'AAAAAA8'"),
    ("EO1-C8-AAAAAA9", "'AAAAAA9'"),
    ("EO1-C8-AAAA AA", "'AAAA AA'"),
    ("EO1-C8-AAAAA=A", "'AAAAA=A'"),
    ("EO1-C8-AAAAAß", "'AAAAAß'"),  # 'ß'.upper() == 'SS' would make 7 symbols
    ("EO1-C8-AAAAAAſ", "'AAAAAAſ'"),  # 'ſ'.upper() == 'S'
    ("EO1-C8-AAAAAAı", "'AAAAAAı'"),  # 'ı'.upper() == 'I'
    ("EO1C8AAAAAFA", "not a game code"),
    ("EO1-C8AAAAAFA", "not a game code"),
    ("EO1C8-AAAAAFA", "not a game code"),
    ("EO1-C8-AAAA-AFA", "not a game code"),
    ("EO1 C8 AAAAAFA", "not a game code"),
    ("", "not a game code"),
    ("   ", "not a game code"),
    ("EO1-C8-" + "A" * 10_000, "is not 7 base32 symbols"),
    (None, "not NoneType"),
    (160, "not int"),
    (b"EO1-C8-AAAAAFA", "not bytes"),
    (Deal(160), "not Deal"),
]


@pytest.mark.parametrize(("bad", "named"), BAD_CODES, ids=lambda bad: repr(bad)[:24])
def test_code_parse_refuses_bad_codes_naming_the_part(bad: object, named: str) -> None:
    with pytest.raises(InvalidCodeError) as raised:
        Deal.from_code(bad)  # type: ignore[arg-type]
    message = str(raised.value)
    assert named in message
    assert len(message) < 300
    assert isinstance(raised.value, InvalidNotationError)  # one root for the server to catch


@given(st.text(max_size=16))
def test_code_parse_accepts_only_canonical_text_up_to_case_and_blanks(text: str) -> None:
    try:
        deal = Deal.from_code(text)
    except InvalidCodeError:
        return
    assert text.strip().isascii()
    assert text.strip().upper() == deal.code()


@pytest.mark.parametrize(
    ("number", "cells"),
    [(-1, 8), (2**35, 8), (2**64, 8), (True, 8), (1.0, 8), ("1", 8), (0, 3), (0, 0), (0, 8.0), (0, True)],
)
def test_deal_out_of_range_refused(number: object, cells: object) -> None:
    with pytest.raises(InvalidCodeError):
        Deal(number, cells)  # type: ignore[arg-type]


def test_deal_huge_number_refused_with_a_short_message() -> None:
    with pytest.raises(InvalidCodeError, match="outside") as raised:
        Deal(10**5000)  # repr() of this int raises ValueError: the message must not need it
    assert len(str(raised.value)) < 200


def test_deal_random_is_seeded_and_in_range() -> None:
    first = [Deal.random(random.Random(7), cells) for cells in (8, 4, 2)]
    again = [Deal.random(random.Random(7), cells) for cells in (8, 4, 2)]
    assert first == again
    assert [deal.cells for deal in first] == [8, 4, 2]
    assert all(0 <= deal.number <= MAX_NUMBER for deal in first)


# ----------------------------------------------------------------------------------- the shuffle


def test_splitmix64_reference_outputs() -> None:
    """The standard SplitMix64 seeded with 0 (as in Vigna's splitmix64.c)."""
    outputs = splitmix64(0)
    assert next(outputs) == 0xE220A8397B1DCDAF
    assert next(outputs) == 0x6E789E6AA1B965F4
    assert next(outputs) == 0x06C45D188009454F
    assert next(splitmix64(0)) == 0xE220A8397B1DCDAF  # a fresh generator starts over


def reference_deck(number: int) -> list[str]:
    """The shuffle written again from protocol/README.md section 11, sharing nothing with the engine."""
    deck = [rank + suit for suit in "CDHS" for rank in "A23456789TJQK"]
    state = number
    mask = 2**64 - 1
    for i in range(51, 0, -1):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        j = (z ^ (z >> 31)) % (i + 1)
        deck[i], deck[j] = deck[j], deck[i]
    return deck


@given(numbers)
def test_shuffle_matches_the_written_rule(number: int) -> None:
    assert [str(card) for card in shuffled_deck(number)] == reference_deck(number)


@given(numbers)
def test_shuffle_is_a_permutation_of_52_cards(number: int) -> None:
    deck = shuffled_deck(number)
    assert len(deck) == 52
    assert set(deck) == ALL_CARDS


def test_shuffle_depends_on_the_number() -> None:
    decks = {shuffled_deck(number) for number in range(200)}
    assert len(decks) == 200
    assert shuffled_deck(0) != SHUFFLE_ORDER


# ----------------------------------------------------------------------------------- layouts


@given(numbers)
def test_layout_c8(number: int) -> None:
    deck = shuffled_deck(number)
    layout = Deal(number, 8).layout()
    assert len(layout.columns) == 8
    for index, column in enumerate(layout.columns):
        assert len(column) == 6
        assert list(column) == [deck[k] for k in range(48) if k % 8 == index]  # bottom first
    assert layout.cells == (*deck[48:], None, None, None, None)
    assert layout.foundations == (0, 0, 0, 0)
    assert sorted(layout.cards(), key=str) == sorted(ALL_CARDS, key=str)


@given(numbers)
def test_layout_c4(number: int) -> None:
    deck = shuffled_deck(number)
    layout = Deal(number, 4).layout()
    assert [len(column) for column in layout.columns] == [6] * 8
    assert layout.cells == deck[48:]
    assert None not in layout.cells
    assert layout.foundations == (0, 0, 0, 0)


@given(numbers)
def test_layout_c2(number: int) -> None:
    deck = shuffled_deck(number)
    layout = Deal(number, 2).layout()
    assert [len(column) for column in layout.columns] == [6, 6, 7, 7, 6, 6, 6, 6]
    assert layout.cells == (deck[48], deck[49])
    # The seeds send cards 51 and 52 to the *bottom* ("spodok", "alt ucu", "nederst") of columns 3 and 4:
    # each is its column's first, most covered card, under the six dealt ones.
    assert layout.columns[2] == (deck[50], *(deck[k] for k in range(48) if k % 8 == 2))
    assert layout.columns[3] == (deck[51], *(deck[k] for k in range(48) if k % 8 == 3))
    assert set(layout.cards()) == ALL_CARDS


@given(numbers)
def test_layouts_of_one_number_share_their_48_tableau_cards(number: int) -> None:
    c8, c4, c2 = (Deal(number, cells).layout() for cells in (8, 4, 2))
    assert c8.columns == c4.columns
    assert [column[-6:] for column in c2.columns] == list(c8.columns)
    assert c8.cells[:4] == c4.cells
    assert c2.cells == c4.cells[:2]
    assert (c2.columns[2][0], c2.columns[3][0]) == c4.cells[2:]


def test_layout_text_pictures_the_table() -> None:
    text = Deal(0, 2).layout().text()
    lines = text.splitlines()
    assert lines[0].startswith("cells: ")
    assert lines[1] == "foundations: .S .H .D .C"
    assert len(lines) == 3 + 7  # cells, foundations, header, then 7 rows


def test_layout_repr_pastes_back() -> None:
    layout = Deal(160, 8).layout()
    assert eval(repr(layout), ENGINE_NAMES) == layout


# ----------------------------------------------------------------------------------- daily deal


def test_daily_deal_is_the_same_for_the_same_date() -> None:
    day = dt.date(2026, 3, 14)
    assert daily_deal(day) == daily_deal(dt.date(2026, 3, 14))
    assert daily_deal(day, 4) == Deal(daily_deal(day).number, 4)


def test_daily_deal_differs_across_366_days() -> None:
    start = dt.date(2027, 1, 1)
    numbers_seen = {daily_deal(start + dt.timedelta(days=i)).number for i in range(366)}
    assert len(numbers_seen) == 366


@given(st.dates(min_value=dt.date(1900, 1, 1), max_value=dt.date(2200, 12, 31)), variants)
def test_daily_deal_follows_the_documented_rule(day: dt.date, cells: int) -> None:
    days = (day - dt.date(1970, 1, 1)).days
    assert daily_deal(day, cells) == Deal(next(splitmix64(days)) >> 29, cells)


def test_daily_deal_known_values() -> None:
    assert daily_deal(dt.date(1970, 1, 1)).number == 0xE220A8397B1DCDAF >> 29
    assert daily_deal(dt.date(1970, 1, 1)).code() == Deal(0xE220A8397B1DCDAF >> 29).code()


# ----------------------------------------------------------------------------------- deal vectors


def load_vectors() -> list[dict[str, Any]]:
    data = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))
    vectors: list[dict[str, Any]] = data["vectors"]
    return vectors


def test_deal_vectors_cover_the_required_deals() -> None:
    vectors = load_vectors()
    assert len(vectors) >= 24
    codes = {entry["code"] for entry in vectors}
    for variant in ("C8", "C4", "C2"):
        assert {f"EO1-{variant}-AAAAAAA", f"EO1-{variant}-7777777", f"EO1-{variant}-AAAAAFA"} <= codes
    assert {entry["cell_count"] for entry in vectors} == {8, 4, 2}


@pytest.mark.parametrize("entry", load_vectors(), ids=lambda entry: entry["code"])
def test_deal_vectors_reproduced_by_the_engine(entry: dict[str, Any]) -> None:
    deal = Deal.from_code(entry["code"])
    assert (deal.number, deal.cells) == (entry["number"], entry["cell_count"])
    assert [str(card) for card in shuffled_deck(deal.number)] == entry["deck"]
    assert entry["deck"] == reference_deck(deal.number)
    layout = deal.layout()
    assert [[str(card) for card in column] for column in layout.columns] == entry["tableau"]
    assert [str(card) if card else None for card in layout.cells] == entry["cells"]
    assert sorted(
        [card for column in entry["tableau"] for card in column] + [card for card in entry["cells"] if card]
    ) == sorted(str(card) for card in ALL_CARDS)


def test_deal_vectors_file_is_what_the_generator_writes() -> None:
    from tests.engine.make_deal_vectors import build, render

    assert VECTORS_PATH.read_text(encoding="utf-8") == render(build())


def test_card_texts_in_vectors_parse() -> None:
    for entry in load_vectors():
        assert {Card.parse(text) for text in entry["deck"]} == ALL_CARDS
