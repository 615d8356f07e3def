"""``eightoff`` with a sampling profiler of its main thread (the event loop), for the benches.

    .venv/bin/python -m bench.bench_attacks --attacks halfopen \\
        --server-launcher "python -m bench.sampled_server /tmp/halfopen.txt"

Every ``INTERVAL`` seconds of wall time (``signal.setitimer``, no tracing hook: the server runs at
about its usual speed) the main thread's stack is taken; at exit the report goes to the file named
first. Only samples taken while the event loop runs count (start-up is left out). A sample whose top
Python frame is the loop's own ``run`` is the loop waiting, or in its C code (uvloop): "free". The
report gives the share of busy samples in which each function was on the stack (inclusive) and at
its top (self), and the runs of consecutive busy samples ("holds": how long the loop was kept from
anything else, what a bystander's request may wait behind), with what the long ones were doing; then
the gate's decisions, the CPU time (of the loop's thread) each read callback of a WebSocket
connection took, timed apart from the sampling (a callback's wall time also counts the moments the
machine ran another process), the garbage collector's passes on the loop's thread (a pass is one
sample however long it is: the signal waits for its end), the writer thread's waits and commits (with
the part of its slow commits it spent waiting for a CPU), and how late a 5-ms timer on the loop came,
with the part of it the loop's thread spent waiting for a CPU (Linux's schedstat: runnable but not
running, the machine's doing rather than the server's).
Not a test, and not part of the server: py-spy is not installed here.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

INTERVAL = 0.001
TOP = 40
LONG_HOLD = 5  # samples: a hold at least this long has its stacks kept apart

_stacks: Counter[tuple[CodeType, ...]] = Counter()
_long: Counter[tuple[CodeType, ...]] = Counter()
_holds: Counter[int] = Counter()  # hold length in samples -> how many
_hold: list[tuple[CodeType, ...]] = []
_free = 0
_sampling = False


def _sample(_: int, frame: FrameType | None) -> None:
    global _sampling
    if _sampling:  # a signal during the handler: not nested
        return
    _sampling = True
    try:
        _take(frame)
    finally:
        _sampling = False


def _take(frame: FrameType | None) -> None:
    global _free
    stack = []
    while frame is not None:
        stack.append(frame.f_code)
        frame = frame.f_back
    stack.reverse()
    names = [code.co_name for code in stack]
    if "run" not in names or "_serve" not in names:
        return  # start-up or shutdown
    if stack[-1].co_name == "run" and stack[-1].co_filename.endswith("runners.py"):
        _free += 1
        if _hold:
            _holds[len(_hold)] += 1
            if len(_hold) >= LONG_HOLD:
                _long.update(_hold)
            _hold.clear()
        return
    key = tuple(stack)
    _stacks[key] += 1
    _hold.append(key)


def _name(code: CodeType) -> str:
    return f"{os.path.basename(code.co_filename)}:{code.co_name}"


def _named(counter: Counter[tuple[CodeType, ...]]) -> Counter[tuple[str, ...]]:
    named: Counter[tuple[str, ...]] = Counter()
    for codes, count in list(counter.items()):
        named[tuple(_name(code) for code in codes)] += count
    return named


def _functions(stacks: Counter[tuple[str, ...]]) -> tuple[Counter[str], Counter[str]]:
    inclusive: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    for stack, count in stacks.items():
        for name in set(stack):
            inclusive[name] += count
        leaf[stack[-1]] += count
    return inclusive, leaf


def _report(path: Path) -> None:
    signal.setitimer(signal.ITIMER_REAL, 0)
    stacks = _named(_stacks)
    busy = sum(stacks.values()) or 1
    inclusive, leaf = _functions(stacks)
    lines = [
        f"{busy + _free} samples of the loop's thread, one every {INTERVAL * 1000:g} ms: "
        f"{busy / (busy + _free or 1):.1%} busy in Python",
        "",
        "holds (ms of consecutive busy samples: how many, their share of busy samples):",
    ]
    for low, high in ((1, 2), (3, 4), (5, 9), (10, 19), (20, 49), (50, 10**9)):
        count = sum(n for length, n in _holds.items() if low <= length <= high)
        share = sum(n * length for length, n in _holds.items() if low <= length <= high) / busy
        lines.append(f"  {low:>3}-{high if high < 10**9 else '':<3} {count:>7}  {share:6.1%}")
    lines += ["", "inclusive (of busy samples):"]
    lines += [f"{n / busy:7.1%}  {name}" for name, n in inclusive.most_common(TOP)]
    lines += ["", "self:"] + [f"{n / busy:7.1%}  {name}" for name, n in leaf.most_common(TOP)]
    long_inclusive, _ = _functions(_named(_long))
    long_total = sum(_long.values()) or 1
    lines += ["", f"in holds of {LONG_HOLD} ms or more (of their samples):"]
    lines += [f"{n / long_total:7.1%}  {name}" for name, n in long_inclusive.most_common(TOP)]
    lines += ["", "stacks:"]
    for stack, count in stacks.most_common(TOP):
        lines.append(f"{count / busy:7.1%}  " + " < ".join(reversed(stack[-10:])))
    lines += ["", "admission:"] + [f"{n:>9,}  {what}" for what, n in sorted(_events.items())]
    lines += ["", "read callbacks (ms of CPU: how many):"]
    lines += [f"  {name:<14} {ms:>3}-{ms + 1:<3} {n:>7,}" for (name, ms), n in sorted(_callbacks.items())]
    lines += ["", "garbage collections on the loop's thread (ms of wall time: how many; each one sample):"]
    lines += [f"  generation {gen}  {_bucket(ms)}  {n:>7,}" for (gen, ms), n in sorted(_collections.items())]
    lines += ["", "the writer thread (ms of wall time: how many): from a write's submit to the writer"]
    lines += ["taking it, and each commit (a wait for the GIL or a CPU counts in both)"]
    lines += [f"  {what:<8} {_bucket(ms)}  {n:>7,}" for (what, ms), n in sorted(_writer.items())]
    late, waited = _late_waits_of_writer
    lines += [
        f"batches taken over {LATE * 1000:g} ms late: {late * 1000:,.0f} ms in all, of which the writer"
    ]
    lines += [f"thread waited for a CPU {waited * 1000:,.0f} ms"]
    slow, took, waited = _slow_commits
    lines += [f"commits over {SLOW_COMMIT * 1000:g} ms: {slow:,.0f}, {took * 1000:,.0f} ms in all, of which"]
    lines += [f"the writer thread waited for a CPU {waited * 1000:,.0f} ms (a flush: tenths of a ms)"]
    lines += ["", f"a timer every {TICK * 1000:g} ms on the loop (ms late: how many):"]
    lines += [f"  {_bucket(ms)}  {n:>7,}" for ms, n in sorted(_late.items())]
    late, waited = _late_waits
    lines += [f"ticks over {LATE * 1000:g} ms late: {late * 1000:,.0f} ms in all, of which the loop's thread"]
    lines += [f"waited for a CPU {waited * 1000:,.0f} ms (runnable, not running: the machine's doing)"]
    path.write_text("\n".join(lines) + "\n")


_events: Counter[str] = Counter()
_collections: Counter[tuple[int, int]] = Counter()  # (generation, ms bucket) -> how many
_writer: Counter[tuple[str, int]] = Counter()  # ("taken" or "commit", ms bucket) -> how many
_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


def _bucket(low: int) -> str:
    high = next((edge for edge in _BUCKETS if edge > low), None)
    return f"{low:>4}-{high if high is not None else '':<4}"


def _ms_bucket(seconds: float) -> int:
    return max(edge for edge in _BUCKETS if edge <= seconds * 1000)


def _time_collections() -> None:
    """Time each pass of the garbage collector on the loop's thread: a pass stalls the loop whole, but
    the sampler sees it as one sample (its signal is handled once the pass is over)."""
    import gc
    import threading

    started: list[float] = []

    def timed(phase: str, info: dict[str, Any]) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        if phase == "start":
            started[:] = [time.perf_counter()]
        elif started:
            _collections[info["generation"], _ms_bucket(time.perf_counter() - started[0])] += 1

    gc.callbacks.append(timed)


def _cpu_wait() -> float:
    """Seconds the calling thread has waited, runnable, for a CPU (Linux's schedstat; 0 elsewhere)."""
    import threading

    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as stat:
            return int(stat.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


_late: Counter[int] = Counter()  # ms bucket of a tick's lateness -> how many
_late_waits: list[float] = [0.0, 0.0]  # lateness of the ticks over LATE, and the loop's CPU waits then
_late_waits_of_writer: list[float] = [0.0, 0.0]  # batches taken over LATE after their submit: the same
_slow_commits: list[float] = [0, 0.0, 0.0]  # commits over SLOW_COMMIT: how many, their time, CPU waits
TICK = 0.005
LATE = 0.015
SLOW_COMMIT = 0.002


def _watch_the_loop() -> None:
    """A timer every `TICK` on the running loop, timing how late each comes and how much of a late
    one's lateness the loop's thread spent waiting for a CPU (runnable but not running: the machine,
    not the server's code)."""
    import asyncio

    from server.app import App

    start = App.start.__func__  # type: ignore[attr-defined]

    async def started(cls: type[App], *args: Any, **kwargs: Any) -> App:
        app: App = await start(cls, *args, **kwargs)
        loop = asyncio.get_running_loop()
        last = [time.perf_counter(), _cpu_wait()]

        def tick() -> None:
            now, waited = time.perf_counter(), _cpu_wait()
            late = now - last[0] - TICK
            _late[_ms_bucket(max(late, 0.0))] += 1
            if late > LATE:
                _late_waits[0] += late
                _late_waits[1] += waited - last[1]
            last[:] = [now, waited]
            loop.call_later(TICK, tick)

        loop.call_later(TICK, tick)
        return app

    setattr(App, "start", classmethod(started))  # noqa: B010 (a bench's patch, untyped on purpose)


def _time_the_writer() -> None:
    """Time the group commit's writer thread: how long a batch waits to be taken after its writes were
    submitted (the thread's wake-up: a CPU and the GIL), and each commit."""
    from server.storage.committer import Committer

    hand_over, take_batch, commit = Committer._hand_over, Committer._take_batch, Committer._commit
    submitted: dict[int, float] = {}

    def timed_hand_over(committer: Committer) -> None:
        if committer._submitted:
            submitted[id(committer._submitted[0][0])] = time.perf_counter()
        hand_over(committer)

    def timed_take_batch(committer: Committer) -> Any:
        waited = _cpu_wait()
        taken = take_batch(committer)
        batch = taken[0]
        at = submitted.pop(id(batch[0][0]), None) if batch else None
        if at is not None:
            took = time.perf_counter() - at
            _writer["taken", _ms_bucket(took)] += 1
            if took > LATE:
                _late_waits_of_writer[0] += took
                _late_waits_of_writer[1] += _cpu_wait() - waited
        return taken

    def timed_commit(committer: Committer, writes: Any) -> Any:
        started, waited = time.perf_counter(), _cpu_wait()
        try:
            return commit(committer, writes)
        finally:
            took = time.perf_counter() - started
            _writer["commit", _ms_bucket(took)] += 1
            if took > SLOW_COMMIT:
                _slow_commits[0] += 1
                _slow_commits[1] += took
                _slow_commits[2] += _cpu_wait() - waited

    setattr(Committer, "_hand_over", timed_hand_over)  # noqa: B010 (a bench's patch, untyped on purpose)
    setattr(Committer, "_take_batch", timed_take_batch)  # noqa: B010
    setattr(Committer, "_commit", timed_commit)  # noqa: B010


def _count_admissions() -> None:
    """Count the gate's decisions (admitted, refused and why, evicted) into the report."""
    from server.edge.admission import ConnectionGate

    accept, evict = ConnectionGate.accept, ConnectionGate._evict

    def counted_accept(gate: ConnectionGate, peer: str, waiting: Any = None) -> str | None:
        pressed = gate.under_pressure()
        refused = accept(gate, peer, waiting)
        outcome = "admitted" if refused is None else "refused: " + refused.split(",")[0].split(" from ")[0]
        _events[f"{outcome}{' (under pressure)' if pressed else ''}"] += 1
        return refused

    def counted_evict(gate: ConnectionGate, waiting: Any, why: str) -> None:
        _events[f"evicted: {why.split(' s ')[0]}"] += 1
        evict(gate, waiting, why)

    setattr(ConnectionGate, "accept", counted_accept)  # noqa: B010 (a bench's patch, untyped on purpose)
    setattr(ConnectionGate, "_evict", counted_evict)  # noqa: B010


_callbacks: Counter[tuple[str, int]] = Counter()  # (callback, whole ms of CPU) -> how many


def _time_read_callbacks() -> None:
    """Time each read callback of a connection (a read, or the parse of a read's rest in a later turn)."""
    from server.edge.transport import WebSocketConnection

    for name in ("data_received", "_parse_rest"):
        callback = getattr(WebSocketConnection, name)

        def timed(connection: Any, *args: Any, name: str = name, callback: Any = callback) -> None:
            started = time.thread_time()
            try:
                callback(connection, *args)
            finally:
                _callbacks[name, int((time.thread_time() - started) * 1000)] += 1

        setattr(WebSocketConnection, name, timed)


USAGE = "usage: python -m bench.sampled_server REPORT serve [eightoff serve's flags]"


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):  # --help, or the report's path forgotten
        print(USAGE, __doc__, sep="\n\n", file=sys.stderr if len(sys.argv) < 2 else sys.stdout)
        sys.exit(0 if sys.argv[1:] in (["-h"], ["--help"]) else 2)
    report = Path(sys.argv.pop(1))
    _count_admissions()
    _time_read_callbacks()
    _time_collections()
    _time_the_writer()
    _watch_the_loop()
    atexit.register(_report, report)
    signal.signal(signal.SIGALRM, _sample)
    signal.setitimer(signal.ITIMER_REAL, INTERVAL, INTERVAL)
    from server.ops.cli import main as eightoff

    sys.exit(eightoff())


if __name__ == "__main__":
    main()
