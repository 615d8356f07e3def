"""The client library plays deals to a win against a real server, in both encodings."""

from __future__ import annotations

import pytest

import eightoff_client
from eightoff_client import Board, Encoding
from tests.client.conftest import winnable_code, winning_line


def board_state(board: Board) -> tuple[object, ...]:
    return (board.v, board.tableau, board.cells, board.foundations, board.score, board.moves, board.status)


@pytest.mark.parametrize("encoding", ["msgpack", "json"])
async def test_a_deal_played_to_a_win_by_its_solver_line(url: str, encoding: Encoding) -> None:
    code = winnable_code(0)
    async with eightoff_client.connect(url, name="LineBot", encoding=encoding) as client:
        assert client.token and client.player and client.player["name"] == "LineBot"
        board = await client.new_game(code=code)
        assert (board.code, board.v, board.status) == (code, 0, "playing")
        for number, (source, target, n) in enumerate(winning_line(code), start=1):
            ack = await client.move(board.game, source, target, n)
            assert ack["v"] == number == board.v  # v sent automatically, the board follows the ack
        assert board.status == "won"
        over = await client.wait_game_over(board.game, timeout=10)
        assert over["won"] is True and (over["score"], over["moves"]) == (board.score, board.moves)
        fresh = await final_board(url, board.game)
        assert board_state(fresh) == board_state(board)
        rows = (await client.leaderboard("deal", code=code))["rows"]
        assert [(row["rank"], row["player"]["id"]) for row in rows] == [(1, client.player["id"])]
        profile = await client.profile()
        assert (profile["played"], profile["won"]) == (1, 1)


async def test_a_deal_won_by_following_the_servers_hints(url: str) -> None:
    async with eightoff_client.connect(url, name="HintBot") as client:
        board = await client.new_game(winnable=True)
        while board.status == "playing":
            hint = await client.hint(board.game)
            assert hint["verdict"] == "win" and hint["v"] == board.v
            await client.play(board.game, hint["action"])
        assert board.status == "won"
        assert (await client.wait_game_over(board.game, timeout=10))["won"] is True
        assert (await client.live())["games"] == []  # a won game is live no more


async def test_tap_auto_undo_and_resign_keep_the_board(url: str) -> None:
    code = winnable_code(1)
    async with eightoff_client.connect(url, name="Tapper") as client:
        board = await client.new_game(code=code)
        source, target, n = winning_line(code)[0]
        before = board_state(board)
        await client.move(board.game, source, target, n)
        await client.undo(board.game)
        assert board_state(board)[1:4] == before[1:4] and board.v == 2
        await client.auto(board.game, source, n)  # the server's best place: some legal move
        assert board.v == 3
        over = await client.resign(board.game)
        assert over["won"] is False and board.status == "resigned" and board.result == over
        fresh = await final_board(url, board.game)
        assert board_state(fresh) == board_state(board)


async def final_board(url: str, game: str) -> Board:
    """What a newcomer's ``watch`` shows of a finished game: its final snapshot, as a board."""
    async with eightoff_client.connect(url, name="Witness") as witness:
        board = await witness.watch(game)
        assert board.status != "playing"
        return board
