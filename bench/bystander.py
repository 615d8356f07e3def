"""A well-behaved player for the attack benches: paced move/undo round trips on its own game.

Shared by bench_attacks and bench_watch_flood so that both measure the bystander the same way.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import msgpack  # type: ignore[import-untyped]

__all__ = ["paced_round_trips"]


async def paced_round_trips(ws: Any, code: str, seconds: float, pace: float) -> list[float]:
    """Play ``t1``→``c5`` and undo in turn on a new game of ``code`` over ``ws`` (a connection that said
    hello), at most ``pace`` actions a second for ``seconds``; returns each round trip in seconds.

    Raises RuntimeError when an action is not acknowledged: a refused bystander is a failed bench.
    """
    await ws.send(msgpack.packb({"type": "new_game", "id": 2, "code": code}))
    game = msgpack.unpackb(await ws.recv())["game"]
    frames = (
        msgpack.packb({"type": "move", "id": 3, "game": game, "from": "t1", "to": "c5"}),
        msgpack.packb({"type": "undo", "id": 4, "game": game}),
    )
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds
    turn = 0
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        await ws.send(frames[turn])
        reply = msgpack.unpackb(await ws.recv())
        latencies.append(time.perf_counter() - started)
        if reply.get("type") != "ack":
            raise RuntimeError(f"the bystander was refused: {reply}")
        turn ^= 1
        await asyncio.sleep(max(0.0, started + 1 / pace - time.perf_counter()))
    return latencies
