"""Client requests: values after parsing, engine actions they ask for, and their wire round trip."""

from __future__ import annotations

import datetime as dt

import pytest

import protocol
from engine import UNDO, Cell, Column, Deal, Foundation, Game, IllegalMoveError, Move, Suit
from protocol import (
    OWN_FOUNDATION,
    AutoRequest,
    Board,
    ErrorCode,
    HelloRequest,
    LeaderboardRequest,
    MoveRequest,
    NewGameRequest,
    Order,
    Period,
    ProtocolError,
    TapRequest,
    UndoRequest,
)

parse = protocol.parse_client_message


def test_move_request_holds_engine_piles() -> None:
    request = parse({"type": "move", "id": 1, "game": "g", "from": "fH", "to": "t8", "n": 1, "v": 0})
    assert request == MoveRequest("g", Foundation(Suit.HEARTS), Column(8), 1, 0, 1)


def test_bare_f_is_the_own_foundation_sentinel() -> None:
    request = parse({"type": "move", "game": "g", "from": "c2", "to": "f"})
    assert isinstance(request, MoveRequest)
    assert request.target is OWN_FOUNDATION and repr(OWN_FOUNDATION) == "OWN_FOUNDATION"
    assert request.to_wire() == {"type": "move", "game": "g", "from": "c2", "to": "f"}


def test_own_foundation_resolves_to_the_top_card_suit() -> None:
    game = Game.from_code("EO1-C8-AAAAAFA")
    piles: list[Column | Cell] = [*(Column(i) for i in range(1, 9)), *(Cell(i) for i in range(1, 5))]
    for pile in piles:
        card = game.top_card(pile)
        assert card is not None
        request = MoveRequest("g", pile, OWN_FOUNDATION)
        assert request.action(game) == Move(pile, Foundation(card.suit))


def test_own_foundation_from_an_empty_pile_is_illegal() -> None:
    game = Game.from_code("EO1-C8-AAAAAFA")
    with pytest.raises(IllegalMoveError):
        MoveRequest("g", Cell(8), OWN_FOUNDATION).action(game)


def test_named_target_passes_through_unchanged() -> None:
    game = Game.from_code("EO1-C8-AAAAAFA")
    assert MoveRequest("g", Column(1), Column(2), 3).action(game) == Move(Column(1), Column(2), 3)


def test_tap_auto_undo_ask_the_engine() -> None:
    game = Game.from_code("EO1-C8-AAAAAFA")
    assert UndoRequest("g").action(game) is UNDO
    with pytest.raises(IllegalMoveError):
        TapRequest("g", Cell(8)).action(game)  # an empty cell
    move = AutoRequest("g", Column(1)).action(game)
    assert move.source == Column(1) and game.is_legal(move)
    assert move == game.double_tap_move(Column(1))


def test_hello_defaults_and_names() -> None:
    assert parse({"type": "hello", "protocol": 1}) == HelloRequest()
    for name in ("A", "Ann Lee", "a\u00a0b", "李小龍", "👩\u200d💻", "n" * 32):
        assert parse({"type": "hello", "protocol": 1, "name": name}) == HelloRequest(name=name)


def test_new_game_resolves_the_variant() -> None:
    assert parse({"type": "new_game"}) == NewGameRequest(None, 8, False)
    assert parse({"type": "new_game", "code": " eo1-c2-aaaaafa "}) == NewGameRequest(
        Deal.from_code("EO1-C2-AAAAAFA"), 2
    )
    assert parse({"type": "new_game", "daily": True, "cells": 4}) == NewGameRequest(None, 4, True)


def test_leaderboard_defaults_per_board() -> None:
    assert parse({"type": "leaderboard", "board": "players"}) == LeaderboardRequest(
        Board.PLAYERS, order=Order.WINS, period=Period.ALL
    )
    assert parse({"type": "leaderboard", "board": "variant"}) == LeaderboardRequest(
        Board.VARIANT, cells=8, order=Order.MOVES
    )
    daily = parse({"type": "leaderboard", "board": "daily", "date": "2026-11-30"})
    assert daily == LeaderboardRequest(Board.DAILY, cells=8, date=dt.date(2026, 11, 30), period=None)
    deal = parse({"type": "leaderboard", "board": "deal", "code": "EO1-C4-AAAAAFA", "period": "week"})
    assert deal == LeaderboardRequest(
        Board.DEAL, Deal.from_code("EO1-C4-AAAAAFA"), cells=4, period=Period.WEEK
    )


@pytest.mark.parametrize(
    "request_",
    [
        HelloRequest("tok", "Ann", 1),
        NewGameRequest(Deal(5, 4), 4, False, "x"),
        NewGameRequest(None, 2, True),
        MoveRequest("g", Cell(1), OWN_FOUNDATION, 1, 3, 0),
        MoveRequest("g", Column(1), Column(2), 4),
        TapRequest("g", Column(3), 9),
        AutoRequest("g", Column(3), 5),
        UndoRequest("g", 2, 2),
        protocol.ResignRequest("g", 1),
        protocol.ResumeRequest("g"),
        protocol.WatchRequest("g", "w"),
        protocol.UnwatchRequest("g"),
        protocol.LiveRequest(100, "cur"),
        LeaderboardRequest(Board.DAILY, cells=2, date=dt.date(2026, 1, 2), period=None, order=Order.SCORE),
        LeaderboardRequest(Board.DEAL, Deal(7, 8), 8, around="p1"),
        LeaderboardRequest(Board.PLAYERS, order=Order.WINS, period=Period.DAY, limit=5, after="c"),
        protocol.ProfileRequest(),
        protocol.ProfileRequest("p_1", request_id=3),
        protocol.ReplayRequest("g_1"),
        protocol.ReplayRequest("g_1", since=500, request_id=4),
    ],
    ids=lambda request: request.TYPE,
)
def test_to_wire_parses_back_to_the_same_request(request_: protocol.ClientMessage) -> None:
    assert parse(request_.to_wire()) == request_


def test_client_message_types_in_readme_order() -> None:
    assert list(protocol.CLIENT_MESSAGE_TYPES) == [
        "hello", "new_game", "move", "tap", "auto", "undo", "resign", "resume", "watch", "unwatch", "replay",
        "hint", "live", "leaderboard", "profile", "games",
        "race_create", "race_join", "race_watch", "race_ready", "race_start", "race_leave", "race_rematch",
        "quick_race", "quick_race_leave",
    ]  # fmt: skip


def test_requests_are_frozen() -> None:
    request = parse({"type": "watch", "game": "g"})
    assert isinstance(request, protocol.WatchRequest)
    with pytest.raises(AttributeError):
        request.game = "h"  # type: ignore[misc]


def test_error_keeps_the_id_once_read() -> None:
    with pytest.raises(ProtocolError) as caught:
        parse({"type": "move", "id": "abc", "game": "g", "from": "t1", "to": "t2", "n": 99})
    assert (caught.value.code, caught.value.request_id) == (ErrorCode.BAD_REQUEST, "abc")


def test_error_messages_stay_short_whatever_the_input() -> None:
    with pytest.raises(ProtocolError) as caught:
        parse({"type": "move", "game": "g", "from": "t1", "to": "t2", "k" * 5000: 1})
    assert len(caught.value.message) < 120
    with pytest.raises(ProtocolError) as caught:
        parse({"type": "hello", "protocol": 1, "token": "x" * 5000})
    assert len(caught.value.message) < 120
