"""What a thread's block and wake-up costs: the same Python work, done right after a wake-up or warm.

``bench_glue --sleeping-commits`` showed the event loop's CPU per action growing with the writer
thread in the process even when its commits store nothing (issue 23 item 1): 18 µs an action with
commits answered at once, 31-51 µs with a writer thread whose commits only sleep. This bench takes the
server's code out of that question. The loop thread does ``--batch`` units of the request's own work
(decode, engine, ack, as `bench.bench_glue.stage_runs` times it), then hands a token to a second
thread and waits for it to come back, as the loop waits for a group commit; the second thread holds the token
``--hold`` seconds (a commit's flush, the GIL released) and hands it back with
``call_soon_threadsafe``, as the writer does. Rows:

- ``warm``: the same work back to back, no hand-over (the baseline: ratios are to its work per unit);
- ``call_soon``: the token handed to the loop itself (a turn of the loop, no thread, no block);
- ``thread, hold S``: the token through the second thread, which holds it S seconds;
- ``… one CPU``: the same with the process pinned to one CPU (``os.sched_setaffinity``): no wake-up
  crosses CPUs.

Per unit of work: the loop thread's CPU (``getrusage(RUSAGE_THREAD)``), the other thread's (the
process's CPU less the loop's), and per round trip the loop's CPU beyond the work's warm cost (and
the kernel's part of that, which the kernel samples by ticks): what a block and its wake-up cost
the loop, work slowed down after it included. The units are the same instructions in every row, so
a ratio above 1 is the machine (wake-ups, caches, the vCPU), not the code.

Each row runs ``--rounds`` times, the rounds interleaved, and its median is shown.

Run: ``.venv/bin/python -m bench.bench_wakeups`` (about a minute). Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import queue
import resource
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import msgpack  # type: ignore[import-untyped]

import protocol
from bench.bench_glue import CODE, action_messages
from engine import Game
from protocol.limits import MAX_GAME_ACTIONS
from server.ops.runtime import fast_event_loop

GAME_ID = "0123456789abcdef"
Handover = Callable[[Callable[[], None]], None]


@dataclass(frozen=True)
class Row:
    name: str
    loop_per_unit: float  # seconds of the loop thread's CPU per unit of work
    loop_system_per_unit: float  # the kernel's part of it (system calls, the scheduler, wake-ups)
    other_per_unit: float  # the other threads'
    wall_per_trip: float


def _cpu() -> tuple[float, float, float]:
    """The loop thread's CPU, its kernel part, and the process's CPU."""
    thread = resource.getrusage(resource.RUSAGE_THREAD)
    process = resource.getrusage(resource.RUSAGE_SELF)
    return thread.ru_utime + thread.ru_stime, thread.ru_stime, process.ru_utime + process.ru_stime


def _unit() -> Callable[[], None]:
    """One unit: an action's own work, as `bench.bench_glue.stage_runs` times it: the request decoded,
    played on a game (undone by the next unit), its ack built and encoded."""
    payloads = [msgpack.packb(message) for message in action_messages(GAME_ID)]
    subprotocol = protocol.Subprotocol.MSGPACK
    game = Game.from_code(CODE)
    index = 0

    def unit() -> None:
        nonlocal game, index
        request = protocol.decode(payloads[index & 1], subprotocol)
        action = request.action(game)  # type: ignore[union-attr]
        transfer = game.play(action)
        protocol.encode(protocol.Ack.of(GAME_ID, game, transfer, index).to_wire(), subprotocol)
        index += 1
        if game.v >= MAX_GAME_ACTIONS:
            game = Game.from_code(CODE)

    return unit


class _Holder:
    """The second thread: takes a callback, holds it ``hold`` seconds, hands it back to the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, hold: float) -> None:
        self._loop = loop
        self._hold = hold
        self._queue: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (callback := self._queue.get()) is not None:
            if self._hold:
                time.sleep(self._hold)
            self._loop.call_soon_threadsafe(callback)

    def hand(self, callback: Callable[[], None]) -> None:
        self._queue.put(callback)

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join()


async def _trips(name: str, unit: Callable[[], None], batch: int, trips: int, hand: Handover | None) -> Row:
    loop = asyncio.get_running_loop()
    for _ in range(batch * 20):
        unit()  # warm
    wall = time.perf_counter()
    loop_cpu, loop_system, process_cpu = _cpu()
    for _ in range(trips):
        for _ in range(batch):
            unit()
        if hand is not None:
            back = loop.create_future()
            hand(lambda back=back: back.set_result(None))  # type: ignore[misc]
            await back
    loop_end, loop_system_end, process_end = _cpu()
    units = batch * trips
    loop_used = loop_end - loop_cpu
    other = (process_end - process_cpu) - loop_used
    system = loop_system_end - loop_system
    return Row(name, loop_used / units, system / units, other / units, (time.perf_counter() - wall) / trips)


async def _run(batch: int, trips: int, holds: list[float], pinned: bool) -> list[Row]:
    loop = asyncio.get_running_loop()
    unit = _unit()
    rows = [await _trips("warm", unit, batch, trips, None)]

    def again(callback: Callable[[], None]) -> None:
        loop.call_soon(callback)

    rows.append(await _trips("call_soon", unit, batch, trips, again))
    for hold in holds:
        holder = _Holder(loop, hold)
        suffix = ", one CPU" if pinned else ""
        rows.append(await _trips(f"thread, hold {hold * 1e3:g} ms{suffix}", unit, batch, trips, holder.hand))
        holder.stop()
    return rows


def _measure(batch: int, trips: int, holds: list[float], pinned: bool) -> list[Row]:
    allowed = os.sched_getaffinity(0)
    if pinned:
        os.sched_setaffinity(0, {max(allowed)})  # this thread; threads started later inherit it
    try:
        with asyncio.Runner(loop_factory=fast_event_loop()) as runner:
            return runner.run(_run(batch, trips, holds, pinned))
    finally:
        os.sched_setaffinity(0, allowed)


def _report(rows: list[Row], batch: int) -> None:
    warm = rows[0].loop_per_unit
    warm_system = rows[0].loop_system_per_unit
    heads = f"{'loop µs/unit':>14}{'ratio':>7}{'other µs/unit':>15}{'loop µs/trip over warm':>24}"
    print(f"{'':30}{heads}{'(kernel)':>10}{'wall ms/trip':>14}")
    for row in rows:
        over = (row.loop_per_unit - warm) * batch * 1e6
        over_system = (row.loop_system_per_unit - warm_system) * batch * 1e6
        print(
            f"{row.name:30}{row.loop_per_unit * 1e6:14.2f}{row.loop_per_unit / warm:7.2f}"
            f"{row.other_per_unit * 1e6:15.2f}{over:24.1f}{over_system:10.1f}{row.wall_per_trip * 1e3:14.3f}"
        )


def _medians(rounds: list[list[Row]]) -> list[Row]:
    """Each row's median over the rounds, by its loop CPU (the rounds interleave the rows: noise that
    lasts a few seconds lands on every row alike)."""
    medians = []
    for runs in zip(*rounds, strict=True):
        ordered = sorted(runs, key=lambda row: row.loop_per_unit)
        medians.append(ordered[len(ordered) // 2])
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--batch", type=int, default=10, help="units of work per round trip (a commit's writes)"
    )
    parser.add_argument("--trips", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5, help="every row this many times, interleaved")
    parser.add_argument("--holds", type=float, nargs="+", default=[0.0, 0.0005, 0.002], help="seconds")
    args = parser.parse_args()
    print(f"load: {' '.join(f'{value:.2f}' for value in os.getloadavg())}; {os.cpu_count()} CPUs")
    rounds = []
    for _ in range(args.rounds):
        rows = _measure(args.batch, args.trips, args.holds, pinned=False)
        rounds.append(rows + _measure(args.batch, args.trips, args.holds, pinned=True)[2:])
    _report(_medians(rounds), args.batch)


if __name__ == "__main__":
    main()
