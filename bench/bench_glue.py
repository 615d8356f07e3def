"""The event loop's glue per action, in-process: socket bytes in → ack bytes out, nothing else.

``--players`` clients each play one game (move t1 → c5, then undo, again and again) through the whole
server of an in-process ``App`` (SQLite ``synchronous=FULL``, the real group commit on its writer
thread): each client's masked frame is handed to its connection's ``data_received`` as a socket read
would, and the next one only once the ack's bytes were written (from a later turn of the loop, as a
read would come). The sockets are stubs (``_Socket``): no system call, so what the loop thread spends
is the server's Python (and the stubs' few lines, the same in the baseline).

The baseline, measured in the same run the same way: a bare websockets sans-I/O ``ServerProtocol``
with msgpack echoing an ack-shaped reply (`bench.echo_server.reply_to`) to the same frames: framing
and codec, no validation, no game, no storage.

- ``--time``: the loop thread's CPU per action (``time.thread_time``) beside the echo's per message,
  their ratio, the writer thread's CPU, and the split: the request's own work timed alone (decode,
  engine, the ack's value and encoding; the echo's msgpack alone) and the glue, what is left: the
  loop thread's CPU per action − the echo's per message − (decode + engine + ack − the echo's
  msgpack). The glue is the turn of the room's driver, the checks, the write record and the commit
  pipeline's hand-over, the announcement, the token bucket and the fan-out.
- ``--instant-commits``: no writer thread, each write answered in the next turn of the loop as if
  stored: the loop thread's CPU without what sharing the process with the writer costs it (the GIL
  changing hands, the thread's wake-ups), which the difference from the plain run shows.
- ``--sleeping-commits SECONDS``: the real writer thread and hand-overs, each commit a sleep that
  long (the GIL released) and nothing stored: the loop's CPU with the writer's Python work gone but its
  waits kept. Beside the plain run (it prints its commits' time) and ``--instant-commits``, it tells the
  writer's Python (the GIL) from the loop's idling while a commit is out.
- ``--profile``: cProfile of the server run, top entries by own time, in µs per action.
- under callgrind, instructions of the loop thread alone (load-independent)::

      valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file=cg.%p \\
          .venv/bin/python -m bench.bench_glue --players 10 --count 2000
      (the same with --count 6000; per action: the difference of the two runs' loop-thread totals
      (the ``-01`` file's ``summary:`` line) / 4000, which takes start-up out)

  and the same for the parts of the glue's sum with ``--only echo``, ``--only request`` (decode,
  engine and ack, alone) and ``--only echo-codec``: glue = server − echo − (request − echo codec).

Run: ``.venv/bin/python -m bench.bench_glue --time`` (about 20 s). Not a test: it asserts only that
every reply was an ack.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import pstats
import resource
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgpack  # type: ignore[import-untyped]
from websockets.frames import Frame, Opcode
from websockets.http11 import Request
from websockets.server import ServerProtocol

import protocol
from bench.echo_server import reply_to
from engine import Game
from protocol.limits import MAX_GAME_ACTIONS
from server.app import App
from server.config import Settings
from server.edge import transport
from server.edge.transport import WebSocketConnection
from server.ops.runtime import fast_event_loop
from server.play.race import registry as race_registry
from server.storage.committer import Done, Write

CODE = "EO1-C8-AAAAAFA"  # cells 5-8 empty: t1 → c5 is legal at the deal
MASK = b"\x1f\x2e\x3d\x4c"
STAGE_COUNT = 20_000
ACK = b"\xa3ack"  # msgpack's "ack": in every ack's bytes
HANDSHAKE = (
    b"GET /ws HTTP/1.1\r\nHost: bench\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    b"Sec-WebSocket-Protocol: eightoff.v1.msgpack\r\n\r\n"
)


def client_frame(message: dict[str, Any]) -> bytes:
    """A client's masked binary frame of ``message`` (msgpack), as a socket read hands it over."""
    payload = msgpack.packb(message)
    masked = bytes(byte ^ MASK[index % 4] for index, byte in enumerate(payload))
    size = len(payload)
    head = bytes([0x82, 0x80 | size]) if size < 126 else bytes([0x82, 0xFE]) + size.to_bytes(2, "big")
    return head + MASK + masked


def server_payload(frame: bytes) -> bytes:
    """The payload of one unmasked server frame."""
    size = frame[1] & 0x7F
    if size == 126:
        return frame[4:]
    if size == 127:
        return frame[10:]
    return frame[2:]


class _Socket(asyncio.Transport):
    """A socket as an ``asyncio.Protocol`` sees it: what is written goes to ``sink`` at once."""

    def __init__(self, address: str, sink: Callable[[bytes], None]) -> None:
        super().__init__()
        self._address = address
        self.sink = sink
        self._closing = False
        self.protocol: asyncio.Protocol | None = None  # told connection_lost once closed

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.sink(bytes(data))

    def is_closing(self) -> bool:
        return self._closing

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return (self._address, 40000) if name == "peername" else default

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        pass

    def close(self) -> None:
        if not self._closing and self.protocol is not None:
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)
        self._closing = True

    def abort(self) -> None:
        self.close()


class _EchoConnection(asyncio.Protocol):
    """The baseline: websockets' sans-I/O core and msgpack, an ack-shaped reply to each frame."""

    def __init__(self) -> None:
        self._ws = ServerProtocol(max_size=4096)
        self._version = 0
        self.transport: asyncio.Transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        ws = self._ws
        ws.receive_data(data)
        for event in ws.events_received():
            if isinstance(event, Request):
                ws.send_response(ws.accept(event))
            elif isinstance(event, Frame) and event.opcode is Opcode.BINARY:
                self._version += 1
                ws.send_binary(msgpack.packb(reply_to(msgpack.unpackb(event.data), self._version)))
        for data_out in ws.data_to_send():
            self.transport.write(data_out)


class _Player:
    """One client: its connection, its two frames, and the acks it got."""

    def __init__(self, index: int, connection: asyncio.Protocol, run: _Run) -> None:
        self.connection = connection
        self.socket = _Socket(f"10.0.{index // 250}.{index % 250 + 1}", self._setup_reply)
        self.replies: asyncio.Queue[bytes] = asyncio.Queue()
        self.frames: list[bytes] = []
        self.turn = 0
        self._run = run

    def _setup_reply(self, data: bytes) -> None:
        self.replies.put_nowait(data)

    def play(self, frames: list[bytes]) -> None:
        """From now on every write is an ack, answered by the next frame from a later turn."""
        self.frames = frames
        self.socket.sink = self._acked
        self._send()

    def _send(self) -> None:
        self.connection.data_received(self.frames[self.turn])

    def _acked(self, data: bytes) -> None:
        if ACK not in data:
            raise RuntimeError(f"not an ack: {data!r}")
        self.turn ^= 1
        if self._run.acked():
            self._run.loop.call_soon(self._send)


class _Run:
    """Counts the actions of all players; stops them at ``count``, with the figures of the window
    after ``warm`` actions."""

    def __init__(self, count: int, warm: int) -> None:
        self.loop = asyncio.get_running_loop()
        self.count = count
        self.warm = warm
        self.done = 0
        self.finished = self.loop.create_future()
        self.commits = 0  # group commits during the run (the loop's share of each is spread over its writes)
        self.commit_seconds = 0.0  # their time on the writer thread, in all
        self.started: tuple[float, float] = (0.0, 0.0)
        self.ended: tuple[float, float] = (0.0, 0.0)

    def acked(self) -> bool:
        self.done += 1
        if self.done == self.warm:
            self.started = _clocks()
        if self.done < self.count + self.warm:
            return True
        if not self.finished.done():
            self.ended = _clocks()
            self.finished.set_result(None)
        return False

    def per_action(self) -> tuple[float, float]:
        """CPU seconds per action in the window: the loop thread's, the other threads'."""
        thread = self.ended[0] - self.started[0]
        process = self.ended[1] - self.started[1]
        return thread / self.count, (process - thread) / self.count


def _clocks() -> tuple[float, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return time.thread_time(), usage.ru_utime + usage.ru_stime


async def _open(player: _Player) -> None:
    player.socket.protocol = player.connection
    player.connection.connection_made(player.socket)
    player.connection.data_received(HANDSHAKE)
    response = await player.replies.get()
    if not response.startswith(b"HTTP/1.1 101"):
        raise RuntimeError(f"handshake refused: {response!r}")


async def _ask(player: _Player, message: dict[str, Any]) -> dict[str, Any]:
    player.connection.data_received(client_frame(message))
    reply: dict[str, Any] = msgpack.unpackb(server_payload(await player.replies.get()))
    if reply.get("type") == "error":
        raise RuntimeError(f"{message['type']} refused: {reply}")
    return reply


def action_messages(game: str) -> list[dict[str, Any]]:
    """The two actions that play ``game`` back and forth: move t1 → c5, undo."""
    return [
        {"type": "move", "id": 1, "game": game, "from": "t1", "to": "c5"},
        {"type": "undo", "id": 2, "game": game},
    ]


def action_frames(game: str) -> list[bytes]:
    return [client_frame(message) for message in action_messages(game)]


async def _play(
    players: list[_Player], games: list[str], count: int, warm: int, profile: cProfile.Profile | None = None
) -> _Run:
    run = _Run(count, warm)
    for player in players:
        player._run = run
    gc.collect()
    gc.freeze()  # as the server does after start-up
    if profile is not None:
        profile.enable()
    for player, game in zip(players, games, strict=True):
        player.play(action_frames(game))
    await run.finished
    if profile is not None:
        profile.disable()
    await asyncio.sleep(0.05)  # the last commits answered
    return run


async def serve_actions(
    directory: Path,
    players: int,
    count: int,
    warm: int,
    profile: cProfile.Profile | None = None,
    *,
    instant: bool = False,
    sleeping: float | None = None,
) -> _Run:
    """``count`` actions (after ``warm``) of ``players`` clients through the whole server."""
    settings = Settings(
        port=0,
        database_url=f"sqlite+aiosqlite:///{directory / 'glue.sqlite3'}",
        rate_per_second=1e9,  # metered all the same: every frame takes its token
        rate_burst=1_000_000,
        max_connections_per_address=None,
        new_connections_per_address_per_second=None,
        guests_per_address_per_minute=None,
        new_games_per_player_per_minute=None,
        new_games_per_address_per_minute=None,
        idle_timeout=None,
    )
    # Work paced by the clock, not by actions, is left out: under callgrind a run lasts minutes, and the
    # race sweeps (a query every 1.5 s), the idle and expiry sweeps and the keepalive pings of that
    # time would count as much as thousands of actions, more the slower the machine.
    race_registry.SWEEP_INTERVAL = transport.PING_INTERVAL = 3600.0
    app = await App.start(settings)
    app.sweeper.cancel()
    app.expirer.cancel()
    commits = [0]
    commit_seconds = [0.0]
    observe_commit = app.metrics.observe_commit

    def counted(writes: int, seconds: float, *, actions: int = 0, lingered: bool = False) -> None:
        commits[0] += 1
        commit_seconds[0] += seconds
        observe_commit(writes, seconds, actions=actions, lingered=lingered)

    app.metrics.observe_commit = counted  # type: ignore[method-assign]
    try:
        run = _Run(count, warm)
        clients = [_Player(index, WebSocketConnection(app.server), run) for index in range(players)]
        games = []
        for client in clients:
            await _open(client)
            await _ask(client, {"type": "hello", "id": 1, "protocol": 1, "name": "bench"})
            games.append((await _ask(client, {"type": "new_game", "id": 2, "code": CODE}))["game"])
        # The new rooms' presence rows written before the window (under callgrind their write can
        # time out and be retried a second later, inside the window of one run and not another's).
        await app.registry.presence.flushed(timeout=120.0)
        if instant:  # no writer thread: each write answered in the next turn of the loop, as stored
            loop = asyncio.get_running_loop()

            def submit(write: Write, done: Done) -> None:
                loop.call_soon(done, None)

            app.committer.submit = submit  # type: ignore[method-assign]
        elif sleeping is not None:  # the real writer thread, its commit a sleep: no Python work there
            app.committer._backend = _SleepingBackend(sleeping)  # a bench's stand-in
        commits[0], commit_seconds[0] = 0, 0.0
        played = await _play(clients, games, count, warm, profile)
        played.commits, played.commit_seconds = commits[0], commit_seconds[0]
        for client in clients:
            client.socket.sink = lambda data: None
        return played
    finally:
        gc.unfreeze()
        await app.shutdown()


class _SleepingBackend:
    """A commit that only sleeps (the GIL released, as in a flush): the writer thread's hand-overs
    and wake-ups stay, its Python work (statements, parameters) goes."""

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds

    def commit(self, writes: Sequence[Write]) -> None:
        time.sleep(self._seconds)

    def tidy(self) -> None:
        pass

    def close(self) -> None:
        pass


async def echo_messages(players: int, count: int, warm: int) -> _Run:
    """The baseline: the same frames and drive against the bare echo."""
    run = _Run(count, warm)
    clients = [_Player(index, _EchoConnection(), run) for index in range(players)]
    for client in clients:
        await _open(client)
    played = await _play(clients, ["0123456789abcdef"] * players, count, warm)
    gc.unfreeze()
    return played


# --------------------------------------------------------------------------- the request's own work


def _per_call(run: Callable[[int], None], count: int = STAGE_COUNT) -> float:
    """This thread's CPU seconds per call, best of three rounds of ``run(count)``."""
    run(count // 10)
    best = float("inf")
    for _ in range(3):
        started = time.thread_time()
        run(count)
        best = min(best, (time.thread_time() - started) / count)
    return best


def stages(game_id: str) -> dict[str, float]:
    """The request's own work per action, each part alone: what is not glue."""
    return {name: _per_call(run) for name, run in stage_runs(game_id).items()}


def stage_runs(game_id: str) -> dict[str, Callable[[int], None]]:
    """Each part of the request's own work, as ``run(count)``."""
    payloads = [msgpack.packb(message) for message in action_messages(game_id)]
    subprotocol = protocol.Subprotocol.MSGPACK
    requests = [protocol.decode(payload, subprotocol) for payload in payloads]
    assert all(isinstance(request, protocol.ActionRequest) for request in requests)
    resolvers = [request.action for request in requests]  # type: ignore[union-attr]

    def decode(count: int) -> None:
        for index in range(count):
            protocol.decode(payloads[index & 1], subprotocol)

    def engine(count: int) -> None:
        game = Game.from_code(CODE)
        for index in range(count):
            action = resolvers[index & 1](game)
            game.play(action)
            action.symbol()
            if game.v >= MAX_GAME_ACTIONS:
                game = Game.from_code(CODE)

    def ack(count: int) -> None:
        game = Game.from_code(CODE)
        moved = game.copy()
        transfer = moved.play(resolvers[0](moved))
        for index in range(count):
            protocol.encode(protocol.Ack.of(game_id, moved, transfer, index).to_wire(), subprotocol)

    def echo_codec(count: int) -> None:
        for index in range(count):
            msgpack.packb(reply_to(msgpack.unpackb(payloads[index & 1]), index))

    return {"decode": decode, "engine": engine, "ack": ack, "echo codec": echo_codec}


# --------------------------------------------------------------------------- reports


def _report_time(server: _Run, echo: _Run, parts: dict[str, float]) -> None:
    loop_cpu, writer_cpu = server.per_action()
    echo_cpu, _ = echo.per_action()
    print(f"load: {Path('/proc/loadavg').read_text().split()[:3]}")
    ratio = loop_cpu / echo_cpu
    print(f"  server, loop thread      : {loop_cpu * 1e6:7.2f} µs per action   ratio {ratio:5.2f}x")
    writes = f"{(server.count + server.warm) / server.commits:.2f}" if server.commits else "no"
    took = f", {server.commit_seconds / server.commits * 1e3:.2f} ms each" if server.commits else ""
    writer = f"{writer_cpu * 1e6:7.2f} µs per action ({writes} writes per commit{took})"
    print(f"  server, writer thread    : {writer}")
    print(f"  echo (websockets+msgpack): {echo_cpu * 1e6:7.2f} µs per message  (the baseline, 1.00x)")
    for name, seconds in parts.items():
        print(f"  {name:<25}: {seconds * 1e6:7.2f} µs alone")
    request = parts["decode"] + parts["engine"] + parts["ack"] - parts["echo codec"]
    glue = loop_cpu - echo_cpu - request
    print(f"  glue = loop − echo − (decode + engine + ack − echo codec): {glue * 1e6:7.2f} µs"
          f"   ratio to the echo {glue / echo_cpu:5.2f}x")  # fmt: skip


def _report_profile(profile: cProfile.Profile, count: int, top: int, loop_cpu: float) -> None:
    """Top functions and the modules' totals by own time: the profiler's CPU per action, and that
    share of ``loop_cpu`` (the loop thread's CPU per action measured without the profiler, which
    inflates every call)."""
    stats = pstats.Stats(profile)
    rows = []
    modules: dict[str, float] = {}
    for (filename, line, name), (_, calls, own, total, _) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append((own, total, calls, f"{Path(filename).name}:{line}({name})"))
        module = "/".join(Path(filename).parts[-2:]) if filename != "~" else f"builtin {name}"
        modules[module] = modules.get(module, 0.0) + own
    rows.sort(reverse=True)
    whole = sum(row[0] for row in rows)

    def scaled(seconds: float) -> float:
        return float(seconds / whole * loop_cpu * 1e6)

    print(f"loop thread without the profiler: {loop_cpu * 1e6:.2f} µs per action")
    print(f"cProfile (thread CPU) of the server run, top {top} by own time, per action")
    print(f"  {'scaled µs':>9} {'own µs':>7} {'incl µs':>8} {'calls/act':>9}  function")
    for own, total, calls, where in rows[:top]:
        line = f"{own / count * 1e6:7.2f} {total / count * 1e6:8.2f} {calls / count:9.2f}"
        print(f"  {scaled(own):9.2f} {line}  {where}")
    print(f"  {scaled(whole):9.2f} {whole / count * 1e6:7.2f} in all")
    print("by module (own time)")
    for module, own in sorted(modules.items(), key=lambda item: -item[1])[:top]:
        print(f"  {scaled(own):9.2f} {own / count * 1e6:7.2f}  {module}")


async def main(args: argparse.Namespace) -> None:
    count, warm = args.count, min(args.count, 1000) if args.time or args.profile else 0
    if count + warm > args.players * (MAX_GAME_ACTIONS - 2):
        raise SystemExit(f"at most {MAX_GAME_ACTIONS - 2} actions per game: more players, or fewer actions")
    if args.only == "echo":
        await echo_messages(args.players, count, warm)
        print(f"{count} messages of {args.players} players echoed")
        return
    if args.only in ("request", "echo-codec"):
        runs = stage_runs("0123456789abcdef")
        for name in ("decode", "engine", "ack") if args.only == "request" else ("echo codec",):
            runs[name](count)
        print(f"{args.only} work done {count} times")
        return
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        commits = {"instant": args.instant_commits, "sleeping": args.sleeping_commits}
        if args.profile:
            plain = await serve_actions(Path(directory), args.players, count, warm, **commits)
            profile = cProfile.Profile(time.thread_time)  # CPU: not the waits for the GIL
            await serve_actions(Path(directory), args.players, count, warm, profile, **commits)
            _report_profile(profile, count + warm, args.top, plain.per_action()[0])
            return
        if args.instant_commits:  # once the players and games are stored: the rest is not stored
            print("commits answered at once, nothing stored past the set-up (--instant-commits)")
        if args.sleeping_commits is not None:
            print(f"the writer thread's commits sleep {args.sleeping_commits * 1e3:.2f} ms, nothing stored")
        server = await serve_actions(Path(directory), args.players, count, warm, **commits)
    if args.time:
        echo = await echo_messages(args.players, count, warm)
        _report_time(server, echo, stages("0123456789abcdef"))
    else:
        writes = (count + warm) / max(1, server.commits)
        print(f"{count} actions of {args.players} players served, {writes:.2f} writes per commit")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--players", type=int, default=10)
    parser.add_argument("--count", type=int, default=10_000, help="actions (after the warm-up)")
    parser.add_argument("--time", action="store_true", help="CPU per action against the echo")
    parser.add_argument("--profile", action="store_true", help="cProfile's top entries")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument(
        "--only",
        choices=("echo", "request", "echo-codec"),
        help="for callgrind: only the echo, the request's own work (decode, engine, ack), or the echo codec",
    )
    parser.add_argument(
        "--instant-commits",
        action="store_true",
        help="no writer thread: what the real group commit costs the loop is the difference",
    )
    parser.add_argument(
        "--sleeping-commits",
        type=float,
        metavar="SECONDS",
        help="the real writer thread, each commit a sleep this long, nothing stored: what the writer's "
        "Python work costs the loop is the difference to the plain run (give the plain run's commit time)",
    )
    parser.add_argument("--dir", default=None, help="where the SQLite file goes (default: the temp dir)")
    with asyncio.Runner(loop_factory=fast_event_loop()) as runner:  # the server's event loop
        runner.run(main(parser.parse_args()))
