"""Cards and suits: text round trips, case, repr, and the errors bad text gets."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import engine
from engine import ALL_CARDS, Card, InvalidNotationError, Rank, Suit
from engine.cards import SHUFFLE_ORDER

ENGINE_NAMES: dict[str, Any] = {name: getattr(engine, name) for name in engine.__all__}
CARD_TEXTS = [rank + suit for suit in "SHDC" for rank in "A23456789TJQK"]


def flip_case(text: str, mask: int) -> str:
    return "".join(ch.swapcase() if mask >> i & 1 else ch for i, ch in enumerate(text))


def test_card_deck_has_52_distinct_cards_in_shuffle_order() -> None:
    assert len(SHUFFLE_ORDER) == 52
    assert set(SHUFFLE_ORDER) == ALL_CARDS
    assert [str(card) for card in SHUFFLE_ORDER[:14]] == [
        "AC",
        "2C",
        "3C",
        "4C",
        "5C",
        "6C",
        "7C",
        "8C",
        "9C",
        "TC",
        "JC",
        "QC",
        "KC",
        "AD",
    ]
    assert [str(card) for card in SHUFFLE_ORDER[-2:]] == ["QS", "KS"]


@pytest.mark.parametrize("text", CARD_TEXTS)
def test_card_parse_format_round_trip(text: str) -> None:
    card = Card.parse(text)
    assert card.symbol() == text
    assert str(card) == text
    assert Card.parse(str(card)) is card
    assert card == Card(Rank("A23456789TJQK".index(text[0]) + 1), Suit(text[1]))


@given(st.sampled_from(CARD_TEXTS), st.integers(0, 3))
def test_card_parse_is_case_insensitive(text: str, mask: int) -> None:
    assert Card.parse(flip_case(text, mask)) == Card.parse(text)
    assert str(Card.parse(flip_case(text, mask))) == text


@given(st.sampled_from(sorted(ALL_CARDS, key=str)))
def test_card_repr_pastes_back(card: Card) -> None:
    assert eval(repr(card), ENGINE_NAMES) == card
    assert repr(card) == f"Card.parse({str(card)!r})"


def test_card_values_compare_and_hash_equal() -> None:
    assert Card(Rank.TEN, Suit.DIAMONDS) == Card.parse("td")
    assert hash(Card(Rank.TEN, Suit.DIAMONDS)) == hash(Card.parse("TD"))
    assert len({Card.parse("qh"), Card.parse("QH"), Card(Rank.QUEEN, Suit.HEARTS)}) == 1
    with pytest.raises(AttributeError):
        Card.parse("QH").rank = Rank.KING  # type: ignore[misc]


BAD_CARD_TEXTS: list[object] = [
    "",
    "1S",
    "TX",
    "T",
    "TDD",
    "10D",
    " TD",
    "TD ",
    "D T",
    "DT",
    "??",
    "Aſ",
    "ıS",
    "ＴＤ",
    "TD" * 5000,
    None,
    5,
    1.5,
    b"TD",
    ["T", "D"],
    ("T", "D"),
    Card.parse("TD"),
]


@pytest.mark.parametrize("bad", BAD_CARD_TEXTS, ids=lambda bad: repr(bad)[:20])
def test_card_parse_refuses_bad_text(bad: object) -> None:
    with pytest.raises(InvalidNotationError, match="not a card") as raised:
        Card.parse(bad)  # type: ignore[arg-type]
    message = str(raised.value)
    assert "rank A 2-9 T J Q K" in message
    assert repr(bad)[:10] in message
    assert len(message) < 200  # untrusted input is never echoed whole


@given(st.text(max_size=4))
def test_card_parse_accepts_only_the_52_texts(text: str) -> None:
    if text.upper() in CARD_TEXTS and text.isascii():
        assert str(Card.parse(text)) == text.upper()
    else:
        with pytest.raises(InvalidNotationError):
            Card.parse(text)


@pytest.mark.parametrize("text", ["S", "h", "D", "c"])
def test_suit_parse_round_trip(text: str) -> None:
    suit = Suit.parse(text)
    assert suit.value == text.upper()
    assert Suit(suit.value) is suit


@pytest.mark.parametrize("bad", ["", "X", "SS", "s ", "ſ", None, 3, b"S"], ids=repr)
def test_suit_parse_refuses_bad_text(bad: object) -> None:
    with pytest.raises(InvalidNotationError, match="not a suit"):
        Suit.parse(bad)  # type: ignore[arg-type]


def test_rank_symbols_and_order() -> None:
    assert "".join(rank.symbol for rank in Rank) == "A23456789TJQK"
    assert Rank.ACE < Rank.TWO < Rank.TEN < Rank.JACK < Rank.QUEEN < Rank.KING
    assert [int(rank) for rank in Rank] == list(range(1, 14))
