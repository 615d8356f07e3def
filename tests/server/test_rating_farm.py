"""A rating can't be farmed with one's own accounts (docs/ratings.md, Farming): over real WebSockets,
a main account beats alts that resign at the reveal, as the farm of a player with many guests does.

Each test turns on one rule of `server.play.race.ratings.FarmGuard` (the others off, so that what it
shows is that rule's doing), and the last one runs the server's defaults. The clients' networks are
named by a proxy on 127.0.0.1 (``forwarded_for``), as a farmer's second network would be.
The rules' tests run on SQLite alone: the counts they read are checked on both backends in
tests/storage/test_rating_networks.py; the defaults' test runs on both.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from engine import Deal
from server.app import App
from server.play.race.ratings import MEETINGS_PER_DAY, NEWCOMER, Placement, rate_race
from server.storage import ratings
from server.storage.records import Rating
from solver import solve_deal
from tests.server.test_races import RACE_SETTINGS, Standings, close_all
from tests.support import dbutil, serverutil
from tests.support.wire import move_fields
from tests.support.wsclient import WsClient, player

#: The farmer's main plays a solver's line a race, hundreds of moves a second, past the per-connection
#: rate: what these tests are about is who is rated, not the rate limit.
UNMETERED = {**RACE_SETTINGS, "rate_per_second": 100_000.0, "rate_burst": 100_000}

#: Every farming rule off: each test turns on the one it is about.
NO_GUARD = {
    **UNMETERED,
    "rated_networks": "any",
    "rated_meetings_per_day": None,
    "established_networks": None,
}


@asynccontextmanager
async def farm_server(database_url: str, **rules: Any) -> AsyncIterator[App]:
    async with serverutil.running_app(database_url, **{**NO_GUARD, **rules}) as app:
        yield app


async def racer(app: App, network: str, name: str) -> WsClient:
    return await player(serverutil.ws_url(app), forwarded_for=network, name=name)


async def duel(winner: WsClient, loser: WsClient) -> tuple[dict[str, Any], dict[str, Any]]:
    """``loser`` makes a 2-seat race, ``winner`` joins it by code; at the reveal ``loser`` resigns and
    ``winner`` plays the solver's line to a win. The finished race's rows of the winner and loser."""
    made = Standings(await loser.request("race_create", seats=2, time_limit=120))
    race_id = made.race["race"]
    joined = Standings(await winner.request("race_join", code=made.race["code"]))
    for client in (loser, winner):
        assert (await client.request("race_ready", race=race_id))["type"] == "ok"
    assert (await loser.request("race_start", race=race_id))["type"] == "ok"
    for client, copy in ((loser, made), (winner, joined)):
        await follow_race(client, copy, lambda s: s.race["state"] == "running")
    assert (await loser.request("resign", game=made.of(loser)["game"]))["type"] == "game_over"
    # done with it: following no more, its client needn't read the winner's diffs
    assert (await loser.request("race_leave", race=race_id))["type"] == "ok"
    game = joined.of(winner)["game"]
    line = solve_deal(Deal.from_code(joined.race["deal"])).moves
    replies = await winner.pipeline(
        [("move", {"game": game, **move_fields(m), "v": v}) for v, m in enumerate(line)]
    )
    assert {reply["type"] for reply in replies} <= {"ack", "game_over"}, replies
    await follow_race(winner, joined, lambda s: s.race["state"] == "finished")
    won, lost = joined.of(winner), joined.of(loser)
    assert (won["place"], lost["place"]) == (1, 2), (won, lost)
    return won, lost


async def follow_race(client: WsClient, standings: Standings, done: Callable[[Standings], bool]) -> None:
    """`follow_until` for one race, past the pushes of the client's races before it (a finished race's
    followers may still be told of its rematch)."""
    while not done(standings):
        push = await client.next_push()
        if push["type"] == "race_diff" and push["race"] == standings.race["race"]:
            standings.apply(push)


async def stored_rating(app: App, client: WsClient) -> Rating | None:
    assert client.player is not None
    async with app.database.connection() as conn:
        return (await ratings.load_ratings(conn, 8, [client.player["id"]])).get(client.player["id"])


def wins_over_newcomers(count: int) -> Rating:
    """A newcomer's rating after ``count`` wins in a row, each over a newcomer."""
    rating = NEWCOMER
    for n in range(count):
        rating = rate_race([Placement("main", 1), Placement(f"alt-{n}", 2)], {"main": rating})[0].after
    return rating


@dbutil.SQLITE_ONLY
async def test_a_farm_on_one_network_rates_nothing(database_url: str) -> None:
    """The farm of the report, from one address: a main and four fresh guests of that address, each
    guest losing on purpose. ``rated_networks distinct``: every seat shares its network, none is
    rated; the main is not on the rating board."""
    async with farm_server(database_url, rated_networks="distinct") as app:
        main = await racer(app, "203.0.113.7", "main")
        alts = [await racer(app, "203.0.113.7", f"alt-{n}") for n in range(4)]
        for alt in alts:
            won, lost = await duel(main, alt)
            assert "rating" not in won and "rating" not in lost
        assert await stored_rating(app, main) is None
        board = await main.request("leaderboard", board="rating", cells=8)
        assert board["rows"] == [], board
        # and the same two clients on two networks are rated: it is the network that decided
        stranger = await racer(app, "198.51.100.9", "stranger")
        won, _ = await duel(main, stranger)
        assert won["rating"]["before"] == 1000 < won["rating"]["after"]
        await close_all(main, stranger, *alts)


@dbutil.SQLITE_ONLY
async def test_two_networks_meet_in_at_most_three_rated_races_a_day(database_url: str) -> None:
    """A main on one network and fresh guests on a second (a phone beside the home line): of six
    farmed wins, ``rated_meetings_per_day`` (3) are rated, the rest change nothing; the main's rating
    is exactly three wins over newcomers. A third network is a new pair: it rates again."""
    assert MEETINGS_PER_DAY == 3
    async with farm_server(database_url, rated_networks="distinct", rated_meetings_per_day=3) as app:
        main = await racer(app, "203.0.113.7", "main")
        alts = [await racer(app, "198.51.100.2", f"alt-{n}") for n in range(6)]
        rated = []
        for alt in alts:
            won, _ = await duel(main, alt)
            rated.append("rating" in won)
        assert rated == [True, True, True, False, False, False]
        assert await stored_rating(app, main) == wins_over_newcomers(3)
        other = await racer(app, "192.0.2.44", "other-network")
        won, _ = await duel(main, other)
        assert "rating" in won
        await close_all(main, other, *alts)


@dbutil.SQLITE_ONLY
async def test_a_race_rates_only_between_established_players(database_url: str) -> None:
    """``established_networks`` 2 (5 by default): a race rates once two of its players have finished
    races against people of two networks other than their own. A main and its alts on two networks
    never are (each has met one network); three strangers on three networks are after a round."""
    async with farm_server(database_url, rated_networks="distinct", established_networks=2) as app:
        main = await racer(app, "203.0.113.7", "main")
        for n in range(3):
            won, _ = await duel(main, await racer(app, "198.51.100.2", f"alt-{n}"))
            assert "rating" not in won
        assert await stored_rating(app, main) is None
        x, y, z = [await racer(app, f"192.0.2.{n}", name) for n, name in ((1, "x"), (2, "y"), (3, "z"))]
        assert "rating" not in (await duel(x, y))[0]  # x met y's network, y met x's: one each
        assert "rating" not in (await duel(y, z))[0]  # y now has two; z one
        won, lost = await duel(z, x)  # z and x now have two each: established, rated
        assert "rating" in won and "rating" in lost
        await close_all(main, x, y, z)


async def test_the_default_guard_holds_the_farm_of_the_report(database_url: str) -> None:
    """The server's own defaults against the report's farm (a main, ten fresh guests, 2 networks):
    no rated race, no row on the rating board, and the main shows a newcomer's 1000 in its profile."""
    async with serverutil.running_app(database_url, **{**UNMETERED, "established_networks": 5}) as app:
        main = await racer(app, "203.0.113.7", "main")
        for n in range(10):
            network = "203.0.113.7" if n % 2 else "198.51.100.2"
            won, _ = await duel(main, await racer(app, network, f"alt-{n}"))
            assert "rating" not in won
        assert await stored_rating(app, main) is None
        assert (await main.request("leaderboard", board="rating", cells=8))["rows"] == []
        await close_all(main)
