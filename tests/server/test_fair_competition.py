"""A race's result is worth having: what a player with the server's solver, a second account or a
second address tries, over real WebSockets (docs/races.md, docs/fair-play.md)."""

from __future__ import annotations

from sqlalchemy import select

from engine import Deal
from server.app import App
from server.storage.tables import games
from solver import solve_deal
from tests.server.test_races import close_all, follow_until, lobby, race_app, start
from tests.support import serverutil
from tests.support.wire import move_fields

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
