"""Every refusal arrives as the exception of its documented code, carrying the code and the server's
message, and the connection goes on after it."""

from __future__ import annotations

import pytest

import eightoff_client
from eightoff_client import BadRequest, Forbidden, IllegalMove, NotFound, ServerError, Unauthorized
from tests.client.conftest import winnable_code


async def test_refusals_raise_the_exception_of_their_code(url: str) -> None:
    async with (
        eightoff_client.connect(url, name="Owner") as owner,
        eightoff_client.connect(url, name="Intruder") as intruder,
    ):
        board = await owner.new_game(code=winnable_code(0))
        with pytest.raises(IllegalMove) as illegal:  # a King's column onto a cell that holds a card
            await owner.move(board.game, "t1", "c1")
        assert illegal.value.code == "illegal_move" and "is illegal" in illegal.value.message
        assert illegal.value.reply["type"] == "error" and board.v == 0  # nothing changed
        with pytest.raises(NotFound) as missing:  # a game id no game has
            await owner.resume("no-such-game")
        assert missing.value.code == "not_found"
        with pytest.raises(Forbidden):  # acting on another player's game
            await intruder.move(board.game, "t1", "c5")
        with pytest.raises(BadRequest, match="bad_request"):  # the deal board without its code
            await owner.leaderboard("deal")
        with pytest.raises(BadRequest):  # a malformed code, refused before any game is dealt
            await owner.new_game(code="not a code")
        assert isinstance(illegal.value, ServerError)
        ack = await owner.move(board.game, "t1", "c5")  # still connected and at v 0
        assert ack["v"] == 1


async def test_an_unknown_token_is_refused_at_connect(url: str) -> None:
    with pytest.raises(Unauthorized) as refused:
        await eightoff_client.connect(url, token="not-a-token-of-this-server", reconnect=False)
    assert refused.value.code == "unauthorized"


def test_an_unknown_code_is_a_plain_server_error() -> None:
    error = ServerError.of({"type": "error", "code": "from_the_future", "message": "new in v1.9"})
    assert type(error) is ServerError and error.code == "from_the_future"
    stale = ServerError.of({"type": "error", "id": 3, "code": "stale", "message": "game g is at v 2"})
    assert isinstance(stale, eightoff_client.Stale) and stale.message == "game g is at v 2"
