"""The cross-node bus: committed actions of every game, for the nodes whose spectators watch it, and
each stored change of a race, for the nodes that hold a copy of it.

One node alone needs no bus (``LocalBus``: its rooms push to their own followers). The workers of
``eightoff serve --workers N`` without Redis use ``RelayBus``: a socket to their supervisor, which
relays each worker's events to the others (`server.ops.workers`). With
``--redis-url`` every node publishes each committed action on ``eightoff:game:<id>`` and listens to
the pattern ``eightoff:game:*``; a node holding the same game for its own spectators replays the
action through its engine and pushes the diff itself, in both subprotocols. One pattern subscription
per node means no subscribe race when a room appears: the room just ignores what it has already.
Each bus stamps what it publishes with a random instance id and skips only its own: operators may
give two nodes the same name (or none), and the node name is for display and logs.

A race's stored change (`RaceEvent`: its id and the revision stored) goes on ``eightoff:race:<id>``
(a second pattern subscription) or the same relay: a node holding a copy of the race at an older
revision reads the race again from the database, the one authority (docs/races.md, Across nodes).
Quick match's seating (`QuickRaceEvent`: a race formed from the deployment's one pool, and the
waits it seated) goes on the same channel: the processes holding those waits' connections have them
follow the race (`server.play.race.quick_match`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

import msgpack  # type: ignore[import-untyped]

__all__ = [
    "Bus",
    "BusEvent",
    "Event",
    "FrameReader",
    "LocalBus",
    "QuickRaceEvent",
    "RaceEvent",
    "RedisBus",
    "RelayBus",
    "RelayStream",
    "frame",
    "pack_event",
    "unpack_event",
]

logger = logging.getLogger(__name__)

CHANNEL_PREFIX = "eightoff:game:"
RACE_CHANNEL_PREFIX = "eightoff:race:"


@dataclass(frozen=True, slots=True)
class BusEvent:
    """One committed action (or a resignation, with ``action`` None) of a game on some node."""

    node: str
    game: str
    v: int
    action: str | None
    finished_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class RaceEvent:
    """A change of race ``race`` stored at ``revision`` by some node (`server.play.race.room`)."""

    node: str
    race: str
    revision: int


@dataclass(frozen=True, slots=True)
class QuickRaceEvent:
    """Quick match formed race ``race`` (stored) from the waits ``waits`` (their ids), some of them
    held by other processes (`server.play.race.quick_match`)."""

    node: str
    race: str
    waits: tuple[str, ...]


#: What goes on the bus.
Event = BusEvent | RaceEvent | QuickRaceEvent


def _fields(event: Event) -> list[object]:
    """``event`` as the list it is packed as: five fields for a game's, three for a race's change
    (the third an int) and three for a quick race's seating (the third a list)."""
    if isinstance(event, RaceEvent):
        return [event.node, event.race, event.revision]
    if isinstance(event, QuickRaceEvent):
        return [event.node, event.race, list(event.waits)]
    return [event.node, event.game, event.v, event.action, event.finished_at_ms]


def _event(fields: object) -> Event:
    """The event of `_fields`'s list.

    Raises:
        ValueError: not one (a field of the wrong type, or a list of another length).
    """
    if isinstance(fields, list) and len(fields) == 3:
        node, race, revision = fields
        if isinstance(node, str) and isinstance(race, str) and type(revision) is int:
            return RaceEvent(node, race, revision)
        waits = revision
        if (
            isinstance(node, str)
            and isinstance(race, str)
            and isinstance(waits, list)
            and all(isinstance(wait, str) for wait in waits)
        ):
            return QuickRaceEvent(node, race, tuple(waits))
    elif isinstance(fields, list) and len(fields) == 5:
        node, game, v, action, finished_at_ms = fields
        if (
            isinstance(node, str)
            and isinstance(game, str)
            and type(v) is int
            and (action is None or isinstance(action, str))
            and (finished_at_ms is None or type(finished_at_ms) is int)
        ):
            return BusEvent(node, game, v, action, finished_at_ms)
    raise ValueError("not a bus event: a field of the wrong type, or too many or too few")


def pack_event(event: Event) -> bytes:
    """``event`` as a msgpack array (the relay's frame payload)."""
    packed: bytes = msgpack.packb(_fields(event))
    return packed


def unpack_event(data: bytes) -> Event:
    """The event `pack_event` made.

    Raises:
        ValueError: ``data`` is not one (a bug of the sender: the relay carries our own processes' frames).
    """
    try:
        fields = msgpack.unpackb(data)
    except Exception as exc:
        raise ValueError(f"not a bus event: {exc}") from None
    return _event(fields)


_LENGTH: Final = struct.Struct("!I")
#: The largest relay frame: an event is ~100 bytes; a bigger length means the stream is corrupt.
MAX_FRAME_BYTES: Final = 64 * 1024


def frame(payload: bytes) -> bytes:
    """``payload`` behind its 4-byte big-endian length: the relay's framing on a stream socket."""
    return _LENGTH.pack(len(payload)) + payload


class FrameReader:
    """Splits a byte stream into the payloads of `frame` (sans-I/O: feed it what the socket gave)."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """The payloads ``data`` completes, in order.

        Raises:
            ValueError: a frame announces more than `MAX_FRAME_BYTES` (the stream is corrupt).
        """
        self._buffer += data
        payloads: list[bytes] = []
        while len(self._buffer) >= _LENGTH.size:
            (length,) = _LENGTH.unpack_from(self._buffer)
            if length > MAX_FRAME_BYTES:
                raise ValueError(f"a relay frame of {length} bytes (at most {MAX_FRAME_BYTES})")
            end = _LENGTH.size + length
            if len(self._buffer) < end:
                break
            payloads.append(bytes(self._buffer[_LENGTH.size : end]))
            del self._buffer[:end]
        return payloads


class Bus(Protocol):
    async def start(self, deliver: Callable[[Event], None]) -> None: ...

    def publish(self, event: Event) -> None: ...

    async def close(self) -> None: ...


class LocalBus:
    """One node: nothing to tell anyone."""

    async def start(self, deliver: Callable[[Event], None]) -> None:
        return None

    def publish(self, event: Event) -> None:
        return None

    async def close(self) -> None:
        return None


class RedisBus:
    """Redis pub/sub between nodes; publishing never blocks an action (a queue keeps the order)."""

    def __init__(self, url: str) -> None:
        import redis.asyncio as redis

        self._redis: Any = redis.Redis.from_url(url)
        self._instance = secrets.token_hex(8)  # tells our own events apart; node names may repeat
        self._outbox: asyncio.Queue[Event] = asyncio.Queue(maxsize=100_000)
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self, deliver: Callable[[Event], None]) -> None:
        await self._redis.ping()  # fail at start-up, not at the first action
        pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
        await pubsub.psubscribe(CHANNEL_PREFIX + "*", RACE_CHANNEL_PREFIX + "*")
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._listen(pubsub, deliver), name="bus-listen"),
            loop.create_task(self._publish_forever(), name="bus-publish"),
        ]

    def publish(self, event: Event) -> None:
        try:
            self._outbox.put_nowait(event)
        except asyncio.QueueFull:
            logger.warning(
                "bus outbox full; dropping an event of %s (spectators will resync)", _channel(event)
            )

    async def _publish_forever(self) -> None:
        while True:
            event = await self._outbox.get()
            try:
                await self._redis.publish(_channel(event), self._pack(event))
            except Exception as exc:  # Redis away: remote spectators resync from the database later
                logger.warning("bus publish failed: %s", exc)

    async def _listen(self, pubsub: Any, deliver: Callable[[Event], None]) -> None:
        while True:
            try:
                message = await pubsub.get_message(timeout=1.0)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("bus listen failed: %s; retrying", exc)
                await asyncio.sleep(1.0)
                continue
            if message is None or message.get("type") != "pmessage":
                continue
            try:
                instance, event = self._unpack(message["data"])
            except Exception:
                logger.warning("ignoring a malformed bus message")
                continue
            if instance != self._instance:
                deliver(event)

    def _pack(self, event: Event) -> bytes:
        packed: bytes = msgpack.packb([self._instance, *_fields(event)])
        return packed

    @staticmethod
    def _unpack(data: bytes) -> tuple[str, Event]:
        instance, *fields = msgpack.unpackb(data)
        return instance, _event(fields)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._redis.aclose()


def _channel(event: Event) -> str:
    if isinstance(event, RaceEvent | QuickRaceEvent):
        return RACE_CHANNEL_PREFIX + event.race
    return CHANNEL_PREFIX + event.game


#: Unsent relay bytes past which a worker drops events instead of buffering more (~100 bytes each).
RELAY_BACKLOG_BYTES: Final = 16 * 1024 * 1024


class RelayBus:
    """A worker's end of the supervisor's relay: events go out on a stream socket, length-prefixed
    msgpack (`frame`, `pack_event`), and the other workers' events come in the same way.

    Hand-written because nothing off the shelf fits: Redis is the bus when a node has one, and without
    it the workers are our own processes on one machine, which need a few lines over a socketpair
    (multiprocessing's queues pickle, have no asyncio side and would need a thread per worker). The
    supervisor relays frames without decoding them, so each worker's events reach the others in the
    order it committed them. Publishing never blocks: the events of one turn of the event loop (a
    commit's batch) leave in one write, and a backlog past `RELAY_BACKLOG_BYTES` drops them with a
    warning (spectators elsewhere then see a version gap and reload the game).
    """

    def __init__(self, sock: socket.socket, *, on_lost: Callable[[], None] | None = None) -> None:
        self._sock = sock
        self._on_lost = on_lost
        self._transport: asyncio.Transport | None = None
        self._outbox: list[bytes] = []  # frames of this turn of the loop, written at its end

    async def start(self, deliver: Callable[[Event], None]) -> None:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_unix_connection(
            lambda: _RelayProtocol(deliver, self._lost), sock=self._sock
        )
        self._transport = transport

    def publish(self, event: Event) -> None:
        if self._transport is None:
            return
        if not self._outbox:
            asyncio.get_running_loop().call_soon(self._flush)
        self._outbox.append(frame(pack_event(event)))

    def _flush(self) -> None:
        frames, self._outbox = self._outbox, []
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if transport.get_write_buffer_size() > RELAY_BACKLOG_BYTES:
            logger.warning("relay backlog full; dropping %d events (spectators will resync)", len(frames))
            return
        transport.write(b"".join(frames))

    def _lost(self) -> None:
        if self._transport is not None and self._on_lost is not None:
            self._on_lost()

    async def close(self) -> None:
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.close()


class RelayStream(asyncio.Protocol):
    """One end of a relay link: length-prefixed frames in, their payloads to `received`; a corrupt
    stream is closed (what follows a bad length cannot be framed again)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._reader = FrameReader()
        self._transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            payloads = self._reader.feed(data)
        except ValueError as exc:
            logger.error("%s: the relay stream is corrupt (%s); closing it", self._name, exc)
            if self._transport is not None:
                self._transport.close()
            return
        if payloads:
            self.received(payloads)

    def received(self, payloads: list[bytes]) -> None:
        raise NotImplementedError


class _RelayProtocol(RelayStream):
    """A worker's end: delivers the events of the supervisor's frames; says when the relay is gone."""

    def __init__(self, deliver: Callable[[Event], None], lost: Callable[[], None]) -> None:
        super().__init__("relay")
        self._deliver = deliver
        self._lost = lost

    def received(self, payloads: list[bytes]) -> None:
        for payload in payloads:
            try:
                event = unpack_event(payload)
            except ValueError as exc:
                logger.warning("ignoring a malformed relay frame: %s", exc)
                continue
            self._deliver(event)

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost()
