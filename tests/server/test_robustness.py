"""Failures inside the server stay contained: a refused request leaves no room in memory, and an
unexpected error in one group commit answers ``unavailable`` without stopping the next ones."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from server.app import App
from server.storage import repository
from server.storage.records import PlayerRecord
from server.storage.tables import live_rooms
from tests.support.wsclient import WsClient


async def test_refused_requests_leave_no_room_in_memory(app: App, url: str) -> None:
    owner = await WsClient.open(url)
    await owner.hello()
    games = [(await owner.request("new_game"))["game"] for _ in range(5)]
    await owner.close()  # nobody follows these games now: they leave memory
    stranger = await WsClient.open(url)
    await stranger.hello()
    for game in games:
        for type_ in ("resume", "move", "undo"):
            fields = {"from": "t1", "to": "c5"} if type_ == "move" else {}
            refused = await stranger.request(type_, game=game, **fields)
            assert refused["code"] == "forbidden"
    assert list(app.registry.rooms()) == [], "refused requests must not keep rooms loaded"
    # Nobody follows the games, so none is live: neither the owner's closed
    # connection nor the refusals' brief loads left a room recorded in the database.
    assert (await stranger.request("live"))["games"] == []
    async with app.database.connection() as conn:
        assert (await conn.execute(select(live_rooms))).all() == []
    await stranger.close()


async def test_an_unexpected_commit_error_is_unavailable_and_contained(
    app: App, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A new player's row is made by repository.player_values on either path: the async engine's
    # (PostgreSQL) and the SQLite writer thread's own connection.
    real_player_values = repository.player_values
    calls = 0

    def player_values_failing_once(player: PlayerRecord) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("a bug in storage")
        return real_player_values(player)

    monkeypatch.setattr(repository, "player_values", player_values_failing_once)
    first = await WsClient.open(url)
    refused = await first.request("hello", protocol=1)
    assert refused["type"] == "error" and refused["code"] == "unavailable"
    welcome = await first.hello()  # the committer is still alive: the retry works
    assert welcome["type"] == "welcome"
    await first.close()
