"""The race rating board and the ratings of a profile, over real WebSocket connections and the HTTP
API, on SQLite and PostgreSQL: ratings stored as a finished race stores them (`StoreRatings`, through
the server's own commit pipeline), read back in rank order, paged, around a player, per variant."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from server.app import App
from server.play.race.ratings import Placement, rate_race
from server.storage import ratings as stored_ratings
from server.storage.committer import StoreRatings
from server.storage.records import RatedRace, Rating
from tests.support.wsclient import WsClient, player

NOW = dt.datetime(2026, 12, 2, 5, 0, tzinfo=dt.UTC)


def http_get(app: App, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{app.port}{path}", timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


async def race(app: App, race_id: str, cells: int, places: dict[str, int]) -> None:
    """Rate a finished race as the race room does: ratings read, rated, stored through the pipeline."""
    async with app.database.connection() as conn:
        current = await stored_ratings.load_ratings(conn, cells, places)
    changes = rate_race([Placement(player_id, place) for player_id, place in places.items()], current)
    await app.services.committer.stored(StoreRatings(RatedRace(race_id, cells, changes, NOW)))


async def ratings_of(app: App, cells: int, *players: str) -> dict[str, Rating]:
    async with app.database.connection() as conn:
        return await stored_ratings.load_ratings(conn, cells, players)


@pytest.fixture
async def raced(app: App, url: str) -> dict[str, WsClient]:
    """Four people who raced (three C8 races, one C4 race with a tie) and one who never did."""
    clients = {name: await player(url, name=name) for name in ("Ann", "Bo", "Cy", "Di")}
    clients["Unrated"] = await player(url, name="Unrated")
    ids = {name: client.player["id"] for name, client in clients.items()}  # type: ignore[index]
    await race(app, "race-1", 8, {ids["Ann"]: 1, ids["Bo"]: 2, ids["Cy"]: 3})
    await race(app, "race-2", 8, {ids["Bo"]: 1, ids["Ann"]: 2})
    await race(app, "race-3", 8, {ids["Ann"]: 1, ids["Di"]: 2, ids["Cy"]: 2})
    await race(app, "race-4", 4, {ids["Cy"]: 1, ids["Di"]: 1, ids["Ann"]: 3})
    return clients


def pid(client: WsClient) -> str:
    assert client.player is not None
    return str(client.player["id"])


async def test_the_rating_board_ranks_stored_ratings(app: App, raced: dict[str, WsClient]) -> None:
    ann = raced["Ann"]
    stored = await ratings_of(app, 8, *(pid(c) for c in raced.values()))
    page = await ann.request("leaderboard", board="rating")
    assert page["type"] == "leaderboard" and "next" not in page
    expected = sorted(stored.items(), key=lambda item: (-item[1].display, item[0]))
    assert [row["player"]["id"] for row in page["rows"]] == [player_id for player_id, _ in expected]
    assert [row["rating"] for row in page["rows"]] == [rating.display for _, rating in expected]
    assert [row["races"] for row in page["rows"]] == [rating.races for _, rating in expected]
    assert [row["rank"] for row in page["rows"]] == [1, 2, 3, 4]
    names = {pid(client): name for name, client in raced.items()}
    assert [row["player"] for row in page["rows"]] == [{"id": p, "name": names[p]} for p, _ in expected]
    assert pid(raced["Unrated"]) not in {row["player"]["id"] for row in page["rows"]}
    explicit = await ann.request("leaderboard", board="rating", cells=8, order="rating", bots=False)
    assert explicit["rows"] == page["rows"]


async def test_equal_ratings_share_a_rank(raced: dict[str, WsClient]) -> None:
    page = await raced["Bo"].request("leaderboard", board="rating", cells=4)
    names = [row["player"]["name"] for row in page["rows"]]
    assert [row["rank"] for row in page["rows"]] == [1, 1, 3]
    assert sorted(names[:2]) == ["Cy", "Di"] and names[2] == "Ann"
    assert page["rows"][0]["rating"] == page["rows"][1]["rating"] > page["rows"][2]["rating"]
    assert (await raced["Bo"].request("leaderboard", board="rating", cells=2))["rows"] == []


async def test_the_rating_board_pages_and_answers_around_a_player(raced: dict[str, WsClient]) -> None:
    cy = raced["Cy"]
    whole = (await cy.request("leaderboard", board="rating"))["rows"]
    first = await cy.request("leaderboard", board="rating", limit=3)
    assert first["rows"] == whole[:3] and "next" in first
    rest = await cy.request("leaderboard", board="rating", limit=3, after=first["next"])
    assert rest["rows"] == whole[3:] and "next" not in rest
    middle = whole[2]["player"]["id"]
    around = await cy.request("leaderboard", board="rating", around=middle, limit=3)
    assert around["rows"] == whole[1:4]
    nobody = await cy.request("leaderboard", board="rating", around=pid(raced["Unrated"]))
    assert nobody["rows"] == []


async def test_the_rating_board_refuses_what_does_not_belong_to_it(raced: dict[str, WsClient]) -> None:
    """Bad input tried: the bots' rating board, a period, a code, another board's order, cells 3, a
    cursor of the C4 rating board sent to the C8 one, and a rating board's cursor sent to the players
    board."""
    ann = raced["Ann"]
    c4_page = await ann.request("leaderboard", board="rating", cells=4, limit=1)
    rating_page = await ann.request("leaderboard", board="rating", limit=1)
    refused: list[dict[str, Any]] = [
        {"bots": True},
        {"period": "all"},
        {"code": "EO1-C8-AAAAAFA"},
        {"order": "wins"},
        {"cells": 3},
        {"after": c4_page["next"]},
    ]
    for fields in refused:
        reply = await ann.request("leaderboard", board="rating", **fields)
        assert reply["type"] == "error" and reply["code"] == "bad_request", (fields, reply)
    reply = await ann.request("leaderboard", board="players", after=rating_page["next"])
    assert reply["type"] == "error" and reply["code"] == "bad_request"


async def test_a_profile_lists_the_ratings_of_each_variant(app: App, raced: dict[str, WsClient]) -> None:
    ann, di = raced["Ann"], raced["Di"]
    profile = await di.request("profile", player=pid(ann))
    c8, c4 = (await ratings_of(app, 8, pid(ann)))[pid(ann)], (await ratings_of(app, 4, pid(ann)))[pid(ann)]
    assert profile["ratings"] == [
        {"cells": 8, "rating": c8.display, "races": 3},
        {"cells": 4, "rating": c4.display, "races": 1},
    ]
    assert (await raced["Unrated"].request("profile"))["ratings"] == []


async def test_the_http_api_serves_the_same_ratings(app: App, raced: dict[str, WsClient]) -> None:
    ann = raced["Ann"]
    page = await ann.request("leaderboard", board="rating", cells=4)
    status, body = await asyncio.to_thread(http_get, app, "/api/leaderboard?board=rating&cells=4")
    assert status == 200 and body == {"rows": page["rows"]}
    status, body = await asyncio.to_thread(http_get, app, f"/api/players/{pid(ann)}")
    assert status == 200 and body["ratings"] == (await ann.request("profile"))["ratings"]
    status, body = await asyncio.to_thread(http_get, app, "/api/leaderboard?board=rating&bots=true")
    assert status == 400 and body["code"] == "bad_request" and "bots race unrated" in body["message"]


async def test_a_new_race_moves_the_board(app: App, raced: dict[str, WsClient]) -> None:
    """Di, last of C8, wins twice against the leader: the board shows it at once (no cache)."""
    ann, di = raced["Ann"], raced["Di"]
    before = {row["player"]["id"]: row for row in (await ann.request("leaderboard", board="rating"))["rows"]}
    await race(app, "race-5", 8, {pid(di): 1, pid(ann): 2})
    await race(app, "race-6", 8, {pid(di): 1, pid(ann): 2})
    after = {row["player"]["id"]: row for row in (await ann.request("leaderboard", board="rating"))["rows"]}
    assert after[pid(di)]["rating"] > before[pid(di)]["rating"]
    assert after[pid(di)]["races"] == before[pid(di)]["races"] + 2
    assert after[pid(ann)]["rating"] < before[pid(ann)]["rating"]
