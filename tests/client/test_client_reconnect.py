"""Reconnects as protocol/README.md section 4 prescribes: a connection cut by a TCP proxy comes back
with the same player, its games resumed, and an action left waiting is resent with its ``v``: applied
once when the server had not applied it, refused as ``stale`` (and the game resumed) when it had."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import eightoff_client
from eightoff_client import Board, Client, Stale
from server.app import App
from tests.client.conftest import winnable_code, winning_line

sys.path.insert(0, str(Path(__file__).parents[1] / "server"))
from tests.support.tcpproxy import TcpProxy


@pytest.fixture
async def proxy(app: App) -> AsyncIterator[TcpProxy]:
    proxy = TcpProxy("127.0.0.1", app.port)
    await proxy.start()
    yield proxy
    await proxy.cut()


async def cut_off(proxy: TcpProxy, client: Client) -> None:
    """Cut the client's connection and refuse its reconnects until ``proxy.start()``."""
    await proxy.cut()
    for _ in range(500):
        if not client.is_connected:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the client did not notice the cut")


async def server_board(url: str, token: str, game: str) -> Board:
    """The game as the server has it, through a connection of the same player."""
    async with eightoff_client.connect(url, token=token, reconnect=False) as other:
        return await other.resume(game)


def direct_url(app: App) -> str:
    return f"ws://127.0.0.1:{app.port}/ws"


async def test_a_cut_connection_comes_back_as_the_same_player_with_its_game_resumed(
    app: App, proxy: TcpProxy
) -> None:
    code = winnable_code(0)
    (first, target, n), second = winning_line(code)[0], winning_line(code)[1]
    async with eightoff_client.connect(f"ws://127.0.0.1:{proxy.port}/ws", name="Phoenix") as client:
        assert client.token is not None and client.player is not None
        board = await client.new_game(code=code)
        await cut_off(proxy, client)
        async with eightoff_client.connect(direct_url(app), token=client.token) as elsewhere:
            await elsewhere.move(board.game, first, target, n)  # played while this one is away
        await proxy.start()
        await client.wait_connected()
        assert client.reconnects == 1 and client.player["name"] == "Phoenix"
        board = client.boards[board.game]
        assert board.v == 1  # resumed: the move made elsewhere is on the board
        ack = await client.move(board.game, *second)
        assert ack["v"] == 2
        assert (await server_board(direct_url(app), client.token, board.game)).v == 2


async def test_an_action_sent_during_a_break_is_resent_with_its_v_and_applied_once(
    app: App, proxy: TcpProxy
) -> None:
    code = winnable_code(1)
    source, target, n = winning_line(code)[0]
    async with eightoff_client.connect(f"ws://127.0.0.1:{proxy.port}/ws", name="Patient") as client:
        board = await client.new_game(code=code)
        await cut_off(proxy, client)
        waiting = asyncio.create_task(client.move(board.game, source, target, n))
        await asyncio.sleep(0.2)
        assert not waiting.done()  # it waits for the connection, v 0 kept
        await proxy.start()
        ack = await asyncio.wait_for(waiting, 10)
        assert ack["v"] == 1 and client.boards[board.game].v == 1
        assert client.token is not None
        on_server = await server_board(direct_url(app), client.token, board.game)
        assert (on_server.v, on_server.moves) == (1, 1)


async def test_an_action_the_server_already_applied_comes_back_stale_with_the_board_resumed(
    app: App, proxy: TcpProxy
) -> None:
    """As if the ack was lost in the break: the same move, made at the same v through another
    connection of the player, is on the server when the waiting one is resent."""
    code = winnable_code(2)
    source, target, n = winning_line(code)[0]
    async with eightoff_client.connect(f"ws://127.0.0.1:{proxy.port}/ws", name="Twice") as client:
        assert client.token is not None
        board = await client.new_game(code=code)
        await cut_off(proxy, client)
        waiting = asyncio.create_task(client.move(board.game, source, target, n))
        await asyncio.sleep(0.05)
        async with eightoff_client.connect(direct_url(app), token=client.token) as elsewhere:
            await elsewhere.move(board.game, source, target, n)
        await proxy.start()
        with pytest.raises(Stale) as refused:
            await asyncio.wait_for(waiting, 10)
        assert refused.value.code == "stale"
        on_server = await server_board(direct_url(app), client.token, board.game)
        assert on_server.v == 1  # applied once, never twice
        fresh = client.boards[board.game]
        assert (fresh.v, fresh.tableau, fresh.cells) == (1, on_server.tableau, on_server.cells)


async def test_without_reconnect_a_break_raises_connection_lost(app: App, proxy: TcpProxy) -> None:
    async with eightoff_client.connect(
        f"ws://127.0.0.1:{proxy.port}/ws", name="Fragile", reconnect=False
    ) as client:
        board = await client.new_game(code=winnable_code(0))
        await cut_off(proxy, client)
        with pytest.raises(eightoff_client.ConnectionLost):
            await client.move(board.game, "t1", "c5")


async def test_reconnecting_gives_up_after_its_timeout(app: App, proxy: TcpProxy) -> None:
    async with eightoff_client.connect(
        f"ws://127.0.0.1:{proxy.port}/ws", name="Gone", reconnect_timeout=0.3
    ) as client:
        await cut_off(proxy, client)
        with pytest.raises(eightoff_client.ConnectionLost, match="could not reconnect"):
            await asyncio.wait_for(client.leaderboard("players"), 10)


async def test_a_spectator_watches_again_after_a_break_and_its_copy_catches_up(
    app: App, proxy: TcpProxy
) -> None:
    code = winnable_code(0)
    line = winning_line(code)
    async with (
        eightoff_client.connect(direct_url(app), name="Mover") as player,
        eightoff_client.connect(f"ws://127.0.0.1:{proxy.port}/ws", name="Eyes", encoding="json") as watcher,
    ):
        board = await player.new_game(code=code)
        copy = await watcher.watch(board.game)
        await player.move(board.game, *line[0])
        await cut_off(proxy, watcher)
        for move in line[1:4]:  # diffs the watcher never gets
            await player.move(board.game, *move)
        await proxy.start()
        await watcher.wait_connected()
        copy = watcher.boards[board.game]  # a fresh snapshot from watching again
        assert (copy.v, copy.tableau, copy.cells, copy.foundations) == (
            4,
            board.tableau,
            board.cells,
            board.foundations,
        )
        await player.move(board.game, *line[4])
        for _ in range(500):
            if copy.v == 5:
                break
            await asyncio.sleep(0.01)
        assert (copy.v, copy.tableau, copy.cells) == (5, board.tableau, board.cells)
