"""Database down: the server keeps its connections, answers actions with ``unavailable`` and recovers
by itself when the database returns; nothing unacknowledged is claimed (PostgreSQL behind a proxy)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import dbutil
import pytest
from sqlalchemy.engine import make_url
from tcpproxy import TcpProxy
from wsclient import WsClient

from server.app import App
from server.config import Settings


@pytest.fixture
async def proxied_app(tmp_path: object) -> AsyncIterator[tuple[App, TcpProxy]]:
    server_url = dbutil.require_postgres_server_url()
    database_url = await dbutil.create_postgres_database_async(server_url)
    real = make_url(database_url)
    proxy = TcpProxy(real.host or "127.0.0.1", real.port or 5432)
    await proxy.start()
    proxied = real.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    app = await App.start(Settings(port=0, database_url=proxied))
    try:
        yield app, proxy
    finally:
        await app.shutdown()
        await dbutil.drop_postgres_database_async(server_url, database_url)


async def test_actions_are_unavailable_while_the_database_is_down(proxied_app: tuple[App, TcpProxy]) -> None:
    app, proxy = proxied_app
    client = await WsClient.open(f"ws://127.0.0.1:{app.port}/ws")
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
