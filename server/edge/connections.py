"""Serving an open WebSocket connection: messages in, decoded requests to the handler, replies and
pushes out.

Abuse is answered here: a message whose frame found the connection's token bucket empty gets
``rate_limited`` (the transport meters every frame, control frames included, and closes a flood
1008 itself), undecodable messages and the wrong frame kind close with 1003, messages over
``max_frame_bytes`` with 1009 (over the transport's hard cap ``server.edge.transport`` closes first),
and a connection that stops reading its replies or pushes is dropped. Connections are counted
against their caps, and framed, pinged and closed, by ``server.edge.transport``; this module sees whole
messages, one at a time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from time import perf_counter
from typing import Any

from prometheus_client import Counter

import protocol
from server.config import Settings
from server.dispatch import Answer, RequestHandler
from server.edge.transport import WebSocketConnection, wire_frame
from server.errors import ErrorCode, refusal_for
from server.metrics import Metrics
from server.play.registry import RoomRegistry
from server.play.session import Session

__all__ = ["Connections", "Fanout"]

logger = logging.getLogger(__name__)

_ACTION_TYPES = frozenset({"move", "tap", "auto", "undo"})
_MSGPACK = protocol.Subprotocol.MSGPACK
READ_BEFORE_IDLE_CLOSE = 0.001
"""Seconds the idle sweep waits before it closes the silent: a timer, so the loop polls the sockets
in between and a frame that arrived meanwhile counts."""
REQUESTS_BEFORE_HELLO = 8
"""Requests other than ``hello`` a connection may send before it says hello, each answered
``unauthorized``; the next one closes it 1008. A client says hello first; a botnet's flood of
requests that never do (each connection from a new address, so no per-address limit binds) would
otherwise cost a reply per frame for two bucketfuls."""
ERROR_FRAMES_KEPT = 64
"""Framed ``error`` replies with neither ``id`` nor ``v`` kept for reuse (`Connections._error`); the
set starts over when full (a message may quote what a client sent)."""


class Fanout:
    """Sends one message to one or many clients: rendered once, encoded once per subprotocol, framed
    once, written at once, never awaited (a client that does not read is dropped by the transport:
    replies use this too, so a request is not answered any slower than a push)."""

    def __call__(self, audience: Iterable[Any], message: protocol.ServerMessage) -> None:
        wire: dict[str, object] | None = None
        framed: bytes | None = None  # msgpack's frame: nearly every client's
        json_framed: bytes | None = None
        now = time.monotonic()
        for client in audience:
            client.touch(now)  # a spectator that is sent diffs is not idle
            if wire is None:
                wire = message.to_wire()
            if client.subprotocol is _MSGPACK:
                if framed is None:
                    framed = wire_frame(protocol.encode(wire, _MSGPACK))
                frame = framed
            else:
                if json_framed is None:
                    json_framed = wire_frame(protocol.encode(wire, client.subprotocol))
                frame = json_framed
            connection: WebSocketConnection = client.transport
            connection.write_frame(frame)

    def reply(self, client: Any, message: protocol.ServerMessage) -> None:
        """Send ``message`` to ``client`` alone (a reply), as ``__call__`` sends it to each of many."""
        self.reply_framed(client, wire_frame(protocol.encode(message.to_wire(), client.subprotocol)))

    def reply_framed(self, client: Any, frame: bytes) -> None:
        """Send ``client`` alone a reply framed already (``wire_frame``) in its subprotocol."""
        client.touch(time.monotonic())
        connection: WebSocketConnection = client.transport
        connection.write_frame(frame)


class Connections:
    """Serves every open WebSocket connection, from its handshake to its close: one request at a
    time per connection, answered as soon as its outcome is known."""

    def __init__(
        self,
        settings: Settings,
        handler: RequestHandler,
        registry: RoomRegistry,
        metrics: Metrics,
        send: Fanout,
    ) -> None:
        self.settings = settings
        self._handler = handler
        self._registry = registry
        self._metrics = metrics
        self._send = send
        self.draining = False
        self.in_flight = 0
        self.clients: set[Session] = set()
        self._error_counters: dict[ErrorCode, Counter] = {}
        self._error_frames: dict[tuple[ErrorCode, str, protocol.Subprotocol], bytes] = {}

    def open(self, connection: WebSocketConnection) -> Session:
        """The one place a connection is taken in (after its handshake): its session starts here,
        and is the transport's ``Channel`` from now on."""
        client = Session(connection.subprotocol, connection, self)
        client.touch(time.monotonic())
        self._metrics.connections.inc()
        self.clients.add(client)
        return client

    def release(self, client: Session) -> None:
        """The one place a connection lets go of everything its session held."""
        self.clients.discard(client)
        client.release()
        self._handler.quick_match.released(client)
        self._metrics.connections.dec()

    def serve(self, client: Session, frame: bytes | str, within_rate: bool) -> None:
        """Serve one message of ``client``; the connection serves its next one once this one is
        answered (now, or from the handler's ``respond``). A message over the rate is still decoded
        (decoding a frame of at most ``max_frame_bytes`` is cheap), so that even a ``rate_limited``
        refusal echoes the request id."""
        started = perf_counter()
        try:
            request = protocol.decode(frame, client.subprotocol, max_size=self.settings.max_frame_bytes)
        except protocol.ProtocolError as exc:
            self._undecodable(client, exc, within_rate)
            client.transport.served()
            return
        if (client.player is None or not within_rate or self.draining) and not self._admit(
            client, request, within_rate
        ):  # (the common case, a player's request within the rate, needs no look at the rest)
            client.transport.served()  # refused with an error; the connection goes on
            return
        self.in_flight += 1
        client.request = request
        client.started = started
        try:
            self._handler.serve(client, request, client.respond)
        except Exception as bug:  # before any answer: answered all the same, the count kept right
            self.answer(client, bug)

    def _undecodable(self, client: Session, exc: protocol.ProtocolError, within_rate: bool) -> None:
        """Answer a message that is no valid request (over the rate: ``rate_limited``); close the
        connection when the error says so."""
        if exc.close_code is None and not within_rate:
            self._refuse(client, ErrorCode.RATE_LIMITED, "too many requests; slow down", exc)
            return
        self._error(client, exc.code, exc.message, exc.request_id)
        if exc.close_code is not None:
            connection: WebSocketConnection = client.transport
            connection.close(int(exc.close_code), exc.message, read_more=False)

    def answer(self, client: Session, outcome: Answer) -> None:
        """The handler's ``respond`` to the request ``client`` is being served (`Session.respond`):
        write its outcome (a failure as the error `refusal_for` says), then serve the next message."""
        self.in_flight -= 1
        request = client.request
        if isinstance(outcome, BaseException):
            refusal = refusal_for(outcome, request.TYPE)
            self._refuse(client, refusal.code, refusal.message, request, refusal.v)
        else:
            reply = self._send.reply
            for message in outcome:
                reply(client, message)
            if request.TYPE in _ACTION_TYPES:
                self._metrics.action_latency.observe(perf_counter() - client.started)
        client.transport.served()

    def _admit(self, client: Session, request: protocol.ClientMessage, within_rate: bool) -> bool:
        """The one place a decoded request is let through to the handler, or refused (replied to, or
        closed): requests before hello past ``REQUESTS_BEFORE_HELLO``, the rate limit (the frame was
        metered as it was read) and shutting down. A valid request vouches for its connection (the
        first before hello: a player's connection has said it)."""
        connection: WebSocketConnection = client.transport
        if client.player is None:
            connection.vouch()
        if (
            client.player is None
            and not isinstance(request, protocol.HelloRequest)
            and client.asked_before_hello() > REQUESTS_BEFORE_HELLO
        ):
            self._metrics.errors.labels("flooding").inc()
            connection.penalize()  # its address may not reconnect at once, as after a flood
            connection.close(1008, "say hello first", read_more=False)
            return False
        if not within_rate:
            self._refuse(client, ErrorCode.RATE_LIMITED, "too many requests; slow down", request)
            return False
        if self.draining:
            self._refuse(client, ErrorCode.UNAVAILABLE, "the server is shutting down; reconnect", request)
            return False
        return True

    def _refuse(
        self, client: Session, code: ErrorCode, message: str, request: Any, v: int | None = None
    ) -> None:
        """Answer ``error`` with ``code``, echoing the id of ``request`` (a request or a ProtocolError)
        and, for ``stale``, the game's current ``v`` when known."""
        self._error(client, code, message, request.request_id, v)

    def _error(
        self,
        client: Session,
        code: ErrorCode,
        message: str,
        request_id: protocol.RequestId | None,
        v: int | None = None,
    ) -> None:
        """Count and send an ``error``. One with neither ``id`` nor ``v`` is the same for every frame
        that earns it (a flood's malformed messages): it is made once per subprotocol and
        its frame kept, as its counter is."""
        counter = self._error_counters.get(code)
        if counter is None:
            counter = self._error_counters[code] = self._metrics.errors.labels(code.value)
        counter.inc()
        if request_id is not None or v is not None:
            self._send.reply(
                client, protocol.ErrorReply(code=code, message=message, request_id=request_id, v=v)
            )
            return
        key = (code, message, client.subprotocol)
        frame = self._error_frames.get(key)
        if frame is None:
            if len(self._error_frames) >= ERROR_FRAMES_KEPT:
                self._error_frames.clear()
            wire = protocol.ErrorReply(code=code, message=message).to_wire()
            frame = self._error_frames[key] = wire_frame(protocol.encode(wire, client.subprotocol))
        self._send.reply_framed(client, frame)

    async def close_idle_forever(self) -> None:
        """Close connections silent for ``idle_timeout``: no frame at all, not even a ping, and no
        push sent to them (one sweep a few times per timeout, not a timer per frame: that would
        cost every request a timer)."""
        idle = self.settings.idle_timeout
        if idle is None:
            return
        while True:
            await asyncio.sleep(max(idle / 4, 0.05))
            deadline = time.monotonic() - idle
            if not self._silent_since(deadline):
                continue
            # What came in while the loop was held (a collector's pass, a starved CPU) is read first:
            # a sweep run in the same turn as the stall's end would take unread pings for silence.
            await asyncio.sleep(READ_BEFORE_IDLE_CLOSE)
            for client in self._silent_since(deadline):
                client.touch(float("inf"))  # one close per client, however long it takes
                connection: WebSocketConnection = client.transport
                connection.close(1000, "idle timeout")

    def _silent_since(self, deadline: float) -> list[Session]:
        """The clients with no frame read and no push sent since ``deadline``."""
        silent = []
        for client in [client for client in self.clients if client.last_seen < deadline]:
            connection: WebSocketConnection = client.transport
            client.touch(max(client.last_seen, connection.last_frame_at))
            if client.last_seen < deadline:
                silent.append(client)
        return silent

    async def wait_idle(self, timeout: float) -> None:
        """Wait until no request is being served (bounded by ``timeout``)."""
        deadline = time.monotonic() + timeout
        while self.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
