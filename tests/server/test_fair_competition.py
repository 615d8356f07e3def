"""A race's result is worth having: what a player with the server's solver, a second account or a
second address tries, over real WebSockets (docs/races.md, docs/fair-play.md)."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from sqlalchemy import select

from engine import Deal
from server.app import App
from server.storage.tables import games, races
from solver import solve_deal
from tests.server.test_quotas import one_address_and_another
from tests.server.test_races import RACE_SETTINGS, close_all, follow_until, lobby, race_app, start
from tests.support import dbutil, serverutil
from tests.support.waiting import eventually
from tests.support.wire import move_fields
from tests.support.wsclient import WsClient, player

__all__ = ["race_app"]  # the fixture, shared with tests/server/test_races.py


async def test_a_racer_cannot_win_with_the_servers_hints(race_app: App) -> None:
    """Bad input tried: at the reveal a seat asks `hint` on its own seat's game (and the rival asks it
    on that game too). Both are refused forbidden, the game is not marked hinted, and the seat that
    plays the line on its own still wins a rated race (its game on the deal's board as any)."""
    url = serverutil.ws_url(race_app)
    clients, copies = await lobby(url, 2, time_limit=600)
    await start(clients, copies)
    ann, bo = clients
    game_id = copies[0].of(ann)["game"]
    refused = await ann.request("hint", game=game_id)
    assert (refused["type"], refused["code"]) == ("error", "forbidden"), refused
    assert "races take no hints" in refused["message"]
    rival = await bo.request("hint", game=game_id)
    assert (rival["type"], rival["code"]) == ("error", "forbidden"), rival
    deal = Deal.from_code(copies[0].race["deal"])
    for index, move in enumerate(solve_deal(deal).moves):
        assert (await ann.request("move", game=game_id, **move_fields(move), v=index))["type"] == "ack"
    await follow_until(ann, copies[0], lambda s: s.race["state"] == "finished")
    won = copies[0].of(ann)
    assert (won["place"], won["status"]) == (1, "won")
    assert won["rating"]["after"] > won["rating"]["before"]
    async with race_app.database.connection() as conn:
        hinted = await conn.scalar(select(games.c.hinted).where(games.c.id == game_id))
    assert hinted is False
    await close_all(*clients)


@dbutil.SQLITE_ONLY
async def test_race_requests_share_the_reads_budget_of_their_address(database_url: str) -> None:
    """Bad input tried: `race_watch` of random invitation codes, and `race_ready`, `race_start`,
    `race_leave` of random race ids, from two players of one address: each is a look-up the database
    answers when no race here has it. In a burst the address's burst (twice the rate) is answered
    (`not_found`), the rest `rate_limited`; paced just above the rate some are refused all along;
    another address follows a real race by its code all the while."""
    settings = {"reads_per_address_per_second": 5.0, "sqlite_synchronous": "NORMAL", **RACE_SETTINGS}
    letters = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
    rng = random.Random(38)

    def ask(n: int) -> dict[str, Any]:
        kind = ("race_watch", "race_ready", "race_start", "race_leave")[n % 4]
        if kind == "race_watch":
            return {"type": kind, "code": "".join(rng.choice(letters) for _ in range(8))}
        return {"type": kind, "race": f"R{rng.getrandbits(64):016x}"[:16]}

    async with serverutil.running_app(database_url, **settings) as app:
        flooders, other = await one_address_and_another(app, 2)
        code = (await other.request("race_create", seats=2, time_limit=600))["code"]

        async def burst(client: WsClient, first: int, count: int) -> list[str]:
            for n in range(first, first + count):
                await client.send({**ask(n), "id": 1000 + n})
            return [str((await client.recv()).get("code")) for _ in range(count)]

        answers = [
            code
            for part in await asyncio.gather(burst(flooders[0], 0, 15), burst(flooders[1], 15, 15))
            for code in part
        ]
        answered = answers.count("not_found")
        assert 10 <= answered <= 11 and answers.count("rate_limited") == 30 - answered, answers
        paced = []
        started = time.monotonic()
        for n in range(24):  # 7.5 a second against 5 for 3.2 s: about 8 refused
            fields = ask(n)
            kind = fields.pop("type")
            paced.append(str((await flooders[n % 2].request(kind, **fields)).get("code")))
            if n % 2:
                assert (await other.request("race_watch", code=code))["type"] == "race"
            await asyncio.sleep(max(0.0, started + (n + 1) / 7.5 - time.monotonic()))
        assert 2 <= paced.count("rate_limited") <= 12 and set(paced) <= {"not_found", "rate_limited"}, paced
        for client in (*flooders, other):
            await client.close()


@dbutil.SQLITE_ONLY
async def test_lobbies_are_capped_per_address(database_url: str) -> None:
    """Bad input tried: many guests of one address each creating races (a per-player cap alone let
    four addresses hold 3,600 lobbies). The address's allowance is spent across its players; the
    next creation is refused `rate_limited`, the others' creations from another address are not."""
    settings = {"races_per_address_per_hour": 4, "sqlite_synchronous": "NORMAL", **RACE_SETTINGS}
    async with serverutil.running_app(database_url, **settings) as app:
        crowd, other = await one_address_and_another(app, 3)
        made = [
            (await crowd[n % 3].request("race_create", seats=2, time_limit=60)).get("code", "made")
            for n in range(6)
        ]
        assert made.count("rate_limited") == 2 and all(len(code) == 8 for code in made[:4]), made
        assert (await other.request("race_create", seats=2, time_limit=60))["type"] == "race"
        for client in (*crowd, other):
            await client.close()


async def test_a_racers_deal_is_sealed_whole_while_the_race_runs(race_app: App) -> None:
    """Bad input tried: a friend who follows the race sees the deal at the reveal, starts an ordinary
    game of it and plays the solver's line; the racer asks `watch` and `replay` of that game. Both are
    refused while the race runs (the seal is per deal, not per race), and open once it is over; the
    racer's rival, no friend of anyone, is refused too; a player in no race watches the game freely."""
    url = serverutil.ws_url(race_app)
    clients, copies = await lobby(url, 2, time_limit=600)
    friend = await player(url, name="friend")
    stranger = await player(url, name="stranger")
    await friend.request("race_watch", race=copies[0].race["race"])
    await start(clients, copies)
    code = copies[0].race["deal"]
    game = (await friend.request("new_game", code=code))["game"]
    for index, move in enumerate(solve_deal(Deal.from_code(code)).moves[:5]):
        assert (await friend.request("move", game=game, **move_fields(move), v=index))["type"] == "ack"
    for racer in clients:
        for kind in ("watch", "replay"):
            refused = await racer.request(kind, game=game)
            assert (refused["type"], refused["code"]) == ("error", "forbidden"), refused
            assert f"you are racing deal {code}" in refused["message"]
    assert (await stranger.request("watch", game=game))["type"] == "snapshot"
    ann, bo = clients
    assert (await ann.request("race_leave", race=copies[0].race["race"]))["type"] == "ok"
    assert (await bo.request("race_leave", race=copies[1].race["race"]))["type"] == "ok"
    await eventually(lambda: _race_over(race_app, copies[0].race["race"]), "the race over")
    assert (await ann.request("replay", game=game))["type"] == "replay"
    assert (await bo.request("watch", game=game))["type"] == "snapshot"
    await close_all(*clients, friend, stranger)


async def _race_over(app: App, race_id: str) -> bool:
    async with app.database.connection() as conn:
        state = await conn.scalar(select(races.c.state).where(races.c.id == race_id))
    return state == "finished"


async def test_every_seat_has_a_final_board_live_and_from_storage(database_url: str) -> None:
    """Ann plays the solver's line to a win; Bo never moves. A spectator gets both seats' final boards
    at the end (Bo's is the deal as dealt), and so does a `race_watch` of the finished race after a
    restart, read from storage (the winner's board with every card home)."""
    async with serverutil.running_app(database_url, **RACE_SETTINGS) as app:
        url = serverutil.ws_url(app)
        clients, copies = await lobby(url, 2, time_limit=600)
        spectator = await player(url, name="spectator")
        race_id = copies[0].race["race"]
        await spectator.request("race_watch", race=race_id)
        await start(clients, copies)
        ann = clients[0]
        game_id = copies[0].of(ann)["game"]
        line = solve_deal(Deal.from_code(copies[0].race["deal"])).moves
        for index, move in enumerate(line):
            assert (await ann.request("move", game=game_id, **move_fields(move), v=index))["type"] == "ack"
        finals: dict[int, dict[str, Any]] = {}
        while len(finals) < 2:  # the boards released late before the end, then the final ones
            push = await spectator.next_push()
            if push["type"] == "race_board" and (push["seat"], push["board"]["v"]) in (
                (1, len(line)),
                (2, 0),
            ):
                finals[push["seat"]] = push["board"]
        assert finals[2]["moves"] == 0 and finals[1]["status"] == "won"
        tokens = [client.token for client in clients]
        await close_all(*clients, spectator)
    async with serverutil.running_app(database_url, **RACE_SETTINGS) as app:
        again = await player(serverutil.ws_url(app), token=tokens[1])
        await again.send({"type": "race_watch", "id": 7, "race": race_id})
        snapshot = await again.recv()
        assert snapshot["type"] == "race" and snapshot["state"] == "finished"
        boards = {(push := await again.recv())["seat"]: push["board"] for _ in range(2)}
        assert sorted(boards) == [1, 2] and boards[2]["v"] == 0
        assert all(top is not None and top[0] == "K" for top in boards[1]["foundations"].values())
        await again.close()


async def test_a_racer_acts_on_its_own_game_only_and_no_game_plays_on_past_the_race(race_app: App) -> None:
    """Bad input tried: a seat's move on its rival's game (refused ``forbidden``, in words for a
    racer, not a spectator); a seat that left plays on (accepted, the race's standings unchanged);
    once a seat has won, the others' moves (refused ``illegal_move``: its race is over, the
    winner's line now watchable could be copied), their resignation still taken."""
    url = serverutil.ws_url(race_app)
    clients, copies = await lobby(url, 3, time_limit=600)
    await start(clients, copies)
    ann, bo, cy = clients
    games = {client: copies[0].of(client)["game"] for client in clients}
    deal = Deal.from_code(copies[0].race["deal"])
    line = list(solve_deal(deal).moves)
    refused = await bo.request("move", game=games[ann], **move_fields(line[0]), v=0)
    assert (refused["type"], refused["code"]) == ("error", "forbidden"), refused
    assert "only its player" in refused["message"] and "spectator" not in refused["message"]

    assert (await cy.request("race_leave", race=copies[0].race["race"]))["type"] == "ok"
    await follow_until(ann, copies[0], lambda s: s.of(cy)["status"] == "left")
    played = await cy.request("move", game=games[cy], **move_fields(line[0]), v=0)
    assert played["type"] == "ack", played  # an ordinary game of its player's now
    for v, move in enumerate(line):
        assert (await ann.request("move", game=games[ann], **move_fields(move), v=v))["type"] == "ack"
    await follow_until(ann, copies[0], lambda s: s.race["state"] == "finished")
    assert copies[0].of(cy)["moves"] == 0  # the left seat's move counted in no standings

    late = await bo.request("move", game=games[bo], **move_fields(line[0]), v=0)
    assert (late["type"], late["code"]) == ("error", "illegal_move") and "race is over" in late["message"]
    assert (await bo.request("resign", game=games[bo]))["type"] == "game_over"
    await close_all(*clients)
