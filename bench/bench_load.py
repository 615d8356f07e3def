"""Load benchmark: the real server against a raw websockets + msgpack echo server, over real sockets.

Run from the project root::

    .venv/bin/python -m bench.bench_load                  (N = 1, 100, 1000; well under a minute)
    .venv/bin/python -m bench.bench_load --quick          (short windows, for a smoke run)
    .venv/bin/python -m bench.bench_load --n 100 --duration 10
    .venv/bin/python -m bench.bench_load --n 100 --rate 8000 0   (equal load at 8,000/s, then saturated)
    .venv/bin/python -m bench.bench_load --n 100 --rate 8000 0 --postgres-url postgresql://postgres@127.0.0.1/test
    .venv/bin/python -m bench.bench_load --idle-only --idle-n 1000 10000   (idle plus active; 2-4 minutes)

For each N it runs two targets, one after the other, each in its own process:

- server: ``eightoff serve`` (run as ``python -m server serve`` from the project root, so the working
  tree's code is measured) as a subprocess on a fresh SQLite file in a temporary directory, with the
  default durability settings (WAL, ``synchronous=FULL``, group commit, an ``ack`` only after its
  commit). Inherited ``EIGHTOFF_*`` variables are dropped so the defaults really apply. The one
  setting changed is the per-connection rate limit (``--rate-per-second`` / ``--rate-burst``, default
  200/s and 400), raised out of the way: a closed-loop client on loopback goes well past 200 requests
  a second on one connection, and the benchmark measures the server's work, not its limiter.
- echo: ``bench/echo_server.py``, the same ``websockets`` server, transport settings and event loop
  (uvloop, as ``eightoff serve`` uses) with no game, no validation and no database: each frame is
  msgpack-decoded and answered by an ``ack``-shaped map of the same size (98 bytes). It is the
  baseline, what the server's figures are divided by.

The driver is a separate process too (``multiprocessing``, spawned, ``--drivers`` of them; one by
default: on a two-core machine the server and the driver each get a core), on the same event loop. It
opens N connections (one per game; each says ``hello`` and starts a ``new_game`` on deal
``EO1-C8-AAAAAFA`` before anything is timed), then every connection runs a closed loop of request →
reply round trips: ``move t1→c5``, ``undo``, ``move``, ``undo`` …, always legal, each action committed
before its ack. After a warm-up, it counts the replies that arrive in a fixed window and records each
one's round-trip time (from just before ``send`` to just after ``recv``). Against the echo server it
runs the same code, byte for byte the same frames (a connection resigns its game and starts another,
untimed, before the game reaches ``MAX_GAME_ACTIONS``). Both server processes and the driver raise their soft
``RLIMIT_NOFILE`` to the hard limit (N = 1000 needs over 1000 descriptors on each side). Each game's
history grows by one action per round trip (up to the bound of 2,000 at N = 1), so any per-action
cost that grows with a game's length shows up here.

With ``--rate R`` (equal load) each connection paces itself instead: it sends at most one action every
N / R seconds (a fixed phase per connection, so the sends are spread over time), still one in flight,
so server and echo answer the same R actions a second as long as each keeps up, and CPU per action
is compared at the same load, not flattered by the bigger group commits of saturation. The report
then says the rate each achieved (a target below 97 % of R fell short: R is above its capacity on
this machine), the ratio of CPU per action and the ack p50 / p99 of both. ``--rate 8000 0`` runs
equal load then saturated, for each N. Beside the CPU it counts blocks per reply (voluntary context
switches in the window, from ``/proc``): the server's event loop and its other threads, the echo's:
each costs a thread tens of microseconds when it wakes on this kind of machine
(``bench.bench_wakeups``), and a durable ack waits for a flush where the echo waits for nothing.

It prints one table (N, server actions/s, echo messages/s, their ratio, p50 / p99 round trip of each,
the p99 ratio), a second table of CPU use during the window (server and echo: all the processes and
threads of each; driver: a driver near 100 %
means the figures are driver-bound; "other" is the rest of the machine, and a warning is printed when
another load took a noticeable share, which skews everything) and the server's group-commit figures
from its ``/metrics``, and the command line. Targets (the issue): at N = 100 the server keeps ≥ 60 % of
the echo's throughput and a p99 within 2x of the echo's.

With ``--idle-n N …`` (``--idle-only`` skips the tables above) it also runs the idle-plus-active table,
printed as Markdown to paste into an issue note: for each N, each target in turn, all N connect
(their handshakes alone, paced as always: ``CONNECT_CONCURRENCY`` in flight over all the drivers,
under the listen backlog), then say ``hello`` and open a game (``new_game``), untimed; then only the first
``--active`` connections (100 by default) run the closed move/undo loop while the rest stay connected
and idle (a ``websockets`` client answers the server's pings by itself). The server is also given
``--max-connections`` above N (its cap is 10,000 by default). Per target: the active connections'
replies a second, p50 / p99, the target's CPU per reply (the idle connections' keepalive included),
and its resident memory (``VmRSS`` of the process and any it forked, threads included) before the
connections, once all connected and once all had a game; hence the memory per connection (connected
minus before, over N) and per live game (games minus connected, over N: a player, its session, a
room; the echo keeps none, its figure is buffers only), and each figure's ratio to the echo's. At
small N the first connections' one-off costs (lazy imports, caches) weigh on the per-connection
figures: read them at 10,000. An ``idle lost`` count above 0 means the target closed idle connections
before the window ended. A ``hello`` or ``new_game`` answered ``unavailable`` during the setup (a
storm of new players and games can keep the database past the server's timeout on a busy machine) is
sent again after a pause, as the protocol says a client should, up to ``SETUP_ATTEMPTS`` times in all,
and counted (``setup retries``). N = 10,000 needs 10,000 descriptors on each side: the soft ``RLIMIT_NOFILE``
is raised to the hard limit, and more driver processes are started when one cannot hold its share.

With ``--postgres-url URL`` (a PostgreSQL server on this machine, e.g.
``postgresql+asyncpg://postgres@127.0.0.1:5432/test``; its database serves only to create and drop the
bench's own) each server run stores into a fresh database ``bench_load_<pid>_<k>``, which the server
migrates at start and the bench drops after the run (``WITH (FORCE)``), never touching the others.
PostgreSQL's work for the server happens in other processes, its backends, so the CPU per action then
has three parts: the server's threads (event loop, the rest), the backends connected to the bench's
database (found in ``pg_stat_activity`` after the warm-up, their ``utime + stime`` read from
``/proc/PID/stat`` at the window's edges with the server's; a backend that connects during the window
counts whole, one that leaves is lost and counted in the report) and, apart and not in the total,
PostgreSQL's processes shared by every database of the server (walwriter, checkpointer, background
writer: other users of the server load them too). The total (server + backends) is what is compared with
the echo's CPU per message (in the tables of ``--n``; the idle-plus-active table shows the server's own).

Only loopback traffic; every subprocess is stopped (SIGTERM, then SIGKILL) when the run ends,
fails or is interrupted, and each one is told by the kernel to die with this process
(``PR_SET_PDEATHSIG``). For profiling: ``--py-spy DIR`` samples each target with ``py-spy record``
during its window (``pip install py-spy``; needs ptrace permission); ``--server-launcher`` runs the
server another way, e.g. ``"python -m cProfile -o /tmp/server.prof -m server"`` (it is stopped with
SIGTERM and shuts down cleanly, so the profile is written); ``--server-args`` adds ``serve`` flags.
This is not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import contextlib
import ctypes
import functools
import itertools
import math
import multiprocessing
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, TypeVar

import asyncpg  # type: ignore[import-untyped]
import msgpack  # type: ignore[import-untyped]
from sqlalchemy.engine import make_url
from websockets.asyncio.client import ClientConnection, connect
from websockets.protocol import State
from websockets.typing import Subprotocol

from bench.echo_server import raise_nofile_limit
from protocol.limits import MAX_GAME_ACTIONS
from server.ops.runtime import fast_event_loop
from server.storage.db import async_url

ROOT = Path(__file__).resolve().parents[1]
ECHO_SERVER = Path(__file__).resolve().parent / "echo_server.py"
SUBPROTOCOL = Subprotocol("eightoff.v1.msgpack")
CODE = "EO1-C8-AAAAAFA"  # an 8-cell deal: cells 5-8 are empty, so t1 → c5 is legal at the deal
DEFAULT_NS = (1, 100, 1000)
DEFAULT_ACTIVE = 100  # the idle-plus-active table: connections that play; the rest stay idle
IDLE_SETTLE = 1.0  # seconds between the target's start and its first memory reading
DEFAULT_MAX_CONNECTIONS = 10_000  # the server's own cap; raised above N for the idle-plus-active table
RATE_PER_SECOND = "1000000000"
RATE_BURST = "1000000000"
CONNECT_CONCURRENCY = 64  # handshakes in flight, all drivers together: under the listen backlog (100)
SETUP_TIMEOUT = 120.0
SETUP_ATTEMPTS = 8  # a setup request answered "unavailable" is sent again, up to this many times in all
SETUP_SECONDS_PER_CONNECTION = 0.03  # more setup time for the idle-plus-active table's big N
START_TIMEOUT = 60.0
STOP_TIMEOUT = 20.0
MAX_ERRORS_PER_CONNECTION = 100
ACTIONS_PER_GAME = MAX_GAME_ACTIONS - MAX_GAME_ACTIONS % 2  # even: the game is back at its deal
TARGET_THROUGHPUT_RATIO = 0.60
TARGET_P99_RATIO = 2.0
TARGET_EQUAL_LOAD_CPU_RATIO = 1.6  # server CPU per action over the echo's per message, at equal load
REACHED = 0.97  # a paced target that answered this share of the offered rate kept up with it

_T = TypeVar("_T")
_SERVING = re.compile(r"serving ws://[^\s:]+:(\d+)/ws")


# --------------------------------------------------------------------------- processes


def _die_with_parent() -> None:
    """In a child, before exec: raise the file limit and ask for SIGTERM when the parent dies."""
    raise_nofile_limit()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (field 3, the state, comes first)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants still running (a server started with ``--workers`` forks its
    workers): the processes whose CPU and memory are the server's. It scans ``/proc`` (milliseconds on
    a busy machine): find the tree before a timed window, not at its edges."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat_fields(int(entry.name))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, index = [pid], 0
    while index < len(tree):
        tree.extend(children.get(tree[index], ()))
        index += 1
    return tree


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process and its descendants, all their threads included (Linux
    ``/proc``); None if the process is gone."""
    return tree_cpu_seconds(process_tree(pid))


def tree_cpu_seconds(members: Sequence[int]) -> float | None:
    """User + system CPU time of the processes ``members`` (a `process_tree`) still running."""
    total = None
    for member in members:
        fields = _stat_fields(member)
        if fields is not None:
            total = (total or 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def main_threads_cpu_seconds(members: Sequence[int]) -> float | None:
    """User + system CPU time of the main threads of ``members`` (a thread's id is its process's id
    for the main one): the servers' event loops, without the SQLite writer and driver threads."""
    total = None
    for member in members:
        try:
            fields = Path(f"/proc/{member}/task/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total = (total or 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def thread_blocks(members: Sequence[int]) -> tuple[int, int] | None:
    """Voluntary context switches so far (each a block: a wait in epoll, a lock, a flush) of the main
    threads of ``members`` (a `process_tree`) and of their other threads: on this kind of machine a
    block costs the thread tens of microseconds of CPU when it wakes (``bench.bench_wakeups``)."""
    main = other = 0
    found = False
    for member in members:
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{member}/task").iterdir():
                with contextlib.suppress(OSError, StopIteration, ValueError):
                    lines = (task / "status").read_text().splitlines()
                    count = int(next(line for line in lines if line.startswith("voluntary_ctxt")).split()[1])
                    found = True
                    if task.name == str(member):
                        main += count
                    else:
                        other += count
    return (main, other) if found else None


def rss_bytes(pid: int) -> int | None:
    """Resident memory (``VmRSS``) of a process and its descendants: a process's threads share its
    RSS; forked workers' shared pages count once per worker. None if the process is gone."""
    total = None
    for member in process_tree(pid):
        with contextlib.suppress(OSError, ValueError, StopIteration):
            status = Path(f"/proc/{member}/status").read_text().splitlines()
            line = next(line for line in status if line.startswith("VmRSS:"))
            total = (total or 0) + int(line.split()[1]) * 1024  # kB
    return total


def busy_cpu_seconds() -> float | None:
    """CPU seconds all processes of the machine spent busy so far (``/proc/stat``, all CPUs)."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    busy = sum(values[:8]) - idle  # user nice system idle iowait irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


@dataclass
class Target:
    """A server process under test: which kind, its pid and where to reach it."""

    kind: str  # "server" or "echo"
    process: subprocess.Popen[bytes]
    url: str
    metrics_url: str | None
    log: Path
    command: list[str]


def _server_command(
    database_url: str, launcher: str | None = None, extra: str | None = None, capacity: int | None = None
) -> list[str]:
    # ``python -m server`` (the ``eightoff`` command) from the project root: the working tree's code,
    # whatever the state of the editable install.
    head = shlex.split(launcher) if launcher else [sys.executable, "-m", "server"]
    # The cap on open connections in all (10,000 by default) must leave room for N and /metrics.
    cap = [] if capacity is None else ["--max-connections", str(max(DEFAULT_MAX_CONNECTIONS, capacity + 100))]
    return [
        *head,
        "serve",
        "--host", "127.0.0.1",
        "--port", "0",
        "--database-url", database_url,
        "--rate-per-second", RATE_PER_SECOND,
        "--rate-burst", RATE_BURST,
        "--max-connections-per-address", "off",  # every connection comes from 127.0.0.1
        "--guests-per-address-per-minute", "off",  # and says hello as a new guest
        "--new-connections-per-address-per-second", "off",  # all at once
        "--new-games-per-address-per-minute", "off",  # and each starts its games
        *cap,
        *shlex.split(extra or ""),
    ]  # fmt: skip


def start_target(
    kind: str,
    workdir: Path,
    launcher: str | None = None,
    extra: str | None = None,
    *,
    capacity: int | None = None,
    database_url: str | None = None,
) -> Target:
    """Start the server or the echo server, wait until it listens, return how to reach it; the server
    admits ``capacity`` connections at once (None: its default cap) and stores into ``database_url``
    (None: a fresh SQLite file in ``workdir``)."""
    workdir.mkdir(parents=True, exist_ok=True)
    if kind == "server":
        url = database_url or f"sqlite+aiosqlite:///{workdir / 'bench.sqlite3'}"
        command = _server_command(url, launcher, extra, capacity)
    else:
        command = [sys.executable, str(ECHO_SERVER), "--host", "127.0.0.1", "--port", "0"]
    env = {key: value for key, value in os.environ.items() if not key.startswith("EIGHTOFF_")}
    env["PYTHONUNBUFFERED"] = "1"
    log = workdir / f"{kind}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        found = _SERVING.search(log.read_text(errors="replace"))
        if found:
            port = int(found.group(1))
            metrics = f"http://127.0.0.1:{port}/metrics" if kind == "server" else None
            return Target(kind, process, f"ws://127.0.0.1:{port}/ws", metrics, log, command)
        if process.poll() is not None:
            break
        time.sleep(0.05)
    stop_process(process)
    raise RuntimeError(f"{kind} did not start; its log:\n{log.read_text(errors='replace')[-3000:]}")


def stop_process(process: subprocess.Popen[bytes] | multiprocessing.process.BaseProcess) -> None:
    """SIGTERM (a graceful shutdown), then SIGKILL if it has not exited within ``STOP_TIMEOUT``."""
    if isinstance(process, subprocess.Popen):
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return
    if process.is_alive():
        process.terminate()
        process.join(STOP_TIMEOUT)
        if process.is_alive():
            process.kill()
            process.join()


# --------------------------------------------------------------------------- PostgreSQL

#: The bench's own databases are named ``bench_load_<pid>_<k>``, one per server run, dropped after it.
POSTGRES_DATABASE_PREFIX = "bench_load"
#: PostgreSQL's processes that serve every database of the server (``pg_stat_activity.backend_type``):
#: reported apart, since other users of the server share them.
POSTGRES_SHARED = ("walwriter", "checkpointer", "background writer")
_database_numbers = itertools.count()


def plain_dsn(url: str) -> str:
    """The asyncpg DSN of a SQLAlchemy URL (``postgresql+asyncpg://…`` → ``postgresql://…``)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def _run_statements(dsn: str, *statements: str) -> list[Any]:
    """Each statement's first value, on one connection outside any transaction (CREATE DATABASE)."""
    conn = await asyncpg.connect(dsn)
    try:
        return [await conn.fetchval(statement) for statement in statements]
    finally:
        await conn.close()


@contextlib.contextmanager
def postgres_database(server_url: str) -> Iterator[str]:
    """A new empty database on the server of ``server_url`` (the server's run migrates it), dropped
    afterwards even with connections still open; yields its SQLAlchemy URL."""
    name = f"{POSTGRES_DATABASE_PREFIX}_{os.getpid()}_{next(_database_numbers)}"
    dsn = plain_dsn(server_url)
    asyncio.run(_run_statements(dsn, f'CREATE DATABASE "{name}"'))
    try:
        yield async_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_run_statements(dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def describe_postgres(server_url: str) -> str:
    """The PostgreSQL server's version and durability settings, for the report."""
    version, synchronous, fsync, method = asyncio.run(
        _run_statements(
            plain_dsn(server_url),
            "SHOW server_version",
            "SHOW synchronous_commit",
            "SHOW fsync",
            "SHOW wal_sync_method",
        )
    )
    host = make_url(server_url).host or "local socket"
    return (
        f"PostgreSQL {version.split()[0]} at {host} (synchronous_commit={synchronous}, fsync={fsync}, "
        f"wal_sync_method={method})"
    )


@dataclass(frozen=True)
class PostgresWatch:
    """Where the driver finds the PostgreSQL processes that serve the server under test."""

    dsn: str  # asyncpg DSN of the maintenance database, to read pg_stat_activity
    database: str  # the bench's own database: its backends serve the server's connections


@dataclass(frozen=True)
class PostgresProcesses:
    """The PostgreSQL processes of this machine, found through ``pg_stat_activity``."""

    backends: tuple[int, ...]  # connected to the bench's database: the server's, autovacuum's on it
    shared: tuple[int, ...]  # `POSTGRES_SHARED`: they work for every database of the server


async def postgres_processes(watch: PostgresWatch) -> PostgresProcesses:
    """The backends of the bench's database and PostgreSQL's shared processes, those running on this
    machine (a ``postgres`` process of that id: a remote server's ids mean nothing here)."""
    conn = await asyncpg.connect(watch.dsn)
    try:
        rows = await conn.fetch(
            "SELECT pid, datname, backend_type FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
        )
    finally:
        await conn.close()
    local = [row for row in rows if _is_postgres(row["pid"])]
    return PostgresProcesses(
        backends=tuple(row["pid"] for row in local if row["datname"] == watch.database),
        shared=tuple(row["pid"] for row in local if row["backend_type"] in POSTGRES_SHARED),
    )


def _is_postgres(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() in ("postgres", "postmaster")
    except OSError:
        return False


def cpu_by_process(pids: Sequence[int]) -> dict[int, float]:
    """User + system CPU seconds of each process of ``pids`` still running (Linux ``/proc``)."""
    ticks = os.sysconf("SC_CLK_TCK")
    found = {}
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is not None:
            found[pid] = (int(fields[11]) + int(fields[12])) / ticks
    return found


def cpu_spent(start: Mapping[int, float], end: Mapping[int, float]) -> float:
    """CPU seconds the processes spent between two `cpu_by_process` readings: one that started
    meanwhile counts whole (all of it is in the window); one gone by the end is lost (the caller
    reports how many)."""
    return sum(seconds - start.get(pid, 0.0) for pid, seconds in end.items())


# --------------------------------------------------------------------------- driver (its own process)


@dataclass
class DriverPlan:
    url: str
    connections: int
    warmup: float
    duration: float
    target_pid: int | None  # read its CPU time at the window's edges (driver 0 only)
    metrics_url: str | None  # scrape /metrics at the window's edges (driver 0 only)
    active: int | None = None  # connections that play (the first ones); None: all; the rest stay idle
    staged: bool = False  # report "connected" once all connected, and say hello only on "open"
    connect_concurrency: int = CONNECT_CONCURRENCY  # handshakes (then hello + new_game) in flight
    interval: float = 0.0  # equal load: seconds between one connection's sends (0: closed loop, saturated)
    postgres: PostgresWatch | None = None  # read its processes' CPU at the window's edges (driver 0 only)


def _frames(game: str) -> tuple[bytes, bytes]:
    move = msgpack.packb({"type": "move", "id": 3, "game": game, "from": "t1", "to": "c5"})
    undo = msgpack.packb({"type": "undo", "id": 4, "game": game})
    return move, undo


class _Window:
    """The measuring phase every connection of a driver looks at: 0 warm-up, 1 measuring, 2 stop."""

    def __init__(self) -> None:
        self.phase = 0
        self.latencies = array.array("d")
        self.errors = 0
        self.first_error: str | None = None


async def _connect(url: str) -> ClientConnection:
    """The WebSocket handshake; the client answers the server's pings by itself, and sends none."""
    return await connect(
        url,
        subprotocols=[SUBPROTOCOL],
        compression=None,
        open_timeout=SETUP_TIMEOUT,
        ping_interval=None,
        max_size=None,
    )


@dataclass
class _Retries:
    """Setup requests answered ``unavailable`` and sent again (a storm of new players and games can
    keep the database past the server's timeout on a busy machine; the protocol says: retry)."""

    count: int = 0


async def _ask(ws: ClientConnection, request: dict[str, Any], retries: _Retries) -> dict[str, Any]:
    """Send a setup request and return its reply, sent again (after a pause) while ``unavailable``."""
    for attempt in range(1, SETUP_ATTEMPTS + 1):
        await ws.send(msgpack.packb(request))
        reply: dict[str, Any] = msgpack.unpackb(await ws.recv())
        if reply.get("code") != "unavailable" or attempt == SETUP_ATTEMPTS:
            break
        retries.count += 1
        await asyncio.sleep(0.25 * attempt)
    return reply


async def _greet(ws: ClientConnection, index: int, retries: _Retries) -> tuple[ClientConnection, str]:
    """hello (a new guest), new_game: a live player with a game; returns the connection and its game."""
    welcome = await _ask(ws, {"type": "hello", "protocol": 1, "id": 1, "name": f"bench-{index}"}, retries)
    if welcome.get("type") == "error":
        raise RuntimeError(f"hello refused: {welcome}")
    snapshot = await _ask(ws, {"type": "new_game", "id": 2, "code": CODE}, retries)
    if snapshot.get("type") == "error" or not isinstance(snapshot.get("game"), str):
        raise RuntimeError(f"new_game refused: {snapshot}")
    return ws, snapshot["game"]


async def _open(
    url: str, gate: asyncio.Semaphore, index: int, retries: _Retries
) -> tuple[ClientConnection, str]:
    """Connect, hello, new_game: the untimed setup of one connection; returns it and its game."""
    async with gate:
        return await _greet(await _connect(url), index, retries)


async def _gated(gate: asyncio.Semaphore, step: Awaitable[_T]) -> _T:
    async with gate:
        return await step


async def _setup(plan: DriverPlan, pipe: Connection, retries: _Retries) -> list[tuple[ClientConnection, str]]:
    """Every connection of the plan connected, said hello and opened a game. Staged: all connect,
    "connected" goes to the parent (it reads the server's memory), and the greetings start on "open"."""
    gate = asyncio.Semaphore(plan.connect_concurrency)
    timeout = SETUP_TIMEOUT + SETUP_SECONDS_PER_CONNECTION * plan.connections
    started = time.monotonic()
    if not plan.staged:
        return await asyncio.wait_for(
            asyncio.gather(*(_open(plan.url, gate, i, retries) for i in range(plan.connections))), timeout
        )
    sockets = await asyncio.wait_for(
        asyncio.gather(*(_gated(gate, _connect(plan.url)) for _ in range(plan.connections))), timeout
    )
    pipe.send(("connected", time.monotonic() - started))
    command, _ = await asyncio.get_running_loop().run_in_executor(None, pipe.recv)
    if command != "open":
        raise RuntimeError(f"unexpected command {command!r}")
    return await asyncio.wait_for(
        asyncio.gather(*(_gated(gate, _greet(ws, i, retries)) for i, ws in enumerate(sockets))), timeout
    )


async def _next_game(ws: ClientConnection, game: str) -> str:
    """Resign ``game`` and start another (untimed): a game holds at most ``MAX_GAME_ACTIONS`` actions."""
    await ws.send(msgpack.packb({"type": "resign", "id": 5, "game": game}))
    await ws.recv()
    await ws.send(msgpack.packb({"type": "new_game", "id": 6, "code": CODE}))
    snapshot = msgpack.unpackb(await ws.recv())
    found = snapshot.get("game")
    return found if isinstance(found, str) else game  # the echo answers with no game


async def _play(ws: ClientConnection, game: str, window: _Window, interval: float, phase: float) -> None:
    """move, undo, move, undo … one round trip at a time until the window closes; a new game (untimed)
    before one reaches the bound on a game's length. With an ``interval``, each send waits for its slot
    (``phase`` into the first interval, then one every ``interval``): the connection's rate is fixed
    whatever the target's speed, as long as the target keeps up; a connection that fell behind sends at
    once but never bursts to catch up more than one slot."""
    frames = _frames(game)
    turn = 0
    played = 0
    errors = 0
    clock = time.perf_counter
    unpackb = msgpack.unpackb
    record = window.latencies.append
    slot = clock() + phase * interval
    while window.phase < 2:
        if played == ACTIONS_PER_GAME:
            game = await _next_game(ws, game)
            frames = _frames(game)
            played = 0
        if interval:
            now = clock()
            if slot > now:
                await asyncio.sleep(slot - now)
            slot = max(slot + interval, clock() - interval)
        started = clock()
        await ws.send(frames[turn])
        reply = await ws.recv()
        elapsed = clock() - started
        if window.phase == 1:
            record(elapsed)
        message = unpackb(reply)
        if message.get("type") == "ack":
            turn ^= 1
            played += 1
            continue
        window.errors += 1
        errors += 1
        if window.first_error is None:
            window.first_error = repr(message)[:300]
        if errors >= MAX_ERRORS_PER_CONNECTION:
            return


def _scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("eightoff_") and "{" not in line:
            name, _, value = line.partition(" ")
            with contextlib.suppress(ValueError):
                values[name] = float(value)
    return values


async def _drive(plan: DriverPlan, pipe: Connection) -> dict[str, Any]:
    setup_started = time.monotonic()
    retries = _Retries()
    opened = await _setup(plan, pipe, retries)
    setup_seconds = time.monotonic() - setup_started
    pipe.send(("ready", setup_seconds))
    loop = asyncio.get_running_loop()
    command, go_at = await loop.run_in_executor(None, pipe.recv)
    if command != "go":
        raise RuntimeError(f"unexpected command {command!r}")
    window = _Window()
    await asyncio.sleep(max(0.0, go_at - time.monotonic()))
    target = process_tree(plan.target_pid) if plan.target_pid else []  # before the window: a /proc scan
    found = PostgresProcesses((), ())
    playing, idle = opened[: plan.active], opened[len(opened) if plan.active is None else plan.active :]
    players = [
        asyncio.create_task(_play(ws, game, window, plan.interval, index / len(playing)))
        for index, (ws, game) in enumerate(playing)
    ]
    await asyncio.sleep(max(0.0, go_at + plan.warmup - time.monotonic()))
    if plan.postgres:  # after the warm-up the pool has its size; connections opened in the window count too
        found = await postgres_processes(plan.postgres)

    before = await asyncio.to_thread(_scrape, plan.metrics_url) if plan.metrics_url else {}
    window.phase = 1
    started = time.perf_counter()
    own_cpu = time.process_time()
    target_cpu = tree_cpu_seconds(target) if target else None
    loop_cpu = main_threads_cpu_seconds(target) if target else None
    blocks = thread_blocks(target) if target else None
    machine_cpu = busy_cpu_seconds() if plan.target_pid else None
    backends_start, shared_start = cpu_by_process(found.backends), cpu_by_process(found.shared)
    await asyncio.sleep(max(0.0, go_at + plan.warmup + plan.duration - time.monotonic()))
    window.phase = 2
    elapsed = time.perf_counter() - started
    own_cpu = time.process_time() - own_cpu
    target_end = tree_cpu_seconds(target) if target else None
    target_cpu = None if target_cpu is None or target_end is None else target_end - target_cpu
    loop_end = main_threads_cpu_seconds(target) if target else None
    loop_cpu = None if loop_cpu is None or loop_end is None else loop_end - loop_cpu
    blocks_end = thread_blocks(target) if target else None
    if blocks is not None and blocks_end is not None:
        blocks = (blocks_end[0] - blocks[0], blocks_end[1] - blocks[1])
    machine_end = busy_cpu_seconds() if plan.target_pid else None
    machine_cpu = None if machine_cpu is None or machine_end is None else machine_end - machine_cpu
    backends_end, shared_end = cpu_by_process(found.backends), cpu_by_process(found.shared)
    postgres = await _postgres_window(plan.postgres, found, backends_start, backends_end)
    postgres["postgres_shared_cpu"] = cpu_spent(shared_start, shared_end) if shared_start else None
    after = await asyncio.to_thread(_scrape, plan.metrics_url) if plan.metrics_url else {}

    done, pending = await asyncio.wait(players, timeout=30.0)
    for task in pending:
        task.cancel()
    failures = [task.exception() for task in done if not task.cancelled() and task.exception()]
    idle_lost = sum(ws.state is not State.OPEN for ws, _ in idle)  # closed by the server meanwhile?
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(*(ws.close() for ws, _ in opened), return_exceptions=True), 30)
    if failures:
        raise RuntimeError(f"{len(failures)} connections failed, the first: {failures[0]!r}")
    return {
        "latencies": window.latencies.tobytes(),
        "elapsed": elapsed,
        "errors": window.errors,
        "first_error": window.first_error,
        "driver_cpu": own_cpu,
        "target_cpu": target_cpu,
        "loop_cpu": loop_cpu,
        "blocks": None if blocks_end is None else blocks,
        "machine_cpu": machine_cpu,
        "metrics": {key: after[key] - before.get(key, 0.0) for key in after},
        "idle_lost": idle_lost,
        "setup_retries": retries.count,
        **postgres,
    }


async def _postgres_window(
    watch: PostgresWatch | None,
    found: PostgresProcesses,
    start: Mapping[int, float],
    end: Mapping[int, float],
) -> dict[str, Any]:
    """The CPU of the bench database's backends in the window, from the readings at its edges, and
    those that connected meanwhile (found after the window: read a few milliseconds late)."""
    if watch is None or not start:
        return {"postgres_cpu": None, "postgres_backends": 0, "postgres_new": 0, "postgres_gone": 0}
    later = await postgres_processes(watch)
    new = [pid for pid in later.backends if pid not in start]
    end = {**end, **cpu_by_process(new)}
    return {
        "postgres_cpu": cpu_spent(start, end),
        "postgres_backends": len(start),
        "postgres_new": len(new),
        "postgres_gone": sum(pid not in end for pid in start),
    }


def driver_main(plan: DriverPlan, pipe: Connection) -> None:
    """Entry point of a driver process: setup, wait for "go", measure, send the figures back."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    raise_nofile_limit()
    try:
        with asyncio.Runner(loop_factory=fast_event_loop()) as runner:
            result = runner.run(_drive(plan, pipe))
    except BaseException as exc:
        pipe.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    pipe.send(("done", result))


# --------------------------------------------------------------------------- one measurement


@dataclass
class Measurement:
    kind: str
    n: int
    rate: float  # replies a second in the window, all connections together
    p50_ms: float
    p99_ms: float
    samples: int
    errors: int
    first_error: str | None
    setup_s: float
    target_cpu: float | None  # fraction of one core
    loop_cpu: float | None  # the same, of the main threads (the event loops) alone
    driver_cpu: float  # fraction of one core, all drivers together
    other_cpu: float | None = None  # the rest of the machine (other processes), fraction of one core
    metrics: dict[str, float] = field(default_factory=dict)
    active: int | None = None  # connections that played (None: all N)
    #: the target's RSS in bytes: "before" any connection, once all "connected", once all said hello
    #: and opened a game ("games"); staged runs only
    rss: dict[str, int | None] = field(default_factory=dict)
    connect_s: float = float("nan")  # staged: the connections' handshakes alone
    idle_lost: int = 0  # idle connections the target closed before the end of the window
    setup_retries: int = 0  # staged: hello / new_game answered "unavailable" and sent again
    offered: float = 0.0  # equal load: the rate the connections paced themselves to (0: saturated)
    #: On PostgreSQL (``--postgres-url``), fractions of one core: the backends of the bench's database
    #: (they serve the server's connections), and PostgreSQL's shared processes (`POSTGRES_SHARED`)
    postgres_cpu: float | None = None
    postgres_shared_cpu: float | None = None
    #: the backends read at the window's start, those that connected during it, those gone by its end
    postgres_backends: tuple[int, int, int] = (0, 0, 0)
    #: the longest round trip in the window and the 99.9th percentile: a pause of the writer's shows here
    max_ms: float = float("nan")
    p999_ms: float = float("nan")
    #: blocks (voluntary context switches) a second in the window: the main threads', the others'
    blocks: tuple[float, float] | None = None


def _cpu_per_reply(measurement: Measurement) -> float:
    """Microseconds of the target's CPU (all its threads) per reply in the window; nan if unknown."""
    if measurement.target_cpu is None or not measurement.rate:
        return float("nan")
    return measurement.target_cpu / measurement.rate * 1e6


def _per_reply(share: float | None, measurement: Measurement) -> float:
    """Microseconds per reply in the window of ``share`` (a fraction of one core); nan if unknown."""
    return float("nan") if share is None or not measurement.rate else share / measurement.rate * 1e6


def _total_per_reply(measurement: Measurement) -> float:
    """The server's CPU per reply and, on PostgreSQL, its backends' (the shared processes apart)."""
    backends = (
        _per_reply(measurement.postgres_cpu, measurement) if measurement.postgres_cpu is not None else 0
    )
    return _cpu_per_reply(measurement) + backends


def _loop_cpu_per_reply(measurement: Measurement) -> float:
    """The part of `_cpu_per_reply` spent on the target's main threads (its event loops)."""
    if measurement.loop_cpu is None or not measurement.rate:
        return float("nan")
    return measurement.loop_cpu / measurement.rate * 1e6


def percentile(ordered: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of sorted values (every bench reports its percentiles by this one)."""
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), math.ceil(fraction * len(ordered))))
    return ordered[rank - 1]


def _receive(pipe: Connection, process: multiprocessing.process.BaseProcess, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while not pipe.poll(0.1):
        if not process.is_alive():
            raise RuntimeError("a driver process died")
        if time.monotonic() > deadline:
            raise TimeoutError("a driver did not answer in time")
    kind, payload = pipe.recv()
    if kind == "error":
        raise RuntimeError(f"driver failed: {payload}")
    return payload


def _py_spy(pid: int, seconds: float, output: Path, fmt: str) -> subprocess.Popen[bytes] | None:
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(exe).exists():
        print("  (py-spy not found: pip install py-spy)", file=sys.stderr)
        return None
    command = [
        exe, "record", "--pid", str(pid), "--duration", str(max(1, round(seconds))),
        "--rate", "200", "--format", fmt, "--output", str(output), "--threads",
    ]  # fmt: skip
    return subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=_die_with_parent
    )


def split(total: int, parts: int) -> list[int]:
    """``total`` shared among ``parts`` as evenly as whole numbers allow (the first ones get one more)."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def measure(
    target: Target,
    n: int,
    args: argparse.Namespace,
    label: str,
    *,
    active: int | None = None,
    offered: float = 0.0,
    postgres: PostgresWatch | None = None,
) -> Measurement:
    """Drive ``target`` with ``n`` connections split over ``args.drivers`` processes (more if one
    process cannot hold its share under the open-files limit). With ``active``, only that many play
    (split over the drivers too) and the rest stay idle; the connections are then set up in stages,
    the target's memory read before, once connected, and once every connection opened a game. With
    ``offered`` (actions a second, all connections together), each playing connection paces itself to
    its share of it (equal load); 0: closed loops, as fast as the target answers (saturated). With
    ``postgres``, the CPU of the PostgreSQL processes serving the target is read too."""
    context = multiprocessing.get_context("spawn")
    drivers = max(1, min(max(args.drivers, _drivers_needed(n)), n))
    shares = split(n, drivers)
    actives: list[int | None] = [None] * drivers if active is None else list(split(min(active, n), drivers))
    staged = active is not None
    playing = min(n if active is None else active, n)
    interval = playing / offered if offered else 0.0
    rss: dict[str, int | None] = {"before": rss_bytes(target.process.pid)} if staged else {}
    connect = float("nan")
    started: list[tuple[multiprocessing.process.BaseProcess, Connection]] = []
    profiler: subprocess.Popen[bytes] | None = None
    finished = False
    try:
        for index, share in enumerate(shares):
            parent_end, child_end = context.Pipe()
            plan = DriverPlan(
                url=target.url,
                connections=share,
                warmup=args.warmup,
                duration=args.duration,
                target_pid=target.process.pid if index == 0 else None,
                metrics_url=target.metrics_url if index == 0 else None,
                active=actives[index],
                staged=staged,
                connect_concurrency=max(1, CONNECT_CONCURRENCY // drivers),
                interval=interval,
                postgres=postgres if index == 0 else None,
            )
            driver = context.Process(target=driver_main, args=(plan, child_end), name=f"driver-{index}")
            driver.start()
            child_end.close()
            started.append((driver, parent_end))
        setup_timeout = SETUP_TIMEOUT + SETUP_SECONDS_PER_CONNECTION * max(shares) + 30
        if staged:
            connect = max(_receive(pipe, process, setup_timeout) for process, pipe in started)
            rss["connected"] = rss_bytes(target.process.pid)
            for _, pipe in started:
                pipe.send(("open", None))
        setup = max(_receive(pipe, process, setup_timeout) for process, pipe in started)
        if staged:
            rss["games"] = rss_bytes(target.process.pid)
        go_at = time.monotonic() + 0.2
        for _, pipe in started:
            pipe.send(("go", go_at))
        if args.py_spy:
            time.sleep(max(0.0, go_at + args.warmup - time.monotonic()))
            suffix = {"speedscope": "json", "raw": "txt", "flamegraph": "svg"}[args.py_spy_format]
            output = Path(args.py_spy) / f"{target.kind}-n{n}.{suffix}"
            profiler = _py_spy(target.process.pid, args.duration, output, args.py_spy_format)
        wait = args.warmup + args.duration + 90
        results = [_receive(pipe, process, wait) for process, pipe in started]
        finished = True
        if profiler is not None:
            _, err = profiler.communicate(timeout=60)
            if profiler.returncode:
                print(f"  py-spy failed: {err.decode(errors='replace').strip()[-500:]}", file=sys.stderr)
            else:
                print(f"  py-spy profile: {output}", file=sys.stderr)
    finally:
        if profiler is not None and profiler.poll() is None:
            stop_process(profiler)
        for process, pipe in started:
            if finished:  # the drivers exit by themselves once they sent their figures
                process.join(10)
            stop_process(process)
            pipe.close()

    latencies = array.array("d")
    for result in results:
        latencies.frombytes(result["latencies"])
    ordered = sorted(latencies)
    elapsed = results[0]["elapsed"]
    first = results[0]
    errors = sum(result["errors"] for result in results)
    first_error = next((result["first_error"] for result in results if result["first_error"]), None)
    measurement = Measurement(
        kind=target.kind,
        n=n,
        rate=len(ordered) / elapsed,
        p50_ms=percentile(ordered, 0.50) * 1000,
        p99_ms=percentile(ordered, 0.99) * 1000,
        samples=len(ordered),
        max_ms=(ordered[-1] if ordered else float("nan")) * 1000,
        p999_ms=percentile(ordered, 0.999) * 1000,
        errors=errors,
        first_error=first_error,
        setup_s=setup,
        target_cpu=None if first["target_cpu"] is None else first["target_cpu"] / elapsed,
        loop_cpu=None if first["loop_cpu"] is None else first["loop_cpu"] / elapsed,
        blocks=_per_second(first.get("blocks"), elapsed),
        driver_cpu=sum(result["driver_cpu"] for result in results) / elapsed,
        metrics=first["metrics"],
        active=active,
        rss=rss,
        connect_s=connect,
        idle_lost=sum(result["idle_lost"] for result in results),
        setup_retries=sum(result["setup_retries"] for result in results),
        offered=offered,
        postgres_cpu=None if first.get("postgres_cpu") is None else first["postgres_cpu"] / elapsed,
        postgres_shared_cpu=(
            None if first.get("postgres_shared_cpu") is None else first["postgres_shared_cpu"] / elapsed
        ),
        postgres_backends=(
            first.get("postgres_backends", 0),
            first.get("postgres_new", 0),
            first.get("postgres_gone", 0),
        ),
    )
    if first["machine_cpu"] is not None and first["target_cpu"] is not None:
        driver_seconds = sum(result["driver_cpu"] for result in results)
        postgres_seconds = (first.get("postgres_cpu") or 0.0) + (first.get("postgres_shared_cpu") or 0.0)
        other = first["machine_cpu"] - first["target_cpu"] - driver_seconds - postgres_seconds
        measurement.other_cpu = max(0.0, other / elapsed)
    shown = "" if active is None else f" ({playing} active)"
    load = f" at {offered:,.0f}/s" if offered else " saturated"
    print(
        f"  {label:6} N={n:<5}{shown}{load} {measurement.rate:9.0f}/s  p50 {measurement.p50_ms:7.2f} ms  "
        f"p99 {measurement.p99_ms:7.2f} ms  p99.9 {measurement.p999_ms:7.2f} ms  "
        f"max {measurement.max_ms:7.2f} ms  errors {errors}  (setup {setup:.1f} s)",
        file=sys.stderr,
        flush=True,
    )
    return measurement


def _drivers_needed(n: int) -> int:
    """Driver processes needed for ``n`` connections under this process's open-files limit (the
    drivers raise theirs the same way)."""
    room = raise_nofile_limit() - 100  # the driver's own files: the event loop, pipes, modules
    return max(1, math.ceil(n / room)) if room > 0 else 1


@contextlib.contextmanager
def _database(kind: str, args: argparse.Namespace) -> Iterator[tuple[str | None, PostgresWatch | None]]:
    """The server's database for one run: with ``--postgres-url``, a fresh PostgreSQL database (dropped
    after the run) and how to watch its backends; else (None, None): a SQLite file of the run's own."""
    if kind != "server" or not args.postgres_url:
        yield None, None
        return
    with postgres_database(args.postgres_url) as url:
        name = make_url(url).database
        assert name is not None
        yield url, PostgresWatch(plain_dsn(args.postgres_url), name)


def run_one(kind: str, n: int, args: argparse.Namespace, root: Path, offered: float = 0.0) -> Measurement:
    name = f"{kind}-n{n}-r{offered:.0f}"
    with _database(kind, args) as (url, watch):
        target = start_target(kind, root / name, args.server_launcher, args.server_args, database_url=url)
        try:
            return measure(target, n, args, kind, offered=offered, postgres=watch)
        finally:
            stop_process(target.process)


def run_idle(kind: str, n: int, args: argparse.Namespace, root: Path) -> Measurement:
    """The idle-plus-active run of one target: ``n`` connections with a game each, ``args.active`` of
    them playing."""
    with _database(kind, args) as (url, watch):
        target = start_target(
            kind,
            root / f"{kind}-idle-n{n}",
            args.server_launcher,
            args.server_args,
            capacity=n,
            database_url=url,
        )
        try:
            time.sleep(IDLE_SETTLE)  # start-up done (migrations, imports) before the memory is read
            return measure(target, n, args, kind, active=args.active, postgres=watch)
        finally:
            stop_process(target.process)


# --------------------------------------------------------------------------- report


def _ratios(server: Measurement, echo: Measurement) -> tuple[float, float]:
    """Throughput of the server over the echo's, and p99 of the server over the echo's (nan if 0)."""
    ratio = server.rate / echo.rate if echo.rate else float("nan")
    p99_ratio = server.p99_ms / echo.p99_ms if echo.p99_ms else float("nan")
    return ratio, p99_ratio


def _fmt_ratio(value: float) -> str:
    return "-" if value != value else f"{value:.2f}"


def report(pairs: list[tuple[Measurement, Measurement]], args: argparse.Namespace, command: str) -> None:
    print()
    print("Eight Off load benchmark: closed-loop move/undo round trips, one connection per game")
    print(f"window {args.duration:g} s after {args.warmup:g} s warm-up; {args.drivers} driver process(es); "
          f"{os.cpu_count()} CPUs; Python {sys.version.split()[0]}")  # fmt: skip
    print()
    header = (
        f"{'N':>5} | {'load':>9} | {'server act/s':>12} | {'echo msg/s':>10} | {'ratio':>5} | "
        f"{'server p50/p99 ms':>17} | {'echo p50/p99 ms':>15} | {'p99 ratio':>9}"
    )
    print(header)
    print("-" * len(header))
    for server, echo in pairs:
        ratio, p99_ratio = _ratios(server, echo)
        print(
            f"{server.n:>5} | {_load(server):>9} | {server.rate:>12,.0f} | {echo.rate:>10,.0f} | "
            f"{_fmt_ratio(ratio):>5} | "
            f"{server.p50_ms:>7.2f} / {server.p99_ms:>7.2f} | {echo.p50_ms:>6.2f} / {echo.p99_ms:>6.2f} | "
            f"{_fmt_ratio(p99_ratio):>9}"
        )
    print()
    header2 = (
        f"{'N':>5} | {'load':>9} | {'CPU server':>10} | {'CPU echo':>8} | {'CPU driver (srv/echo)':>21} | "
        f"{'CPU other (srv/echo)':>20} | {'commits/s':>9} | {'writes/commit':>13} | {'commit ms':>9} | "
        f"{'errors':>6} | {'setup s (srv/echo)':>18}"
    )
    print(header2)
    print("-" * len(header2))
    for server, echo in pairs:
        metrics = server.metrics
        commits = metrics.get("eightoff_commit_batch_writes_count", 0.0)
        writes = metrics.get("eightoff_commit_batch_writes_sum", 0.0)
        commit_time = metrics.get("eightoff_commit_latency_seconds_sum", 0.0)
        window = args.duration
        print(
            f"{server.n:>5} | {_load(server):>9} | {_pct(server.target_cpu):>10} | "
            f"{_pct(echo.target_cpu):>8} | "
            f"{_pct(server.driver_cpu) + ' / ' + _pct(echo.driver_cpu):>21} | "
            f"{_pct(server.other_cpu) + ' / ' + _pct(echo.other_cpu):>20} | "
            f"{commits / window:>9,.0f} | {(writes / commits if commits else float('nan')):>13.1f} | "
            f"{(commit_time / commits * 1000 if commits else float('nan')):>9.2f} | "
            f"{server.errors + echo.errors:>6} | {server.setup_s:>8.1f} / {echo.setup_s:<7.1f}"
        )
    for server, echo in pairs:
        if args.postgres_url:
            _report_postgres_cpu(server, echo)
            continue
        per_action, per_message = _cpu_per_reply(server), _cpu_per_reply(echo)
        print(
            f"N={server.n} {_load(server)}: server CPU per action {per_action:.1f} µs, echo per message "
            f"{per_message:.1f} µs"
            f" (ratio {_fmt_ratio(per_action / per_message if per_message else float('nan'))}); event loop"
            f" {_loop_cpu_per_reply(server):.1f} µs, other threads (the SQLite writer)"
            f" {per_action - _loop_cpu_per_reply(server):.1f} µs; {_blocks(server, echo)}"
        )
    noisy = [m for pair in pairs for m in pair if m.other_cpu is not None and m.other_cpu > 0.25]
    if noisy:
        worst = max(m.other_cpu or 0.0 for m in noisy)
        print(
            f"WARNING: other processes used up to {worst * 100:.0f}% of a core during {len(noisy)} "
            "window(s): those figures are skewed; rerun on a quiet machine."
        )
    for server, echo in pairs:
        for measurement in (server, echo):
            if measurement.first_error:
                print(f"first error ({measurement.kind}, N={measurement.n}): {measurement.first_error}")
            if measurement.setup_retries:
                retried = measurement.setup_retries
                print(f"setup ({measurement.kind}, N={measurement.n}): {retried} hello / new_game retried")
    print()
    print("CPU is the share of one core used during the window (server: all its processes and threads,")
    print(
        "SQLite's included)"
        + ("; PostgreSQL's processes are not the server's:" if args.postgres_url else ";")
    )
    print("'other' is the rest of the machine meanwhile: well above 0 means another load skewed the figures.")
    if args.postgres_url:
        print(f"Database: {describe_postgres(args.postgres_url)}, a fresh database per server run (dropped")
        print("after it); PostgreSQL backends: the processes of pg_stat_activity connected to that database;")
        print(f"PostgreSQL shared: {', '.join(POSTGRES_SHARED)} (they serve every database of that server).")
        print("Server settings: defaults (group commit of up to 1024 writes, ack after commit), except")
    else:
        print(
            "Server settings: defaults (SQLite WAL, synchronous=FULL, group commit of up to 1024 writes, ack"
        )
        print("after commit), except")
    print(f"--rate-per-second {RATE_PER_SECOND} --rate-burst {RATE_BURST}: the per-connection limit")
    print("(200/s, burst 400) would otherwise refuse a closed loop on loopback.")
    if args.server_args or args.server_launcher:
        launcher = args.server_launcher or "python -m server"
        print(f"Experiment: server launcher {launcher}, extra flags: {args.server_args or 'none'}")
    for server, echo in pairs:
        if server.offered and server.samples and echo.samples:
            per_action, per_message = _total_per_reply(server), _cpu_per_reply(echo)
            cpu_ratio = per_action / per_message if per_message else float("nan")
            print(
                f"Equal load at N={server.n}, {server.offered:,.0f}/s offered: achieved server "
                f"{server.rate:,.0f}/s, echo {echo.rate:,.0f}/s ({_reached(server)}, {_reached(echo)}); "
                f"CPU per action {per_action:.1f} / {per_message:.1f} µs = {cpu_ratio:.2f} "
                f"(target ≤ {TARGET_EQUAL_LOAD_CPU_RATIO:.1f}: "
                f"{'met' if cpu_ratio <= TARGET_EQUAL_LOAD_CPU_RATIO else 'missed'}); ack p50 "
                f"{server.p50_ms:.2f} / {echo.p50_ms:.2f} ms, p99 {server.p99_ms:.2f} / {echo.p99_ms:.2f} ms"
            )
    for server, echo in pairs:
        if server.n == 100 and not server.offered and server.samples and echo.samples:
            ratio, p99_ratio = _ratios(server, echo)
            print(
                f"Targets at N=100: throughput ratio {ratio:.2f} (target ≥ {TARGET_THROUGHPUT_RATIO:.2f}: "
                f"{'met' if ratio >= TARGET_THROUGHPUT_RATIO else 'missed'}), p99 ratio {p99_ratio:.2f} "
                f"(target ≤ {TARGET_P99_RATIO:.1f}: {'met' if p99_ratio <= TARGET_P99_RATIO else 'missed'})"
            )
    print(f"command: {command}")


def _report_postgres_cpu(server: Measurement, echo: Measurement) -> None:
    """CPU per action on PostgreSQL: the server's threads, the backends of its database, the total
    beside the echo's per message, then PostgreSQL's shared processes apart."""
    own, loop = _cpu_per_reply(server), _loop_cpu_per_reply(server)
    backends, total, per_message = (
        _per_reply(server.postgres_cpu, server),
        _total_per_reply(server),
        _cpu_per_reply(echo),
    )
    read, new, gone = server.postgres_backends
    print(
        f"N={server.n} {_load(server)}: server CPU per action {own:.1f} µs (event loop {loop:.1f} µs, other "
        f"threads {own - loop:.1f} µs) + PostgreSQL backends {backends:.1f} µs = {total:.1f} µs, echo per "
        f"message {per_message:.1f} µs (ratio {_over(total, per_message)}); "
        f"PostgreSQL shared {_per_reply(server.postgres_shared_cpu, server):.1f} µs more, not counted; "
        f"backends: {read} read, {new} connected in the window, {gone} gone"
    )


def _per_second(counts: Sequence[int] | None, elapsed: float) -> tuple[float, float] | None:
    return None if counts is None else (counts[0] / elapsed, counts[1] / elapsed)


def _blocks(server: Measurement, echo: Measurement) -> str:
    """Blocks per reply (voluntary context switches): the server's event loop and other threads, the
    echo's."""
    if server.blocks is None or echo.blocks is None or not server.rate or not echo.rate:
        return "blocks per reply unknown"
    loop, other = (count / server.rate for count in server.blocks)
    return (
        f"blocks per action: event loop {loop:.2f}, other threads {other:.2f}; "
        f"echo per message {echo.blocks[0] / echo.rate:.2f}"
    )


def _load(measurement: Measurement) -> str:
    return f"{measurement.offered:,.0f}/s" if measurement.offered else "saturated"


def _reached(measurement: Measurement) -> str:
    """Whether a paced target kept up with the offered rate (within REACHED of it)."""
    kept = measurement.rate >= REACHED * measurement.offered
    return f"{measurement.kind} {'reached it' if kept else 'fell short'}"


def _pct(value: float | None) -> str:
    return "-" if value is None or value != value else f"{value * 100:.0f}%"


def _grown(measurement: Measurement, start: str, end: str) -> float:
    """Bytes the target's RSS grew by per connection between two readings; nan if unknown."""
    before, after = measurement.rss.get(start), measurement.rss.get(end)
    if before is None or after is None or not measurement.n:
        return float("nan")
    return (after - before) / measurement.n


def _mib(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:.0f}"


def _kib(value: float) -> str:
    return "-" if value != value else f"{value / 1024:.1f}"


def _over(server: float, echo: float) -> str:
    return _fmt_ratio(server / echo if echo and echo == echo else float("nan"))


def report_idle(pairs: list[tuple[Measurement, Measurement]], args: argparse.Namespace, command: str) -> None:
    """The idle-plus-active table, as Markdown (to paste into an issue note)."""
    print()
    print(
        f"#### Idle plus active connections: N connected, each said hello and opened a game; {args.active} "
        "of them play closed move/undo loops, the rest stay idle (they answer pings)"
    )
    print()
    print(
        f"window {args.duration:g} s after {args.warmup:g} s warm-up; {os.cpu_count()} CPUs; "
        f"Python {sys.version.split()[0]}; RSS = VmRSS of the target's processes (threads included)"
    )
    print()
    print(
        "| N | target | active act/s | p50 / p99 ms | CPU µs/action | RSS MiB before / connected / games "
        "| KiB per connection | KiB per live game | setup s (connect / greet) "
        "| setup retries | idle lost | errors | CPU other |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for server, echo in pairs:
        for m in (server, echo):
            print(
                f"| {m.n:,} | {m.kind} | {m.rate:,.0f} | {m.p50_ms:.2f} / {m.p99_ms:.2f} | "
                f"{_cpu_per_reply(m):.1f} | {_mib(m.rss.get('before'))} / {_mib(m.rss.get('connected'))} / "
                f"{_mib(m.rss.get('games'))} | {_kib(_grown(m, 'before', 'connected'))} | "
                f"{_kib(_grown(m, 'connected', 'games'))} | "
                f"{m.connect_s:.1f} / {m.setup_s - m.connect_s:.1f} | "
                f"{m.setup_retries} | {m.idle_lost} | {m.errors} | {_pct(m.other_cpu)} |"
            )
        print(
            f"| {server.n:,} | server / echo | {_over(server.rate, echo.rate)} | "
            f"{_over(server.p50_ms, echo.p50_ms)} / {_over(server.p99_ms, echo.p99_ms)} | "
            f"{_over(_cpu_per_reply(server), _cpu_per_reply(echo))} | | "
            f"{_over(_grown(server, 'before', 'connected'), _grown(echo, 'before', 'connected'))} "
            "| | | | | | |"
        )
    print()
    for server, echo in pairs:
        connection, game = _grown(server, "before", "connected"), _grown(server, "connected", "games")
        bare = _grown(echo, "before", "connected")
        print(
            f"- N = {server.n:,}: the server holds {_kib(connection)} KiB per connection and "
            f"{_kib(game)} KiB more per live game (hello + new_game: a player, a session, a room), "
            f"{_kib(connection + game)} KiB in all; the echo {_kib(bare)} KiB per bare connection "
            f"(ratio {_over(connection + game, bare)}). CPU per action of the {args.active} active: "
            f"{_cpu_per_reply(server):.1f} µs, echo {_cpu_per_reply(echo):.1f} µs per message "
            f"(ratio {_over(_cpu_per_reply(server), _cpu_per_reply(echo))})."
        )
    for server, echo in pairs:
        for measurement in (server, echo):
            if measurement.first_error:
                print(f"first error ({measurement.kind}, N={measurement.n}): {measurement.first_error}")
    print()
    print(
        "KiB per connection: RSS growth from before the connections to all connected, over N; per live "
        "game: growth from connected to all greeted with a game, over N (the echo keeps no player or game:"
    )
    print(
        "its figure is buffers only). CPU µs/action: the target's CPU (all processes and threads, the idle "
        "connections' keepalive included) over the active connections' replies in the window."
    )
    print("'setup retries': hello / new_game answered 'unavailable' (the database past the server's timeout")
    print("during the setup storm) and sent again; 'idle lost': idle connections the target closed before")
    print("the end of the window (should be 0);")
    print("'CPU other': the rest of the machine during the window, share of a core (well above 0: skewed).")
    print(
        f"Server settings: defaults except --rate-per-second {RATE_PER_SECOND} --rate-burst {RATE_BURST}, "
        "the per-address limits off, --max-connections N + 100 (at least 10,000, its default)."
    )
    if args.server_args or args.server_launcher:
        launcher = args.server_launcher or "python -m server"
        print(f"Experiment: server launcher {launcher}, extra flags: {args.server_args or 'none'}")
    print(f"command: `{command}`")


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench_load", description="Load benchmark of the real server against a websockets echo server."
    )
    parser.add_argument(
        "--n",
        type=int,
        nargs="+",
        default=list(DEFAULT_NS),
        metavar="N",
        help="concurrent games (connections) to run, in order (default: 1 100 1000)",
    )
    parser.add_argument(
        "--idle-n",
        type=int,
        nargs="+",
        default=[],
        metavar="N",
        help="also run the idle-plus-active table at these N (e.g. 1000 10000; a few minutes)",
    )
    parser.add_argument(
        "--active",
        type=int,
        default=DEFAULT_ACTIVE,
        help=f"connections that play in the idle-plus-active table (default {DEFAULT_ACTIVE})",
    )
    parser.add_argument(
        "--idle-only", action="store_true", help="skip the first table (with --idle-n): only idle-plus-active"
    )
    parser.add_argument(
        "--rate",
        type=float,
        nargs="+",
        default=[0.0],
        metavar="R",
        help="equal load: the connections pace themselves to R actions a second in all, server and echo "
        "alike; 0 is closed loops (saturated, the default); several: one pair of runs each, e.g. 8000 0",
    )
    parser.add_argument("--duration", type=float, default=None, help="measured window, seconds (default 5)")
    parser.add_argument("--warmup", type=float, default=None, help="warm-up before the window (default 1)")
    parser.add_argument("--quick", action="store_true", help="short windows (1.5 s after 0.5 s warm-up)")
    parser.add_argument("--drivers", type=int, default=1, help="driver processes sharing the N connections")
    parser.add_argument("--only", choices=("server", "echo"), help="run one target only (no ratios)")
    parser.add_argument(
        "--postgres-url",
        metavar="URL",
        help="run the server on PostgreSQL: URL names a server (its database only creates and drops the "
        f"bench's own, {POSTGRES_DATABASE_PREFIX}_<pid>_<k>, one per server run), e.g. "
        "postgresql+asyncpg://postgres@127.0.0.1:5432/test; the CPU of the backends that serve the server is "
        "read too (PostgreSQL on this machine). Default: SQLite",
    )
    parser.add_argument(
        "--py-spy", metavar="DIR", help="sample the server (and echo) with py-spy in each window"
    )
    parser.add_argument("--py-spy-format", default="speedscope", choices=("speedscope", "raw", "flamegraph"))
    parser.add_argument(
        "--server-launcher",
        metavar="CMD",
        help="run the server as CMD followed by 'serve …' instead of 'python -m server', e.g. "
        '"python -m cProfile -o /tmp/server.prof -m server" (stopped by SIGTERM: the profile is written)',
    )
    parser.add_argument(
        "--server-args",
        metavar="FLAGS",
        help="extra flags for 'eightoff serve' (for experiments; the table then no longer shows the "
        'defaults), e.g. "--sqlite-synchronous NORMAL"',
    )
    args = parser.parse_args(argv)
    if args.duration is None:
        args.duration = 1.5 if args.quick else 5.0
    if args.warmup is None:
        args.warmup = 0.5 if args.quick else 1.0
    if (
        args.duration <= 0
        or args.warmup < 0
        or any(n < 1 for n in [*args.n, *args.idle_n])
        or args.drivers < 1
        or any(rate < 0 for rate in args.rate)
    ):
        parser.error("durations must be positive, N and --drivers at least 1 and --rate not negative")
    if args.active < 1:
        parser.error("--active must be at least 1")
    if args.idle_only and not args.idle_n:
        parser.error("--idle-only needs --idle-n")
    if args.postgres_url and async_url(args.postgres_url).get_backend_name() != "postgresql":
        parser.error(
            "--postgres-url must name a PostgreSQL server, e.g. postgresql://postgres@127.0.0.1/test"
        )
    return args


def _nan_measurement(kind: str, n: int) -> Measurement:
    nan = float("nan")
    return Measurement(kind, n, nan, nan, nan, 0, 0, None, nan, None, None, nan)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    given = sys.argv[1:] if argv is None else list(argv)
    python = Path(sys.executable)
    with contextlib.suppress(ValueError):
        python = python.relative_to(ROOT)  # .venv/bin/python, as run from the project root
    module = ["-m", "bench.bench_load"] if __spec__ is not None else [sys.argv[0]]
    command = shlex.join([str(python), *module, *given])
    limit = raise_nofile_limit()
    if max([*args.n, *args.idle_n]) + 64 > limit:
        n = max([*args.n, *args.idle_n])
        print(
            f"warning: the open-file limit is {limit}, below N={n}: the target cannot hold it",
            file=sys.stderr,
        )
    if args.py_spy:
        Path(args.py_spy).mkdir(parents=True, exist_ok=True)

    def _terminate(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _terminate)
    pairs: list[tuple[Measurement, Measurement]] = []
    idle_pairs: list[tuple[Measurement, Measurement]] = []
    with tempfile.TemporaryDirectory(prefix="eightoff-bench-") as tmp:
        root = Path(tmp)
        print(f"working in {root}", file=sys.stderr)
        for n in [] if args.idle_only else args.n:
            for offered in args.rate:
                paced = functools.partial(run_one, offered=offered)
                pairs.append(
                    (_run_target("server", n, args, root, paced), _run_target("echo", n, args, root, paced))
                )
        for n in args.idle_n:
            idle_pairs.append(
                (_run_target("server", n, args, root, run_idle), _run_target("echo", n, args, root, run_idle))
            )
    if pairs:
        report(pairs, args, command)
    if idle_pairs:
        report_idle(idle_pairs, args, command)
    return 0


def _run_target(
    kind: str,
    n: int,
    args: argparse.Namespace,
    root: Path,
    run: Callable[[str, int, argparse.Namespace, Path], Measurement],
) -> Measurement:
    """``run`` the target, unless ``--only`` names the other one (then a measurement of nothing)."""
    return _nan_measurement(kind, n) if args.only not in (None, kind) else run(kind, n, args, root)


if __name__ == "__main__":
    if __package__ in (None, ""):  # run as a script: make ``bench`` importable for the spawned drivers
        sys.path.insert(0, str(ROOT))
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted; every subprocess was stopped", file=sys.stderr)
        sys.exit(130)
