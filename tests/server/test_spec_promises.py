"""What protocol/README.md promises a client written from it alone, tried over real connections.

- Every `valid` vector of protocol/vectors/client_messages.json is served: none is refused as
  `bad_request`; each gets its reply type, or an error about the game, player or token it names
  (`not_found`, `forbidden`, `unauthorized`), and on a game of the player's own its reply, or
  `illegal_move` or `stale` from the rules and the version.
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

from server.clock import utc_now
from server.services import rankings
from server.storage import pruning
from tests.support.board import ClientBoard
from tests.support.wsclient import SUBPROTOCOLS, WsClient


@pytest.fixture
def database_url(sqlite_database_url: str) -> str:
    """SQLite alone: what is promised here is the protocol's, answered the same on either backend;
    the storage of the games it plays is tested on both elsewhere (test_play, tests/storage)."""
    return sqlite_database_url


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
    "replay": "replay",
    "hint": "hint",
    "live": "live",
    "leaderboard": "leaderboard",
    "profile": "profile",
    "games": "games",
    "race_create": "race",
    "race_join": "race",
    "race_watch": "race",
    "race_ready": "ok",
    "race_start": "ok",
    "race_leave": "ok",
    "race_rematch": "race",
    "quick_race": "ok",
    "quick_race_leave": "ok",
}
#: The errors a valid vector may get as it stands: about what it names (its game `7Kq2XwbT9m-Ls4fR`,
#: player `3fQ9Lk2vBn8sZ1wD`, race `Rc4Vn8Lq2Ztp0aXe`, invitation code and token do not exist on a
#: fresh server), never about its form.
NAMED_STATE_ERRORS = {"not_found", "forbidden", "unauthorized"}
#: ... and when it names a game of the player's own: what the rules or the version say.
OWN_GAME_ERRORS = {"illegal_move", "stale"}


def test_every_request_type_has_its_reply_here() -> None:
    assert {case["message"]["type"] for case in VECTORS["valid"]} == set(REPLIES)


async def served_reply(client: WsClient, case: dict[str, Any], message: dict[str, Any]) -> dict[str, Any]:
    """The reply to ``message``: the expected type, or an error a valid message may get."""
    await client.send(message)
    reply = await client.recv()  # nobody else acts on these games: no push comes first
    assert reply.get("id") == message.get("id"), (case["name"], reply)
    if reply["type"] == "error":
        allowed = NAMED_STATE_ERRORS if message == case["message"] else OWN_GAME_ERRORS
        assert reply["code"] in allowed, (case["name"], reply)
    else:
        assert reply["type"] == REPLIES[message["type"]], (case["name"], reply)
    return reply


def _closed_bucket(message: dict[str, Any]) -> bool:
    """Whether ``message`` pages a day or week board from a cursor pinning a bucket older than the
    previous one: only the current and previous buckets are kept, so a vector's cursor, made on a
    fixed day, is refused ``not_found`` once that day is two days old (`server.storage.pruning`)."""
    period = message.get("period")
    if (
        message["type"] != "leaderboard"
        or message.get("board") in ("daily", "rating")
        or period not in ("day", "week")
    ):
        return False
    day, _, _ = rankings._decode_cursor_head(message["after"])
    return not pruning.is_kept(period, day, utc_now().date())


@pytest.mark.parametrize("subprotocol", SUBPROTOCOLS)
async def test_valid_vectors_are_served_never_refused_as_bad_request(url: str, subprotocol: str) -> None:
    """Each `hello` on a connection of its own; the quick match vectors on one of a player in no race
    (the served player holds seats of the `race_create` vectors, and quick match refuses a seated
    player); every other vector on one that said hello, as it is and, when it names a game, once
    more on a fresh game of the player's own."""
    served = await WsClient.open(url, subprotocol)
    await served.hello()
    quick = await WsClient.open(url, subprotocol)
    await quick.hello()
    for case in VECTORS["valid"]:
        message = case["message"]
        if message["type"] in ("quick_race", "quick_race_leave"):
            await served_reply(quick, case, message)
            continue
        if message["type"] == "hello":
            newcomer = await WsClient.open(url, subprotocol)
            await served_reply(newcomer, case, message)
            await newcomer.close()
            continue
        reply = await served_reply(served, case, message)
        if "after" in message:  # a server-made cursor pages on (a made-up one was a bad_request)
            if _closed_bucket(message):  # a day or week board's cursor of a bucket no longer kept
                assert (reply["type"], reply.get("code")) == ("error", "not_found"), (case["name"], reply)
                assert "no longer kept" in reply["message"], (case["name"], reply)
            else:
                assert reply["type"] in ("live", "leaderboard", "games"), (case["name"], reply)
        if "game" in message:
            own = (await served.request("new_game", code="EO1-C8-AAAAAFA"))["game"]
            await served_reply(served, case, {**message, "game": own})
            assert (await served.request("unwatch", game=own))["type"] == "ok"  # under the games limit
        elif message["type"] == "new_game":
            await served.request("unwatch", game=reply["game"])
    assert (await served.request("live"))["type"] == "live"  # still serving
    await served.close()
    await quick.close()


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
    copy = ClientBoard(await spectator.request("watch", game=game))
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
