"""Spectator fan-out benchmark: one game played while many spectators watch it, against a raw
``websockets`` broadcast of the same messages in the same run (issue 23 item 5).

Run from the project root::

    .venv/bin/python -m bench.bench_fanout                          (1000 spectators, 4 drivers)
    .venv/bin/python -m bench.bench_fanout --spectators 1000 --drivers 4 --pace 20 --seconds 10

Two targets, one after the other, each a fresh process on loopback:

- ``server``: ``eightoff serve`` (the working tree's code, as in ``bench_load``) on a fresh SQLite
  file. A player plays ``t1``→``c5`` and undo in turn on its game at ``--pace`` actions a second; the
  spectators ``watch`` that game and get one ``diff`` per action.
- ``raw``: the floor, this module run with ``--serve-raw``: a ``websockets`` server (same event loop,
  same frame settings) that answers each action with an ack-shaped reply and hands one diff-shaped
  message of the real size to ``websockets.broadcast`` for every spectator. No validation, no
  storage, no state.

The spectators are spread over ``--drivers`` processes (a Python client process can read about as
many messages a second as the server sends, so one driver would measure itself). Each records when
each version's diff arrived (``time.monotonic``, one clock for every process of the machine); the
player records when it sent each action. Printed per target: actions, deliveries, server CPU per
delivery (all the server's threads, over the played window), the delay from an action's send to each
spectator's receipt (p50 / p99), and the server/raw ratios: the target is CPU per delivery at most
1.1x raw and delay p99 at most 1.5x raw.

Only loopback traffic; every process is stopped when the run ends. This is not a test: it asserts
nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import msgpack  # type: ignore[import-untyped]
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import ServerConnection, broadcast, serve
from websockets.exceptions import ConnectionClosed

from bench.bench_load import (
    CODE,
    ROOT,
    START_TIMEOUT,
    SUBPROTOCOL,
    percentile,
    process_tree,
    split,
    start_target,
    stop_process,
    tree_cpu_seconds,
)
from bench.echo_server import raise_nofile_limit, reply_to
from server.ops.runtime import fast_event_loop

CONNECT_CONCURRENCY = 50  # handshakes in flight per driver
SETTLE = 1.0  # seconds of play before the measured window (every spectator is watching by then)


# --------------------------------------------------------------------------- the raw floor


def diff_of(reply: dict[str, Any]) -> dict[str, Any]:
    """The diff a spectator gets for an action: the ack's fields under the type ``diff``."""
    return {**reply, "type": "diff", "id": None}


async def _serve_raw(host: str, port: int) -> None:
    watchers: set[ServerConnection] = set()
    versions = 0

    async def handle(ws: ServerConnection) -> None:
        nonlocal versions
        try:
            async for frame in ws:
                request = msgpack.unpackb(frame)
                kind = request.get("type") if isinstance(request, dict) else None
                if kind == "watch":
                    watchers.add(ws)
                    await ws.send(msgpack.packb({"type": "snapshot", "id": request.get("id"), "v": versions}))
                elif kind in ("move", "undo"):
                    versions += 1
                    reply = reply_to(request, versions)
                    await ws.send(msgpack.packb(reply))
                    broadcast(watchers, msgpack.packb(diff_of(reply)))
                else:  # hello, new_game: an answer of the shape the driver reads
                    await ws.send(msgpack.packb({"type": "welcome", "id": request.get("id"), "game": CODE}))
        except ConnectionClosed:
            pass
        finally:
            watchers.discard(ws)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with serve(
        handle, host, port, subprotocols=[SUBPROTOCOL], max_size=4096, compression=None
    ) as server:
        print(f"raw broadcast serving ws://{host}:{server.sockets[0].getsockname()[1]}/ws", flush=True)
        await stop.wait()


def start_raw(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start the raw broadcast server; return its process and URL once it listens."""
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "raw.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.bench_fanout", "--serve-raw"],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if "serving ws://" in text:
            return process, text.split("serving ", 1)[1].split()[0]
        if process.poll() is not None:
            break
        time.sleep(0.05)
    stop_process(process)
    raise RuntimeError(f"the raw server did not start:\n{log.read_text(errors='replace')[-3000:]}")


# --------------------------------------------------------------------------- spectators (driver processes)


@dataclass
class SpectatorPlan:
    url: str
    game: str
    connections: int


async def _watch(url: str, game: str, gate: asyncio.Semaphore) -> ClientConnection:
    """A spectator connected, greeted and watching ``game`` (its snapshot read)."""
    async with gate:
        ws = await connect(url, subprotocols=[SUBPROTOCOL], compression=None, max_size=None, open_timeout=60)
        await ws.send(msgpack.packb({"type": "hello", "protocol": 1, "id": 1}))
        await ws.recv()
        await ws.send(msgpack.packb({"type": "watch", "id": 2, "game": game}))
        await ws.recv()
        return ws


async def _record(ws: ClientConnection, arrivals: list[tuple[int, float]]) -> None:
    monotonic = time.monotonic
    unpackb = msgpack.unpackb
    try:
        async for frame in ws:
            arrived = monotonic()
            message = unpackb(frame)
            if message.get("type") == "diff":
                arrivals.append((message["v"], arrived))
    except ConnectionClosed:
        pass


async def _spectate(plan: SpectatorPlan, pipe: Connection) -> list[tuple[int, float]]:
    arrivals: list[tuple[int, float]] = []
    gate = asyncio.Semaphore(CONNECT_CONCURRENCY)
    sockets = await asyncio.gather(*(_watch(plan.url, plan.game, gate) for _ in range(plan.connections)))
    tasks = [asyncio.create_task(_record(ws, arrivals)) for ws in sockets]
    pipe.send("watching")
    await asyncio.to_thread(pipe.recv)  # "stop"
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return arrivals


def spectator_main(plan: SpectatorPlan, pipe: Connection) -> None:
    raise_nofile_limit()
    with asyncio.Runner(loop_factory=fast_event_loop()) as runner:
        pipe.send(runner.run(_spectate(plan, pipe)))


# --------------------------------------------------------------------------- the player and the run


@dataclass
class Player:
    ws: ClientConnection
    game: str
    v: int = 0  # the last acked version: an odd one has the card in c5, to be undone


async def _player(url: str) -> Player:
    ws = await connect(url, subprotocols=[SUBPROTOCOL], compression=None)
    await ws.send(msgpack.packb({"type": "hello", "protocol": 1, "id": 1}))
    await ws.recv()
    await ws.send(msgpack.packb({"type": "new_game", "id": 2, "code": CODE}))
    return Player(ws, msgpack.unpackb(await ws.recv())["game"])


async def _play(player: Player, seconds: float, pace: float) -> dict[int, float]:
    """Move and undo in turn at ``pace`` a second; when each acked version was sent."""
    frames = (
        msgpack.packb({"type": "move", "id": 3, "game": player.game, "from": "t1", "to": "c5"}),
        msgpack.packb({"type": "undo", "id": 4, "game": player.game}),
    )
    sent: dict[int, float] = {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.monotonic()
        await player.ws.send(frames[player.v % 2])
        reply = msgpack.unpackb(await player.ws.recv())
        if reply.get("type") != "ack":
            raise RuntimeError(f"the player was refused: {reply}")
        player.v = reply["v"]
        sent[player.v] = started
        await asyncio.sleep(max(0.0, started + 1 / pace - time.monotonic()))
    return sent


@dataclass
class Result:
    kind: str
    actions: int
    deliveries: int
    cpu_per_delivery_us: float
    delay_p50_ms: float
    delay_p99_ms: float


def measure(kind: str, url: str, pid: int, args: argparse.Namespace) -> Result:
    """Spectators watch, the player plays; the server's CPU over the window after ``SETTLE``."""
    runner = asyncio.Runner(loop_factory=fast_event_loop())
    player = runner.run(_player(url))
    game = player.game
    context = multiprocessing.get_context("spawn")
    drivers = []
    for share in split(args.spectators, args.drivers):
        ours, theirs = context.Pipe()
        process = context.Process(target=spectator_main, args=(SpectatorPlan(url, game, share), theirs))
        process.start()
        theirs.close()  # the driver's end is the driver's: a driver that dies then ends our recv
        drivers.append((process, ours))
    try:
        for _, pipe in drivers:
            if pipe.recv() != "watching":
                raise RuntimeError("a driver did not get its spectators in")
        runner.run(_play(player, SETTLE, args.pace))
        members = process_tree(pid)
        cpu_before = tree_cpu_seconds(members)
        sent = runner.run(_play(player, args.seconds, args.pace))
        cpu_after = tree_cpu_seconds(members)
        runner.run(asyncio.sleep(0.5))  # the last diffs' way to the spectators
        for _, pipe in drivers:
            pipe.send("stop")
        arrivals = [arrival for _, pipe in drivers for arrival in pipe.recv()]
    finally:
        for process, _ in drivers:
            stop_process(process)
        runner.run(player.ws.close())
        runner.close()
    delays = sorted(at - sent[v] for v, at in arrivals if v in sent)
    cpu = (cpu_after or 0.0) - (cpu_before or 0.0)
    return Result(
        kind,
        len(sent),
        len(delays),
        cpu / len(delays) * 1e6 if delays else float("nan"),
        percentile(delays, 0.5) * 1e3,
        percentile(delays, 0.99) * 1e3,
    )


def run_server(args: argparse.Namespace, root: Path) -> Result:
    extra = f"--max-connections {args.spectators + 200}"
    target = start_target("server", root / "server", extra=extra)
    try:
        return measure("server", target.url, target.process.pid, args)
    finally:
        stop_process(target.process)


def run_raw(args: argparse.Namespace, root: Path) -> Result:
    process, url = start_raw(root / "raw")
    try:
        return measure("raw", url, process.pid, args)
    finally:
        stop_process(process)


def report(pairs: list[tuple[Result, Result]], args: argparse.Namespace) -> None:
    print(
        f"bench_fanout: {args.spectators} spectators over {args.drivers} drivers, one game played at "
        f"{args.pace:g} actions/s for {args.seconds:g} s"
    )
    header = ("run", "target", "actions", "deliveries", "CPU/delivery", "delay p50", "p99")
    print("{:>3} {:>6} {:>7} {:>10} {:>13} {:>9} {:>8}".format(*header))
    for run, (server, raw) in enumerate(pairs, 1):
        for r in (server, raw):
            cpu, p50, p99 = r.cpu_per_delivery_us, r.delay_p50_ms, r.delay_p99_ms
            counts = f"{run:>3} {r.kind:>6} {r.actions:>7} {r.deliveries:>10}"
            print(f"{counts} {cpu:>10.2f} µs {p50:>6.2f} ms {p99:>5.2f} ms")
        cpu_ratio = server.cpu_per_delivery_us / raw.cpu_per_delivery_us
        delay_ratio = server.delay_p99_ms / raw.delay_p99_ms
        print(
            f"{run:>3}  server/raw: CPU per delivery {cpu_ratio:.2f}x (target <= 1.1x), "
            f"delay p99 {delay_ratio:.2f}x (target <= 1.5x)"
        )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spectators", type=int, default=1000)
    parser.add_argument("--drivers", type=int, default=4, help="spectator processes")
    parser.add_argument("--pace", type=float, default=20.0, help="the player's actions a second")
    parser.add_argument("--seconds", type=float, default=10.0, help="the measured window")
    parser.add_argument("--runs", type=int, default=2, help="server and raw, back to back, this many times")
    parser.add_argument("--serve-raw", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve_raw:
        raise_nofile_limit()
        with asyncio.Runner(loop_factory=fast_event_loop()) as runner:
            runner.run(_serve_raw("127.0.0.1", 0))
        return 0
    raise_nofile_limit()
    with tempfile.TemporaryDirectory(prefix="eightoff-bench-fanout-") as tmp:
        root = Path(tmp)
        pairs = [
            (run_server(args, root / f"run{run}"), run_raw(args, root / f"run{run}"))
            for run in range(args.runs)
        ]
    report(pairs, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
