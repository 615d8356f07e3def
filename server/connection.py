"""The per-socket loop: frames in, decoded requests to the handler, replies and pushes out.

The only module that imports ``websockets`` (with ``app.py``, which starts the server). Abuse is
answered here: undecodable frames and the wrong frame kind close with 1003, a flood past the token
bucket gets ``rate_limited`` and then 1008, oversized frames are closed with 1009 by websockets
itself (``max_size``), and a connection that stops reading its replies or pushes is dropped.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any

from websockets.asyncio.server import ServerConnection, broadcast
from websockets.exceptions import ConnectionClosed, NegotiationError
from websockets.typing import Subprotocol

import protocol
from server.config import Settings
from server.errors import ErrorCode, Refusal
from server.metrics import Metrics
from server.ratelimit import TokenBucket
from server.requests import RequestHandler
from server.rooms import RoomRegistry
from server.session import Session

__all__ = ["ConnectionLoop", "Fanout", "select_subprotocol"]

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


def _close_now(ws: ServerConnection, code: int, reason: str) -> None:
    """Send the close frame and drop the TCP connection without waiting for the peer's answer.

    An abusive client's frames may fill our receive queue, so websockets would never read its
    closing frame and ``close()`` would wait out its whole timeout: the close frame is flushed
    and the transport closed instead.
    """
    if ws.transport is None or ws.transport.is_closing():
        return
    ws.protocol.send_close(code, reason.encode()[:120].decode(errors="ignore"))
    ws.send_data()
    ws.transport.close()


class _Verdict(enum.Enum):
    """What `ConnectionLoop._admit` decided for a request."""

    SERVE = "serve"
    REFUSED = "refused"  # answered with an error; the connection goes on
    CLOSE = "close"


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
                self._metrics.dropped_spectators.inc()
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
            while True:
                frame = await ws.recv()
                if ws.transport is None or ws.transport.is_closing():
                    return  # dropped (it did not read): frames it queued before are not served
                client.last_seen = time.monotonic()
                if not await self._serve_frame(ws, client, frame, bucket):
                    return
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

        The frame is decoded before the token bucket is asked (decoding a frame of at most
        ``max_frame_bytes`` is cheap), so that even a ``rate_limited`` refusal echoes the request id.
        """
        started = time.perf_counter()
        try:
            request = protocol.decode(frame, client.subprotocol, max_size=self._settings.max_frame_bytes)
        except protocol.ProtocolError as exc:
            self._metrics.errors.labels(exc.code.value).inc()
            self._send((client,), exc.reply())
            if exc.close_code is not None:
                _close_now(ws, int(exc.close_code), exc.message)
                return False
            return True
        verdict = self._admit(ws, client, request, bucket)
        if verdict is not _Verdict.SERVE:
            return verdict is _Verdict.REFUSED
        self.in_flight += 1
        try:
            replies = await self._handler.handle(client, request)
        except Refusal as refusal:
            self._refuse(client, refusal.code, refusal.message, request)
            return True
        except Exception:
            logger.exception("request %s failed", request.TYPE)
            self._refuse(client, ErrorCode.INTERNAL, "the server failed on this request", request)
            return True
        finally:
            self.in_flight -= 1
        for reply in replies:
            self._send((client,), reply)
        if request.TYPE in ("move", "tap", "auto", "undo"):
            self._metrics.action_latency.observe(time.perf_counter() - started)
        return True

    def _admit(
        self, ws: ServerConnection, client: Session, request: protocol.ClientMessage, bucket: TokenBucket
    ) -> _Verdict:
        """The one place a decoded request is let through to the handler, or refused (replied to) or
        the connection closed: the rate limit and shutting down."""
        if not bucket.take():
            if bucket.is_abusive():
                _close_now(ws, 1008, "flooding")
                return _Verdict.CLOSE
            self._refuse(client, ErrorCode.RATE_LIMITED, "too many requests; slow down", request)
            return _Verdict.REFUSED
        if self.draining:
            self._refuse(client, ErrorCode.UNAVAILABLE, "the server is shutting down; reconnect", request)
            return _Verdict.REFUSED
        return _Verdict.SERVE

    def _refuse(self, client: Session, code: ErrorCode, message: str, request: Any) -> None:
        self._metrics.errors.labels(code.value).inc()
        self._send((client,), protocol.ErrorReply(code=code, message=message, request_id=request.request_id))

    async def close_idle_forever(self) -> None:
        """Close connections silent for ``idle_timeout`` (one sweep a few times per timeout, not a
        timer per frame: that would cost every request a timer)."""
        idle = self._settings.idle_timeout
        if idle is None:
            return
        while True:
            await asyncio.sleep(max(idle / 4, 0.05))
            deadline = time.monotonic() - idle
            for client in [client for client in self.clients if client.last_seen < deadline]:
                client.last_seen = float("inf")  # one close per client, however long it takes
                ws: ServerConnection = client.transport
                _close_now(ws, 1000, "idle timeout")

    async def wait_idle(self, timeout: float) -> None:
        """Wait until no request is being served (bounded by ``timeout``)."""
        deadline = time.monotonic() + timeout
        while self.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
