"""The per-socket loop: frames in, decoded requests to the handler, replies and pushes out.

The only module that imports ``websockets`` (with ``app.py``, which starts the server). Abuse is
answered here: every frame but pings takes a token (valid or not), a flood past the token bucket
gets ``rate_limited`` and then 1008, undecodable frames and the wrong frame kind close with 1003,
oversized frames are closed with 1009 by websockets itself (``max_size``), and a connection that
stops reading its replies or pushes is dropped. ``MeteredConnection`` counts connections against
their caps before the handshake and notes every frame (pings too) for the idle timeout.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import itertools
import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, cast

from websockets.asyncio.server import ServerConnection, broadcast
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed, NegotiationError
from websockets.frames import Frame
from websockets.http11 import Response
from websockets.protocol import State
from websockets.typing import Subprotocol

import protocol
from server.admission import ConnectionGate
from server.config import Settings
from server.errors import ErrorCode, Refusal
from server.metrics import Metrics
from server.ratelimit import TokenBucket, Verdict
from server.requests import Outcome, RequestHandler
from server.rooms import RoomRegistry
from server.session import Session

__all__ = ["ConnectionLoop", "Fanout", "MeteredConnection", "metered_connection", "select_subprotocol"]

logger = logging.getLogger(__name__)

_SUBPROTOCOLS = {sub.value: sub for sub in protocol.Subprotocol}


def select_subprotocol(connection: ServerConnection, offered: Sequence[Subprotocol]) -> Subprotocol | None:
    """msgpack (and no header) when the client offers nothing; else the first of ours it offers;
    else refuse the handshake (HTTP 400)."""
    if not offered:
        return None
    chosen = protocol.select_subprotocol(offered)
    if chosen is None:
        raise NegotiationError(f"unsupported subprotocol; offer one of {', '.join(_SUBPROTOCOLS)}")
    return Subprotocol(chosen.value)


CLOSE_LINGER = 2.0
"""Seconds a closed connection has to read what we sent before its socket is dropped."""
FAIR_SHARE = 8
"""Frames a connection serves in a row before the event loop serves the others."""
REFUSAL_LINGER = 0.5
"""Seconds a connection refused at accept has to send its request and read its HTTP 503."""


def _close_now(ws: ServerConnection, code: int, reason: str) -> None:
    """Send the close frame after the replies already written, read nothing more, and drop the
    socket ``CLOSE_LINGER`` seconds later whatever the peer does.

    An abusive client's frames may fill our receive queue, so websockets would never read its
    closing frame and ``close()`` would wait out its whole timeout. Closing the socket at once is no
    better: with unread input in it the kernel sends a reset, which can destroy the replies and the
    close frame before the client reads them (it then sees 1006 and nothing). So the TCP connection
    is half-closed (our FIN follows the close frame) and dropped after the linger.
    """
    transport = ws.transport
    if transport is None or transport.is_closing() or ws.protocol.state is not State.OPEN:
        return
    ws.protocol.send_close(code, reason.encode()[:120].decode(errors="ignore"))
    ws.send_data()
    transport.pause_reading()
    if transport.can_write_eof():
        transport.write_eof()
    ws.loop.call_later(CLOSE_LINGER, transport.abort)


def _settle(future: asyncio.Future[Outcome], outcome: Outcome) -> None:
    if not future.done():  # not cancelled meanwhile
        future.set_result(outcome)


_TOO_MANY = b"too many connections; retry later\n"


def too_many_connections() -> Response:
    """HTTP 503 for a connection over a cap."""
    headers = Headers([("Content-Length", str(len(_TOO_MANY))), ("Connection", "close")])
    headers["Retry-After"] = "5"
    return Response(503, "Service Unavailable", headers, _TOO_MANY)


class MeteredConnection(ServerConnection):
    """Counted by ``gate`` from accept to close and refused at once past its caps (HTTP 503, nothing
    read); ``client_address`` is the peer's, or the forwarded client's once a trusted proxy's
    handshake named it; ``last_frame_at`` is the time of its last frame of any kind, pings included.

    ``serve(create_connection=metered_connection(gate))`` makes one per accepted socket."""

    gate: ClassVar[ConnectionGate]
    last_frame_at = 0.0
    client_address = ""
    _counted = False
    _refused = False
    _answered = False
    _lingering = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.last_frame_at = time.monotonic()
        peer = transport.get_extra_info("peername")
        self.client_address = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        if self.gate.accept(self.client_address) is None:
            self._counted = True
            return
        self._refused = True
        socket = cast(asyncio.Transport, transport)
        if self.gate.start_lingering():  # answered when its request comes (data_received)
            self._lingering = True
            self.loop.call_later(REFUSAL_LINGER, socket.abort)
        else:  # no slot left: answer at once and close, the best that can be done in a storm
            socket.write(too_many_connections().serialize())
            socket.close()

    def data_received(self, data: bytes) -> None:
        if not self._refused:
            super().data_received(data)
        elif not self._answered:
            # The 503 answers the request, then our FIN follows it; the rest of what the client
            # sends is dropped. Answering before the request came confuses some clients, and
            # closing with the request unread would send a reset that can destroy the 503.
            self._answered = True
            self.transport.write(too_many_connections().serialize())
            if self.transport.can_write_eof():
                self.transport.write_eof()
            else:
                self.transport.close()

    def eof_received(self) -> None:
        if self._refused:  # the client read the refusal and hung up
            self.transport.close()
            return
        super().eof_received()

    def admit_forwarded(self, forwarded_for: str | None) -> bool:
        """At the handshake: count the connection under its client's address (behind a trusted
        proxy); False when that address is over its cap."""
        self.client_address, refused = self.gate.handshake(self.client_address, forwarded_for)
        return refused is None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._counted:
            self.gate.release(self.client_address)
            self._counted = False
        if self._lingering:
            self.gate.stop_lingering()
            self._lingering = False
        super().connection_lost(exc)

    def process_event(self, event: Any) -> None:
        if isinstance(event, Frame):
            self.last_frame_at = time.monotonic()
        super().process_event(event)


def metered_connection(gate: ConnectionGate) -> type[MeteredConnection]:
    """The ``MeteredConnection`` class of one server, counted by ``gate``."""
    return type("MeteredConnection", (MeteredConnection,), {"gate": gate})


class _Verdict(enum.Enum):
    """What `ConnectionLoop._admit` decided for a request."""

    SERVE = "serve"
    REFUSED = "refused"  # answered with an error; the connection goes on


class Fanout:
    """Sends one message to one or many clients: rendered once, encoded once per subprotocol, written at
    once, never awaited. A client whose unsent data passes ``max_write_buffer`` does not read: it is
    dropped, so that it can neither hold memory nor slow anyone down (replies use this too: a request is not
    answered any slower than a push)."""

    def __init__(self, metrics: Metrics, max_write_buffer: int) -> None:
        self._metrics = metrics
        self._max_write_buffer = max_write_buffer

    def __call__(self, audience: Iterable[Any], message: protocol.ServerMessage) -> None:
        frames: dict[protocol.Subprotocol, bytes | str] = {}
        wire: dict[str, object] | None = None
        now = time.monotonic()
        for client in audience:
            client.last_seen = now  # a spectator that is sent diffs is not idle
            frame = frames.get(client.subprotocol)
            if frame is None:
                if wire is None:
                    wire = message.to_wire()
                frame = frames[client.subprotocol] = protocol.encode(wire, client.subprotocol)
            ws: ServerConnection = client.transport
            broadcast((ws,), frame)
            if ws.transport is not None and ws.transport.get_write_buffer_size() > self._max_write_buffer:
                logger.info("dropping a connection that does not read", extra={"remote": ws.remote_address})
                self._metrics.dropped_slow_readers.inc()
                ws.transport.abort()


class ConnectionLoop:
    """Serves one WebSocket connection from its first frame to its close."""

    def __init__(
        self,
        settings: Settings,
        handler: RequestHandler,
        registry: RoomRegistry,
        metrics: Metrics,
        send: Fanout,
    ) -> None:
        self._settings = settings
        self._handler = handler
        self._registry = registry
        self._metrics = metrics
        self._send = send
        self.draining = False
        self.in_flight = 0
        self.clients: set[Session] = set()

    async def __call__(self, ws: ServerConnection) -> None:
        client = self._accept(ws)
        bucket = TokenBucket(self._settings.rate_per_second, self._settings.rate_burst)
        try:
            for served in itertools.count(1):
                frame = await ws.recv()
                if ws.transport is None or ws.transport.is_closing():
                    return  # dropped (it did not read): frames it queued before are not served
                client.last_seen = time.monotonic()
                if not await self._serve_frame(ws, client, frame, bucket):
                    return
                if served % FAIR_SHARE == 0:
                    # recv() does not suspend while frames are queued: a client that sent thousands
                    # at once would otherwise hold the event loop until all are served.
                    await asyncio.sleep(0)
        except ConnectionClosed:
            pass
        finally:
            self._release(client)

    def _accept(self, ws: ServerConnection) -> Session:
        """The one place a connection is taken in (after its handshake): its session starts here."""
        subprotocol = _SUBPROTOCOLS.get(ws.subprotocol or "", protocol.Subprotocol.MSGPACK)
        client = Session(subprotocol, ws)
        client.last_seen = time.monotonic()
        self._metrics.connections.inc()
        self.clients.add(client)
        return client

    def _release(self, client: Session) -> None:
        """The one place a connection lets go of everything its session held."""
        self.clients.discard(client)
        client.release(self._registry)
        self._metrics.connections.dec()

    async def _serve_frame(
        self, ws: ServerConnection, client: Session, frame: bytes | str, bucket: TokenBucket
    ) -> bool:
        """Serve one frame; False when the connection must close.

        Every frame takes a token, valid or not (an invalid one costs a reply too). It is still
        decoded when refused (decoding a frame of at most ``max_frame_bytes`` is cheap), so that even
        a ``rate_limited`` refusal echoes the request id.
        """
        started = time.perf_counter()
        metered = bucket.take()  # issue 11: every frame counts
        if metered is Verdict.CLOSE:
            self._metrics.errors.labels("flooding").inc()
            if isinstance(ws, MeteredConnection):
                ws.gate.penalize(ws.client_address)  # no reconnecting to flood again at once
            _close_now(ws, 1008, "flooding after rate_limited")
            return False
        try:
            request = protocol.decode(frame, client.subprotocol, max_size=self._settings.max_frame_bytes)
        except protocol.ProtocolError as exc:
            if exc.close_code is None and metered is Verdict.REFUSE:
                self._refuse(client, ErrorCode.RATE_LIMITED, "too many requests; slow down", exc)
                return True
            self._metrics.errors.labels(exc.code.value).inc()
            self._send((client,), exc.reply())
            if exc.close_code is not None:
                _close_now(ws, int(exc.close_code), exc.message)
                return False
            return True
        if self._admit(client, request, metered) is not _Verdict.SERVE:
            return True  # refused with an error; the connection goes on
        self.in_flight += 1
        answered: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._handler.serve(client, request, functools.partial(_settle, answered))
        try:
            outcome = await answered
        finally:
            self.in_flight -= 1
        if isinstance(outcome, Refusal):
            self._refuse(client, outcome.code, outcome.message, request)
            return True
        for reply in outcome:
            self._send((client,), reply)
        if request.TYPE in ("move", "tap", "auto", "undo"):
            self._metrics.action_latency.observe(time.perf_counter() - started)
        return True

    def _admit(self, client: Session, request: protocol.ClientMessage, metered: Verdict) -> _Verdict:
        """The one place a decoded request is let through to the handler, or refused (replied to):
        the rate limit (the frame was metered before it was decoded) and shutting down."""
        if metered is Verdict.REFUSE:
            self._refuse(client, ErrorCode.RATE_LIMITED, "too many requests; slow down", request)
            return _Verdict.REFUSED
        if self.draining:
            self._refuse(client, ErrorCode.UNAVAILABLE, "the server is shutting down; reconnect", request)
            return _Verdict.REFUSED
        return _Verdict.SERVE

    def _refuse(self, client: Session, code: ErrorCode, message: str, request: Any) -> None:
        """Answer ``error`` with ``code``, echoing the id of ``request`` (a request or a ProtocolError)."""
        self._metrics.errors.labels(code.value).inc()
        self._send((client,), protocol.ErrorReply(code=code, message=message, request_id=request.request_id))

    async def close_idle_forever(self) -> None:
        """Close connections silent for ``idle_timeout``: no frame at all, not even a ping, and no
        push sent to them (one sweep a few times per timeout, not a timer per frame: that would
        cost every request a timer)."""
        idle = self._settings.idle_timeout
        if idle is None:
            return
        while True:
            await asyncio.sleep(max(idle / 4, 0.05))
            deadline = time.monotonic() - idle
            for client in [client for client in self.clients if client.last_seen < deadline]:
                ws: ServerConnection = client.transport
                client.last_seen = max(client.last_seen, getattr(ws, "last_frame_at", 0.0))
                if client.last_seen < deadline:
                    client.last_seen = float("inf")  # one close per client, however long it takes
                    _close_now(ws, 1000, "idle timeout")

    async def wait_idle(self, timeout: float) -> None:
        """Wait until no request is being served (bounded by ``timeout``)."""
        deadline = time.monotonic() + timeout
        while self.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
