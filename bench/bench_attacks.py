"""Attack suite: a well-behaved player's round trips during each attack, against calm, in one run.

Run from the project root::

    .venv/bin/python -m bench.bench_attacks                 (every attack, 6 s each: about 2 minutes)
    .venv/bin/python -m bench.bench_attacks --seconds 3 --attacks calm,flood,invalid

The server is ``eightoff serve`` with its default limits (``bench.bench_load.start_target``, a fresh
SQLite file, inherited ``EIGHTOFF_*`` variables dropped). The bystander is a process of its own that
connects from 127.0.0.2 (a source address of its own, so the per-address limits hit only the attacker,
who connects from 127.0.0.1) and plays ``move``/``undo`` round trips on one game in a closed loop,
recording each round trip (at most 100 a second, under the rate limit). Each attack is a third
process running for the same window:

- ``calm``: no attacker: the baseline every ratio divides by, all the run's ``calm`` rows pooled (the
  default runs it first and last: a calm p99 of some 590 round trips moves 1.3-2.5 ms between runs);
- ``flood``: 4 connections each sending frames as fast as they can, reconnecting when closed (1008);
- ``botnet``: the ``flood``, each reconnect from a new address (127.1.0.1 …): no per-address limit helps;
- ``paced``: 4 connections each at 1.25x the refill rate (250 frames/s against 200/s);
- ``invalid``: the ``flood`` with well-formed but invalid messages (``move`` without its fields);
- ``watch``: 4 connections watching a game over and over at just under the rate limit (a snapshot each);
- ``live``: 4 connections asking ``live`` at just under the rate limit;
- ``boards``: 12 connections of one player asking for leaderboard pages (each board in turn, 100 rows) and a
  profile at just under the rate limit: reads the database answers, on the server's (small) database;
- ``storm``: raw TCP connections opened as fast as possible and held idle (to the caps, then 503s);
- ``games``: 4 connections of one player in a ``new_game`` / ``unwatch`` loop;
- ``guests``: ``hello`` without a token on a new connection, in a loop;
- ``pages``: 4 loops of first page loads as fast as they go: the page, every file it names and the
  clock, each on a connection of its own as a browser fetches them (answers from memory, whose
  connections do not count toward the new-connection budget while ``--page-requests-per-address-per-second``
  lasts); the attacker reports the answers by status;
- ``pings``: 1 connection sending empty WebSocket pings as fast as it can and reading its pongs,
  reconnecting when closed; ``pings4``: 4 such connections; ``bigpings``: 125-byte pings;
- ``deafpings``: 8 connections sending pings as fast as they can and reading nothing;
- ``deafwatch``: 4 spectators with small receive buffers that stop reading, watching a game its
  player moves in just under the rate: their pushes pile up until the server drops them (1008);
- ``deafreplies``: 4 players with small receive buffers that stop reading and keep asking ``resume``
  (a whole snapshot each) just under the rate: their replies pile up until the server drops them;
- ``tiny``: 4 connections, each reconnect from a new address, writing 256 KiB of tiny frames per write;
- ``fragments``: 348 connections each trying to hold a 60 KB fragmented message it never finishes;
- ``dribble``: 4 connections from one address that say hello and then send a 20 KB frame a byte per
  segment (``TCP_NODELAY``), as fast as they can, reconnecting when closed: a read callback per byte
  (``botnet`` shows what a new address for each reconnect buys);
- ``addresses``: 199 source addresses (127.0.x.y) each playing like the bystander (a player of its
  own, move/undo round trips at up to 100 a second): a crowd that no per-address limit tells apart;
  ``--target echo --attacks calm,addresses`` runs the same crowd against ``bench.echo_server``, which
  does nothing but answer: the row the machine itself sets, to read the server's row against;
- ``halfopen``: 150 addresses x 25 sockets that connect and never finish their handshake (each a
  few bytes of a request, reconnecting when dropped), while 34 new clients, each from an address of
  its own, try to connect and play: the attacker reports how many got in. 3,750 sockets fill the
  cap on open connections only where it is lower than that (an open-files limit of a few thousand
  lowers it): ``--server-args "--max-connections 3000"`` puts it there.
- ``hints``: 12 guests' connections from one address (127.0.0.4) looping ``new_game`` / ``hint`` / ``resign``
  (issue 20, item 5), and a second bystander, a player on 127.0.0.3 in the attacker's process, doing the
  same: the row's last line is the fraction of its hints answered (not ``unavailable`` nor
  ``rate_limited``) and their round trips; hints are slow work, so what counts is that they are answered.
  The hint bystander loops at most twice a second (a player's new-games quota allows no more; before,
  it looped as fast as the flood and its own refused ``new_game`` counted as unanswered hints).

It prints, per attack, the bystander's round trips, p50 and p99 (ms), their ratio to calm and the
server's CPU use during the window, the growth of its resident memory over the attack and how late a
process that only sleeps wakes then (``wake p99``, `wake_probe_main`: the machine's share of each of
the wake-ups a round trip crosses, measured in the same window), then what the attacker saw (replies
by type or error code, closes by code, refused handshakes). The attacker runs at niceness 10
(``--attacker-nice``): on one small machine an attacker at full priority takes the CPU the server and
the bystander need, which a remote attacker cannot; ``--attacker-nice 0`` measures that too. This is
not a test: it asserts nothing (tests/server/test_limits.py and test_quotas.py assert the limits hold).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import itertools
import multiprocessing
import os
import re
import socket
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import msgpack  # type: ignore[import-untyped]
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame, Opcode

from bench.bench_load import CODE, SUBPROTOCOL, cpu_seconds, percentile, rss_bytes, start_target, stop_process
from bench.bystander import paced_round_trips
from bench.echo_server import raise_nofile_limit
from server.ops.runtime import fast_event_loop

ATTACKER_ADDRESS = "127.0.0.1"
BYSTANDER_ADDRESS = "127.0.0.2"
RATE = 200.0  # the server's default refill rate, frames a second per connection
CONNECTIONS = 4
BYSTANDER_PACE = 100.0  # actions a second at most: a very fast player, well under the rate limit
WAKE_PROBE_SLEEP = 0.005  # the wake-up probe's sleep: 200 wake-ups a second, too few to load the machine
START_MARGIN = 3.0  # seconds of attack around the bystander's window (its process start-up included)
# bench_load's server command lifts the per-connection limits; these flags (later flags win) put the
# defaults back, so the attacks meet the limits an operator gets.
DEFAULT_LIMITS = (
    "--rate-per-second 200 --rate-burst 400 --max-connections-per-address 256 "
    "--guests-per-address-per-minute 30 --new-connections-per-address-per-second 20 "
    "--page-requests-per-address-per-second 200 --new-games-per-address-per-minute 240"
)
HINT_BYSTANDER_ADDRESS = "127.0.0.3"
HINT_FLOOD_ADDRESS = "127.0.0.4"  # one address of its own: the guests attack leaves 127.0.0.1 no guests
HINT_FLOOD_CONNECTIONS = 12
#: The hint bystander's new_game / hint / resign loops a second at most: the new games a player may
#: start (120 a minute by default), so that what it measures is its hints, not its own new-games quota.
HINT_BYSTANDER_LOOPS = 2.0
BOARD_CONNECTIONS = 12  # past the 5 connections' worth of frames one address's connections share
#: What the ``boards`` attack asks, in turn: each of the boards a client can read, and a profile.
BOARD_REQUESTS: tuple[dict[str, Any], ...] = (
    {"type": "leaderboard", "board": "players", "limit": 100},
    {"type": "leaderboard", "board": "deal", "code": CODE, "limit": 100},
    {"type": "leaderboard", "board": "variant", "cells": 8, "period": "week", "limit": 100},
    {"type": "leaderboard", "board": "daily", "limit": 100},
    {"type": "leaderboard", "board": "rating", "cells": 8, "limit": 100},
    {"type": "profile"},
)
ATTACKS = (
    "calm",
    "flood",
    "botnet",
    "paced",
    "invalid",
    "watch",
    "live",
    "boards",
    "storm",
    "games",
    "guests",
    "pages",
    "pings",
    "pings4",
    "bigpings",
    "deafpings",
    "deafwatch",
    "deafreplies",
    "tiny",
    "fragments",
    "dribble",
    "addresses",
    "halfopen",
    "hints",
)
CROWD = 199  # the addresses attack
#: The attacks the echo server (``--target echo``) can stand for the server in: they only play.
ECHO_ATTACKS = ("calm", "addresses")
HALF_OPEN_ADDRESSES, HALF_OPEN_PER_ADDRESS, NEWCOMERS = 150, 25, 34


async def _connect(url: str, address: str, receive_buffer: int | None = None) -> ClientConnection:
    """A connection from ``address``; with ``receive_buffer``, a kernel buffer of that size (a slow
    network: the kernel queues little for it, so the server's own buffer grows as soon as it stops
    reading)."""
    host, port = url.removeprefix("ws://").split("/")[0].split(":")
    sock = socket.socket()
    sock.setblocking(False)
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.bind((address, 0))
    await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
    max_queue = 16 if receive_buffer is None else 1  # 16: websockets' default
    return await connect(
        url, sock=sock, subprotocols=[SUBPROTOCOL], ping_interval=None, max_size=None, max_queue=max_queue
    )


async def _request(ws: ClientConnection, message: dict[str, Any]) -> dict[str, Any]:
    await ws.send(msgpack.packb(message))
    reply: dict[str, Any] = msgpack.unpackb(await ws.recv())
    return reply


# --------------------------------------------------------------------------- bystander


async def _bystand(url: str, seconds: float) -> list[float]:
    """The bystander's round trips; none when it could not even connect (the server held its loop
    past websockets' 10 s opening handshake timeout)."""
    try:
        ws = await _connect(url, BYSTANDER_ADDRESS)
    except (TimeoutError, OSError) as exc:
        print(f"the bystander could not connect: {exc}", file=sys.stderr)
        return []
    await _request(ws, {"type": "hello", "protocol": 1, "id": 1})
    latencies = await paced_round_trips(ws, CODE, seconds, BYSTANDER_PACE)
    await ws.close()
    return latencies


def bystander_main(url: str, seconds: float, pipe: Connection) -> None:
    with asyncio.Runner(loop_factory=fast_event_loop()) as runner:
        pipe.send(runner.run(_bystand(url, seconds)))


def wake_probe_main(seconds: float, pipe: Connection) -> None:
    """How late a process that does nothing but sleep ``WAKE_PROBE_SLEEP`` wakes, each time, for
    ``seconds``: the machine's share of any wake-up during the window (a CPU to run on), which every
    hop of the bystander's round trip pays too (its process, the server's loop, the writer thread
    before and after its commit's flush). It holds no socket and does no work."""
    delays = []
    deadline = time.perf_counter() + seconds
    while (started := time.perf_counter()) < deadline:
        time.sleep(WAKE_PROBE_SLEEP)
        delays.append(time.perf_counter() - started - WAKE_PROBE_SLEEP)
    pipe.send(delays)


# --------------------------------------------------------------------------- attacks


class Tally:
    """What the attacker saw."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def reply(self, frame: bytes | str) -> None:
        message = msgpack.unpackb(frame) if isinstance(frame, bytes) else {}
        self.counts["reply " + str(message.get("code") or message.get("type"))] += 1

    def closed(self, ws: ClientConnection) -> None:
        self.counts[f"close {ws.close_code}"] += 1


async def _drain(ws: ClientConnection, tally: Tally) -> None:
    with contextlib.suppress(ConnectionClosed):
        async for frame in ws:
            tally.reply(frame)


def _botnet_addresses(first: int) -> Iterator[str]:
    """Loopback addresses of their own (127.1.0.1 …, clear of the bystanders' and the crowds' 127.0.x.y;
    62,500 to each second octet): each reconnect of a botnet comes from a new one. (Until 2026-12-06
    they were 127.0.x.y, and an index past 62,249 made no address: 289 of the ``fragments`` attack's
    348 holders never connected, each try counted as refused.)"""
    for index in itertools.count(first):
        yield f"127.{1 + index // 62_500}.{index // 250 % 250}.{1 + index % 250}"


async def _flooder(
    url: str, tally: Tally, frame: bytes, pace: float | None, until: float, addresses: Iterator[str]
) -> None:
    """Send ``frame`` at ``pace`` a second (None: as fast as possible); reconnect when closed, from
    the next of ``addresses``."""
    while time.monotonic() < until:
        try:
            ws = await _connect(url, next(addresses))
        except Exception as exc:  # refused: HTTP 503, or a reset in a storm
            tally.counts[f"refused {getattr(getattr(exc, 'response', None), 'status_code', 'other')}"] += 1
            await asyncio.sleep(0.05)
            continue
        reader = asyncio.create_task(_drain(ws, tally))
        started = time.monotonic()
        with contextlib.suppress(ConnectionClosed):
            for index in itertools.count():
                if time.monotonic() > until or reader.done():
                    break
                await ws.send(frame)
                if pace is None:
                    if index % 64 == 0:
                        await asyncio.sleep(0)
                else:
                    await asyncio.sleep(max(0.0, started + (index + 1) / pace - time.monotonic()))
        await ws.close()
        await reader
        tally.closed(ws)


async def _admitted(url: str, patience: float = 10.0, receive_buffer: int | None = None) -> ClientConnection:
    """A connection from the attacker's address once it is admitted again (an earlier attack may
    have left it refused for a while: an address closed for flooding waits a refill)."""
    deadline = time.monotonic() + patience
    while True:
        try:
            return await _connect(url, ATTACKER_ADDRESS, receive_buffer)
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.25)


async def _player(url: str, tally: Tally, token: str | None) -> tuple[ClientConnection, str | None]:
    ws = await _admitted(url)
    hello: dict[str, Any] = {"type": "hello", "protocol": 1, "id": 1}
    if token:
        hello["token"] = token
    welcome = await _request(ws, hello)
    tally.reply(msgpack.packb(welcome))
    return ws, welcome.get("token", token)


async def _requester(
    url: str, tally: Tally, until: float, token: str | None, make: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    """One player connection sending ``make(last reply)`` requests in turn, each awaited, just under
    the rate."""
    ws, _ = await _player(url, tally, token)
    reply: dict[str, Any] = {}
    with contextlib.suppress(ConnectionClosed):
        for index in itertools.count():
            if time.monotonic() > until:
                break
            reply = await _request(ws, {**make(reply), "id": index})
            tally.reply(msgpack.packb(reply))
            await asyncio.sleep(1 / (RATE * 0.9))
    await ws.close()


async def _deaf(url: str, tally: Tally, first: dict[str, Any]) -> tuple[ClientConnection, dict[str, Any]]:
    """A connection from the attacker's address with a 4 KiB receive buffer that says hello, sends
    ``first``, reads its reply (returned) and from then on reads nothing."""
    ws = await _admitted(url, receive_buffer=4096)
    await _request(ws, {"type": "hello", "protocol": 1, "id": 1})
    reply = await _request(ws, {**first, "id": 2})
    tally.reply(msgpack.packb(reply))
    ws.transport.pause_reading()
    return ws, reply


async def _deaf_spectators(url: str, tally: Tally, until: float) -> None:
    owner, _ = await _player(url, tally, None)
    game = (await _request(owner, {"type": "new_game", "id": 2, "code": CODE}))["game"]
    deaf = [(await _deaf(url, tally, {"type": "watch", "game": game}))[0] for _ in range(CONNECTIONS)]
    with contextlib.suppress(ConnectionClosed):
        for index in itertools.count(3):
            if time.monotonic() > until:
                break
            source, target = ("t1", "c5") if index % 2 else ("c5", "t1")
            move = {"type": "move", "game": game, "from": source, "to": target, "id": index}
            tally.reply(msgpack.packb(await _request(owner, move)))
            await asyncio.sleep(1 / (RATE * 0.9))  # pacing: just under the rate limit
    await owner.close()
    for ws in deaf:
        ws.transport.abort()


async def _deaf_player(url: str, tally: Tally, until: float) -> None:
    ws, snapshot = await _deaf(url, tally, {"type": "new_game", "code": CODE})
    with contextlib.suppress(ConnectionClosed):
        for index in itertools.count(3):
            if time.monotonic() > until:
                break
            await ws.send(msgpack.packb({"type": "resume", "game": snapshot["game"], "id": index}))
            await asyncio.sleep(1 / (RATE * 0.9))  # pacing: just under the rate limit
    ws.transport.abort()


async def _storm(url: str, tally: Tally, until: float) -> None:
    held: list[socket.socket] = []
    host, port = url.removeprefix("ws://").split("/")[0].split(":")
    loop = asyncio.get_running_loop()
    while time.monotonic() < until:
        sock = socket.socket()
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, (host, int(port)))
            held.append(sock)
            tally.counts["tcp open"] += 1
        except OSError:
            sock.close()
            tally.counts["tcp refused"] += 1
            await asyncio.sleep(0.01)
        if len(held) % 50 == 0:
            with contextlib.suppress(Exception):  # refused, one way or another
                async with await _connect(url, ATTACKER_ADDRESS) as ws:
                    tally.counts["handshake ok"] += 1
                    await ws.close()
            tally.counts["handshake tried"] += 1
        await asyncio.sleep(0.001)
    for sock in held:
        sock.close()


async def _guests(url: str, tally: Tally, until: float) -> None:
    while time.monotonic() < until:
        try:
            ws = await _connect(url, ATTACKER_ADDRESS)
            tally.reply(msgpack.packb(await _request(ws, {"type": "hello", "protocol": 1, "id": 1})))
            await ws.close()
        except Exception as exc:  # refused: HTTP 503, or a reset in a storm
            tally.counts[f"refused {getattr(getattr(exc, 'response', None), 'status_code', 'other')}"] += 1


async def _http_get(url: str, target: str) -> tuple[int, bytes]:
    """A GET on a connection of its own from the attacker's address: the status (0: no answer) and body."""
    host, port = url.removeprefix("ws://").split("/")[0].split(":")
    try:
        reader, writer = await asyncio.open_connection(host, int(port), local_addr=(ATTACKER_ADDRESS, 0))
        writer.write(f"GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        answer = await reader.read()
        writer.close()
    except OSError:
        return 0, b""
    head, _, body = answer.partition(b"\r\n\r\n")
    status = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b"0"
    return int(status), body


async def _page_loads(url: str, tally: Tally, until: float) -> None:
    """First page loads in a loop: the page, then every file it names (its links, its import map)
    at once, then the clock, each on a connection of its own."""
    page = b""
    while not page and time.monotonic() < until:  # an earlier attack may leave the address refused
        status, page = await _http_get(url, "/")
        await asyncio.sleep(0 if status == 200 else 0.25)
    text = page.decode(errors="replace")
    files = re.findall(r'(?:src|href)="(/[^"]+\?v=[^"]+)"', text)
    files += re.findall(r'"(/[\w-]+\.js\?v=[0-9a-f]+)"', text)  # the import map's URLs
    while time.monotonic() < until:
        for batch in (["/"], sorted(set(files)), ["/api/time"]):
            for status, _ in await asyncio.gather(*(_http_get(url, target) for target in batch)):
                tally.counts[f"HTTP {status}"] += 1


async def _raw_socket(url: str, address: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A WebSocket connection on a bare stream (handshake done by hand), from ``address``: frames are
    then written raw, as an attacker writes them."""
    host, port = url.removeprefix("ws://").split("/")[0].split(":")
    sock = socket.socket()
    sock.setblocking(False)
    sock.bind((address, 0))
    await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
    reader, writer = await asyncio.open_connection(sock=sock)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        f"GET /ws HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    if not head.startswith(b"HTTP/1.1 101 "):
        writer.close()
        raise ConnectionError(head.split(b"\r\n")[0].decode(errors="replace"))
    return reader, writer


def _masked(opcode: Opcode, payload: bytes, *, fin: bool = True) -> bytes:
    return Frame(opcode, payload, fin).serialize(mask=True)


#: What the ``tiny`` attack writes at a time: 256 KiB of 7-byte frames, each an empty map (an invalid
#: message).
TINY_WRITE = _masked(Opcode.BINARY, b"\x80") * (256 * 1024 // 7)


async def _next_raw_socket(
    url: str, tally: Tally, addresses: Iterator[str], pause: float
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    """`_raw_socket` from the next of ``addresses``; None once refused (counted by why, after ``pause``)."""
    try:
        return await _raw_socket(url, next(addresses))
    except Exception as exc:
        tally.counts[f"refused {str(exc)[:20] or type(exc).__name__}"] += 1
        await asyncio.sleep(pause)
        return None


async def _raw_flooder(
    url: str, tally: Tally, data: bytes, until: float, addresses: Iterator[str], *, reads: bool
) -> None:
    """Write ``data`` over and over on raw connections (reading what comes back, or nothing), each
    reconnect from the next of ``addresses``."""
    while time.monotonic() < until:
        if (connection := await _next_raw_socket(url, tally, addresses, 0.05)) is None:
            continue
        reader, writer = connection
        tally.counts["connections"] += 1
        drained = asyncio.create_task(_drain_raw(reader, tally)) if reads else None
        with contextlib.suppress(ConnectionError, RuntimeError):
            while time.monotonic() < until and not writer.is_closing():
                if drained is not None and drained.done():
                    break
                writer.write(data)
                if reads:
                    await writer.drain()
                else:
                    await asyncio.sleep(0.001 if writer.transport.get_write_buffer_size() < 1 << 20 else 0.05)
        writer.transport.abort()
        if drained is not None:
            await drained


async def _drain_raw(reader: asyncio.StreamReader, tally: Tally) -> None:
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
        while chunk := await reader.read(1 << 16):
            tally.counts["bytes read"] += len(chunk)
    tally.counts["closed"] += 1


#: What the ``dribble`` attack sends a byte at a time: a frame that would be a valid request.
DRIBBLED = _masked(Opcode.BINARY, msgpack.packb({"type": "resume", "id": 2, "game": "x" * 20_000}))
DRIBBLE_YIELD = 64  # bytes written between two turns of the attacker's loop (to see a close)


async def _dribbler(url: str, tally: Tally, until: float, addresses: Iterator[str]) -> None:
    """Say hello, then write `DRIBBLED` a byte per segment until closed; again from the next address."""
    while time.monotonic() < until:
        if (connection := await _next_raw_socket(url, tally, addresses, 0.2)) is None:
            continue
        reader, writer = connection
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        drain = asyncio.create_task(_drain_raw(reader, tally))
        writer.write(_masked(Opcode.BINARY, msgpack.packb({"type": "hello", "protocol": 1, "id": 1})))
        with contextlib.suppress(ConnectionError):
            for index in itertools.cycle(range(len(DRIBBLED))):
                if drain.done() or time.monotonic() > until:
                    break
                writer.write(DRIBBLED[index : index + 1])  # an empty buffer: sent at once, a segment
                if index % DRIBBLE_YIELD == 0:
                    tally.counts["bytes dribbled"] += DRIBBLE_YIELD
                    await asyncio.sleep(0)
        writer.close()
        await drain


async def _fragment_holders(url: str, tally: Tally, until: float, count: int = 348) -> None:
    """``count`` connections each sending a 60 KB fragmented message in pieces and never its last
    fragment, then holding on (reconnecting when closed)."""

    async def hold(index: int) -> None:
        addresses = _botnet_addresses(20_000 + index * 1000)
        while time.monotonic() < until:
            try:
                reader, writer = await _raw_socket(url, next(addresses))
            except Exception:
                tally.counts["refused"] += 1
                await asyncio.sleep(0.2)
                continue
            drained = asyncio.create_task(_drain_raw(reader, tally))
            with contextlib.suppress(ConnectionError, RuntimeError):
                writer.write(_masked(Opcode.BINARY, b"\x00" * 2000, fin=False))
                for _ in range(29):
                    writer.write(_masked(Opcode.CONT, b"\x00" * 2000, fin=False))
                    await asyncio.sleep(0.01)
            await asyncio.wait([drained], timeout=max(0.0, until - time.monotonic()))
            writer.transport.abort()
            await drained

    await asyncio.gather(*(hold(index) for index in range(count)))


def _crowd_address(index: int) -> str:
    """Addresses of their own for the crowds (127.0.200.1 …), apart from the botnets'."""
    return f"127.0.{200 + index // 250}.{1 + index % 250}"


async def _crowd_player(url: str, tally: Tally, address: str, until: float) -> None:
    """A player from ``address`` doing what the bystander does (move/undo at up to
    ``BYSTANDER_PACE`` a second), counting its replies; a refusal does not stop it."""
    try:
        ws = await _connect(url, address)
    except Exception as exc:
        tally.counts[f"refused {getattr(getattr(exc, 'response', None), 'status_code', 'other')}"] += 1
        return
    with contextlib.suppress(ConnectionClosed):
        tally.reply(msgpack.packb(await _request(ws, {"type": "hello", "protocol": 1, "id": 1})))
        game = (await _request(ws, {"type": "new_game", "id": 2, "code": CODE}))["game"]
        moves = (
            {"type": "move", "id": 3, "game": game, "from": "t1", "to": "c5"},
            {"type": "undo", "id": 4, "game": game},
        )
        for turn in itertools.count():
            if time.monotonic() > until:
                break
            started = time.monotonic()
            tally.reply(msgpack.packb(await _request(ws, moves[turn % 2])))
            await asyncio.sleep(max(0.0, started + 1 / BYSTANDER_PACE - time.monotonic()))
    await ws.close()
    tally.closed(ws)


async def _half_open(url: str, tally: Tally, address: str, until: float) -> None:
    """One socket from ``address`` that connects and sends the first bytes of a request, never the
    rest; connecting again when the server drops it."""
    host, port = url.removeprefix("ws://").split("/")[0].split(":")
    loop = asyncio.get_running_loop()
    while time.monotonic() < until:
        sock = socket.socket()
        sock.setblocking(False)
        try:
            sock.bind((address, 0))
            await loop.sock_connect(sock, (host, int(port)))
            await loop.sock_sendall(sock, b"GET /ws HTTP/1.1\r\n")
            tally.counts["half-open sockets"] += 1
            with contextlib.suppress(TimeoutError):  # b"": dropped by the server; or a 503
                await asyncio.wait_for(loop.sock_recv(sock, 1024), max(0.0, until - time.monotonic()))
        except OSError:
            tally.counts["half-open refused"] += 1
            await asyncio.sleep(0.2)
        finally:
            sock.close()


async def _newcomer(url: str, tally: Tally, address: str, until: float) -> None:
    """A new client trying to get in (one try, websockets' 10 s handshake timeout) and play."""
    try:
        ws = await _connect(url, address)
    except Exception as exc:
        tally.counts[f"newcomer refused {type(exc).__name__}"] += 1
        return
    with contextlib.suppress(ConnectionClosed):
        await _request(ws, {"type": "hello", "protocol": 1, "id": 1})
        game = (await _request(ws, {"type": "new_game", "id": 2, "code": CODE}))["game"]
        reply = await _request(ws, {"type": "move", "id": 3, "game": game, "from": "t1", "to": "c5"})
        tally.counts["newcomers in" if reply.get("type") == "ack" else f"newcomer {reply.get('code')}"] += 1
    await ws.close()


async def _half_open_attack(url: str, tally: Tally, until: float) -> None:
    """The half-open sockets, and the newcomers arriving one by one once they are in place."""
    holders = [
        asyncio.create_task(_half_open(url, tally, _crowd_address(index), until))
        for index in range(HALF_OPEN_ADDRESSES)
        for _ in range(HALF_OPEN_PER_ADDRESS)
    ]
    await asyncio.sleep(2.0)
    window = 0.7 * max(0.1, until - time.monotonic())
    newcomers = []
    for index in range(NEWCOMERS):
        newcomers.append(asyncio.create_task(_newcomer(url, tally, _crowd_address(1000 + index), until)))
        await asyncio.sleep(window / NEWCOMERS)
    await asyncio.gather(*newcomers, *holders)


async def _hint_loop(
    ws: ClientConnection,
    until: float,
    seen: Callable[[dict[str, Any], float], None],
    loops_per_second: float = RATE * 0.9 / 3,
) -> None:
    """``new_game``, ``hint``, ``resign`` in turn until ``until``, at most ``loops_per_second`` (by
    default just under the rate limit); ``seen`` gets each hint's reply and round trip."""
    with contextlib.suppress(ConnectionClosed):
        for index in itertools.count(step=3):
            started = time.monotonic()
            if started > until:
                break
            game = (await _request(ws, {"type": "new_game", "id": index})).get("game")
            if game is None:  # refused: counted as the hint's reply, tried again after a pause
                seen({"type": "error", "code": "new_game refused"}, 0.0)
                await asyncio.sleep(0.1)
                continue
            started = time.perf_counter()
            reply = await _request(ws, {"type": "hint", "id": index + 1, "game": game})
            seen(reply, time.perf_counter() - started)
            await _request(ws, {"type": "resign", "id": index + 2, "game": game})
            await asyncio.sleep(max(0.0, started + 1 / loops_per_second - time.monotonic()))


async def _hints(url: str, tally: Tally, until: float) -> None:
    """The hint flood, and the hint bystander's answered fraction and round trips in ``tally``."""
    flooders = [await _connect(url, HINT_FLOOD_ADDRESS) for _ in range(HINT_FLOOD_CONNECTIONS)]
    for ws in flooders:
        tally.reply(msgpack.packb(await _request(ws, {"type": "hello", "protocol": 1, "id": 1})))
    bystander = await _connect(url, HINT_BYSTANDER_ADDRESS)
    await _request(bystander, {"type": "hello", "protocol": 1, "id": 1})
    trips: list[float] = []

    def flood_saw(reply: dict[str, Any], _: float) -> None:
        tally.reply(msgpack.packb(reply))

    def bystander_saw(reply: dict[str, Any], seconds: float) -> None:
        if reply.get("code") == "new_game refused":  # over its own new-games quota: no hint asked
            tally.counts["bystander new_game refused"] += 1
            return
        tally.counts["bystander hints asked"] += 1
        tally.counts["bystander hints answered"] += reply.get("type") == "hint"
        trips.append(seconds)

    flood = [asyncio.ensure_future(_hint_loop(ws, until, flood_saw)) for ws in flooders]
    await asyncio.sleep(START_MARGIN / 2)  # the flood under way, as for the first bystander
    await _hint_loop(bystander, until - START_MARGIN / 2, bystander_saw, HINT_BYSTANDER_LOOPS)
    await asyncio.gather(*flood)
    trips.sort()
    tally.counts["bystander hint p50 ms"] = round(percentile(trips, 0.5) * 1000)
    tally.counts["bystander hint p99 ms"] = round(percentile(trips, 0.99) * 1000)
    for ws in (*flooders, bystander):
        await ws.close()


async def _attack(name: str, url: str, seconds: float) -> dict[str, int]:
    tally = Tally()
    until = time.monotonic() + seconds
    tasks: list[Awaitable[None]] = []
    live = msgpack.packb({"type": "live", "id": 1})
    invalid = msgpack.packb({"type": "move", "id": 1, "game": "nope"})
    attacker = itertools.repeat(ATTACKER_ADDRESS)
    if name == "flood":
        tasks = [_flooder(url, tally, live, None, until, attacker) for _ in range(CONNECTIONS)]
    elif name == "botnet":
        tasks = [
            _flooder(url, tally, live, None, until, _botnet_addresses(10_000 * n)) for n in range(CONNECTIONS)
        ]
    elif name == "paced":
        tasks = [_flooder(url, tally, live, RATE * 1.25, until, attacker) for _ in range(CONNECTIONS)]
    elif name == "invalid":
        tasks = [_flooder(url, tally, invalid, None, until, attacker) for _ in range(CONNECTIONS)]
    elif name in ("watch", "live", "games", "boards"):
        ws, token = await _player(url, tally, None)
        game = (await _request(ws, {"type": "new_game", "id": 2, "code": CODE}))["game"]
        await ws.close()
        boards = itertools.cycle(BOARD_REQUESTS)

        def make(last: dict[str, Any]) -> dict[str, Any]:
            if name == "watch":
                return {"type": "watch", "game": game}
            if name == "live":
                return {"type": "live", "limit": 100}
            if name == "boards":
                return next(boards)
            if last.get("type") == "snapshot":  # leave the game just made: the connection's place frees
                return {"type": "unwatch", "game": last["game"]}
            return {"type": "new_game", "code": CODE}

        connections = BOARD_CONNECTIONS if name == "boards" else CONNECTIONS
        tasks = [_requester(url, tally, until, token, make) for _ in range(connections)]
    elif name == "storm":
        tasks = [_storm(url, tally, until)]
    elif name == "guests":
        tasks = [_guests(url, tally, until) for _ in range(CONNECTIONS)]
    elif name == "pages":
        tasks = [_page_loads(url, tally, until) for _ in range(CONNECTIONS)]
    elif name in ("pings", "pings4", "bigpings"):
        pings = _masked(Opcode.PING, b"x" * 125 if name == "bigpings" else b"") * 64
        count = 4 if name == "pings4" else 1
        tasks = [_raw_flooder(url, tally, pings, until, attacker, reads=True) for _ in range(count)]
    elif name == "deafpings":
        pings = _masked(Opcode.PING, b"") * 1024
        tasks = [_raw_flooder(url, tally, pings, until, attacker, reads=False) for _ in range(8)]
    elif name == "deafwatch":
        tasks = [_deaf_spectators(url, tally, until)]
    elif name == "deafreplies":
        tasks = [_deaf_player(url, tally, until) for _ in range(CONNECTIONS)]
    elif name == "tiny":
        tasks = [
            _raw_flooder(url, tally, TINY_WRITE, until, _botnet_addresses(10_000 * n), reads=True)
            for n in range(CONNECTIONS)
        ]
    elif name == "fragments":
        tasks = [_fragment_holders(url, tally, until)]
    elif name == "dribble":
        tasks = [_dribbler(url, tally, until, itertools.repeat(ATTACKER_ADDRESS)) for _ in range(CONNECTIONS)]
    elif name.partition(":")[0] == "addresses":  # addresses:N, a crowd of N (the load's knee)
        crowd = int(name.partition(":")[2] or CROWD)
        tasks = [_crowd_player(url, tally, _crowd_address(index), until) for index in range(crowd)]
    elif name == "halfopen":
        tasks = [_half_open_attack(url, tally, until)]
    elif name == "hints":
        tasks = [_hints(url, tally, until)]
    await asyncio.gather(*tasks)
    return dict(tally.counts)


def attack_main(name: str, url: str, seconds: float, niceness: int, pipe: Connection) -> None:
    raise_nofile_limit()  # the storm holds thousands of sockets
    os.nice(niceness)
    with asyncio.Runner(loop_factory=fast_event_loop()) as runner:
        pipe.send("started")
        pipe.send(runner.run(_attack(name, url, seconds)))


# --------------------------------------------------------------------------- the run


def _spawn(target: Callable[..., None], *args: Any) -> tuple[multiprocessing.process.BaseProcess, Connection]:
    receiver, sender = multiprocessing.get_context("spawn").Pipe(duplex=False)
    process = multiprocessing.get_context("spawn").Process(target=target, args=(*args, sender), daemon=True)
    process.start()
    return process, receiver


@dataclass
class Window:
    """One attack's window: the bystander's sorted round trips, what the attacker saw, the server's
    CPU use meanwhile (a fraction of one core), the growth of its resident memory (bytes, from before
    the attack to its end) and the wake-up probe's sorted delays (`wake_probe_main`)."""

    name: str
    latencies: list[float]
    seen: dict[str, int]
    server_cpu: float
    rss_growth: int
    wake_delays: list[float]


def run_attack(name: str, url: str, seconds: float, niceness: int, server_pid: int) -> Window:
    """The attack ``name`` (none for ``calm``) while the bystander and the wake-up probe measure."""
    rss_before = rss_bytes(server_pid) or 0
    attacker = None
    if name != "calm":
        # The attack lasts the bystander's window, its start-up and a margin on both sides.
        attacker = _spawn(attack_main, name, url, seconds + START_MARGIN, niceness)
        if attacker[1].poll(START_MARGIN * 10):
            attacker[1].recv()
        time.sleep(0.5)  # under way before the bystander measures
    cpu_before, started = cpu_seconds(server_pid) or 0.0, time.monotonic()
    bystander, pipe = _spawn(bystander_main, url, seconds)
    probe, probe_pipe = _spawn(wake_probe_main, seconds)
    try:
        latencies = sorted(pipe.recv()) if pipe.poll(seconds + 60) else []
        server_cpu = ((cpu_seconds(server_pid) or 0.0) - cpu_before) / (time.monotonic() - started)
        wake_delays = sorted(probe_pipe.recv()) if probe_pipe.poll(seconds + 60) else []
        seen: dict[str, int] = {}
        if attacker is not None and attacker[1].poll(seconds + 60):
            seen = attacker[1].recv()
        rss_growth = (rss_bytes(server_pid) or 0) - rss_before
    finally:
        for process in (bystander, probe, *(attacker[:1] if attacker else ())):
            stop_process(process)
    return Window(name, latencies, seen, server_cpu, rss_growth, wake_delays)


def report(windows: list[Window], command: str) -> None:
    calm = sorted(latency for window in windows if window.name == "calm" for latency in window.latencies)
    calm_p50, calm_p99 = percentile(calm, 0.5), percentile(calm, 0.99)
    print(
        f"{'attack':<13} {'round trips':>11} {'p50 ms':>8} {'p99 ms':>8} {'p50/calm':>9} {'p99/calm':>9} "
        f"{'server CPU':>10} {'RSS +MiB':>8} {'max ms':>8} {'wake p99':>8}"
    )
    for window in windows:
        latencies = window.latencies
        p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
        most = latencies[-1] if latencies else float("nan")
        wake = percentile(window.wake_delays, 0.99)
        print(
            f"{window.name:<13} {len(latencies):>11,} {p50 * 1000:>8.2f} {p99 * 1000:>8.2f} "
            f"{p50 / calm_p50:>9.2f} {p99 / calm_p99:>9.2f} {window.server_cpu:>10.0%} "
            f"{window.rss_growth / 2**20:>8.1f} {most * 1000:>8.1f} {wake * 1000:>8.2f}"
        )
    print(
        f"\nwake p99: ms late, p99, of a process that only sleeps {WAKE_PROBE_SLEEP * 1000:g} ms at a time"
        " (`wake_probe_main`): what"
        " the machine adds to each wake-up a round trip crosses"
    )
    print("\nwhat each attacker saw:")
    for window in windows:
        name, seen = window.name, window.seen
        if name != "calm":
            print(f"  {name}: " + ", ".join(f"{key} {value:,}" for key, value in sorted(seen.items())))
        if name == "hints":
            asked, answered = seen.get("bystander hints asked", 0), seen.get("bystander hints answered", 0)
            print(f"  hints: the hint bystander had {answered / max(1, asked):.0%} of its hints answered")
    print(f"\ncommand: {command}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="window per attack (default 6)")
    parser.add_argument(
        "--attacks",
        default=",".join((*ATTACKS, "calm")),
        help=f"comma-separated of {', '.join(ATTACKS)}; addresses:N: a crowd of N addresses (199 by default)",
    )
    parser.add_argument("--server-args", default="", help="extra `eightoff serve` flags")
    parser.add_argument(
        "--server-launcher",
        default=None,
        help="command in place of `python -m server` (e.g. `python -m bench.sampled_server REPORT`)",
    )
    parser.add_argument(
        "--target",
        choices=("server", "echo"),
        default="server",
        help="what is attacked: `eightoff serve`, or the load bench's echo server (bench.echo_server: "
        "no game, no database, no limits), for the attacks that only play (calm, addresses[:N]): "
        "the same crowd against the floor a Python websockets server sets on this machine",
    )
    parser.add_argument(
        "--attacker-nice",
        type=int,
        default=10,
        help="niceness of the attacker process (default 10: on one small machine an attacker at full "
        "priority takes the bystander's and the server's CPU, which a remote attacker cannot; 0 for that)",
    )
    args = parser.parse_args(argv)
    names = [name for name in args.attacks.split(",") if name]
    unknown = {name for name in names if name.partition(":")[0] not in ATTACKS}
    unknown |= {name for name in names if ":" in name and not name.startswith("addresses:")}
    if unknown:
        parser.error(f"unknown attacks: {', '.join(sorted(unknown))}")
    if args.target == "echo" and any(name.partition(":")[0] not in ECHO_ATTACKS for name in names):
        parser.error(f"the echo only answers the attacks that play: {', '.join(ECHO_ATTACKS)}")
    if "calm" not in names:
        names.insert(0, "calm")
    windows: list[Window] = []
    with tempfile.TemporaryDirectory(prefix="eightoff-attacks-") as workdir:
        target = start_target(
            args.target, Path(workdir), args.server_launcher, extra=f"{DEFAULT_LIMITS} {args.server_args}"
        )
        try:
            for name in names:
                window = run_attack(name, target.url, args.seconds, args.attacker_nice, target.process.pid)
                windows.append(window)
                print(f"{name}: {len(window.latencies):,} round trips", file=sys.stderr, flush=True)
        finally:
            stop_process(target.process)
    report(
        windows, " ".join(["python -m bench.bench_attacks", *(argv if argv is not None else sys.argv[1:])])
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
