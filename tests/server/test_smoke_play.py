"""End-to-end: hello, a new game, a move, an undo, over a real WebSocket."""

from __future__ import annotations

import pytest

from tests.support.wsclient import SUBPROTOCOLS, WsClient


@pytest.mark.parametrize("subprotocol", SUBPROTOCOLS)
async def test_play_move_and_undo(url: str, subprotocol: str) -> None:
    client = await WsClient.open(url, subprotocol)
    welcome = await client.hello(name="ann")
    assert welcome["player"]["name"] == "ann" and welcome["token"]
    snapshot = await client.request("new_game", code="EO1-C8-AAAAAFA")
    assert snapshot["type"] == "snapshot" and snapshot["v"] == 0
    ack = await client.request("move", game=snapshot["game"], **{"from": "t1", "to": "c5"}, v=0)
    assert ack["type"] == "ack" and ack["v"] == 1, ack
    assert ack["ops"] == [{"cards": ["5C"], "from": "t1", "to": "c5"}]
    undo = await client.request("undo", game=snapshot["game"], v=1)
    assert undo["v"] == 2 and undo["ops"] == [{"cards": ["5C"], "from": "c5", "to": "t1"}]
    await client.close()
