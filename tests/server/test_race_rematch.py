"""A spectator's race_leave and the rematch of a finished race, over real WebSockets with several real
clients, on SQLite and PostgreSQL (docs/races.md, protocol/README.md section 15)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine import Deal, Game
from server.app import App
from server.storage import races
from tests.server.test_http import http_get
from tests.server.test_races import RACE_SETTINGS, Standings, close_all, follow_until, lobby, start
from tests.support import dbutil, serverutil
from tests.support.wire import move_fields
from tests.support.wsclient import WsClient, player


@pytest.fixture
async def race_app(database_url: str) -> AsyncIterator[App]:
    async with serverutil.running_app(database_url, **RACE_SETTINGS) as app:
        yield app


async def _quiet(client: WsClient, seconds: float = 0.5) -> None:
    """Nothing is pushed to ``client`` for ``seconds``."""
    with pytest.raises(TimeoutError):
        push = await client.next_push(timeout=seconds)
        pytest.fail(f"pushed {push}")


async def test_a_spectators_race_leave_stops_its_following(race_app: App) -> None:
    """A spectator (no seat) of a running race says race_leave: ok, and no more race_diff comes to it;
    the seats race on. Bad input tried: a second race_leave (it follows no more), a race_leave of a
    race never followed, of an unknown race id, of a malformed id, and without a race."""
    url = serverutil.ws_url(race_app)
    clients, copies = await lobby(url, 2, time_limit=600)
    race_id = copies[0].race["race"]
    spectator = await player(url, name="spectator")
    watched = Standings(await spectator.request("race_watch", race=race_id))
    await start(clients, copies)
    await follow_until(spectator, watched, lambda s: s.race["state"] == "running")
    left = await spectator.request("race_leave", race=race_id)
    assert left["type"] == "ok", left
    deal = Deal.from_code(copies[0].race["deal"])
    game_id = copies[0].of(clients[0])["game"]
    move = next(iter(Game(deal).legal_moves))
    assert (await clients[0].request("move", game=game_id, **move_fields(move)))["type"] == "ack"
    await follow_until(clients[1], copies[1], lambda s: s.of(clients[0])["moves"] == 1)
    await _quiet(spectator)  # no diff, no board: it follows no more
    twice = await spectator.request("race_leave", race=race_id)
    assert twice["code"] == "illegal_move" and "follow" in twice["message"], twice
    stranger = await player(url, name="stranger")
    never = await stranger.request("race_leave", race=race_id)
    assert never["code"] == "illegal_move" and "follow" in never["message"], never
    assert (await stranger.request("race_leave", race="Rc4Vn8Lq2Ztp0aXe"))["code"] == "not_found"
    assert (await stranger.request("race_leave", race="not an id!"))["code"] == "bad_request"
    assert (await stranger.request("race_leave"))["code"] == "bad_request"
    # the seats still race: standings reach them
    assert (await clients[1].request("race_watch", race=race_id))["state"] == "running"
    await close_all(spectator, stranger, *clients)


async def finish_by_resigning(clients: list[WsClient], copies: list[Standings]) -> None:
    """Every seat resigns its game: the race is over (no seat is still playing)."""
    for client, copy in zip(clients, copies, strict=True):
        assert (await client.request("resign", game=copy.of(client)["game"]))["type"] == "game_over"


async def a_finished_race(url: str, seats: int, **create: Any) -> tuple[list[WsClient], list[Standings]]:
    clients, copies = await lobby(url, seats, time_limit=600, **create)
    await start(clients, copies)
    await finish_by_resigning(clients, copies)
    for client, copy in zip(clients, copies, strict=True):
        await follow_until(client, copy, lambda s: s.race["state"] == "finished")
    return clients, copies


async def test_a_spectator_of_a_finished_race_leaves_it(race_app: App) -> None:
    """The page of a spectator closes a race that is over with race_leave: ok (not refused "no seat",
    though the finished race may no longer be followed in memory); a second one is ok too (a race
    over has nothing left to give up), and the rematch asked later does not reach it."""
    url = serverutil.ws_url(race_app)
    clients, copies = await lobby(url, 2, time_limit=600)
    race_id = copies[0].race["race"]
    spectator = await player(url, name="spectator")
    watched = Standings(await spectator.request("race_watch", race=race_id))
    await start(clients, copies)
    await finish_by_resigning(clients, copies)
    await follow_until(spectator, watched, lambda s: s.race["state"] == "finished")
    for _ in range(2):
        assert (await spectator.request("race_leave", race=race_id))["type"] == "ok"
    assert (await clients[0].request("race_rematch", race=race_id))["type"] == "race"
    await follow_until(clients[1], copies[1], lambda s: "rematch" in s.race)
    while not spectator.pushed.empty():  # the end's boards came before the leave
        assert spectator.pushed.get_nowait()["type"] == "race_board"
    await _quiet(spectator)
    await close_all(spectator, *clients)


async def test_a_rematch_is_made_by_the_first_ask_and_joined_by_the_others(race_app: App) -> None:
    """Three racers and a spectator. The first racer's race_rematch makes a new race of the same
    settings, the asker seated as its creator; every follower of the finished race gets a race_diff
    naming it; the second racer's race_rematch joins it, the third joins by its code. The link is
    stored (a race_watch of the finished race read from the database names it)."""
    url = serverutil.ws_url(race_app)
    clients, copies = await a_finished_race(url, 3, cells=4, public=True)
    race_id = copies[0].race["race"]
    spectator = await player(url, name="spectator")
    watched = Standings(await spectator.request("race_watch", race=race_id))
    assert "rematch" not in watched.race
    first, second, third = clients
    made = await first.request("race_rematch", race=race_id)
    assert made["type"] == "race", made
    assert made["race"] != race_id and made["state"] == "lobby"
    assert (made["cells"], made["seats"], made["time_limit"], made["public"]) == (4, 3, 600, True)
    assert first.player is not None and made["creator"] == first.player["id"]
    assert [row["player"]["id"] for row in made["rows"]] == [first.player["id"]]
    link = {"race": made["race"], "code": made["code"]}
    for client, copy in [*zip(clients, copies, strict=True), (spectator, watched)]:
        await follow_until(client, copy, lambda s: "rematch" in s.race)
        assert copy.race["rematch"] == link and copy.race["state"] == "finished"
    joined = await second.request("race_rematch", race=race_id)
    assert (joined["type"], joined["race"], len(joined["rows"])) == ("race", made["race"], 2), joined
    by_code = await third.request("race_join", code=made["code"])
    assert (by_code["race"], len(by_code["rows"])) == (made["race"], 3)
    again = await first.request("race_rematch", race=race_id)  # its seat again, no second race
    assert (again["race"], len(again["rows"])) == (made["race"], 3)
    rematch = Standings(made)
    await follow_until(first, rematch, lambda s: len(s.rows) == 3)
    for follower in (*clients, spectator):  # the last follower goes: the finished race is let go
        assert (await follower.request("race_leave", race=race_id))["type"] == "ok"
    assert race_app.races.room(race_id) is None
    stored = await spectator.request("race_watch", race=race_id)  # read from the database now
    assert stored["rematch"] == link and stored["state"] == "finished"
    await close_all(spectator, *clients)


async def test_two_asks_at_once_make_one_rematch(race_app: App) -> None:
    """Both racers ask at the same instant: one race is made, both are seated in it."""
    url = serverutil.ws_url(race_app)
    clients, copies = await a_finished_race(url, 2)
    race_id = copies[0].race["race"]
    replies = await asyncio.gather(*(client.request("race_rematch", race=race_id) for client in clients))
    assert {reply["type"] for reply in replies} == {"race"}, replies
    assert len({reply["race"] for reply in replies}) == 1
    assert max(len(reply["rows"]) for reply in replies) == 2
    _, _, metrics = await asyncio.to_thread(http_get, race_app, "/metrics")
    assert "eightoff_races_made_total 2.0" in metrics
    await close_all(*clients)


async def test_bad_rematch_requests_are_refused_clearly(database_url: str) -> None:
    """Bad input tried: a rematch asked by a spectator (no seat), of a race still running, of a
    cancelled race, of an unknown race, with a malformed id, without a race, with an extra field,
    and past the creations allowance (the asker has made its races of the hour)."""
    settings = {**RACE_SETTINGS, "races_per_player_per_hour": 2}
    async with serverutil.running_app(database_url, **settings) as app:
        url = serverutil.ws_url(app)
        clients, copies = await lobby(url, 2, time_limit=600)
        race_id = copies[0].race["race"]
        await start(clients, copies)
        running = await clients[1].request("race_rematch", race=race_id)
        assert running["code"] == "illegal_move" and "finished" in running["message"], running
        await finish_by_resigning(clients, copies)
        await follow_until(clients[0], copies[0], lambda s: s.race["state"] == "finished")
        spectator = await player(url, name="spectator")
        unseated = await spectator.request("race_rematch", race=race_id)
        assert unseated["code"] == "illegal_move" and "no seat" in unseated["message"], unseated
        assert (await spectator.request("race_rematch", race="Rc4Vn8Lq2Ztp0aXe"))["code"] == "not_found"
        for fields in ({"race": "not an id!"}, {}, {"race": race_id, "seats": 2}):
            assert (await spectator.request("race_rematch", **fields))["code"] == "bad_request", fields
        cancelled = await spectator.request("race_create", seats=2)
        assert (await spectator.request("race_leave", race=cancelled["race"]))["type"] == "ok"
        refused = await spectator.request("race_rematch", race=cancelled["race"])
        assert refused["code"] == "illegal_move" and "cancelled" in refused["message"], refused
        # clients[0] made the race (one of its 2 an hour) and one more: no rematch made by it now
        assert (await clients[0].request("race_create", seats=2))["type"] == "race"
        limited = await clients[0].request("race_rematch", race=race_id)
        assert limited["code"] == "rate_limited" and "races created" in limited["message"], limited
        # ... but once made by the other player, it joins it: a join, within its allowance
        assert (await clients[1].request("race_rematch", race=race_id))["type"] == "race"
        joined = await clients[0].request("race_rematch", race=race_id)
        assert joined["type"] == "race" and len(joined["rows"]) == 2, joined
        await close_all(spectator, *clients)


@pytest.fixture
async def two_race_nodes() -> AsyncIterator[tuple[App, App]]:
    """Two nodes on one PostgreSQL database and one Redis, with the short race settings (skipped
    unless CI provides both)."""
    server_url = dbutil.require_postgres_server_url()
    redis_url = os.environ.get("EIGHTOFF_TEST_REDIS_URL")
    if not redis_url:
        pytest.skip("EIGHTOFF_TEST_REDIS_URL is not set (CI sets it)")
    database_url = await dbutil.create_postgres_database_async(server_url)
    try:
        async with (
            serverutil.running_app(database_url, redis_url=redis_url, node="node-a", **RACE_SETTINGS) as a,
            serverutil.running_app(database_url, redis_url=redis_url, node="node-b", **RACE_SETTINGS) as b,
        ):
            yield a, b
    finally:
        await dbutil.drop_postgres_database_async(server_url, database_url)


async def test_two_asks_on_two_nodes_make_one_rematch(two_race_nodes: tuple[App, App]) -> None:
    """The race finished on node A (kept there); one player asks there, the other's connection on node
    B asks at the same instant (B reads the race from the database). The race's revision fences the
    link: one rematch is stored, and both askers are seated in it (the loser, told stale, reads the
    race again and joins the rematch it names)."""
    node_a, node_b = two_race_nodes
    clients, copies = await a_finished_race(serverutil.ws_url(node_a), 2)
    race_id = copies[0].race["race"]
    on_b = await player(serverutil.ws_url(node_b), token=clients[1].token)
    replies = await asyncio.gather(
        clients[0].request("race_rematch", race=race_id), on_b.request("race_rematch", race=race_id)
    )
    assert {reply["type"] for reply in replies} == {"race"}, replies
    (rematch_id,) = {reply["race"] for reply in replies}
    async with node_a.database.connection() as conn:
        stored = await races.load_race(conn, race_id)
        made = await races.load_race(conn, rematch_id)
    assert stored is not None and made is not None
    assert (stored.rematch_id, stored.rematch_code, stored.state) == (rematch_id, made.code, "finished")
    assert (made.state, made.cells, made.seats, made.time_limit_s) == ("lobby", 8, 2, 600)
    seated = {seat.player_id for seat in made.seated}
    assert clients[0].player is not None and clients[0].player["id"] in seated
    await close_all(on_b, *clients)


async def test_a_follower_on_another_node_is_told_of_the_rematch(two_race_nodes: tuple[App, App]) -> None:
    """The racers on node A, a spectator following on node B (B holds a copy of the race). The race
    ends; the rematch asked on A is published: B's copy, kept for its follower, reads the race again
    and its spectator gets the race_diff naming the rematch."""
    node_a, node_b = two_race_nodes
    clients, copies = await lobby(serverutil.ws_url(node_a), 2, time_limit=600)
    race_id = copies[0].race["race"]
    spectator = await player(serverutil.ws_url(node_b), name="spectator on B")
    watched = Standings(await spectator.request("race_watch", race=race_id))
    await start(clients, copies)
    await finish_by_resigning(clients, copies)
    await follow_until(spectator, watched, lambda s: s.race["state"] == "finished")
    made = await clients[0].request("race_rematch", race=race_id)
    assert made["type"] == "race", made
    await follow_until(spectator, watched, lambda s: "rematch" in s.race)
    assert watched.race["rematch"] == {"race": made["race"], "code": made["code"]}
    await close_all(spectator, *clients)
