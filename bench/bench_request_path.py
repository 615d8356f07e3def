"""The server's own cost per action, without sockets: decode → handler → engine → ack → encode.

Runs the real ``RequestHandler`` of an in-process ``App`` on move/undo requests: with the real group
commit and one action in flight (commit latency dominates); with the real group commit and
``CONCURRENT`` games each running a closed loop (as ``bench_load`` at N = 100, without the sockets),
reporting the CPU time per action of the event-loop thread and of the other threads (the SQLite
writer) apart, once through ``serve`` as a connection calls it (each reply's ``respond`` sends the
game's next request in the next loop iteration, as a frame arriving would: no task per game) and once
through ``handle`` awaited by a task per game (the path every request took before actions were
answered from their commit's callback); and with commits answered at once (the Python work of a
request alone). Beside them a
baseline measured in the same run: msgpack-decoding the same frame and encoding an ack-sized reply,
which is what the echo server of ``bench_load`` does.

The event-loop figure of the concurrent run, plus the echo server's CPU per message in ``bench_load``,
is a floor for the server's CPU per action over real sockets: one event loop can do no better than
one action per their sum.

Run: ``.venv/bin/python -m bench.bench_request_path``
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import resource
import tempfile
import time
from pathlib import Path

import msgpack  # type: ignore[import-untyped]

import protocol
from protocol.limits import MAX_GAME_ACTIONS
from server.app import App
from server.cli import fast_event_loop
from server.committer import Done, Write
from server.config import Settings
from server.errors import Refusal
from server.requests import Outcome
from server.room import PlayerRef
from server.session import Session
from server.storage import PlayerRecord

ACTIONS = 20_000
CONCURRENT = 100
CONCURRENT_SECONDS = 3.0
ACTIONS_PER_GAME = MAX_GAME_ACTIONS - MAX_GAME_ACTIONS % 2


def _instant_submit(write: Write, done: Done) -> None:
    """A commit answered at once: in the next loop iteration, as the pipeline never calls back from
    ``submit`` itself."""
    asyncio.get_running_loop().call_soon(done, None)


def _baseline(frames: list[bytes], reply: protocol.ServerMessage, count: int) -> float:
    wire = reply.to_wire()
    started = time.perf_counter()
    for index in range(count):
        msgpack.unpackb(frames[index % 2])
        msgpack.packb(wire)
    return (time.perf_counter() - started) / count


async def _measure(app: App, client: Session, count: int) -> tuple[float, protocol.ServerMessage]:
    """Seconds per move/undo over ``count`` actions; a new game (timed too, a few per run) before one
    reaches the bound on a game's length."""
    handler = app.loop._handler  # the app's own handler: the code path a connection uses
    subprotocol = protocol.Subprotocol.MSGPACK
    reply: protocol.ServerMessage = protocol.Ok()
    frames: list[bytes] = []
    started = time.perf_counter()
    for index in range(count):
        if index % ACTIONS_PER_GAME == 0:
            frames = await _move_and_undo(app, client)
        request = protocol.decode(frames[index % 2], subprotocol)
        for reply in await handler.handle(client, request):
            protocol.encode(reply.to_wire(), subprotocol)
    return (time.perf_counter() - started) / count, reply


def _cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


async def _measure_concurrent(app: App, games: int, seconds: float) -> tuple[float, float, float]:
    """``games`` closed loops of move/undo with the real group commit; returns actions per second
    and the CPU seconds per action of this (the event loop's) thread and of the other threads."""
    handler = app.loop._handler
    subprotocol = protocol.Subprotocol.MSGPACK
    done = 0
    running = True

    async def play(index: int) -> None:
        nonlocal done
        client = await _new_client(app, f"bench-{index}")
        frames = await _move_and_undo(app, client)
        turn = 0
        while running:
            request = protocol.decode(frames[turn], subprotocol)
            for reply in await handler.handle(client, request):
                protocol.encode(reply.to_wire(), subprotocol)
            turn ^= 1
            done += 1

    players = [asyncio.create_task(play(index)) for index in range(games)]
    await asyncio.sleep(1.0)  # every game started, the loops warm
    count, thread, process, started = (
        done,
        _cpu_seconds(resource.RUSAGE_THREAD),
        _cpu_seconds(resource.RUSAGE_SELF),
        time.perf_counter(),
    )
    await asyncio.sleep(seconds)
    count = done - count
    thread = _cpu_seconds(resource.RUSAGE_THREAD) - thread
    process = _cpu_seconds(resource.RUSAGE_SELF) - process
    elapsed = time.perf_counter() - started
    running = False
    await asyncio.gather(*players)
    return count / elapsed, thread / count, (process - thread) / count


async def _measure_served(app: App, games: int, seconds: float) -> tuple[float, float, float]:
    """As `_measure_concurrent`, through ``serve`` and ``respond`` callbacks instead of tasks."""
    handler = app.loop._handler
    subprotocol = protocol.Subprotocol.MSGPACK
    loop = asyncio.get_running_loop()
    done = 0
    running = True
    stopped = asyncio.Event()
    playing = games
    refused: dict[str, int] = {}

    def play(client: Session, frames: list[bytes], turn: int) -> None:
        nonlocal playing
        if not running:
            playing -= 1
            if not playing:
                stopped.set()
            return
        request = protocol.decode(frames[turn], subprotocol)
        handler.serve(client, request, functools.partial(answered, client, frames, turn))

    def answered(client: Session, frames: list[bytes], turn: int, outcome: Outcome) -> None:
        nonlocal done
        if isinstance(outcome, Refusal):  # e.g. unavailable on a loaded machine: the same frame again
            refused[outcome.code.value] = refused.get(outcome.code.value, 0) + 1
        else:
            for reply in outcome:
                protocol.encode(reply.to_wire(), subprotocol)
            done += 1
            turn ^= 1
        loop.call_soon(play, client, frames, turn)  # the next frame arrives later, not inside respond

    for index in range(games):
        client = await _new_client(app, f"served-{index}")
        play(client, await _move_and_undo(app, client), 0)
    await asyncio.sleep(1.0)
    count, thread, process, started = (
        done,
        _cpu_seconds(resource.RUSAGE_THREAD),
        _cpu_seconds(resource.RUSAGE_SELF),
        time.perf_counter(),
    )
    await asyncio.sleep(seconds)
    count = done - count
    thread = _cpu_seconds(resource.RUSAGE_THREAD) - thread
    process = _cpu_seconds(resource.RUSAGE_SELF) - process
    elapsed = time.perf_counter() - started
    running = False
    await stopped.wait()
    if refused:
        print(f"  (refusals during the serve run, retried: {refused})")
    return count / elapsed, thread / count, (process - thread) / count


async def _new_client(app: App, player_id: str) -> Session:
    client = Session(protocol.Subprotocol.MSGPACK)
    client.player = PlayerRef(player_id, "bench")
    record = PlayerRecord(player_id, "bench", player_id.rjust(64, "0"), dt.datetime.now(dt.UTC))
    await app.committer.stored(Write(player=record))
    return client


async def _move_and_undo(app: App, client: Session) -> list[bytes]:
    """A new game of ``client`` and the two frames that play it back and forth."""
    new_game = protocol.decode(
        protocol.encode_msgpack({"type": "new_game", "code": "EO1-C8-AAAAAFA"}), protocol.Subprotocol.MSGPACK
    )
    (snapshot,) = await app.loop._handler.handle(client, new_game)
    assert isinstance(snapshot, protocol.Snapshot)
    game = snapshot.game
    return [
        protocol.encode_msgpack({"type": "move", "id": 1, "game": game, "from": "t1", "to": "c5"}),
        protocol.encode_msgpack({"type": "undo", "id": 2, "game": game}),
    ]


async def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite+aiosqlite:///{Path(directory) / 'bench.sqlite3'}"
        app = await App.start(Settings(port=0, database_url=url))
        try:
            client = await _new_client(app, "bench-player")
            durable, _ = await _measure(app, client, 2_000)
            served = await _measure_served(app, CONCURRENT, CONCURRENT_SECONDS)
            handled = await _measure_concurrent(app, CONCURRENT, CONCURRENT_SECONDS)
            app.committer.submit = _instant_submit  # type: ignore[method-assign]
            await _measure(app, client, 2_000)  # warm-up
            alone, reply = await _measure(app, client, ACTIONS)
            baseline_frames = await _move_and_undo(app, client)  # the same frames, for the baseline
        finally:
            await app.shutdown()
    baseline = _baseline(baseline_frames, reply, ACTIONS)
    print("server request path per action (no sockets), SQLite synchronous=FULL")
    print(f"  with a durable commit, one in flight : {durable * 1e6:8.1f} µs")
    for how, (rate, loop_cpu, other_cpu) in (("serve", served), ("handle", handled)):
        print(
            f"  {f'{CONCURRENT} games at once, durable, {how}':<37}: {rate:8,.0f} actions/s; CPU per action:"
            f" event loop {loop_cpu * 1e6:.1f} µs, other threads (SQLite writer) {other_cpu * 1e6:.1f} µs"
        )
    print(f"  request work alone (commit skipped)  : {alone * 1e6:8.1f} µs")
    print(
        f"  baseline msgpack unpackb+packb       : {baseline * 1e6:8.1f} µs   ratio {alone / baseline:.1f}x"
    )


if __name__ == "__main__":
    with asyncio.Runner(loop_factory=fast_event_loop()) as runner:  # the server's event loop
        runner.run(main())
