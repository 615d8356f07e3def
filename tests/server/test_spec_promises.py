"""What protocol/README.md promises a client written from it alone, tried over real connections.

- Every `valid` vector of protocol/vectors/client_messages.json is served: none is refused as
  `bad_request`; each gets its reply type, or an error about the game, player or token it names.
- Precedence before `hello`: a malformed request gets its validation error (`bad_request`,
  `unsupported_version`), never `unauthorized`; only a valid request other than `hello` is
  `unauthorized`, and the connection then says hello as usual.
- A resign sends no `ack` or `diff`: a rule-free copy of the board takes its status from `game_over`
  (section 7, step 4) and matches the stored game.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from boardcopy import BoardCopy
from wsclient import SUBPROTOCOLS, WsClient

VECTORS = json.loads(
    (Path(__file__).parents[2] / "protocol" / "vectors" / "client_messages.json").read_text()
)

#: The reply each request type gets when the server serves it.
REPLIES = {
    "hello": "welcome",
    "new_game": "snapshot",
    "move": "ack",
    "tap": "ack",
    "auto": "ack",
    "undo": "ack",
    "resign": "game_over",
    "resume": "snapshot",
    "watch": "snapshot",
    "unwatch": "ok",
    "live": "live",
    "leaderboard": "leaderboard",
    "profile": "profile",
}
#: The errors a valid vector may get: about the state it names (the vectors' game `g_7Kq2-Xw`,
#: player `p_3fQ9` and token do not exist on a fresh server), never about its form.
STATE_ERRORS = {"not_found", "forbidden", "unauthorized", "illegal_move"}


def test_every_request_type_has_its_reply_here() -> None:
    assert {case["message"]["type"] for case in VECTORS["valid"]} == set(REPLIES)


@pytest.mark.parametrize("subprotocol", SUBPROTOCOLS)
async def test_valid_vectors_are_served_never_refused_as_bad_request(url: str, subprotocol: str) -> None:
    """Each `hello` on a connection of its own; every other vector on one that said hello."""
    served = await WsClient.open(url, subprotocol)
    await served.hello()
    replies: dict[str, dict[str, Any]] = {}
    for case in VECTORS["valid"]:
        message = case["message"]
        client = await WsClient.open(url, subprotocol) if message["type"] == "hello" else served
        await client.send(message)
        reply = await client.recv()
        while "id" not in reply and reply["type"] in ("diff", "game_over"):  # a push of a followed game
            reply = await client.recv()
        replies[case["name"]] = reply
        assert reply.get("id") == message.get("id"), (case["name"], reply)
        if reply["type"] == "error":
            assert reply["code"] in STATE_ERRORS, (case["name"], reply)
        else:
            assert reply["type"] == REPLIES[message["type"]], (case["name"], reply)
        if client is not served:
            await client.close()
    # the leaderboard page after a server-made cursor is served (it was refused when the vector
    # held a made-up cursor)
    paged = [name for name, case in zip(replies, VECTORS["valid"], strict=True) if "after" in case["message"]]
    assert paged and all(replies[name]["type"] in ("live", "leaderboard") for name in paged)
    assert (await served.request("live"))["type"] == "live"  # still serving
    await served.close()


@pytest.mark.parametrize("subprotocol", SUBPROTOCOLS)
async def test_malformed_request_before_hello_gets_its_error_not_unauthorized(
    url: str, subprotocol: str
) -> None:
    client = await WsClient.open(url, subprotocol)
    for case in VECTORS["invalid"]:
        await client.send(case["message"])
        reply = await client.recv()
        assert (reply["type"], reply["code"], reply.get("id")) == ("error", case["error"], case["id"]), (
            case["name"],
            reply,
        )
    frames = [
        case for case in VECTORS["frames"] if case["subprotocol"] == subprotocol and not case.get("valid")
    ]
    for case in [case for case in frames if case["close"] is None and "max_size" not in case]:
        await client.ws.send(bytes.fromhex(case["binary_hex"]) if "binary_hex" in case else case["text"])
        reply = await client.recv()
        assert (reply["code"], reply.get("id")) == (case["error"], case["id"]), (case["name"], reply)
    refused = await client.request("new_game")  # valid, but before hello
    assert (refused["type"], refused["code"]) == ("error", "unauthorized")
    await client.hello()  # none of the above used up the connection
    assert (await client.request("new_game"))["type"] == "snapshot"
    await client.close()


async def test_undecodable_frame_before_hello_is_closed_as_after_it(url: str) -> None:
    client = await WsClient.open(url, SUBPROTOCOLS[1])
    await client.ws.send("{not json")
    reply = await client.recv()
    assert (reply["type"], reply["code"]) == ("error", "bad_request")
    await client.ws.wait_closed()
    assert client.ws.close_code == 1003


async def test_a_copy_takes_the_end_of_a_resigned_game_from_game_over(url: str) -> None:
    owner = await WsClient.open(url)
    await owner.hello()
    spectator = await WsClient.open(url)
    await spectator.hello()
    game = (await owner.request("new_game", code="EO1-C8-AAAAAFA"))["game"]
    copy = BoardCopy(await spectator.request("watch", game=game))
    await owner.request("move", game=game, **{"from": "t1", "to": "c5"})
    copy.apply(await spectator.next_push())
    over = await owner.request("resign", game=game)
    assert over["type"] == "game_over" and over["won"] is False
    assert owner.pushed.empty()  # the player got no ack or diff for the resign
    pushed = await spectator.next_push()
    assert pushed["type"] == "game_over", pushed  # no diff before it: v did not change
    copy.end(pushed)
    stored = await spectator.request("watch", game=game)  # a finished game: its stored snapshot
    assert stored["status"] == "resigned" and stored["v"] == 1
    assert copy.matches(stored)
    await owner.close()
    await spectator.close()
