"""The bot fields: ``hello``'s ``bot``, ``leaderboard``'s ``bots`` and the player object's ``bot``.

Bad input tried: ``bot``/``bots`` as a string, an integer (1 and 0, since ``bool`` is an ``int`` in
Python), null, a list and a map; ``bot: false`` on a player object, where the field is only ever
``true`` or left out.
"""

from __future__ import annotations

import pytest

import protocol
from protocol import Board, ErrorCode, HelloRequest, LeaderboardRequest, Order, ProtocolError

parse = protocol.parse_client_message
NOT_BOOLEANS: list[object] = ["true", 1, 0, None, [True], {"bot": True}]


def test_hello_bot_is_said_or_not() -> None:
    assert parse({"type": "hello", "protocol": 1}).bot is None  # type: ignore[union-attr]
    assert parse({"type": "hello", "protocol": 1, "bot": True}) == HelloRequest(bot=True)
    assert parse({"type": "hello", "protocol": 1, "bot": False}) == HelloRequest(bot=False)
    with_token = parse({"type": "hello", "protocol": 1, "token": "tok", "bot": True, "id": 4})
    assert with_token == HelloRequest("tok", None, 4, bot=True)


@pytest.mark.parametrize("value", NOT_BOOLEANS, ids=repr)
def test_hello_bot_must_be_a_boolean(value: object) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse({"type": "hello", "id": 9, "protocol": 1, "bot": value})
    assert caught.value.code is ErrorCode.BAD_REQUEST and caught.value.request_id == 9
    assert caught.value.message.startswith("bot must be true or false, not ")


def test_leaderboard_bots_defaults_to_the_peoples_board() -> None:
    assert parse({"type": "leaderboard", "board": "variant"}).bots is False  # type: ignore[union-attr]
    for board in Board:
        fields: dict[object, object] = {"type": "leaderboard", "board": board.value, "bots": True}
        if board is Board.DEAL:
            fields["code"] = "EO1-C8-AAAAAFA"
        if board is Board.RATING:  # bots race unrated: the rating board has no bots' twin
            with pytest.raises(ProtocolError, match="bots race unrated"):
                parse(fields)
            assert parse({**fields, "bots": False}).bots is False  # type: ignore[union-attr]
            continue
        request = parse(fields)
        assert isinstance(request, LeaderboardRequest) and request.bots is True


@pytest.mark.parametrize("value", NOT_BOOLEANS, ids=repr)
def test_leaderboard_bots_must_be_a_boolean(value: object) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse({"type": "leaderboard", "id": "b", "board": "players", "bots": value})
    assert caught.value.code is ErrorCode.BAD_REQUEST and caught.value.request_id == "b"
    assert caught.value.message.startswith("bots must be true or false, not ")


@pytest.mark.parametrize(
    "request_",
    [
        HelloRequest(bot=True),
        HelloRequest("tok", bot=False),
        LeaderboardRequest(Board.PLAYERS, order=Order.WINS, bots=True),
    ],
    ids=repr,
)
def test_bot_fields_round_trip_through_to_wire(request_: protocol.ClientMessage) -> None:
    assert parse(request_.to_wire()) == request_


def test_player_says_bot_only_for_a_bot() -> None:
    assert protocol.Player.of("p", "Ann", bot=False).to_wire() == {"id": "p", "name": "Ann"}
    assert protocol.Player.of("b", "solver", bot=True).to_wire() == {"id": "b", "name": "solver", "bot": True}
    assert protocol.Player("p", "Ann") == protocol.Player.of("p", "Ann", bot=False)  # v1's two fields


def _welcome(player: dict[str, object]) -> dict[str, object]:
    server = {"version": "1", "node": "n"}
    return {"type": "welcome", "player": player, "server": server, "games": []}


def test_the_checker_takes_bot_true_or_nothing() -> None:
    protocol.validate_server_message(_welcome({"id": "p", "name": "Ann"}))
    protocol.validate_server_message(_welcome({"id": "b", "name": "solver", "bot": True}))
    for value in (False, "true", 1, None):
        with pytest.raises(ValueError, match="bot"):
            protocol.validate_server_message(_welcome({"id": "b", "name": "solver", "bot": value}))
