"""Bad input and limits (DESIGN.md section 7) against a real server: every case gets its documented
error or close code, and other clients keep being served meanwhile.

Tried here: every invalid message and raw frame of protocol/vectors/client_messages.json in both
subprotocols (unknown types, missing/extra/mistyped fields, huge numbers, deep nesting, non-string keys,
invalid UTF-8, broken msgpack and JSON, the wrong frame kind, oversized frames); floods past the token
bucket; too many games and watches on one connection; a spectator, and a player, that never reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgpack  # type: ignore[import-untyped]
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from server.app import App
from tests.support import serverutil
from tests.support.wsclient import SUBPROTOCOLS, WsClient

VECTORS = json.loads(
    (Path(__file__).parents[2] / "protocol" / "vectors" / "client_messages.json").read_text()
)


@pytest.fixture
def database_url(sqlite_database_url: str) -> str:
    """SQLite alone: bad frames, floods and clients that never read meet the transport before any
    database does; what each request gets from storage is tried on both backends elsewhere
    (test_play, test_spec_promises)."""
    return sqlite_database_url


@pytest.fixture
async def strict_app(database_url: str) -> AsyncIterator[App]:
    limits = {"rate_per_second": 20.0, "rate_burst": 20}
    per_connection = {"max_games_per_connection": 2, "max_watches_per_connection": 2}
    async with serverutil.running_app(database_url, **limits, **per_connection) as app:
        yield app


@pytest.mark.parametrize("subprotocol", SUBPROTOCOLS)
async def test_invalid_message_vectors_get_their_error(url: str, subprotocol: str) -> None:
    client = await WsClient.open(url, subprotocol)
    await client.hello()
    for case in VECTORS["invalid"]:
        await client.send(case["message"])
        reply = await client.recv()
        assert reply["type"] == "error", case["name"]
        assert reply["code"] == case["error"], (case["name"], reply)
        assert reply.get("id") == case["id"], (case["name"], reply)
    # the connection is still open and serving
    assert (await client.request("live"))["type"] == "live"
    await client.close()


@pytest.mark.parametrize("case", VECTORS["frames"], ids=lambda case: case["name"])
async def test_raw_frame_vectors(url: str, case: dict[str, Any]) -> None:
    client = await WsClient.open(url, case["subprotocol"])
    await client.hello()
    frame: bytes | str = bytes.fromhex(case["binary_hex"]) if "binary_hex" in case else case["text"]
    await client.ws.send(frame)
    if case.get("valid"):
        reply = await client.recv()
        assert reply["type"] != "error" or reply["code"] != "bad_request", reply
        return
    reply = await client.recv()
    assert reply["type"] == "error" and reply["code"] == case["error"], reply
    assert reply.get("id") == case["id"]
    if case["close"] is None:
        assert (await client.request("live"))["type"] == "live"
    else:
        with pytest.raises(ConnectionClosed):
            await client.recv()
        assert client.ws.close_code == case["close"]


async def test_flood_is_refused_then_closed_while_others_are_served(strict_app: App) -> None:
    url = serverutil.ws_url(strict_app)
    flooder = await WsClient.open(url)
    await flooder.hello()
    calm = await WsClient.open(url)
    await calm.hello()
    game = (await calm.request("new_game"))["game"]

    async def send_all() -> None:
        # On a loaded machine the server may read, refuse and close before the last frames are
        # sent: a send after the close raises, and only the replies read count.
        with contextlib.suppress(ConnectionClosed):
            for index in range(200):
                await flooder.send({"type": "live", "id": index})

    async def flood() -> list[dict[str, Any]]:
        sending = asyncio.create_task(send_all())
        replies = []
        try:
            while True:
                replies.append(await flooder.recv(timeout=5))
        except ConnectionClosed:
            await sending
            return replies

    flood_task = asyncio.create_task(flood())
    # The calm player is served meanwhile; its round trips during a flood are figures that
    # bench/bench_attacks.py (flood) reports, not a promise a test can time on a shared machine.
    for _ in range(10):
        assert (await calm.request("resume", game=game))["type"] == "snapshot"
    replies = await flood_task
    assert any(reply.get("code") == "rate_limited" for reply in replies)
    assert flooder.ws.close_code == 1008
    await calm.close()


async def test_too_many_games_and_watches(strict_app: App) -> None:
    client = await WsClient.open(serverutil.ws_url(strict_app))
    await client.hello()
    games = [(await client.request("new_game"))["game"] for _ in range(2)]
    third = await client.request("new_game")
    assert third["type"] == "error" and third["code"] == "rate_limited"
    watcher = await WsClient.open(serverutil.ws_url(strict_app))
    await watcher.hello()
    for game in games:
        assert (await watcher.request("watch", game=game))["type"] == "snapshot"
    other = await WsClient.open(serverutil.ws_url(strict_app))
    await other.hello()
    extra = (await other.request("new_game"))["game"]
    refused = await watcher.request("watch", game=extra)
    assert refused["type"] == "error" and refused["code"] == "rate_limited"
    assert (await watcher.request("unwatch", game=games[0]))["type"] == "ok"
    assert (await watcher.request("watch", game=extra))["type"] == "snapshot"
    # leaving one of one's own games frees a place for a new one; the game itself goes on
    assert (await client.request("unwatch", game=games[0]))["type"] == "ok"
    assert (await client.request("new_game"))["type"] == "snapshot"
    assert (await client.request("resume", game=games[1]))["v"] == 0
    for each in (client, watcher, other):
        await each.close()


async def test_unknown_game_and_unknown_subprotocol(url: str) -> None:
    client = await WsClient.open(url)
    await client.hello()
    missing = await client.request("watch", game="no-such-game")
    assert missing["code"] == "not_found"
    await client.close()
    with pytest.raises(Exception, match="400"):
        await connect(url, subprotocols=["chat"])  # type: ignore[list-item]


async def test_no_subprotocol_means_msgpack(url: str) -> None:
    async with connect(url) as ws:
        await ws.send(msgpack.packb({"type": "hello", "protocol": 1, "id": 1}))
        reply = msgpack.unpackb(await ws.recv())
        assert reply["type"] == "welcome" and reply["id"] == 1


@pytest.fixture
async def small_buffer_app(database_url: str) -> AsyncIterator[App]:
    """A server that drops a connection once 16 KiB wait unsent for it, and no rate limit to speak of."""
    limits = {"max_write_buffer_bytes": 16 * 1024, "rate_per_second": 100_000.0, "rate_burst": 100_000}
    async with serverutil.running_app(database_url, **limits) as app:
        yield app


async def open_narrow_connection(app: App) -> tuple[ClientConnection, str]:
    """A connection that said hello, with small socket buffers on both ends (a slow network: the
    kernel queues little for it, so the server's own buffer grows as soon as it stops reading);
    returns it and its player id."""
    url = serverutil.ws_url(app)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", app.port))
    narrow = await connect(url, sock=sock, max_queue=1)
    await narrow.send(msgpack.packb({"type": "hello", "protocol": 1, "id": 1}))
    player = msgpack.unpackb(await narrow.recv())["player"]["id"]
    (server_side,) = [c for c in app.connections.clients if c.player and c.player.id == player]
    server_side.transport.transport.get_extra_info("socket").setsockopt(
        socket.SOL_SOCKET, socket.SO_SNDBUF, 4096
    )
    return narrow, player


async def test_spectator_that_never_reads_is_dropped(small_buffer_app: App) -> None:
    app = small_buffer_app
    url = serverutil.ws_url(app)
    owner = await WsClient.open(url)
    await owner.hello()
    game = (await owner.request("new_game", code="EO1-C8-AAAAAFA"))["game"]
    reader = await WsClient.open(url)
    await reader.hello()
    await reader.request("watch", game=game)

    stuck, _ = await open_narrow_connection(app)
    await stuck.send(msgpack.packb({"type": "watch", "game": game, "id": 2}))
    await stuck.recv()
    stuck.transport.pause_reading()  # from now on this spectator reads nothing

    # The owner keeps being served (each move acked: WsClient.request fails after 10 s); how long its
    # round trips take meanwhile is a figure, not a promise: bench/bench_attacks.py (deafwatch) reports it.
    for index in range(3000):
        fields = {"from": "t1", "to": "c5"} if index % 2 == 0 else {"from": "c5", "to": "t1"}
        reply = await owner.request("move", game=game, **fields)
        assert reply["type"] == "ack", (index, reply)
        assert (await reader.next_push())["v"] == index + 1
        if app.metrics.dropped_slow_readers._value.get():
            break
    assert app.metrics.dropped_slow_readers._value.get() == 1, "the stuck spectator was never dropped"
    room = next(iter(app.registry.rooms()))
    assert len(room.spectators) <= 2
    await owner.close()
    await reader.close()


async def test_player_that_never_reads_its_replies_is_dropped(small_buffer_app: App) -> None:
    app = small_buffer_app
    url = serverutil.ws_url(app)
    other = await WsClient.open(url)
    await other.hello()
    game = (await other.request("new_game", code="EO1-C8-AAAAAFA"))["game"]

    stuck, stuck_player = await open_narrow_connection(app)
    await stuck.send(msgpack.packb({"type": "new_game", "code": "EO1-C8-AAAAAFA", "id": 2}))
    own_game = msgpack.unpackb(await stuck.recv())["game"]
    stuck.transport.pause_reading()  # from now on this player reads none of its replies

    # resume is answered from the room in memory with a whole snapshot, so the replies pile up faster
    # than a request the database answers (live) would make them.
    # (How long the other player's round trips take meanwhile: bench/bench_attacks.py, deafreplies.)
    with pytest.raises(ConnectionClosed):
        for index in range(20_000):
            await stuck.send(msgpack.packb({"type": "resume", "game": own_game, "id": index}))
            if index % 100 == 0:  # the other player is served as usual meanwhile
                fields = {"from": "t1", "to": "c5"} if index % 200 == 0 else {"from": "c5", "to": "t1"}
                assert (await other.request("move", game=game, **fields))["type"] == "ack"
            if app.metrics.dropped_slow_readers._value.get():
                await asyncio.sleep(0)  # a loop turn, no wait: the server closes its side; a send meets it
    assert app.metrics.dropped_slow_readers._value.get() == 1, "the player was never dropped"
    # the metric says what it counts: connections that do not read, players as well as spectators
    assert b"\neightoff_dropped_slow_readers_total 1.0\n" in app.metrics.render()
    assert [c for c in app.connections.clients if c.player and c.player.id == stuck_player] == []
    await other.close()
