"""A program written with the client library declares itself a bot (protocol section 5, ``hello``,
Bots): its player says so wherever it appears, its won game ranks on the bots' boards and not on the
people's, and it stays a bot through a reconnect. Bad input tried: a person's token said to be a
bot and a bot's token said to be a person (``forbidden``), and a ``bot`` that is not a boolean
(``bad_request``), each refused as the library's named error."""

from __future__ import annotations

from typing import Any, cast

import pytest

import eightoff_client
from eightoff_client import BadRequest, Forbidden
from server.app import App
from tests.client.conftest import winnable_code, winning_line
from tests.client.test_client_reconnect import cut_off
from tests.support.tcpproxy import TcpProxy


async def test_a_bot_is_told_apart_everywhere_its_player_appears(url: str) -> None:
    code = winnable_code(2)
    async with eightoff_client.connect(url, bot=True) as bot, eightoff_client.connect(url) as person:
        assert bot.player is not None and bot.player.get("bot") is True
        assert bot.player["name"].startswith("bot-")
        assert person.player is not None and "bot" not in person.player
        board = await bot.new_game(code=code)
        assert board.player == bot.player  # the snapshot's player, bot field kept
        watched = await person.watch(board.game)
        assert watched.player.get("bot") is True
        for source, target, n in winning_line(code):
            await bot.move(board.game, source, target, n)
        assert (await bot.wait_game_over(board.game, timeout=10))["won"] is True
        rows = (await bot.leaderboard("deal", code=code, bots=True))["rows"]
        assert [row["player"] for row in rows] == [bot.player]
        assert (await person.leaderboard("deal", code=code))["rows"] == []  # not on the people's
        assert (await person.profile(bot.player["id"]))["player"].get("bot") is True


async def test_a_bot_stays_a_bot_through_a_reconnect(app: App) -> None:
    proxy = TcpProxy("127.0.0.1", app.port)
    await proxy.start()
    try:
        async with eightoff_client.connect(f"ws://127.0.0.1:{proxy.port}/ws", bot=True) as bot:
            assert bot.player is not None
            first = dict(bot.player)
            await cut_off(proxy, bot)
            await proxy.start()  # the client says hello again, with its token and bot=True
            board = await bot.new_game(code=winnable_code(0))
            assert bot.reconnects == 1
            assert bot.player == first and board.player == first
    finally:
        await proxy.cut()


@pytest.mark.parametrize("made_as_bot", [False, True], ids=["person-said-bot", "bot-said-person"])
async def test_a_bot_field_that_disagrees_with_the_token_is_forbidden(url: str, made_as_bot: bool) -> None:
    async with eightoff_client.connect(url, bot=made_as_bot or None) as made:
        token = made.token
    with pytest.raises(Forbidden):
        await eightoff_client.connect(url, token=token, bot=not made_as_bot, reconnect=False)
    async with eightoff_client.connect(url, token=token) as again:  # left out: as it was made
        assert again.player is not None and again.player.get("bot", False) is made_as_bot


async def test_a_bot_field_that_is_not_a_boolean_is_a_bad_request(url: str) -> None:
    with pytest.raises(BadRequest):
        await eightoff_client.connect(url, bot=cast(Any, "yes"), reconnect=False)
