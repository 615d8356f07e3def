"""Database down or blackholed: the server keeps its connections, answers every request that needs the
database with the retryable ``unavailable`` (never ``internal``) within a bounded time, says so on
/healthz, and recovers by itself when the database returns; nothing unacknowledged is claimed.
(PostgreSQL behind a proxy the test cuts or blackholes.)"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from sqlalchemy.engine import make_url

from server.app import App
from server.config import Settings
from tests.server.test_http import http_get
from tests.support import dbutil
from tests.support.tcpproxy import TcpProxy
from tests.support.waiting import eventually
from tests.support.wsclient import WsClient

#: The server's database timeout in these tests: a blackholed request must be answered soon after.
DATABASE_TIMEOUT = 1.0


@pytest.fixture
async def proxied_app() -> AsyncIterator[tuple[App, TcpProxy]]:
    server_url = dbutil.require_postgres_server_url()
    database_url = await dbutil.create_postgres_database_async(server_url)
    real = make_url(database_url)
    proxy = TcpProxy(real.host or "127.0.0.1", real.port or 5432)
    await proxy.start()
    proxied = real.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    app = await App.start(Settings(port=0, database_url=proxied, database_timeout=DATABASE_TIMEOUT))
    try:
        yield app, proxy
    finally:
        await proxy.start()  # whatever the test left it as: shutting down needs the database
        await app.shutdown()
        await dbutil.drop_postgres_database_async(server_url, database_url)


def url_of(app: App) -> str:
    return f"ws://127.0.0.1:{app.port}/ws"


async def healthz(app: App) -> int:
    status, _, _ = await asyncio.to_thread(http_get, app, "/healthz")
    return status


async def test_actions_are_unavailable_while_the_database_is_down(proxied_app: tuple[App, TcpProxy]) -> None:
    app, proxy = proxied_app
    client = await WsClient.open(url_of(app))
    await client.hello()
    game = (await client.request("new_game", code="EO1-C8-AAAAAFA"))["game"]
    assert (await client.request("move", game=game, **{"from": "t1", "to": "c5"}, v=0))["v"] == 1

    await proxy.cut()
    refused = await client.request("move", game=game, **{"from": "t2", "to": "c6"}, v=1)
    assert refused["type"] == "error" and refused["code"] == "unavailable", refused
    snapshot = await client.request("resume", game=game)
    assert snapshot["v"] == 1, "the refused action must not stay applied in memory"
    assert snapshot["cells"][5] is None

    await proxy.start()  # the database is back: the same request now succeeds, no reconnect needed
    retried = await client.request("move", game=game, **{"from": "t2", "to": "c6"}, v=1)
    assert retried["type"] == "ack" and retried["v"] == 2, retried
    await client.close()


async def played_game_out_of_memory(app: App) -> tuple[str, str]:
    """A player's token and a game of theirs that no connection follows (so it is not in memory)."""
    owner = await WsClient.open(url_of(app))
    await owner.hello()
    game = (await owner.request("new_game", code="EO1-C8-AAAAAFA"))["game"]
    assert (await owner.request("move", game=game, **{"from": "t1", "to": "c5"}))["type"] == "ack"
    await owner.close()
    await eventually(lambda: app.registry.room(game) is None, "the room of the game left is forgotten")
    assert owner.token is not None
    return owner.token, game


async def assert_unavailable_everywhere(app: App, token: str, game: str, spectator: WsClient) -> float:
    """hello (with ``token``, and as a new guest), watch of ``game`` (not in memory), live and leaderboard
    are each answered ``unavailable``; returns the slowest answer, in seconds."""
    slowest = 0.0
    for fields in ({"token": token}, {}):
        fresh = await WsClient.open(url_of(app))
        started = time.perf_counter()
        reply = await fresh.request("hello", protocol=1, **fields)
        slowest = max(slowest, time.perf_counter() - started)
        assert reply["type"] == "error" and reply["code"] == "unavailable", (fields, reply)
        await fresh.close()
    for type_, fields in (("watch", {"game": game}), ("live", {}), ("leaderboard", {"board": "variant"})):
        started = time.perf_counter()
        reply = await spectator.request(type_, **fields)
        slowest = max(slowest, time.perf_counter() - started)
        assert reply["type"] == "error" and reply["code"] == "unavailable", (type_, reply)
    return slowest


async def test_reads_are_unavailable_not_internal_while_the_database_is_down(
    proxied_app: tuple[App, TcpProxy],
) -> None:
    app, proxy = proxied_app
    token, game = await played_game_out_of_memory(app)
    owner = await WsClient.open(url_of(app))
    await owner.hello(token=token)
    spectator = await WsClient.open(url_of(app))
    await spectator.hello()

    await proxy.cut()
    await assert_unavailable_everywhere(app, token, game, spectator)
    for type_ in ("resume", "move"):
        fields = {"from": "t2", "to": "c6"} if type_ == "move" else {}
        reply = await owner.request(type_, game=game, **fields)
        assert reply["type"] == "error" and reply["code"] == "unavailable", (type_, reply)
    assert await healthz(app) == 503

    await proxy.start()  # recovery by itself: the same connections, the same requests
    assert await healthz(app) == 200
    assert (await spectator.request("watch", game=game))["v"] == 1
    assert (await owner.request("move", game=game, **{"from": "t2", "to": "c6"}, v=1))["v"] == 2
    again = await WsClient.open(url_of(app))
    assert (await again.hello(token=token))["games"] == [game]
    for client in (owner, spectator, again):
        await client.close()


async def test_a_blackholed_database_is_unavailable_within_the_timeout(
    proxied_app: tuple[App, TcpProxy],
) -> None:
    """PostgreSQL that keeps its connections open but never answers: every request that needs it is
    answered ``unavailable`` (today's bound: the database timeout plus a little; without one, the
    requests hung for the whole outage), games in memory included; /healthz says 503."""
    app, proxy = proxied_app
    token, game = await played_game_out_of_memory(app)
    player = await WsClient.open(url_of(app))
    await player.hello()
    live_game = (await player.request("new_game", code="EO1-C8-AAAAAFA"))["game"]
    spectator = await WsClient.open(url_of(app))
    await spectator.hello()

    proxy.blackhole()
    started = time.perf_counter()
    refused = await player.request("move", game=live_game, **{"from": "t1", "to": "c5"}, v=0)
    slowest = time.perf_counter() - started
    assert refused["type"] == "error" and refused["code"] == "unavailable", refused
    assert (await player.request("resume", game=live_game))["v"] == 0, "nothing refused is shown"
    slowest = max(slowest, await assert_unavailable_everywhere(app, token, game, spectator))
    assert await healthz(app) == 503
    print(f"\nblackholed database: slowest unavailable answer {slowest:.2f} s (timeout {DATABASE_TIMEOUT} s)")

    await proxy.start()

    async def healthy() -> bool:
        return await healthz(app) == 200

    # the pool drops the connections that lived through the blackhole
    await eventually(healthy, "/healthz says 200 again")
    assert (await player.request("move", game=live_game, **{"from": "t1", "to": "c5"}, v=0))["v"] == 1
    assert (await spectator.request("watch", game=game))["v"] == 1
    for client in (player, spectator):
        await client.close()
