"""Playing through the API over real WebSockets, in both subprotocols and on both databases."""

from __future__ import annotations

import asyncio

import pytest

from engine import Deal, Foundation, Game
from solver import solve_deal
from tests.support.board import ClientBoard
from tests.support.wire import move_fields
from tests.support.wsclient import SUBPROTOCOLS, WsClient, player

WINNABLE = "EO1-C8-AAAAAAB"


@pytest.mark.parametrize("subprotocol", SUBPROTOCOLS)
async def test_full_game_won_with_two_spectators(url: str, subprotocol: str) -> None:
    """A solver's moves win a deal; spectators replay every diff and get game_over after the last one."""
    solution = list(solve_deal(Deal.from_code(WINNABLE)).moves)
    assert solution
    owner = await player(url, subprotocol, name="winner")
    snapshot = await owner.request("new_game", code=WINNABLE)
    game_id = snapshot["game"]
    spectators = [await player(url, sub) for sub in SUBPROTOCOLS]
    copies = []
    for spectator in spectators:
        first = await spectator.request("watch", game=game_id)
        assert first["type"] == "snapshot"
        copies.append(ClientBoard(first))

    for index, move in enumerate(solution):
        # Mix the ways of moving: taps for foundation moves with an even index, plain moves otherwise.
        if isinstance(move.target, Foundation) and index % 2 == 0:
            reply = await owner.request("tap", game=game_id, **{"from": move.source.symbol()}, v=index)
        else:
            reply = await owner.request("move", game=game_id, **move_fields(move), v=index)
        assert reply["type"] == "ack", reply
        assert reply["v"] == index + 1
    assert reply["status"] == "won"
    over = await owner.recv()
    assert over["type"] == "game_over" and over["won"] is True and over["moves"] == len(solution)
    assert over["score"] == 52 * 10 + 5 * sum(
        1 for m in solution if m.source.symbol()[0] == "c" and m.target.symbol()[0] == "t"
    )

    for spectator, board in zip(spectators, copies, strict=True):
        for _ in solution:
            board.apply(await spectator.next_push())
        end = await spectator.next_push()
        assert end["type"] == "game_over" and end["won"] is True
        assert board.status == "won" and all(board.foundations[suit] == f"K{suit}" for suit in "SHDC")
        fresh = await spectator.request("watch", game=game_id)  # a finished game is still visible
        assert board.matches(fresh)
    for client in (owner, *spectators):
        await client.close()


async def test_undo_limit_over_the_api(url: str) -> None:
    """100 undos in a row work after 101 actions; the 101st is refused with illegal_move."""
    client = await player(url)
    game = (await client.request("new_game", code="EO1-C8-AAAAAFA"))["game"]
    for index in range(101):
        to = "c5" if index % 2 == 0 else "t1"
        source = "t1" if index % 2 == 0 else "c5"
        ack = await client.request("move", game=game, **{"from": source, "to": to})
        assert ack["type"] == "ack", ack
    for _ in range(100):
        assert (await client.request("undo", game=game))["type"] == "ack"
    refused = await client.request("undo", game=game)
    assert refused["type"] == "error" and refused["code"] == "illegal_move"
    assert "100" in refused["message"]
    await client.close()


async def test_reconnect_resume_and_stale_retry(url: str) -> None:
    """A player reconnects with its token, finds its game, and a retried request with an old v is refused."""
    first = await player(url, name="bea")
    token = first.token
    game = (await first.request("new_game", code="EO1-C4-AAAAAAC"))["game"]  # a C4 deal with a legal move
    snapshot = await first.request("resume", game=game)
    legal = next(iter(Game.from_code(snapshot["code"]).legal_moves))
    ack = await first.request("move", game=game, **move_fields(legal), v=0)
    assert ack["type"] == "ack"
    await first.close()

    again = await WsClient.open(url)
    welcome = await again.hello(token=token)
    assert welcome["player"] == first.player and "token" not in welcome
    assert welcome["games"] == [game]
    resumed = await again.request("resume", game=game)
    assert resumed["v"] == 1 and resumed["moves"] == 1
    retry = await again.request("move", game=game, **move_fields(legal), v=0)
    assert retry["type"] == "error" and retry["code"] == "stale"
    assert (await again.request("resume", game=game))["v"] == 1  # nothing changed
    await again.close()


async def test_only_the_owner_acts(url: str) -> None:
    owner = await player(url)
    stranger = await player(url)
    game = (await owner.request("new_game", code="EO1-C8-AAAAAFA"))["game"]
    await stranger.request("watch", game=game)
    for type_, fields in [
        ("move", {"from": "t1", "to": "c5"}),
        ("tap", {"from": "t1"}),
        ("auto", {"from": "t1"}),
        ("undo", {}),
        ("resign", {}),
        ("resume", {}),
    ]:
        refused = await stranger.request(type_, game=game, **fields)
        assert refused["type"] == "error" and refused["code"] == "forbidden", (type_, refused)
    assert (await owner.request("resume", game=game))["v"] == 0
    await owner.close()
    await stranger.close()


async def test_hello_first_and_once(url: str) -> None:
    client = await WsClient.open(url)
    refused = await client.request("new_game")
    assert refused["code"] == "unauthorized"
    bad_token = await client.request("hello", protocol=1, token="no-such-token")
    assert bad_token["code"] == "unauthorized"
    await client.hello()
    again = await client.request("hello", protocol=1)
    assert again["code"] == "bad_request"
    await client.close()


async def test_resign_sends_game_over_to_everyone(url: str) -> None:
    owner = await player(url)
    other_tab = await WsClient.open(url)
    await other_tab.hello(token=owner.token)
    spectator = await player(url)
    game = (await owner.request("new_game"))["game"]  # not the daily: sealed to this spectator
    await other_tab.request("resume", game=game)
    await spectator.request("watch", game=game)
    over = await owner.request("resign", game=game)
    assert over["type"] == "game_over" and over["won"] is False
    for client in (other_tab, spectator):
        pushed = await client.next_push()
        assert pushed["type"] == "game_over" and pushed["game"] == game
    refused = await owner.request("move", game=game, **{"from": "t1", "to": "c5"})
    assert refused["code"] == "illegal_move"
    for client in (owner, other_tab, spectator):
        await client.close()


async def test_other_connections_of_the_player_get_diffs_in_order(url: str) -> None:
    owner = await player(url)
    tab = await WsClient.open(url)
    await tab.hello(token=owner.token)
    snapshot = await owner.request("new_game", code="EO1-C8-AAAAAFA")
    board = ClientBoard(await tab.request("resume", game=snapshot["game"]))
    for index in range(20):
        fields = {"from": "t1", "to": "c5"} if index % 2 == 0 else {"from": "c5", "to": "t1"}
        await owner.request("move", game=snapshot["game"], **fields)
    for _ in range(20):
        board.apply(await tab.next_push())
    assert board.matches(await owner.request("resume", game=snapshot["game"]))
    await owner.close()
    await tab.close()


async def test_daily_game_is_the_same_for_everyone(url: str) -> None:
    first, second = await player(url), await player(url)
    a = await first.request("new_game", daily=True)
    b = await second.request("new_game", daily=True)
    assert a["code"] == b["code"] and a["game"] != b["game"]
    await asyncio.gather(first.close(), second.close())


async def test_live_lists_games_being_played(url: str) -> None:
    clients = [await player(url) for _ in range(3)]
    games = [(await client.request("new_game"))["game"] for client in clients]
    page = await clients[0].request("live", limit=2)
    assert page["type"] == "live" and len(page["games"]) == 2 and "next" in page
    rest = await clients[0].request("live", limit=2, after=page["next"])
    listed = [entry["game"] for entry in page["games"] + rest["games"]]
    assert sorted(listed) == sorted(games) and "next" not in rest
    for client in clients:
        await client.close()
