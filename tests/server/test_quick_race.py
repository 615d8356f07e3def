"""Quick match over real WebSockets, on SQLite and PostgreSQL (docs/races.md, Quick match)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import insert

from server.app import App
from server.play.race.ratings import network_of
from server.storage import races
from server.storage.tables import ratings
from tests.server.test_races import RACE_SETTINGS, Standings, close_all, follow_until, racer_address
from tests.support import serverutil
from tests.support.waiting import eventually
from tests.support.wsclient import SUBPROTOCOLS, WsClient, player

NOW = dt.datetime(2026, 12, 2, 5, 0, tzinfo=dt.UTC)


async def formed(client: WsClient) -> Standings:
    """The ``race`` snapshot pushed to a waiting client when its quick race is formed."""
    pushed = await client.next_push()
    return Standings(pushed)


def waiting(app: App, client: WsClient) -> bool:
    assert client.player is not None
    return app.services.handler.quick_match.is_waiting(client.player["id"])


async def test_enough_players_form_a_public_race_that_starts(database_url: str) -> None:
    """Two newcomers asking for a C4 quick race (enough: 2) are seated, ready, in one public race
    whose countdown runs; each gets the race's snapshot pushed, then the reveal, one deal for both."""
    settings: dict[str, Any] = {**RACE_SETTINGS, "quick_match_enough": 2}
    async with serverutil.running_app(database_url, **settings) as app:
        url = serverutil.ws_url(app)
        clients = [await player(url, SUBPROTOCOLS[i], name=f"quick-{i}") for i in range(2)]
        for client in clients:
            assert (await client.request("quick_race", cells=4))["type"] == "ok"
        copies = [await formed(client) for client in clients]
        for client, copy in zip(clients, copies, strict=True):
            race = copy.race
            assert (race["cells"], race["seats"], race["public"]) == (4, 2, True)
            assert race["state"] in ("countdown", "running")
            assert (race["deal"] is None) == (race["state"] == "countdown")  # the deal only at the reveal
            assert all(row["ready"] for row in copy.rows.values()) and copy.of(client)["seat"] in (1, 2)
            assert not waiting(app, client)
        assert copies[0].race["race"] == copies[1].race["race"]
        for client, copy in zip(clients, copies, strict=True):
            await follow_until(client, copy, lambda s: s.race["state"] == "running")
            assert copy.of(client)["game"] is not None
        assert len({copy.race["deal"] for copy in copies}) == 1
        await close_all(*clients)


async def test_the_timer_forms_a_race_at_the_wait_limit(database_url: str) -> None:
    """With four needed at once, two waiting players race each other once the wait limit passes:
    the node's timer ticks the matchmaker (nobody asks anything meanwhile)."""
    settings: dict[str, Any] = {**RACE_SETTINGS, "quick_match_enough": 4, "quick_match_wait": 1.0}
    async with serverutil.running_app(database_url, **settings) as app:
        url = serverutil.ws_url(app)
        first, second = await player(url, name="early"), await player(url, name="later")
        for client in (first, second):
            assert (await client.request("quick_race", cells=8))["type"] == "ok"
        assert waiting(app, first) and waiting(app, second)
        copies = [await formed(client) for client in (first, second)]
        assert {copy.race["race"] for copy in copies} == {copies[0].race["race"]}
        assert copies[0].race["seats"] == 2
        await close_all(first, second)


async def test_a_waiting_player_leaves_on_request_and_on_disconnect(database_url: str) -> None:
    """quick_race_leave and a closed connection both take a player out of the queue: a later player
    then finds nobody to race (enough: 2)."""
    settings: dict[str, Any] = {**RACE_SETTINGS, "quick_match_enough": 2}
    async with serverutil.running_app(database_url, **settings) as app:
        url = serverutil.ws_url(app)
        leaver, dropper, later = await player(url), await player(url), await player(url)
        assert (await leaver.request("quick_race", cells=2))["type"] == "ok"
        assert (await leaver.request("quick_race_leave"))["type"] == "ok"
        assert not waiting(app, leaver)
        assert (await dropper.request("quick_race", cells=8))["type"] == "ok"
        await dropper.close()
        await eventually(lambda: not waiting(app, dropper), "the closed connection's player left the queue")
        assert (await later.request("quick_race", cells=8))["type"] == "ok"
        assert waiting(app, later)
        assert (await later.request("quick_race", cells=2))["code"] == "illegal_move"  # still waiting
        await close_all(leaver, later)


async def test_bad_quick_race_requests_are_refused_clearly(database_url: str) -> None:
    """Bad input tried: cells 3, cells as a string, an unknown field, asking twice, leaving when not
    waiting, asking while seated in a race not over, and asking in a loop (rate limited)."""
    settings: dict[str, Any] = {**RACE_SETTINGS, "race_joins_per_player_per_minute": 3}
    async with serverutil.running_app(database_url, **settings) as app:
        url = serverutil.ws_url(app)
        client, seated = await player(url), await player(url)
        for fields in ({"cells": 3}, {"cells": "8"}, {"seats": 2}):
            assert (await client.request("quick_race", **fields))["code"] == "bad_request", fields
        assert (await client.request("quick_race_leave", cells=8))["code"] == "bad_request"
        not_waiting = await client.request("quick_race_leave")
        assert not_waiting["code"] == "not_found" and "do not wait" in not_waiting["message"]
        assert (await client.request("quick_race"))["type"] == "ok"
        twice = await client.request("quick_race")
        assert twice["code"] == "illegal_move" and "already" in twice["message"]
        assert (await client.request("quick_race_leave"))["type"] == "ok"
        assert (await client.request("quick_race"))["type"] == "ok"  # the third ask of three a minute
        assert (await client.request("quick_race_leave"))["type"] == "ok"
        flood = await client.request("quick_race")
        assert flood["code"] == "rate_limited"
        assert (await seated.request("race_create", seats=2))["type"] == "race"
        in_race = await seated.request("quick_race")
        assert in_race["code"] == "illegal_move" and "seat" in in_race["message"]
        assert not waiting(app, client) and not waiting(app, seated)
        await close_all(client, seated)


async def test_players_are_matched_by_their_stored_rating(database_url: str) -> None:
    """With no band widening and a long wait, a player rated far above the newcomers (2480 shown)
    is not raced with them; two newcomers (1000) are matched with each other."""
    settings: dict[str, Any] = {
        **RACE_SETTINGS,
        "quick_match_enough": 2,
        "quick_match_band": 50.0,
        "quick_match_widening": 0.0,
        "quick_match_wait": 600.0,
    }
    async with serverutil.running_app(database_url, **settings) as app:
        url = serverutil.ws_url(app)
        strong, first, second = [await player(url, name=name) for name in ("strong", "first", "second")]
        assert strong.player is not None
        async with app.database.transaction() as conn:
            await conn.execute(
                insert(ratings).values(
                    player_id=strong.player["id"],
                    cells=8,
                    mu=40.0,
                    sigma=1.0,
                    races=30,
                    sort_key=-2480,
                    updated_at=NOW,
                )
            )
        for client in (strong, first):
            assert (await client.request("quick_race", cells=8))["type"] == "ok"
        assert waiting(app, strong) and waiting(app, first)  # 1480 apart: no race
        assert (await second.request("quick_race", cells=8))["type"] == "ok"
        copies = [await formed(client) for client in (first, second)]
        assert copies[0].race["race"] == copies[1].race["race"]
        assert waiting(app, strong)
        await close_all(strong, first, second)


async def test_a_quick_race_seats_each_player_with_the_network_it_waited_from(database_url: str) -> None:
    """The race quick match stores (in whichever process claims it) keeps each seat's network, as a
    race joined by code does, so that the race is rated by the farming rules (docs/ratings.md)."""
    settings: dict[str, Any] = {**RACE_SETTINGS, "quick_match_enough": 2}
    async with serverutil.running_app(database_url, **settings) as app:
        url = serverutil.ws_url(app)
        clients = [await player(url, forwarded_for=racer_address(i), name=f"quick-{i}") for i in range(2)]
        for client in clients:
            assert (await client.request("quick_race"))["type"] == "ok"
        copy = await formed(clients[0])
        async with app.database.connection() as conn:
            record = await races.load_race(conn, copy.race["race"])
        assert record is not None
        by_player = {seat.player_id: seat.network for seat in record.seated}
        assert by_player == {
            client.player["id"]: network_of(racer_address(i))  # type: ignore[index]
            for i, client in enumerate(clients)
        }
        await close_all(*clients)
