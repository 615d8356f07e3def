"""The baseline of the load benchmark: a raw websockets + msgpack echo server, no game logic.

Run from the project root::

    .venv/bin/python -m bench.echo_server --port 0

It speaks just enough of protocol v1 for ``bench.bench_load``'s driver to run against it unchanged:
every binary frame is msgpack-decoded, and answered at once with a msgpack map shaped like the real
server's ``ack`` (same keys, same value kinds, so the same size within a byte or two: about 98 bytes
for a ``move``), echoing the request's ``id`` and ``game``. There is no database, no validation, no
rate limit: this is the floor a Python ``websockets`` server on this machine cannot go below, what
the real server's figures are divided by.

It uses the same transport settings as ``eightoff serve`` (the ``websockets.asyncio`` server, no
compression, 4 KiB max frame, the ``eightoff.v1.msgpack`` subprotocol), prints
``echo serving ws://HOST:PORT/ws`` once it listens, and stops on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import signal
import sys
from typing import Any

import msgpack  # type: ignore[import-untyped]
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

from server.ops.runtime import fast_event_loop

SUBPROTOCOL = Subprotocol("eightoff.v1.msgpack")
_DEFAULT_GAME = "0123456789abcdef"  # a game id is 16 characters, as the real server makes them


def raise_nofile_limit() -> int:
    """Raise the soft limit of open files to the hard limit; return the soft limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


def reply_to(request: Any, version: int) -> dict[str, Any]:
    """An ``ack``-shaped answer of the real server's size."""
    if not isinstance(request, dict):
        request = {}
    source = request.get("from", "t1")
    target = request.get("to", "c5")
    return {
        "type": "ack",
        "id": request.get("id"),
        "game": request.get("game", _DEFAULT_GAME),
        "v": version,
        "ops": [{"cards": ["5C"], "from": source, "to": target}],
        "score": 0,
        "moves": version & 1,
        "status": "playing",
    }


async def echo(ws: ServerConnection) -> None:
    version = 0
    packb = msgpack.packb
    unpackb = msgpack.unpackb
    try:
        async for frame in ws:
            version += 1
            await ws.send(packb(reply_to(unpackb(frame), version)))
    except ConnectionClosed:
        pass


async def run(host: str, port: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with serve(
        echo,
        host,
        port,
        subprotocols=[SUBPROTOCOL],
        max_size=4096,
        compression=None,
    ) as server:
        bound = server.sockets[0].getsockname()[1]
        print(f"echo serving ws://{host}:{bound}/ws", flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    args = parser.parse_args(argv)
    raise_nofile_limit()
    with asyncio.Runner(loop_factory=fast_event_loop()) as runner:  # the server's event loop
        runner.run(run(args.host, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
