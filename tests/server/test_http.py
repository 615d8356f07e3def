"""Plain HTTP on the WebSocket port, and what the metrics and memory say after some play."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

import pytest

from server.app import App
from tests.support.waiting import eventually
from tests.support.wsclient import WsClient


@pytest.fixture
def database_url(sqlite_database_url: str) -> str:
    """SQLite alone: the HTTP routes, the metrics and the rooms in memory are the same on either
    backend."""
    return sqlite_database_url


def http_get(app: App, path: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{app.port}{path}", timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


async def test_healthz(app: App) -> None:
    status, _, body = await asyncio.to_thread(http_get, app, "/healthz")
    assert (status, body) == (200, "ok\n")


async def test_metrics_count_connections_actions_and_errors(app: App, url: str) -> None:
    client = await WsClient.open(url)
    await client.hello()
    game = (await client.request("new_game", code="EO1-C8-AAAAAFA"))["game"]
    await client.request("move", game=game, **{"from": "t1", "to": "c5"})
    await client.request("move", game=game, **{"from": "t1", "to": "t1"})  # illegal
    status, content_type, body = await asyncio.to_thread(http_get, app, "/metrics")
    assert status == 200 and content_type.startswith("text/plain")
    assert "eightoff_connections 1.0" in body
    assert "eightoff_live_games 1.0" in body
    assert "eightoff_actions_total 1.0" in body
    assert 'eightoff_errors_total{code="illegal_move"} 1.0' in body
    assert "eightoff_action_latency_seconds_count 1.0" in body
    assert "eightoff_commit_latency_seconds_count" in body
    assert "_created" not in body  # no start-time series beside each counter and histogram
    await client.close()


@pytest.mark.parametrize("path", ["/nope", "/../pyproject.toml", "/%2e%2e/pyproject.toml"])
async def test_unknown_paths_are_404(app: App, path: str) -> None:
    status, _, _ = await asyncio.to_thread(http_get, app, path)
    assert status == 404


async def test_rooms_leave_memory_when_nobody_follows_them(app: App, url: str) -> None:
    """Memory stays bounded: a game nobody looks at is dropped, and comes back from the database."""
    clients = [await WsClient.open(url) for _ in range(20)]
    games = []
    for client in clients:
        await client.hello()
        game = (await client.request("new_game", code="EO1-C8-AAAAAFA"))["game"]
        await client.request("move", game=game, **{"from": "t1", "to": "c5"})
        games.append(game)
    assert len(list(app.registry.rooms())) == 20
    tokens = [client.token for client in clients]
    for client in clients:
        await client.close()
    await eventually(lambda: not list(app.registry.rooms()), "the rooms of the closed connections are gone")
    back = await WsClient.open(url)
    await back.hello(token=tokens[0])
    assert (await back.request("resume", game=games[0]))["v"] == 1
    await back.close()


async def test_silent_connections_are_closed_after_the_idle_timeout(settings) -> None:  # type: ignore[no-untyped-def]
    import dataclasses

    app = await App.start(dataclasses.replace(settings, idle_timeout=0.3))
    try:
        client = await WsClient.open(f"ws://127.0.0.1:{app.port}/ws")
        await client.hello()
        await asyncio.wait_for(client.ws.wait_closed(), 5)
        assert client.ws.close_code == 1000 and client.ws.close_reason == "idle timeout"
    finally:
        await app.shutdown()
