"""A spectator's board copy, kept by the library from one snapshot and the diffs, stays exact over a
whole game: group moves, undos, a take-back, the win; and a resign's game_over ends it."""

from __future__ import annotations

import asyncio

import eightoff_client
from eightoff_client import Board, Client
from tests.client.conftest import winnable_code, winning_line


def board_state(board: Board) -> tuple[object, ...]:
    return (board.v, board.tableau, board.cells, board.foundations, board.score, board.moves, board.status)


async def collect_pushes(client: Client, game: str, into: list[dict[str, object]]) -> None:
    async for push in client.pushes():
        if push.get("game") == game:
            into.append(push)
            if push["type"] == "game_over":
                return


async def test_a_spectator_copy_is_exact_after_every_action_of_a_whole_game(url: str) -> None:
    code = winnable_code(2)
    async with (
        eightoff_client.connect(url, name="Player") as player,
        eightoff_client.connect(url, name="Watcher", encoding="json") as watcher,
    ):
        board = await player.new_game(code=code)
        copy = await watcher.watch(board.game)
        pushes: list[dict[str, object]] = []
        collector = asyncio.create_task(collect_pushes(watcher, board.game, pushes))
        await asyncio.sleep(0)  # the collector listens before the first action
        line = winning_line(code)
        actions = foundation_undos = 0
        for index, (source, target, n) in enumerate(line):
            await player.move(board.game, source, target, n)
            actions += 1
            if index % 10 == 3 and board.status == "playing":  # an undo and the move again
                await player.undo(board.game)
                await player.move(board.game, source, target, n)
                actions += 2
            if target.startswith("f") and index % 7 == 0 and board.status == "playing":
                await player.undo(board.game)  # the undo of a foundation move: an op from a foundation
                await player.move(board.game, source, target, n)
                actions += 2
                foundation_undos += 1
            while copy.v < board.v:  # the diff is on its way
                await asyncio.sleep(0.005)
            assert board_state(copy) == board_state(board), f"after action {board.v}"
        await asyncio.wait_for(collector, 10)
        assert [push["type"] for push in pushes] == ["diff"] * actions + ["game_over"]
        assert copy.status == "won" and watcher.resyncs == 0 and foundation_undos > 0
        assert copy.result is not None and copy.result["won"] is True


async def test_a_resign_ends_the_spectator_copy_without_a_diff(url: str) -> None:
    async with (
        eightoff_client.connect(url, name="Quitter") as player,
        eightoff_client.connect(url, name="Watcher") as watcher,
    ):
        board = await player.new_game(code=winnable_code(0))
        source, target, n = winning_line(board.code)[0]
        await player.move(board.game, source, target, n)
        copy = await watcher.watch(board.game)
        await player.resign(board.game)
        over = await watcher.wait_game_over(board.game, timeout=10)
        assert over["won"] is False and copy.status == "resigned" and copy.v == board.v == 1
        assert board_state(copy) == board_state(board)


async def test_pushes_end_when_the_client_closes(url: str) -> None:
    client = await eightoff_client.connect(url, name="Listener")
    seen: list[dict[str, object]] = []

    async def listen() -> None:
        async for push in client.pushes():
            seen.append(push)

    listening = asyncio.create_task(listen())
    await asyncio.sleep(0.01)
    await client.close()
    await asyncio.wait_for(listening, 5)
    assert seen == []
