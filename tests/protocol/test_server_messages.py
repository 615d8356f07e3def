"""Server messages as values: wire forms the checker accepts, values taken from the engine, and one
table of types that the checker agrees with."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import pytest

import protocol
from engine import ALL_CARDS, FOUNDATION_ORDER, UNDO, Deal, Game, Move
from protocol import server_messages
from protocol.checks import checked_fields
from tests.support.wire import WINNING_LINE, sample_server_messages, sample_server_values

PLAYER = protocol.Player("p_1", "Ann")
STARTED = protocol.parse_timestamp("2026-11-30T04:48:59.123Z")


def test_card_text_matches_the_engine_for_every_card() -> None:
    assert all(protocol.card_text(card) == card.symbol() for card in ALL_CARDS)


@pytest.mark.parametrize("cells", [8, 4, 2])
def test_layout_fields_are_the_deal_in_wire_form(cells: int) -> None:
    deal = Deal(12345, cells)
    layout = deal.layout()
    fields = protocol.layout_fields(layout)
    assert fields["tableau"] == [[card.symbol() for card in column] for column in layout.columns]
    assert fields["cells"] == [card.symbol() if card else None for card in layout.cells]
    assert fields["foundations"] == {"S": None, "H": None, "D": None, "C": None}
    assert len(layout.cells) == cells


@pytest.mark.parametrize("cells", [8, 4, 2])
def test_snapshot_of_a_new_game_is_valid(cells: int) -> None:
    game = Game(Deal(987654321, cells))
    snapshot = protocol.Snapshot.of("g_1", game, player=PLAYER, started_at=STARTED, request_id="r1").to_wire()
    protocol.validate_server_message(snapshot)
    assert snapshot["id"] == "r1"
    assert (snapshot["v"], snapshot["score"], snapshot["moves"], snapshot["status"]) == (0, 0, 0, "playing")
    assert snapshot["code"] == game.deal.code()


def test_snapshot_without_request_id_has_no_id() -> None:
    snapshot = protocol.Snapshot.of("g_1", Game(Deal(1)), player=PLAYER, started_at=STARTED).to_wire()
    assert "id" not in snapshot


def test_snapshot_lists_foundation_tops() -> None:
    game = Game.from_code("EO1-C8-AAAAAFA")
    for text in ["t8-t6", "t4-t2", "t8-c8", "t8-c7", "t8-c6", "t8-c5", "c2-t8", "t1-t8:2", "t4-t1"]:
        game.play(Move.parse(text))
    heights = game.layout().foundations
    snapshot = protocol.Snapshot.of("g_1", game, player=PLAYER, started_at=STARTED).to_wire()
    protocol.validate_server_message(snapshot)
    for suit, height in zip("SHDC", heights, strict=True):
        expected = None if height == 0 else "A23456789TJQK"[height - 1] + suit
        assert snapshot["foundations"][suit] == expected  # type: ignore[index]


def _game_with_a_foundation_card() -> tuple[Game, Move]:
    """A game where some card can go onto its foundation, and that move."""
    for number in range(200):
        game = Game(Deal(number, 8))
        for move in game.legal_moves:
            if move.target.symbol().startswith("f"):
                return game, move
    raise AssertionError("no deal with an ace on top in 200 deals")


def test_ack_and_diff_describe_the_action_after_it() -> None:
    game, move = _game_with_a_foundation_card()
    transfer = game.play(move)
    ack = protocol.Ack.of("g_1", game, transfer, 42).to_wire()
    diff = protocol.Diff.of("g_1", game, transfer).to_wire()
    protocol.validate_server_message(ack)
    protocol.validate_server_message(diff)
    assert (
        ack["ops"]
        == diff["ops"]
        == [{"cards": [transfer.cards[0].symbol()], "from": move.source.symbol(), "to": move.target.symbol()}]
    )
    assert (ack["v"], ack["score"], ack["moves"], ack["status"]) == (1, 10, 1, "playing")
    assert ack["id"] == 42 and "id" not in diff
    assert {key: value for key, value in ack.items() if key not in ("type", "id")} == {
        key: value for key, value in diff.items() if key != "type"
    }


def test_ack_without_request_id_has_no_id() -> None:
    game, move = _game_with_a_foundation_card()
    assert "id" not in protocol.Ack.of("g_1", game, game.play(move), None).to_wire()


def test_undo_of_a_foundation_move_carries_the_new_top() -> None:
    game, move = _game_with_a_foundation_card()
    game.play(move)
    transfer = game.play(UNDO)
    diff = protocol.Diff.of("g_1", game, transfer).to_wire()
    protocol.validate_server_message(diff)
    ops = diff["ops"]
    assert isinstance(ops, list)
    (op,) = ops
    assert op == {
        "cards": [transfer.cards[0].symbol()],
        "from": move.target.symbol(),
        "to": move.source.symbol(),
        "top": None,
    }
    assert diff["v"] == 2 and diff["score"] == 0 and diff["moves"] == 0


def test_ops_top_is_the_card_under_the_one_taken() -> None:
    game = Game.from_code("EO1-C8-AAAAAFA")
    for text in WINNING_LINE:
        game.play(Move.parse(text))
        height = game.layout().foundations[1]  # hearts
        takebacks = [move for move in game.legal_moves if move.source.symbol() == "fH"]
        if height >= 2 and takebacks:
            break
    else:
        raise AssertionError("the line never allows taking back a heart above the ace")
    ops = protocol.Diff.of("g_1", game, game.play(takebacks[0])).to_wire()["ops"]
    assert isinstance(ops, list)
    (op,) = ops
    rank = "A23456789TJQK"
    assert op == {
        "cards": [rank[height - 1] + "H"],
        "from": "fH",
        "to": takebacks[0].target.symbol(),
        "top": rank[height - 2] + "H",
    }


def test_every_sample_of_every_type_is_valid() -> None:
    messages = sample_server_messages()
    assert {message["type"] for message in messages} == set(protocol.SERVER_MESSAGE_TYPES)
    for message in messages:
        protocol.validate_server_message(message)


def test_welcome_sends_the_token_only_when_given() -> None:
    server = protocol.ServerInfo("1", "n")
    assert "token" not in protocol.Welcome(player=PLAYER, server=server, games=()).to_wire()
    assert protocol.Welcome(player=PLAYER, server=server, games=(), token="t").to_wire()["token"] == "t"


def test_player_row_win_rate() -> None:
    assert protocol.PlayerRow(1, PLAYER, played=4, won=3, best_score=0).to_wire()["win_rate"] == 0.75
    assert protocol.PlayerRow(1, PLAYER, played=0, won=0, best_score=0).to_wire()["win_rate"] == 0.0


def test_profile_win_rate_and_streak() -> None:
    message = protocol.Profile(
        player=PLAYER, played=8, won=2, best_score=935, best=(), streak=protocol.Streak(1, 3), recent=()
    ).to_wire()
    protocol.validate_server_message(message)
    assert message["win_rate"] == 0.25 and message["streak"] == {"current": 1, "best": 3}


def test_error_cuts_long_messages_and_refuses_unknown_codes() -> None:
    reply = protocol.ErrorReply(
        code=protocol.ErrorCode.BAD_REQUEST, message="x" * 1000, request_id=1
    ).to_wire()
    assert len(reply["message"]) == 200  # type: ignore[arg-type]
    protocol.validate_server_message(reply)
    with pytest.raises(ValueError):
        protocol.ErrorReply(code="oops", message="no such code")  # type: ignore[arg-type]


def test_foundations_are_keyed_by_suit_letter_in_engine_order() -> None:
    foundations = protocol.layout_fields(Deal(0).layout())["foundations"]
    assert list(foundations) == ["S", "H", "D", "C"]  # type: ignore[call-overload]
    assert [item.name for item in dataclasses.fields(protocol.Foundations)] == [
        suit.value for suit in FOUNDATION_ORDER
    ]


# --------------------------------------------------------------------------- the one table


def test_the_table_maps_each_type_to_its_frozen_slotted_class() -> None:
    for kind, cls in protocol.SERVER_MESSAGE_TYPES.items():
        assert kind == cls.TYPE
        params = cls.__dict__["__dataclass_params__"]
        assert params.frozen and "__slots__" in cls.__dict__, kind


def test_the_checker_expects_exactly_the_fields_of_the_table() -> None:
    checked = checked_fields()
    assert set(checked) == set(protocol.SERVER_MESSAGE_TYPES)
    for kind, cls in protocol.SERVER_MESSAGE_TYPES.items():
        assert checked[kind] == cls.wire_fields(), kind


def test_every_sample_sends_its_required_fields_and_only_its_fields() -> None:
    for value in sample_server_values():
        wire = value.to_wire()
        required, optional = value.wire_fields()
        assert wire["type"] == value.TYPE and next(iter(wire)) == "type"
        assert required <= wire.keys() - {"type"} <= required | optional, wire


def test_a_value_is_immutable_and_renders_the_same_each_time() -> None:
    game, move = _game_with_a_foundation_card()
    ack = protocol.Ack.of("g_1", game, game.play(move), 1)
    first = ack.to_wire()
    game.play(UNDO)  # the game moves on: the ack holds what it said
    assert ack.to_wire() == first and ack.v == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        ack.v = 2  # type: ignore[misc]


def test_a_field_type_with_no_wire_form_is_refused() -> None:
    """A new message with a field the wire cannot carry fails when its class is made (at import)."""

    with pytest.raises(TypeError, match="no wire form"):

        @server_messages._wire_value
        @dataclasses.dataclass(frozen=True, slots=True)
        class Odd(server_messages._Value):
            TYPE: ClassVar[str] = "odd"
            values: set[int]


def test_optional_fields_are_left_out_only_when_none() -> None:
    page = protocol.LivePage(games=(), next_cursor="")  # empty, not None: sent
    assert page.to_wire() == {"type": "live", "games": [], "next": ""}
    assert protocol.Ok(request_id=0).to_wire() == {"type": "ok", "id": 0}
    snapshot = protocol.Snapshot.of("g_1", Game(Deal(5, 8)), player=PLAYER, started_at=STARTED).to_wire()
    assert snapshot["cells"][4:] == [None] * 4  # type: ignore[index]  # empty cells: null, never left out
    assert snapshot["foundations"] == {"S": None, "H": None, "D": None, "C": None}
