"""Races over real WebSockets, with several real clients, on SQLite and PostgreSQL (docs/races.md)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from engine import Deal, Game
from server.app import App
from server.clock import utc_now
from solver import solve_deal
from tests.server.test_http import http_get
from tests.support import serverutil
from tests.support.waiting import eventually
from tests.support.wire import move_fields
from tests.support.wsclient import SUBPROTOCOLS, WsClient, player

#: A countdown and a board delay short enough for tests; the racers' addresses are named by a proxy
#: on 127.0.0.1 (`racer_address`), so that each is on a network of its own, as rated racers must be;
#: every racer counts as established (the farming tests, tests/server/test_fair_competition.py,
#: establish theirs by racing).
RACE_SETTINGS = {
    "race_countdown": 0.2,
    "race_board_delay": 0.3,
    "sqlite_synchronous": "NORMAL",
    "trusted_proxies": "127.0.0.1",
    "established_networks": None,
}


def racer_address(index: int) -> str:
    """The address racer ``index`` connects from (TEST-NET-2: no real client's)."""
    return f"198.51.100.{index + 1}"


@pytest.fixture
async def race_app(database_url: str) -> AsyncIterator[App]:
    async with serverutil.running_app(database_url, **RACE_SETTINGS) as app:
        yield app


class Standings:
    """A client's copy of a race, kept from its snapshot and diffs (``v`` checked, as a client must)."""

    def __init__(self, race: dict[str, Any]) -> None:
        assert race["type"] == "race"
        self.race = race
        self.rows = {row["seat"]: row for row in race["rows"]}

    def apply(self, diff: dict[str, Any]) -> None:
        assert diff["type"] == "race_diff" and diff["v"] == self.race["v"] + 1, (diff, self.race["v"])
        for key in ("v", "creator", "state", "starts_at", "ends_at", "deal"):
            self.race[key] = diff[key]
        if "rematch" in diff:  # a finished race's rematch, once asked (absent until then)
            self.race["rematch"] = diff["rematch"]
        self.rows.update({row["seat"]: row for row in diff["rows"]})
        for seat in diff["gone"]:
            del self.rows[seat]

    def of(self, client: WsClient) -> dict[str, Any]:
        assert client.player is not None
        return next(row for row in self.rows.values() if row["player"]["id"] == client.player["id"])


async def follow_until(
    client: WsClient, standings: Standings, done: Callable[[Standings], bool]
) -> list[dict[str, Any]]:
    """Apply the client's race diffs until ``done``; the other pushes (boards) it got on the way."""
    others = []
    while not done(standings):
        push = await client.next_push()
        if push["type"] == "race_diff":
            standings.apply(push)
        else:
            others.append(push)
    return others


async def lobby(url: str, seats: int, **create: Any) -> tuple[list[WsClient], list[Standings]]:
    """``seats`` players in one race, every seat ready: their clients and copies of the race."""
    clients = [
        await player(url, SUBPROTOCOLS[i % 2], forwarded_for=racer_address(i), name=f"racer-{i}")
        for i in range(seats)
    ]
    first = Standings(await clients[0].request("race_create", seats=seats, **create))
    copies = [first]
    for client in clients[1:]:
        joined = await client.request("race_join", code=first.race["code"])
        copies.append(Standings(joined))
    race_id = first.race["race"]
    for client in clients:
        assert (await client.request("race_ready", race=race_id))["type"] == "ok"
    for client, copy in zip(clients, copies, strict=True):
        await follow_until(client, copy, lambda s: all(row["ready"] for row in s.rows.values()))
        assert len(copy.rows) == seats
    return clients, copies


async def start(clients: list[WsClient], copies: list[Standings]) -> None:
    """The creator starts; every seat sees the countdown, then the reveal with the deal and its game."""
    race_id = copies[0].race["race"]
    assert (await clients[0].request("race_start", race=race_id))["type"] == "ok"
    for client, copy in zip(clients, copies, strict=True):
        await follow_until(client, copy, lambda s: s.race["state"] == "running")
        assert copy.race["deal"] is not None and copy.of(client)["game"] is not None
    assert len({copy.race["deal"] for copy in copies}) == 1  # one deal for everyone


async def close_all(*clients: WsClient) -> None:
    for client in clients:
        await client.close()


async def test_eight_seats_raced_to_a_win(race_app: App) -> None:
    """Eight players race one winnable deal; one plays the solver's line, the others a move each;
    everyone's standings follow every action, the winner takes place 1, and the boards open at the end."""
    url = serverutil.ws_url(race_app)
    clients, copies = await lobby(url, 8, time_limit=600)
    await start(clients, copies)
    deal = Deal.from_code(copies[0].race["deal"])
    for client, copy in list(zip(clients, copies, strict=True))[1:]:
        game_id = copy.of(client)["game"]
        snapshot = await client.request("resume", game=game_id)
        assert snapshot["type"] == "snapshot" and snapshot["code"] == deal.code()
        first = next(iter(Game(deal).legal_moves))
        assert (await client.request("move", game=game_id, **move_fields(first)))["type"] == "ack"
    winner, winner_copy = clients[0], copies[0]
    game_id = winner_copy.of(winner)["game"]
    solution = list(solve_deal(deal).moves)
    for index, move in enumerate(solution):
        reply = await winner.request("move", game=game_id, **move_fields(move), v=index)
        assert reply["type"] == "ack", reply
    for client, copy in zip(clients, copies, strict=True):
        others = await follow_until(client, copy, lambda s: s.race["state"] == "finished")
        assert [push["type"] for push in others] == (["game_over"] if client is winner else [])
        won = copy.of(winner)
        assert (won["place"], won["status"], won["cards_home"], won["moves"]) == (1, "won", 52, len(solution))
        # the others moved once each, none home: tied on cards and moves, then by time
        assert sorted(row["place"] for row in copy.rows.values())[:2] == [1, 2]
        assert all(
            row["status"] == "playing" and row["moves"] == 1 for row in copy.rows.values() if row != won
        )
        # no board before the race is over, to anyone seated; then everyone's final board
        finals = [await client.next_push() for _ in range(8)]
        assert {push["type"] for push in finals} == {"race_board"}
        assert {push["seat"] for push in finals} == set(range(1, 9))
    _, _, metrics = await asyncio.to_thread(http_get, race_app, "/metrics")
    assert "eightoff_races_made_total 1.0" in metrics and "eightoff_live_races 0.0" in metrics
    assert 'eightoff_races_ended_total{how="won"} 1.0' in metrics
    (updates,) = [
        float(line.split()[1])
        for line in metrics.splitlines()
        if line.startswith("eightoff_race_updates_total ")
    ]
    assert updates >= 8 * (len(solution) + 7)  # every seat got every action's standings
    # Rated as one match of eight, in the transaction that finished the race (docs/ratings.md): each
    # player's first C8 race, the winner rated above every other.
    # ... and the result told every follower each seat's shown rating before and after it
    ratings = {}
    for client in clients:
        profile = await client.request("profile")
        (rating,) = profile["ratings"]
        assert (rating["cells"], rating["races"]) == (8, 1), rating
        ratings[client] = rating["rating"]
        for copy in copies:
            assert copy.of(client)["rating"] == {"before": 1000, "after": rating["rating"]}
    assert all(ratings[winner] > rating for client, rating in ratings.items() if client is not winner)
    # a race over is read from the database when watched: its rows carry the same changes
    late = Standings(await winner.request("race_watch", race=winner_copy.race["race"]))
    assert late.race["state"] == "finished"
    assert {row["seat"]: row["rating"] for row in late.rows.values()} == {
        row["seat"]: row["rating"] for row in winner_copy.rows.values()
    }
    board = await winner.request("leaderboard", board="rating", cells=8)
    assert winner.player is not None and board["rows"][0]["player"]["id"] == winner.player["id"]
    await close_all(*clients)


async def test_time_limit_ends_the_race_on_most_cards_home(race_app: App) -> None:
    """At the time limit the seat with more cards home wins; fewer moves breaks a tie of cards."""
    url = serverutil.ws_url(race_app)
    offset = dt.timedelta()
    race_app.races.clock = lambda: utc_now() + offset
    clients, copies = await lobby(url, 3, time_limit=30)
    await start(clients, copies)
    deal = Deal.from_code(copies[0].race["deal"])
    line = list(solve_deal(deal).moves)
    home = next(i for i, move in enumerate(line) if move.target.symbol().startswith("f"))
    # racer 0 plays up to its first card home; racer 1 the moves before it; racer 2 nothing
    for client, copy, count in zip(clients, copies, (home + 1, home, 0), strict=True):
        game_id = copy.of(client)["game"]
        for index, move in enumerate(line[:count]):
            assert (await client.request("move", game=game_id, **move_fields(move), v=index))["type"] == "ack"
    for client, copy in zip(clients, copies, strict=True):
        await follow_until(client, copy, lambda s: s.of(clients[0])["cards_home"] >= 1)
    offset = dt.timedelta(seconds=31)
    race_app.races.wake_all()
    for client, copy in zip(clients, copies, strict=True):
        await follow_until(client, copy, lambda s: s.race["state"] == "finished")
        # racer 0: a card home; racer 2 (no move) before racer 1 (more moves); tied when both made none
        assert [copy.of(c)["place"] for c in clients] == ([1, 3, 2] if home else [1, 2, 2])
        assert [copy.of(c)["status"] for c in clients] == ["playing"] * 3
    await close_all(*clients)


async def test_a_racer_who_disconnects_keeps_the_seat_and_resumes(race_app: App) -> None:
    """A racer's connection drops mid-race; with its token it gets the race and its game back."""
    url = serverutil.ws_url(race_app)
    clients, copies = await lobby(url, 2, time_limit=600)
    await start(clients, copies)
    deal = Deal.from_code(copies[0].race["deal"])
    line = list(solve_deal(deal).moves)
    racer, copy = clients[1], copies[1]
    game_id = copy.of(racer)["game"]
    for index, move in enumerate(line[:3]):
        assert (await racer.request("move", game=game_id, **move_fields(move), v=index))["type"] == "ack"
    await racer.close()
    again = await player(url, token=racer.token)
    fresh = Standings(await again.request("race_watch", race=copy.race["race"]))
    assert fresh.of(again)["game"] == game_id and fresh.of(again)["moves"] == 3
    snapshot = await again.request("resume", game=game_id)
    assert snapshot["v"] == 3
    rejoined = Standings(await again.request("race_join", code=copy.race["code"]))  # its seat, again
    assert rejoined.of(again)["seat"] == copy.of(racer)["seat"] and len(rejoined.rows) == 2
    reply = await again.request("move", game=game_id, **move_fields(line[3]), v=3)
    assert reply["type"] == "ack"
    await follow_until(clients[0], copies[0], lambda s: s.of(again)["moves"] == 4)
    await close_all(clients[0], again)


async def test_fair_play_a_racer_sees_no_rival_board_a_spectator_sees_them_late(race_app: App) -> None:
    """A racer's second connection may not watch a rival's game and gets no boards; a spectator
    who holds no seat gets each board late, and the standings at once."""
    url = serverutil.ws_url(race_app)
    clients, copies = await lobby(url, 2, time_limit=600)
    race_id = copies[0].race["race"]
    second = await player(url, token=clients[0].token)
    spectator = await player(url, name="spectator")
    second_copy = Standings(await second.request("race_watch", race=race_id))
    watch_copy = Standings(await spectator.request("race_watch", race=race_id))
    await start(clients, copies)
    for client, copy in ((second, second_copy), (spectator, watch_copy)):
        await follow_until(client, copy, lambda s: s.race["state"] == "running")
    rival_game = copies[1].of(clients[1])["game"]
    refused = await second.request("watch", game=rival_game)
    assert refused["type"] == "error" and refused["code"] == "forbidden"
    refused = await spectator.request("watch", game=rival_game)
    assert refused["type"] == "error" and refused["code"] == "forbidden"  # boards come through the race
    # The rival opens its game as a racer's client does at the reveal: a game someone has open is live
    # (server.play.presence), listed sealed to everyone else until the race is over.
    assert (await clients[1].request("resume", game=rival_game))["type"] == "snapshot"
    listed = {game["game"]: game for game in (await spectator.request("live"))["games"]}
    assert listed[rival_game].get("sealed") is True
    deal = Deal.from_code(copies[0].race["deal"])
    move = next(iter(Game(deal).legal_moves))
    assert (await clients[1].request("move", game=rival_game, **move_fields(move)))["type"] == "ack"
    pushed = await follow_until(spectator, watch_copy, lambda s: s.of(clients[1])["moves"] == 1)
    board = pushed[0] if pushed else await spectator.next_push()
    assert board["type"] == "race_board" and board["board"]["game"] == rival_game
    assert board["board"]["v"] == 1
    await follow_until(second, second_copy, lambda s: s.of(clients[1])["moves"] == 1)
    assert second.pushed.empty()
    own = copies[0].of(clients[0])["game"]
    assert (await second.request("move", game=own, **move_fields(move)))["type"] == "ack"
    with pytest.raises(TimeoutError):  # the board delay is long past: a racer gets none
        await _no_board(second, second_copy)
    await close_all(*clients, second, spectator)


async def _no_board(client: WsClient, copy: Standings) -> None:
    """Read the client's pushes for a second: diffs are applied, a board fails the test."""
    while True:
        push = await client.next_push(timeout=1.0)
        assert push["type"] == "race_diff", push
        copy.apply(push)


async def test_bad_race_requests_are_refused_clearly(race_app: App) -> None:
    """Bad input tried: an unknown code, starting with a seat not ready, starting as not the creator,
    joining a full race, acting before the reveal (no game yet) and on a rival's game, readying after
    the start, leaving twice, and fields out of range."""
    url = serverutil.ws_url(race_app)
    creator = await player(url, name="creator")
    other = await player(url, name="other")
    late = await player(url, name="late")
    unknown = await creator.request("race_join", code="ABCDEFGH")
    assert unknown["code"] == "not_found"
    for fields in ({"seats": 9}, {"seats": 1}, {"time_limit": 5}, {"cells": 3}, {"public": 1}, {"x": 1}):
        assert (await creator.request("race_create", **fields))["code"] == "bad_request", fields
    assert (await creator.request("race_join", code="abc"))["code"] == "bad_request"
    race = await creator.request("race_create", seats=2)
    race_id, code = race["race"], race["code"]
    assert (await other.request("race_join", code=code))["type"] == "race"
    assert (await creator.request("race_ready", race=race_id))["type"] == "ok"
    not_ready = await creator.request("race_start", race=race_id)
    assert not_ready["code"] == "illegal_move" and "not ready" in not_ready["message"]
    assert (await other.request("race_ready", race=race_id))["type"] == "ok"
    assert (await other.request("race_start", race=race_id))["code"] == "forbidden"
    full = await late.request("race_join", code=code)
    assert full["code"] == "illegal_move" and "full" in full["message"]
    no_game = await other.request("move", game="no-such-game", **{"from": "t1", "to": "c1"})
    assert no_game["code"] == "not_found"
    assert (await creator.request("race_start", race=race_id))["type"] == "ok"
    copy = Standings(await late.request("race_watch", race=race_id))
    await follow_until(late, copy, lambda s: s.race["state"] == "running")
    rival = copy.of(other)["game"]
    assert (await creator.request("move", game=rival, **{"from": "t1", "to": "c1"}))["code"] == "forbidden"
    assert (await creator.request("race_ready", race=race_id))["code"] == "illegal_move"
    assert (await late.request("race_join", code=code))["code"] == "illegal_move"  # started
    assert (await other.request("race_leave", race=race_id))["type"] == "ok"
    twice = await other.request("race_leave", race=race_id)
    assert twice["code"] == "illegal_move" and "no seat" in twice["message"]
    await close_all(creator, other, late)


async def test_a_stranger_with_the_code_watches_a_started_race(race_app: App) -> None:
    """race_join of a started race is refused; race_watch with its code follows it as a spectator
    (the standings live, no seat). Bad input tried: an unknown code, both race and code."""
    url = serverutil.ws_url(race_app)
    clients, copies = await lobby(url, 2, time_limit=600)
    await start(clients, copies)
    code, race_id = copies[0].race["code"], copies[0].race["race"]
    stranger = await player(url, name="stranger")
    assert (await stranger.request("race_join", code=code))["code"] == "illegal_move"
    watched = Standings(await stranger.request("race_watch", code=code))
    assert (watched.race["race"], watched.race["state"]) == (race_id, "running")
    assert stranger.player is not None
    assert all(row["player"]["id"] != stranger.player["id"] for row in watched.rows.values())
    deal = Deal.from_code(watched.race["deal"])
    game_id = copies[0].of(clients[0])["game"]
    move = next(iter(Game(deal).legal_moves))
    assert (await clients[0].request("move", game=game_id, **move_fields(move)))["type"] == "ack"
    await follow_until(stranger, watched, lambda s: s.of(clients[0])["moves"] == 1)
    assert (await stranger.request("race_watch", code="ABCDEFGH"))["code"] == "not_found"
    both = await stranger.request("race_watch", race=race_id, code=code)
    assert both["code"] == "bad_request"
    await close_all(stranger, *clients)


async def test_race_creation_loops_are_rate_limited(database_url: str) -> None:
    """A player creating races in a loop is refused once over its hourly allowance."""
    async with serverutil.running_app(database_url, races_per_player_per_hour=3, **RACE_SETTINGS) as app:
        client = await player(serverutil.ws_url(app))
        for _ in range(3):
            assert (await client.request("race_create", seats=2))["type"] == "race"
        refused = await client.request("race_create", seats=2)
        assert refused["code"] == "rate_limited" and "races created" in refused["message"]
        await client.close()


async def test_a_race_survives_a_restart(database_url: str) -> None:
    """A running race is taken up again by a restarted server, not at its start (no node takes up
    every open race: the sweep takes up those due) but when a seat's game is resumed there (a bot
    that only resumes its game still reaches the race): the standings go on from the stored games."""
    async with serverutil.running_app(database_url, **RACE_SETTINGS) as app:
        clients, copies = await lobby(serverutil.ws_url(app), 2, time_limit=600)
        await start(clients, copies)
        deal = Deal.from_code(copies[0].race["deal"])
        move = next(iter(Game(deal).legal_moves))
        game_id = copies[0].of(clients[0])["game"]
        assert (await clients[0].request("move", game=game_id, **move_fields(move)))["type"] == "ack"
        tokens = [client.token for client in clients]
        race_id = copies[0].race["race"]
        await close_all(*clients)
    async with serverutil.running_app(database_url, **RACE_SETTINGS) as app:
        assert app.races.room(race_id) is None  # not due: not taken up at start
        again = await player(serverutil.ws_url(app), token=tokens[0])
        assert (await again.request("resume", game=game_id))["v"] == 1
        await eventually(lambda: app.races.room(race_id) is not None, "the seat's game takes its race up")
        copy = Standings(await again.request("race_watch", race=race_id))
        assert copy.race["state"] == "running" and copy.of(again)["moves"] == 1
        await again.close()


async def test_race_join_and_leave_floods_are_rate_limited(database_url: str) -> None:
    """A player joining and leaving a race in a loop is refused once over its allowance a minute."""
    settings = {**RACE_SETTINGS, "race_joins_per_player_per_minute": 4}
    async with serverutil.running_app(database_url, **settings) as app:
        url = serverutil.ws_url(app)
        creator, flooder = await player(url), await player(url)
        race = await creator.request("race_create", seats=2)
        for _ in range(2):
            assert (await flooder.request("race_join", code=race["code"]))["type"] == "race"
            assert (await flooder.request("race_leave", race=race["race"]))["type"] == "ok"
        refused = await flooder.request("race_join", code=race["code"])
        assert refused["code"] == "rate_limited" and "joins and leaves" in refused["message"]
        await close_all(creator, flooder)


async def test_race_ready_as_the_spec_says(race_app: App) -> None:
    """protocol/README.md, race_create and race_ready. Bad input tried: a ready from a player with no
    seat, for a race id that does not exist, and after the start; the creator's seat starts not
    ready; a ready said twice is ok, its diff changing no row."""
    url = serverutil.ws_url(race_app)
    ann, bo, eve = [await player(url, name=name) for name in ("ann", "bo", "eve")]
    made = Standings(await ann.request("race_create", seats=2))
    race_id = made.race["race"]
    assert made.of(ann)["ready"] is False
    stranger = await eve.request("race_ready", race=race_id)
    assert (stranger["type"], stranger["code"]) == ("error", "illegal_move"), stranger
    missing = await ann.request("race_ready", race="NoSuchRace000000")
    assert (missing["type"], missing["code"]) == ("error", "not_found"), missing
    joined = Standings(await bo.request("race_join", code=made.race["code"]))
    for _ in range(2):
        assert (await ann.request("race_ready", race=race_id))["type"] == "ok"
    await follow_until(ann, made, lambda s: s.race["v"] == 2)  # bo's join, ann's ready
    assert made.of(ann)["ready"] is True
    again = await ann.next_push()
    assert (again["type"], again["v"], again["rows"], again["gone"]) == ("race_diff", 3, [], [])
    assert (await bo.request("race_ready", race=race_id))["type"] == "ok"
    assert (await ann.request("race_start", race=race_id))["type"] == "ok"
    await follow_until(bo, joined, lambda s: s.race["state"] != "lobby")
    late = await bo.request("race_ready", race=race_id, ready=False)
    assert (late["type"], late["code"]) == ("error", "illegal_move"), late
    await close_all(ann, bo, eve)
