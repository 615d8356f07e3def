"""``replay`` over real WebSocket connections: a game move by move from its deal, the
same positions the engine reaches, in pages; sealed like ``watch``; bad input refused; and the game
page ``/g/GAME_ID`` over HTTP."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from typing import Any

import pytest

import protocol
from engine import Game, parse_action
from protocol.limits import MAX_GAME_ACTIONS
from server.app import App
from server.play import replay as replay_module
from server.storage import StoredGame
from tests.server.test_fair_play import assert_sealed, midnight_after, resign, started
from tests.server.test_http import http_get
from tests.support.board import ClientBoard
from tests.support.wsclient import WsClient, player

CODE = "EO1-C8-AAAAAFA"


async def play(client: WsClient, game_id: str, game: Game, actions: list[str]) -> None:
    """Play ``actions`` on ``game_id`` and on its engine mirror ``game``: ``undo``, or ``""`` for the
    first legal move by its text."""
    for text in actions:
        if text == "undo":
            reply = await client.request("undo", game=game_id)
            game.play(parse_action("undo"))
        else:
            move = min(game.legal_moves, key=str)
            fields = {"from": move.source.symbol(), "to": move.target.symbol(), "n": move.count}
            reply = await client.request("move", game=game_id, **fields)
            game.play(move)
        assert reply["type"] == "ack", reply


def positions(code: str, log: tuple[Any, ...]) -> list[dict[str, Any]]:
    """The engine's position at every version of a game played from ``code`` with ``log``."""
    game = Game.from_code(code)
    found = [_position(game)]
    for action in log:
        game.play(action)
        found.append(_position(game))
    return found


def _position(game: Game) -> dict[str, Any]:
    return {**protocol.layout_fields(game.layout()), "score": game.score, "moves": game.moves}


async def replay_all(client: WsClient, game_id: str) -> list[dict[str, Any]]:
    """Every page of ``game_id``'s replay, asked for as a client does (from the last step held)."""
    pages = [await client.request("replay", game=game_id)]
    while pages[-1]["type"] == "replay" and pages[-1]["since"] + len(pages[-1]["steps"]) < pages[-1]["v"]:
        pages.append(
            await client.request("replay", game=game_id, since=pages[-1]["since"] + len(pages[-1]["steps"]))
        )
    return pages


def stepped(pages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The positions a rule-free client reaches applying the pages' ops from their deal."""
    first = pages[0]
    board = ClientBoard({**first, "v": 0, "score": 0, "moves": 0, "status": "playing"})
    found = [{**_table(board), "score": 0, "moves": 0}]
    for page in pages:
        for index, step in enumerate(page["steps"]):
            board.apply({**step, "v": page["since"] + index + 1, "status": "playing"})
            found.append({**_table(board), "score": board.score, "moves": board.moves})
    return found


def _table(board: ClientBoard) -> dict[str, Any]:
    return {
        "tableau": [list(column) for column in board.tableau],
        "cells": list(board.cells),
        "foundations": dict(board.foundations),
    }


async def test_a_finished_game_replays_position_by_position_as_the_engine_plays_it(url: str) -> None:
    """Ann plays moves, an undo and a take-back of the log, then resigns; Bob (a spectator) gets its
    deal and one step per version, and each position is the engine's; the resignation is the status."""
    ann, bob = await player(url, name="Ann"), await player(url, name="Bob")
    snapshot = await ann.request("new_game", code=CODE)
    game = Game.from_code(CODE)
    await play(ann, snapshot["game"], game, ["", "", "", "undo", "", ""])
    await resign(ann, snapshot["game"])

    pages = await replay_all(bob, snapshot["game"])
    assert len(pages) == 1
    page = pages[0]
    protocol.validate_server_message(page)
    assert (page["code"], page["player"]["name"], page["status"]) == (CODE, "Ann", "resigned")
    assert (page["v"], page["since"], len(page["steps"])) == (6, 0, 6)
    assert page["started_at"] == snapshot["started_at"] and page["duration_ms"] >= 0
    assert stepped(pages) == positions(CODE, game.log)
    again = await bob.request("replay", game=snapshot["game"])  # remembered: the same reply
    assert {**again, "id": None} == {**page, "id": None}
    final = await bob.request("watch", game=snapshot["game"])
    assert final["v"] == page["v"] and final["tableau"] == stepped(pages)[-1]["tableau"]
    await asyncio.gather(ann.close(), bob.close())


async def test_each_step_says_when_the_server_accepted_its_action(url: str) -> None:
    """Each step's ``elapsed_ms`` lies between the client's send and its ack (one clock on this
    machine; the server rounds down to the millisecond), in order, and the last is at most the
    game's duration."""
    ann = await player(url, name="Ann")
    snapshot = await ann.request("new_game", code=CODE)
    started_at = protocol.parse_timestamp(snapshot["started_at"])
    game = Game.from_code(CODE)
    windows: list[tuple[float, float]] = []
    for text in ["", "", "undo", ""]:
        sent = (dt.datetime.now(dt.UTC) - started_at).total_seconds() * 1000
        await play(ann, snapshot["game"], game, [text])
        windows.append((sent, (dt.datetime.now(dt.UTC) - started_at).total_seconds() * 1000))
    await resign(ann, snapshot["game"])
    (page,) = await replay_all(ann, snapshot["game"])
    protocol.validate_server_message(page)
    elapsed = [step["elapsed_ms"] for step in page["steps"]]
    assert elapsed == sorted(elapsed) and elapsed[-1] <= page["duration_ms"]
    for at, (sent, acked) in zip(elapsed, windows, strict=True):
        assert sent - 2 <= at <= acked, (at, sent, acked)  # two roundings down: the time's, the span's
    await ann.close()


def test_a_step_whose_time_is_unknown_says_none() -> None:
    """Actions stored before times were kept, or timed before the game's start (a clock stepped
    back): no ``elapsed_ms``, never a guess."""
    started = dt.datetime(2026, 12, 7, 12, 0, tzinfo=dt.UTC)
    start_ms = int(started.timestamp() * 1000)
    stored = StoredGame(
        "g1", "p1", CODE, 8, None, "playing", 0, 0, 0, started, None, None, False,
        actions=("t1-c5", "undo", "t1-c5"), action_times=(None, start_ms - 5, start_ms + 2500),
    )  # fmt: skip
    whole = replay_module.replay_whole(stored, protocol.Player("p1", "Ann"))
    assert [step.to_wire().get("elapsed_ms") for step in whole.steps] == [None, None, 2500]
    untimed = replay_module.replay_whole(
        dataclasses.replace(stored, action_times=()), protocol.Player("p1", "Ann")
    )
    assert all("elapsed_ms" not in step.to_wire() for step in untimed.steps)


async def test_a_long_game_comes_in_pages_and_a_live_one_replays_what_is_stored(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With pages of 3 steps, 7 versions come in 3 pages that join exactly; the game is still being
    played (status playing, no duration), and its owner may replay it too."""
    monkeypatch.setattr(replay_module, "MAX_REPLAY_STEPS", 3)
    ann, bob = await player(url, name="Ann"), await player(url, name="Bob")
    snapshot = await ann.request("new_game", code=CODE)
    game = Game.from_code(CODE)
    await play(ann, snapshot["game"], game, ["", "", "", "", "undo", "", ""])

    pages = await replay_all(bob, snapshot["game"])
    assert [(page["since"], len(page["steps"])) for page in pages] == [(0, 3), (3, 3), (6, 1)]
    assert all(page["status"] == "playing" and "duration_ms" not in page for page in pages)
    assert stepped(pages) == positions(CODE, game.log)
    assert stepped(await replay_all(ann, snapshot["game"])) == stepped(pages)
    end = await bob.request("replay", game=snapshot["game"], since=7)
    assert (end["type"], end["steps"]) == ("replay", []), "asking from the end: no step, no error"
    await asyncio.gather(ann.close(), bob.close())


async def test_a_daily_game_replay_is_sealed_like_its_watch(url: str) -> None:
    """Bob, who can still play today's daily, is refused Ann's daily game (live, then finished) with the
    watch's words; Ann replays her own; once Bob has finished the daily, it opens to him."""
    ann, bob = await player(url, name="Ann"), await player(url, name="Bob")
    daily = await started(ann, daily=True)
    opens = midnight_after(dt.date.fromisoformat(daily["started_at"][:10]))
    assert_sealed(await bob.request("replay", game=daily["game"]), daily["game"], opens)
    await resign(ann, daily["game"])
    sealed = await bob.request("replay", game=daily["game"])
    assert_sealed(sealed, daily["game"], opens)
    assert sealed["message"] == (await bob.request("watch", game=daily["game"]))["message"]
    assert (await ann.request("replay", game=daily["game"]))["type"] == "replay", "one's own game"
    mine = await started(bob, daily=True)
    await resign(bob, mine["game"])
    opened = await bob.request("replay", game=daily["game"])
    assert (opened["type"], opened["status"], len(opened["steps"])) == ("replay", "resigned", 1)
    await asyncio.gather(ann.close(), bob.close())


async def test_replay_refuses_bad_input(url: str) -> None:
    """Tried: an unknown game id, a malformed one, ``since`` past the game's version, negative, a
    float, a string, over the action bound, an extra field, no game, and before hello."""
    ann = await player(url, name="Ann")
    snapshot = await ann.request("new_game", code=CODE)
    unknown = await ann.request("replay", game="NoSuchGame123")
    assert (unknown["type"], unknown["code"]) == ("error", "not_found") and "NoSuchGame123" in unknown[
        "message"
    ]
    past = await ann.request("replay", game=snapshot["game"], since=1)
    assert (past["code"], past["v"], "past the game's version 0" in past["message"]) == ("stale", 0, True), (
        past
    )
    for fields in (
        {"game": "bad id!"},
        {"game": snapshot["game"], "since": -1},
        {"game": snapshot["game"], "since": 1.0},
        {"game": snapshot["game"], "since": "0"},
        {"game": snapshot["game"], "since": MAX_GAME_ACTIONS + 1},
        {"game": snapshot["game"], "limit": 5},
        {},
    ):
        refused = await ann.request("replay", **fields)
        assert (refused["type"], refused["code"]) == ("error", "bad_request"), (fields, refused)
    await ann.close()
    anonymous = await WsClient.open(url)
    early = await anonymous.request("replay", game=snapshot["game"])
    assert early["code"] == "unauthorized", early
    await anonymous.close()


async def test_the_game_page_is_served_for_a_game_id_and_refused_for_anything_else(app: App) -> None:
    """``/g/ID`` gives the replay page; a malformed id the same page with 400 (it says why); the page's
    own files are served."""
    status, content_type, body = await asyncio.to_thread(http_get, app, "/g/Qm81Zt_e3VhN0pWa")
    assert (status, content_type) == (200, "text/html; charset=utf-8") and "/replay-page.js" in body
    for bad in ("/g/bad%21id", "/g/", "/g/" + "x" * 33, "/g/a/b", "/g/%ZZ"):
        status, _, body = await asyncio.to_thread(http_get, app, bad)
        assert status == 400 and "/replay-page.js" in body, bad
    for path in ("/replay-page.js", "/replay.js", "/replay.css"):
        assert (await asyncio.to_thread(http_get, app, path))[0] == 200, path
