"""Bot accounts over a real server (WebSocket and HTTP): a bot declared in ``hello`` stays one for
life, its games rank on the bots' boards and never on the people's, and it is named as a bot
(``bot: true``) wherever its games appear: welcome, snapshots (its own and a spectator's), live,
leaderboard rows and its profile; a person's player object has no ``bot`` field at all.

Bad input tried: a token's ``hello`` whose ``bot`` disagrees with its player (either way), a cursor
of the bots' board sent to the people's, ``bots=yes`` over HTTP."""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import Deal, Game
from protocol import ErrorCode, ProtocolError
from server.app import App
from server.services.rankings import parse_leaderboard_query
from solver import solve_deal
from tests.leaderboard.test_leaderboard_api import WINNABLE, http_get, resign_after_one_move, win
from tests.support import dbutil, serverutil
from tests.support.wire import move_fields
from tests.support.wsclient import WsClient

BOARDS: list[dict[str, Any]] = [
    {"board": "deal", "code": WINNABLE},
    {"board": "variant", "cells": 8, "period": "day"},
    {"board": "players"},
    {"board": "players", "order": "score", "period": "week"},
]


async def hello(url: str, **fields: Any) -> WsClient:
    client = await WsClient.open(url)
    await client.hello(**fields)
    return client


def names(page: dict[str, Any]) -> list[tuple[int, str, bool]]:
    """(rank, name, named a bot) of each row; a person's player object must not carry ``bot``."""
    for row in page["rows"]:
        assert row["player"].get("bot", True) is True, row
    return [(row["rank"], row["player"]["name"], "bot" in row["player"]) for row in page["rows"]]


async def test_bots_rank_apart_and_are_named_wherever_their_games_appear(app: App, url: str) -> None:
    solution = list(solve_deal(Deal.from_code(WINNABLE)).moves)
    ann = await hello(url, name="Ann")
    solver = await hello(url, name="solver-9", bot=True)
    loser = await hello(url, bot=True)  # no name: the server names a bot as one
    assert ann.player is not None and "bot" not in ann.player
    assert solver.player is not None and solver.player["bot"] is True
    assert loser.player is not None and loser.player["bot"] is True
    assert loser.player["name"].startswith("bot-")
    solver_id = solver.player["id"]

    ann_game, _ = await resign_after_one_move(ann, code=WINNABLE)
    solver_game = await win(solver, solution)
    loser_game, _ = await resign_after_one_move(loser, code=WINNABLE)

    # The people's boards have only Ann; the bots' boards only the bots, ranked among themselves.
    for fields in BOARDS:
        people = await ann.request("leaderboard", **fields)
        bots = await ann.request("leaderboard", **fields, bots=True)
        assert names(people) == [(1, "Ann", False)], fields
        assert names(bots) == [(1, "solver-9", True), (2, loser.player["name"], True)], fields
        for query in (fields, {**fields, "bots": "true"}):  # the same pages over HTTP
            websocket = bots if "bots" in query else people
            status, body = await asyncio.to_thread(
                http_get, app, "/api/leaderboard?" + urllib.parse.urlencode(query)
            )
            assert status == 200
            assert body == {key: value for key, value in websocket.items() if key not in ("type", "id")}
    deal = await ann.request("leaderboard", board="deal", code=WINNABLE, bots=True)
    assert [row["game"] for row in deal["rows"]] == [solver_game, loser_game]
    assert (await ann.request("leaderboard", board="deal", code=WINNABLE))["rows"][0]["game"] == ann_game
    around = await ann.request("leaderboard", board="players", bots=True, around=solver_id, limit=1)
    assert names(around) == [(1, "solver-9", True)]
    assert (await ann.request("leaderboard", board="players", around=solver_id))["rows"] == []

    # A cursor belongs to its side.
    first = await ann.request("leaderboard", board="deal", code=WINNABLE, bots=True, limit=1)
    rest = await ann.request(
        "leaderboard", board="deal", code=WINNABLE, bots=True, limit=1, after=first["next"]
    )
    assert names(rest) == [(2, loser.player["name"], True)]
    crossed = await ann.request("leaderboard", board="deal", code=WINNABLE, limit=1, after=first["next"])
    assert (crossed["type"], crossed["code"]) == ("error", "bad_request")
    assert "after" in crossed["message"]

    # Profiles: the bot's figures are those of the bots' boards.
    profile = await ann.request("profile", player=solver_id)
    assert profile["player"] == {"id": solver_id, "name": "solver-9", "bot": True}
    assert (profile["played"], profile["won"]) == (1, 1)
    assert [game["game"] for game in profile["best"]] == [solver_game]
    own = await ann.request("profile")
    assert "bot" not in own["player"] and (own["played"], own["won"]) == (1, 0)
    status, body = await asyncio.to_thread(http_get, app, f"/api/players/{solver_id}")
    assert status == 200 and body["player"]["bot"] is True

    # Games being played: the bot's snapshot, a spectator's snapshot and live name it as a bot.
    snapshot = await solver.request("new_game", code=WINNABLE)
    assert snapshot["player"] == {"id": solver_id, "name": "solver-9", "bot": True}
    move = move_fields(next(iter(Game.from_code(WINNABLE).legal_moves)))
    assert (await solver.request("move", game=snapshot["game"], **move))["type"] == "ack"
    ann_snapshot = await ann.request("new_game", code=WINNABLE)
    assert "bot" not in ann_snapshot["player"]
    watched = await ann.request("watch", game=snapshot["game"])
    assert watched["type"] == "snapshot" and watched["player"]["bot"] is True
    finished = await ann.request("watch", game=solver_game)  # a finished game's final snapshot
    assert finished["player"]["bot"] is True
    live = await ann.request("live")
    players = {game["game"]: game["player"] for game in live["games"]}
    assert players[snapshot["game"]] == {"id": solver_id, "name": "solver-9", "bot": True}
    assert "bot" not in players[ann_snapshot["game"]]
    for client in (ann, solver, loser):
        await client.close()


async def test_a_player_is_a_bot_or_a_person_for_life(url: str) -> None:
    bot = await hello(url, name="solver-9", bot=True)
    person = await hello(url, name="Ann", bot=False)
    assert person.player is not None and "bot" not in person.player
    assert bot.token is not None and person.token is not None
    for token, said, made in ((bot.token, False, "a bot"), (person.token, True, "a person")):
        client = await WsClient.open(url)
        refused = await client.request("hello", protocol=1, token=token, bot=said)
        assert (refused["type"], refused["code"]) == ("error", "forbidden")
        assert f"made as {made}, for life" in refused["message"]
        # Refused means nothing happened: the same connection may say hello again, rightly.
        welcome = await client.hello(token=token)
        assert welcome["player"].get("bot", False) is (made == "a bot")
        await client.close()
    for token, said in ((bot.token, True), (person.token, False)):  # agreeing is fine
        client = await WsClient.open(url)
        welcome = await client.hello(token=token, bot=said)
        assert "token" not in welcome and welcome["player"].get("bot", False) is said
        await client.close()
    await bot.close()
    await person.close()


@pytest.fixture(params=dbutil.BACKENDS)
def shared_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with dbutil.fresh_database(request.param, tmp_path, migrate=False) as database_url:
        yield database_url


async def test_a_bot_stays_a_bot_across_a_restart(shared_database_url: str) -> None:
    """The flag is stored: a server that loads the bot's game from the database names it a bot."""
    async with serverutil.running_app(shared_database_url) as first:
        bot = await hello(serverutil.ws_url(first), name="solver-9", bot=True)
        game = (await bot.request("new_game", code=WINNABLE))["game"]
        token = bot.token
        await bot.close()
    async with serverutil.running_app(shared_database_url) as second:
        again = await WsClient.open(serverutil.ws_url(second))
        welcome = await again.hello(token=token)
        assert welcome["player"]["bot"] is True and welcome["games"] == [game]
        resumed = await again.request("resume", game=game)
        assert resumed["type"] == "snapshot" and resumed["player"]["bot"] is True
        await again.close()


def test_bots_over_http_is_true_or_false() -> None:
    assert parse_leaderboard_query("board=players&bots=true").bots is True
    assert parse_leaderboard_query("board=players&bots=false").bots is False
    assert parse_leaderboard_query("board=players").bots is False
    for value in ("yes", "1", "True", ""):
        with pytest.raises(ProtocolError, match="bots must be true or false") as caught:
            parse_leaderboard_query(f"board=players&bots={value}")
        assert caught.value.code is ErrorCode.BAD_REQUEST
