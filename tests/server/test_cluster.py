"""Two nodes on one PostgreSQL database and one Redis: spectators on either node see every diff of a
game played on the other, and a player moving to another node takes the game over from the database."""

from __future__ import annotations

from server.app import App
from tests.support import serverutil
from tests.support.board import ClientBoard
from tests.support.wsclient import WsClient


async def test_spectator_on_another_node_and_takeover(two_nodes: tuple[App, App]) -> None:
    node_a, node_b = two_nodes
    player = await WsClient.open(serverutil.ws_url(node_a))
    await player.hello()
    assert (await player.request("live"))["type"] == "live"
    game = (await player.request("new_game", code="EO1-C8-AAAAAFA"))["game"]

    spectator_b = await WsClient.open(serverutil.ws_url(node_b))
    await spectator_b.hello()
    board_b = ClientBoard(await spectator_b.request("watch", game=game))
    spectator_a = await WsClient.open(serverutil.ws_url(node_a))
    await spectator_a.hello()
    board_a = ClientBoard(await spectator_a.request("watch", game=game))

    moves = [("t1", "c5"), ("c5", "t1"), ("t2", "c5")]
    for source, target in moves:
        assert (await player.request("move", game=game, **{"from": source, "to": target}))["type"] == "ack"
    for _ in moves:
        board_b.apply(await spectator_b.next_push())
        board_a.apply(await spectator_a.next_push())
    assert board_b.state() == board_a.state()

    # The player's next connection lands on node B: it takes the game over from the database.
    await player.close()
    moved = await WsClient.open(serverutil.ws_url(node_b))
    welcome = await moved.hello(token=player.token)
    assert welcome["server"]["node"] == "node-b" and welcome["games"] == [game]
    assert (await moved.request("resume", game=game))["v"] == 3
    assert (await moved.request("undo", game=game, v=3))["v"] == 4
    board_b.apply(await spectator_b.next_push())
    board_a.apply(await spectator_a.next_push())  # node A follows node B's action over Redis
    assert board_a.state() == board_b.state() and board_a.v == 4

    over = await moved.request("resign", game=game)
    assert over["type"] == "game_over"
    for spectator in (spectator_a, spectator_b):
        assert (await spectator.next_push())["type"] == "game_over"
    for client in (moved, spectator_a, spectator_b):
        await client.close()


async def test_nodes_sharing_the_default_name_still_hear_each_other(
    two_unnamed_nodes: tuple[App, App],
) -> None:
    """The bus tells its own events apart by a per-bus instance id, not by the operator's node name:
    two nodes both left at ``node-1`` still fan a game out to each other's spectators."""
    node_a, node_b = two_unnamed_nodes
    assert node_a.settings.node == node_b.settings.node == "node-1"
    player = await WsClient.open(serverutil.ws_url(node_a))
    await player.hello()
    game = (await player.request("new_game", code="EO1-C8-AAAAAFA"))["game"]
    spectator = await WsClient.open(serverutil.ws_url(node_b))
    await spectator.hello()
    board = ClientBoard(await spectator.request("watch", game=game))

    assert (await player.request("move", game=game, **{"from": "t1", "to": "c5"}))["type"] == "ack"
    board.apply(await spectator.next_push())
    assert board.v == 1 and board.cells[4]
    assert (await player.request("resign", game=game))["type"] == "game_over"
    assert (await spectator.next_push())["type"] == "game_over"
    for client in (player, spectator):
        await client.close()
