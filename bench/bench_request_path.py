"""The server's own cost per action, without sockets: decode → handler → engine → ack → encode.

Runs the real ``RequestHandler`` of an in-process ``App`` on move/undo requests, once with the real
group commit (one action in flight: commit latency dominates) and once with commits answered at once
(the Python work of a request alone), beside a baseline measured in the same run: msgpack-decoding the
same frame and encoding an ack-sized reply, which is what the echo server of ``bench_load`` does.

Run: ``.venv/bin/python -m bench.bench_request_path``
"""

from __future__ import annotations

import asyncio
import datetime as dt
import tempfile
import time
from pathlib import Path

import msgpack  # type: ignore[import-untyped]

import protocol
from server.app import App
from server.committer import Write
from server.config import Settings
from server.hub import PlayerRef
from server.requests import Client
from server.storage import PlayerRecord

ACTIONS = 20_000


async def _instant_submit(write: Write) -> None:
    return None


def _baseline(frames: list[bytes], reply: dict[str, object], count: int) -> float:
    started = time.perf_counter()
    for index in range(count):
        msgpack.unpackb(frames[index % 2])
        msgpack.packb(reply)
    return (time.perf_counter() - started) / count


async def _measure(
    app: App, client: Client, frames: list[bytes], count: int
) -> tuple[float, dict[str, object]]:
    handler = app.loop._handler  # the app's own handler: the code path a connection uses
    subprotocol = protocol.Subprotocol.MSGPACK
    reply: dict[str, object] = {}
    started = time.perf_counter()
    for index in range(count):
        request = protocol.decode(frames[index % 2], subprotocol)
        for reply in await handler.handle(client, request):
            protocol.encode(reply, subprotocol)
    return (time.perf_counter() - started) / count, reply


async def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite+aiosqlite:///{Path(directory) / 'bench.sqlite3'}"
        app = await App.start(Settings(port=0, database_url=url))
        try:
            client = Client(protocol.Subprotocol.MSGPACK)
            client.player = PlayerRef("bench-player", "bench")
            record = PlayerRecord("bench-player", "bench", "0" * 64, dt.datetime.now(dt.UTC))
            await app.committer.submit(Write(player=record))
            new_game = protocol.decode(
                protocol.encode_msgpack({"type": "new_game", "code": "EO1-C8-AAAAAFA"}),
                protocol.Subprotocol.MSGPACK,
            )
            game = (await app.loop._handler.handle(client, new_game))[0]["game"]
            frames = [
                protocol.encode_msgpack({"type": "move", "id": 1, "game": game, "from": "t1", "to": "c5"}),
                protocol.encode_msgpack({"type": "undo", "id": 2, "game": game}),
            ]
            durable, _ = await _measure(app, client, frames, 2_000)
            app.committer.submit = _instant_submit  # type: ignore[method-assign]
            await _measure(app, client, frames, 2_000)  # warm-up
            alone, reply = await _measure(app, client, frames, ACTIONS)
        finally:
            await app.shutdown()
    baseline = _baseline(frames, reply, ACTIONS)
    print("server request path per action (no sockets), SQLite synchronous=FULL")
    print(f"  with a durable commit, one in flight : {durable * 1e6:8.1f} µs")
    print(f"  request work alone (commit skipped)  : {alone * 1e6:8.1f} µs")
    print(
        f"  baseline msgpack unpackb+packb       : {baseline * 1e6:8.1f} µs   ratio {alone / baseline:.1f}x"
    )


if __name__ == "__main__":
    asyncio.run(main())
