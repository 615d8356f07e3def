"""Hints, winnable deals and the winnable daily deal over real WebSockets, on both databases."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest
import serverutil
from wsclient import WsClient

from engine import Deal, Game, Layout
from server.app import App
from server.hints import SolverBusy, SolvingService
from server.winnable import winnable_deals
from solver import winnable_daily_deal


@pytest.fixture
async def fast_url(database_url: str) -> Any:
    """A server whose token bucket lets a test play a whole game with a hint before each move."""
    async with serverutil.running_app(
        database_url, sqlite_synchronous="NORMAL", rate_per_second=5000.0, rate_burst=5000
    ) as app:
        yield serverutil.ws_url(app)


async def player(url: str, name: str) -> WsClient:
    client = await WsClient.open(url)
    await client.hello(name=name)
    return client


async def follow_hints(client: WsClient, game: str) -> tuple[int, dict[str, Any]]:
    """Play the hinted action until the game is won; returns the hints asked and the last reply."""
    hints = 0
    while True:
        hint = await client.request("hint", game=game)
        assert hint["type"] == "hint" and hint["verdict"] == "win", hint
        hints += 1
        action = {key: value for key, value in hint["action"].items() if key != "type"}
        reply = await client.request("move", game=game, v=hint["v"], **action)
        assert reply["type"] == "ack", reply
        if reply["status"] == "won":
            return hints, reply


@pytest.mark.parametrize("cells", [8, 4, 2])
async def test_hints_followed_from_the_opening_win_proven_winnable_deals(fast_url: str, cells: int) -> None:
    client = await player(fast_url, "Hinted")
    for deal in winnable_deals(cells)[:4]:
        snapshot = await client.request("new_game", code=deal.code())
        hints, last = await follow_hints(client, snapshot["game"])
        assert hints == last["moves"] == last["v"]
        over = await client.recv()
        assert over["type"] == "game_over" and over["won"] is True
    await client.close()


async def test_hint_from_a_dead_opening_is_lost(url: str) -> None:
    dead = next(Deal(n, 2) for n in range(10_000) if not Game(Deal(n, 2)).legal_moves)
    client = await player(url, "Stuck")
    game = (await client.request("new_game", code=dead.code()))["game"]
    hint = await client.request("hint", game=game)
    assert hint == {"type": "hint", "id": hint["id"], "game": game, "v": 0, "verdict": "lost"}
    again = await client.request("hint", game=game)  # the cached answer
    assert {**again, "id": hint["id"]} == hint
    await client.close()


async def test_hint_refusals(url: str) -> None:
    owner, other = await player(url, "Owner"), await player(url, "Other")
    game = (await owner.request("new_game", code=winnable_deals(8)[0].code()))["game"]
    assert (await other.request("hint", game=game))["code"] == "forbidden"
    assert (await owner.request("hint", game="g_nope"))["code"] == "not_found"
    await owner.request("resign", game=game)
    assert (await owner.request("hint", game=game))["code"] == "illegal_move"
    assert (await owner.request("hint"))["code"] == "bad_request"
    assert (await owner.request("hint", game=game, v=0))["code"] == "bad_request"
    await owner.close()
    await other.close()


async def test_a_hinted_game_ranks_on_no_leaderboard(fast_url: str) -> None:
    code = winnable_deals(8)[1].code()
    helped, alone = await player(fast_url, "Helped"), await player(fast_url, "Alone")
    for client, name in ((helped, "Helped"), (alone, "Alone")):
        game = (await client.request("new_game", code=code))["game"]
        if name == "Helped":
            await follow_hints(client, game)
        else:  # the same line, found without asking the server
            from solver import solve_deal

            for move in solve_deal(Deal.from_code(code)).moves:
                fields = {"from": move.source.symbol(), "to": move.target.symbol(), "n": move.count}
                assert (await client.request("move", game=game, **fields))["type"] == "ack"
        assert (await client.recv())["type"] == "game_over"
    for board in ({"board": "deal", "code": code}, {"board": "variant", "cells": 8}, {"board": "players"}):
        rows = (await alone.request("leaderboard", **board))["rows"]
        assert [row["player"]["name"] for row in rows] == ["Alone"], board
    profile = await helped.request("profile")
    assert (profile["played"], profile["won"]) == (0, 0) and len(profile["recent"]) == 1
    await helped.close()
    await alone.close()


async def test_new_game_winnable_deals_from_the_table(url: str) -> None:
    client = await player(url, "Picky")
    for cells in (8, 4, 2):
        snapshot = await client.request("new_game", cells=cells, winnable=True)
        assert Deal.from_code(snapshot["code"]) in winnable_deals(cells)
        await client.request("resign", game=snapshot["game"])
    await client.close()


async def test_new_game_daily_is_the_winnable_daily_deal(url: str) -> None:
    client = await player(url, "Daily")
    today = dt.datetime.now(dt.UTC).date()
    for cells in (8, 4):
        snapshot = await client.request("new_game", daily=True, cells=cells)
        assert snapshot["code"] == winnable_daily_deal(today, cells).code()
        await client.request("resign", game=snapshot["game"])
    await client.close()


async def test_solving_service_refuses_hints_beyond_its_queue(app: App) -> None:
    service = SolvingService(max_waiting_hints=1)
    try:
        layout: Layout = Deal(1, 4).layout()
        first = asyncio.ensure_future(service.hint("g_1", 0, layout))
        await asyncio.sleep(0)
        with pytest.raises(SolverBusy):
            await service.hint("g_2", 0, layout)
        same = await service.hint("g_1", 0, layout)  # the same position shares the one in flight
        assert same == await first
    finally:
        service.close()
