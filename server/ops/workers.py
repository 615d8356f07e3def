"""``eightoff serve --workers N``: N server processes on one port, under one supervisor.

The supervisor binds the address once to learn its port (port 0 too) and keeps that socket bound, not
listening, so the port stays ours; it claims the port (below), prepares the database once, then spawns
the workers (fresh interpreters: nothing is forked after an event loop exists). Each worker binds its
own listening socket to that port with ``SO_REUSEPORT``, so the kernel spreads new connections across
their accept queues, and serves it with `App` under its own node name (``NODE-wI``) on the shared
database. Without Redis the supervisor relays each worker's bus events to the others
(`server.play.bus.RelayBus`), so a spectator on any worker sees every game's diffs; with ``--redis-url``
the workers use Redis as separate nodes do.

Only one supervisor serves a port: ``SO_REUSEPORT`` lets any process of the same user join the port's
group, and the kernel would then split new players between two servers and two databases. So the
supervisor holds a `PortClaim` on its port from before it opens the database until it exits, and a
second one is refused at start-up (a single-process server needs no claim: its socket, bound without
``SO_REUSEPORT``, already keeps every other socket off its address).

The supervisor prints the usual banner once every worker listens, forwards SIGTERM and SIGINT to the
workers (each shuts down gracefully) and exits when they have. A worker that dies otherwise is logged
and stops the others, and the supervisor exits 1: a node never runs silently at part capacity (its
process manager restarts it whole). A worker whose supervisor is gone shuts down too.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import fcntl
import functools
import gc
import logging
import multiprocessing
import os
import signal
import socket
import struct
import sys
import tempfile
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Final

from server import __version__
from server.config import Settings, Unavailable, needs
from server.metrics import SharedMetricsDir
from server.play.bus import RELAY_BACKLOG_BYTES, RelayBus, RelayStream, frame
from server.storage.db import describe_database, prepare_for_serving

__all__ = ["ListenAddress", "PortClaim", "Supervisor", "check_address_free", "worker_main"]

logger = logging.getLogger(__name__)

#: Seconds the supervisor waits for its workers' graceful shutdown beyond their ``shutdown_grace``
#: before it kills what is left.
STOP_MARGIN: Final = 15.0
_STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)


@dataclass(frozen=True, slots=True)
class ListenAddress:
    """Where every worker listens: the socket family and address (its port resolved)."""

    family: int
    sockaddr: tuple[Any, ...]

    @property
    def port(self) -> int:
        return int(self.sockaddr[1])

    @classmethod
    def reserve(cls, host: str, port: int) -> tuple[ListenAddress, socket.socket]:
        """Bind ``host`` and ``port`` (0: any free port) once with ``SO_REUSEPORT``, not listening: the
        address with its port, and the socket that holds it (it takes no connections).

        Raises:
            OSError: the address cannot be bound (in use without SO_REUSEPORT, not ours, unknown host).
        """
        family, _, _, _, sockaddr = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = cls(family, sockaddr).bound_socket()
        return cls(family, sock.getsockname()), sock

    def bound_socket(self) -> socket.socket:
        """A new socket bound to the address with ``SO_REUSEPORT`` (its owner listens on it)."""
        sock = socket.socket(self.family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(self.sockaddr)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            raise _bind_error(exc, self.sockaddr) from exc
        return sock


def _bind_error(exc: OSError, sockaddr: tuple[Any, ...]) -> OSError:
    """The words of the event loop's own bind failure, which one process reports."""
    reason = (exc.strerror or str(exc)).lower()
    return OSError(exc.errno, f"error while attempting to bind on address {sockaddr!r}: {reason}")


def check_address_free(host: str, port: int) -> None:
    """Fail as the single process's bind will if ``host`` and ``port`` are served already, before
    that process opens its database: it binds last, and would otherwise create and migrate a
    database of its own before it is refused. The bind that follows still decides (this is a check,
    not a claim); port 0 is always free.

    Raises:
        OSError: as the event loop's bind would (in use, not ours, unknown host).
    """
    if port == 0:
        return
    for family, _, _, _, sockaddr in socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    ):
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the event loop's
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(sockaddr)
            except OSError as exc:
                raise _bind_error(exc, sockaddr) from exc


class PortClaim:
    """A supervisor's exclusive claim on a TCP port, released when its process ends however it ends
    (``kill -9`` included): nothing is left behind to clean up.

    On Linux it is an abstract unix socket named after the port (``@eightoff-serve/tcp/PORT``), so it
    is scoped as the port itself is, by network namespace: two containers that share the host's
    network see each other's claims, whatever their file systems. It listens only so that a refused
    supervisor can name the holder's pid (``SO_PEERCRED``). Elsewhere it is a ``flock`` on a file named
    after the port in the temporary directory.

    The claim is on the port, not on host and port: with ``SO_REUSEPORT`` the kernel lets a supervisor
    on ``0.0.0.0`` share connections with one on ``127.0.0.1`` (and ``::`` with both), so only the port
    tells every overlap apart. Two supervisors on two distinct addresses of one port are refused too.
    """

    def __init__(self, port: int, holder: socket.socket | int) -> None:
        self.port = port
        self._holder = holder  # the abstract socket, or the locked file's descriptor

    @classmethod
    def take(cls, port: int) -> PortClaim:
        """Claim ``port`` for this process.

        Raises:
            OSError: EADDRINUSE when another process holds the claim (naming its pid when known).
        """
        if sys.platform == "linux":
            return cls(port, _claim_abstract_socket(port))
        return cls(port, _claim_lock_file(port, Path(tempfile.gettempdir())))

    def fileno(self) -> int | None:
        """The listening socket's descriptor, to answer `answer_probes` from the event loop (None
        for a lock file)."""
        return self._holder.fileno() if isinstance(self._holder, socket.socket) else None

    def answer_probes(self) -> None:
        """Accept and close the connections of refused supervisors (they read our pid from the
        connection itself), so that the backlog never fills."""
        if not isinstance(self._holder, socket.socket):
            return
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while True:
                self._holder.accept()[0].close()

    def release(self) -> None:
        if isinstance(self._holder, socket.socket):
            self._holder.close()
        else:
            os.close(self._holder)


def _claimed(port: int, pid: int | None) -> OSError:
    holder = "another eightoff serve --workers" + (f" (pid {pid})" if pid else "")
    return OSError(errno.EADDRINUSE, f"{holder} already serves port {port}")


def _claim_abstract_socket(port: int) -> socket.socket:
    name = f"\0eightoff-serve/tcp/{port}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(name)
        sock.listen(16)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        if exc.errno != errno.EADDRINUSE:
            raise
        raise _claimed(port, _holder_pid(name)) from None
    return sock


def _holder_pid(name: str) -> int | None:
    """The pid of the process listening on the abstract socket ``name``; None if it cannot be told."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(name)
            credentials = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        except OSError:
            return None
    pid, _, _ = struct.unpack("3i", credentials)
    return pid or None


def _claim_lock_file(port: int, directory: Path) -> int:
    """An exclusive ``flock`` on the port's file in ``directory`` (created if missing), which holds
    the holder's pid."""
    fd = os.open(directory / f"eightoff-serve-tcp-{port}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        text = os.read(fd, 32).decode(errors="replace").strip()
        os.close(fd)
        raise _claimed(port, int(text) if text.isdigit() else None) from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd


# ---------------------------------------------------------------------------------------- the supervisor


@dataclass(eq=False)
class _Worker:
    """A worker process as the supervisor holds it."""

    node: str
    process: BaseProcess
    control: Connection  # the worker reports its start here; its end closing means it is gone
    link: socket.socket | None  # the relay's end, without Redis
    started: asyncio.Future[str | None]  # None once it listens, else why it could not start
    exited: asyncio.Future[int]  # its exit code (negative: the signal that ended it)
    relay: asyncio.Transport | None = None

    def describe_exit(self) -> str:
        code = self.exited.result()
        if code >= 0:
            return f"exit status {code}"
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"


class Supervisor:
    """Runs ``settings.workers`` workers (see the module docstring); ``run`` returns the exit status."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._workers: list[_Worker] = []
        self._stopping = asyncio.Event()
        self._metrics: SharedMetricsDir | None = None  # the workers' metrics, summed at every scrape

    async def run(self) -> int:
        """Serve until a signal (0 once every worker stopped gracefully) or a worker's death (1).

        Raises:
            server.config.Unavailable: the address (another supervisor's claim on the port too), the
                database, or a worker's start (Redis...).
        """
        settings = self._settings
        loop = asyncio.get_running_loop()
        with contextlib.ExitStack() as held:
            with needs("host", "port", what=f"cannot listen on {settings.host} port {settings.port}"):
                address, reserved = ListenAddress.reserve(settings.host, settings.port)
                held.callback(reserved.close)
                claim = PortClaim.take(address.port)
                held.callback(claim.release)
            if (claim_fd := claim.fileno()) is not None:
                loop.add_reader(claim_fd, claim.answer_probes)
                held.callback(loop.remove_reader, claim_fd)
            with needs("database_url", what="cannot open and migrate the database"):
                await asyncio.to_thread(prepare_for_serving, settings.database_url)
            return await self._serve(address)

    async def _serve(self, address: ListenAddress) -> int:
        loop = asyncio.get_running_loop()
        for signum in _STOP_SIGNALS:
            loop.add_signal_handler(signum, self._on_signal, signum)
        self._metrics = SharedMetricsDir()
        try:
            self._workers = [self._spawn(index, address) for index in range(1, self._settings.workers + 1)]
            await self._connect_relay()
            failure = await self._wait_started()
            if failure is not None:
                await self._stop_all(signal.SIGTERM)
                raise Unavailable(failure)
            if not self._stopping.is_set():
                self._print_banner(address.port)
            return await self._wait_exits()
        finally:
            for signum in _STOP_SIGNALS:
                loop.remove_signal_handler(signum)
            for worker in self._workers:
                self._release(worker)
            self._metrics.remove()

    def _spawn(self, index: int, address: ListenAddress) -> _Worker:
        context = multiprocessing.get_context("spawn")
        node = self._settings.worker_node(index)
        settings = dataclasses.replace(self._settings.worker_share(), node=node, port=address.port)
        control, child_control = context.Pipe()
        link, child_link = socket.socketpair() if settings.redis_url is None else (None, None)
        process = context.Process(
            target=worker_main, args=(settings, address, child_control, child_link), name=node
        )
        process.start()
        child_control.close()  # the worker's ends live in the worker: EOF here means it is gone
        if child_link is not None:
            child_link.close()
        loop = asyncio.get_running_loop()
        worker = _Worker(node, process, control, link, loop.create_future(), loop.create_future())
        loop.add_reader(control.fileno(), self._on_control, worker)
        loop.add_reader(process.sentinel, self._on_exit, worker)
        return worker

    def _on_control(self, worker: _Worker) -> None:
        """The worker's start report, ``("listening", port)`` or ``("failed", line)``, or its end."""
        try:
            kind, detail = worker.control.recv()
        except (EOFError, OSError):
            asyncio.get_running_loop().remove_reader(worker.control.fileno())
            return
        if not worker.started.done():
            worker.started.set_result(None if kind == "listening" else str(detail))
        if kind == "listening":
            logger.info("worker %s (pid %s) listening on port %s", worker.node, worker.process.pid, detail)

    def _on_exit(self, worker: _Worker) -> None:
        asyncio.get_running_loop().remove_reader(worker.process.sentinel)
        worker.process.join()
        if self._metrics is not None and worker.process.pid is not None:
            self._metrics.worker_exited(worker.process.pid)
        worker.exited.set_result(worker.process.exitcode or 0)

    def _on_signal(self, signum: int) -> None:
        logger.info("%s: stopping %d workers", signal.Signals(signum).name, len(self._workers))
        self._stopping.set()
        self._signal_all(signum)

    def _signal_all(self, signum: int) -> None:
        for worker in self._workers:
            if not worker.exited.done() and worker.process.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.process.pid, signum)

    async def _connect_relay(self) -> None:
        loop = asyncio.get_running_loop()
        for worker in self._workers:
            if worker.link is not None:
                transport, _ = await loop.create_unix_connection(
                    functools.partial(_RelayPeer, self, worker), sock=worker.link
                )
                worker.relay = transport

    def relay(self, payloads: list[bytes], source: _Worker) -> None:
        """Send ``source``'s events to every other worker, in the order it sent them (one write each)."""
        data = b"".join(frame(payload) for payload in payloads)
        for worker in self._workers:
            relay = worker.relay
            if worker is source or relay is None or relay.is_closing():
                continue
            if relay.get_write_buffer_size() > RELAY_BACKLOG_BYTES:
                logger.warning("worker %s reads no relayed events; dropping %d", worker.node, len(payloads))
                continue
            relay.write(data)

    async def _wait_started(self) -> str | None:
        """None once every worker listens (or a stop signal came first); else why one did not start."""
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            for worker in self._workers:
                await asyncio.wait(
                    (worker.started, worker.exited, stopping), return_when=asyncio.FIRST_COMPLETED
                )
                if worker.started.done() and worker.started.result() is not None:
                    return worker.started.result()
                if not worker.started.done() and worker.exited.done():
                    return f"worker {worker.node} {worker.describe_exit()} before it listened"
                if stopping.done():
                    return None
            return None
        finally:
            stopping.cancel()

    async def _wait_exits(self) -> int:
        """Wait for a stop signal or a worker's death, then for every worker to exit; the status."""
        stopping: asyncio.Future[object] = asyncio.ensure_future(self._stopping.wait())
        exits: list[asyncio.Future[Any]] = [worker.exited for worker in self._workers]
        await asyncio.wait((stopping, *exits), return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        status = 0
        if not self._stopping.is_set():
            dead = next(worker for worker in self._workers if worker.exited.done())
            logger.error(
                "worker %s (pid %s) died: %s; stopping the other workers (a node never serves at part "
                "capacity)",
                dead.node,
                dead.process.pid,
                dead.describe_exit(),
            )
            status = 1
        self._stopping.set()
        if not await self._stop_all(signal.SIGTERM):
            status = 1
        for worker in self._workers:
            if status == 0 and worker.exited.result() != 0:
                logger.error("worker %s stopped badly: %s", worker.node, worker.describe_exit())
                status = 1
        return status

    async def _stop_all(self, signum: int) -> bool:
        """Signal every running worker and wait for them (killing what is left after the grace); True
        when they all exited within it."""
        self._signal_all(signum)
        exits = [worker.exited for worker in self._workers]
        _, pending = await asyncio.wait(exits, timeout=self._settings.shutdown_grace + STOP_MARGIN)
        if not pending:
            return True
        logger.error("%d worker(s) did not stop in time; killing them", len(pending))
        self._signal_all(signal.SIGKILL)
        await asyncio.wait(exits)
        return False

    def _print_banner(self, port: int) -> None:
        settings = self._settings
        host = f"[{settings.host}]" if ":" in settings.host else settings.host  # an IPv6 address
        logger.info("%d workers serving (%s)", len(self._workers), ", ".join(w.node for w in self._workers))
        print(f"eightoff {__version__} serving ws://{host}:{port}/ws", flush=True)
        print(f"browser client: http://{host}:{port}/", flush=True)
        print(f"database: {describe_database(settings.database_url)}", flush=True)

    @staticmethod
    def _release(worker: _Worker) -> None:
        loop = asyncio.get_running_loop()
        loop.remove_reader(worker.control.fileno())
        loop.remove_reader(worker.process.sentinel)
        worker.control.close()
        if worker.relay is not None:
            worker.relay.close()
        elif worker.link is not None:
            worker.link.close()


class _RelayPeer(RelayStream):
    """The supervisor's end of one worker's relay link: frames in, to the other workers."""

    def __init__(self, supervisor: Supervisor, worker: _Worker) -> None:
        super().__init__(f"worker {worker.node}")
        self._supervisor = supervisor
        self._worker = worker

    def received(self, payloads: list[bytes]) -> None:
        self._supervisor.relay(payloads, self._worker)


# ---------------------------------------------------------------------------------------- a worker


def worker_main(
    settings: Settings, address: ListenAddress, control: Connection, link: socket.socket | None
) -> None:
    """A worker process's entry point (spawned by the supervisor); exits 0 after a graceful stop, 1
    when it could not start (having reported why on ``control``)."""
    from server.ops.runtime import configure_logging, fast_event_loop

    configure_logging(settings.node)
    with asyncio.Runner(loop_factory=fast_event_loop()) as runner:
        status = runner.run(_serve(settings, address, control, link))
    control.close()
    sys.exit(status)


async def _serve(
    settings: Settings, address: ListenAddress, control: Connection, link: socket.socket | None
) -> int:
    from server.app import App

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in _STOP_SIGNALS:
        loop.add_signal_handler(signum, stop.set)

    def supervisor_gone() -> None:
        loop.remove_reader(control.fileno())  # else a closed pipe calls back at every turn of the loop
        if not stop.is_set():
            logger.error("the supervisor is gone; shutting down")
            stop.set()

    loop.add_reader(control.fileno(), supervisor_gone)  # it sends nothing: readable means closed
    try:
        with needs("host", "port", what=f"cannot listen on {settings.host} port {address.port}"):
            sock = address.bound_socket()
        bus = None if link is None else RelayBus(link, on_lost=supervisor_gone)
        app = await App.start(settings, sock=sock, bus=bus, start_solver=True)
    except Unavailable as exc:
        _report(control, "failed", str(exc))
        return 1
    gc.freeze()  # as `server.app.run`: what start-up built lives as long as the process
    _report(control, "listening", app.port)
    await stop.wait()
    logger.info("shutting down")
    await app.shutdown()
    return 0


def _report(control: Connection, kind: str, detail: object) -> None:
    """Tell the supervisor how the start went (nobody to tell if it is gone: the worker then stops)."""
    with contextlib.suppress(OSError):
        control.send((kind, detail))
