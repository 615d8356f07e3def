"""WebSocket and HTTP on one port: websockets' sans-I/O ``ServerProtocol`` driven by a plain
``asyncio.Protocol``, one per accepted socket.

Why not websockets' asyncio server: it runs a task per connection and reassembles every message
through a reader queue and an awaited ``recv()``, most of the CPU a message costs here. In this module
bytes from the socket go through the protocol's parser and come out as whole messages handed to the
connection's ``Channel`` at once; replies are written as soon as they exist. Per connection only one
request is served at a time (its later messages wait in order) and reading pauses while a few wait,
so a flood queues at most what one read of the socket holds; a peer that lets unsent frames (replies,
pushes, the pongs of its own pings) pile up past ``max_write_buffer`` does not read and is dropped.

What the asyncio server gave for free and is done here: the handshake (``/ws`` with subprotocol
selection, the ``Server`` header, HTTP 503 while shutting down; any other path is answered by the
HTTP routes and closed), the open timeout, keepalive pings, close handshakes and lingering closes,
HTTP 400 for a request that is not HTTP. Admission (``server.admission``) is asked at accept, before
anything is read, and again at the handshake for the client behind a trusted proxy.

The only module that imports ``websockets``: the HTTP routes take its ``Request`` and ``Response`` from here.
"""

from __future__ import annotations

import asyncio
import collections
import http
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Protocol, cast

from websockets.datastructures import Headers
from websockets.exceptions import InvalidMessage, NegotiationError
from websockets.frames import CloseCode, Frame, Opcode
from websockets.http11 import Request, Response
from websockets.protocol import State
from websockets.server import ServerProtocol
from websockets.typing import Subprotocol

import protocol
from server.admission import ConnectionGate, ThrottledLog

__all__ = [
    "Channel",
    "HttpRoutes",
    "Request",
    "Response",
    "WebSocketConnection",
    "WebSocketServer",
    "http_response",
    "too_many_connections",
    "wire_frame",
]

logger = logging.getLogger(__name__)

OPEN_TIMEOUT = 10.0
"""Seconds a new connection has to send its request (websockets' default, which the server used
before): a socket that says nothing does not hold a connection slot for long."""
PING_INTERVAL = 20.0
"""Seconds between keepalive pings (websockets' default, which the server used before)."""
PING_TIMEOUT = 20.0
"""Seconds a pong may take before the connection is closed with 1011."""
CLOSE_LINGER = 2.0
"""Seconds a closed connection has to read what we sent before its socket is dropped."""
REFUSAL_LINGER = 0.5
"""Seconds a connection refused at accept has to send its request and read its HTTP 503."""
MAX_WAITING = 16
"""Messages a connection may have waiting behind the one being served before reading pauses."""

_SUBPROTOCOLS = [Subprotocol(sub.value) for sub in protocol.Subprotocol]
_TOO_MANY = b"too many connections; retry later\n"


def http_response(status: http.HTTPStatus, body: bytes, content_type: str) -> Response:
    """A plain HTTP response (for the routes: they need not import websockets)."""
    headers = Headers([("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return Response(status.value, status.phrase, headers, body)


def too_many_connections() -> Response:
    """HTTP 503 for a connection over a cap."""
    headers = Headers([("Content-Length", str(len(_TOO_MANY))), ("Connection", "close")])
    headers["Retry-After"] = "5"
    return Response(503, "Service Unavailable", headers, _TOO_MANY)


def _bad_request() -> Response:
    body = b"not an HTTP request\n"
    headers = Headers([("Content-Length", str(len(body))), ("Connection", "close")])
    headers["Content-Type"] = "text/plain; charset=utf-8"
    return Response(400, "Bad Request", headers, body)


def wire_frame(message: bytes | str) -> bytes:
    """The bytes of one unfragmented server frame (binary for bytes, text for str): the same for
    every connection, so a message sent to many is framed once."""
    if isinstance(message, str):
        return Frame(Opcode.TEXT, message.encode()).serialize(mask=False)
    return Frame(Opcode.BINARY, message).serialize(mask=False)


def _select_subprotocol(_: ServerProtocol, offered: list[Subprotocol]) -> Subprotocol | None:
    """msgpack (and no header) when the client offers nothing; else the first of ours it offers;
    else refuse the handshake (HTTP 400)."""
    if not offered:
        return None
    chosen = protocol.select_subprotocol(offered)
    if chosen is None:
        raise NegotiationError(f"unsupported subprotocol; offer one of {', '.join(_SUBPROTOCOLS)}")
    return Subprotocol(chosen.value)


class Channel(Protocol):
    """What the application attaches to an open connection."""

    def serve(self, message: bytes | str) -> None:
        """Serve one message; call ``connection.served()`` exactly once when done (maybe before
        returning). The next message waits until then."""

    def closed(self) -> None:
        """The connection is gone: let go of everything."""


class HttpRoutes(Protocol):
    """The answers to plain HTTP requests and the checks of a WebSocket handshake."""

    def check_handshake(self, request: Request) -> Response | None:
        """None when the WebSocket handshake on ``/ws`` may go on; else the refusal to send."""

    def respond(self, request: Request) -> Awaitable[Response]:
        """The response to a request for any other path."""


class WebSocketServer:
    """The listening socket and every connection it accepted."""

    def __init__(
        self,
        open_channel: Callable[[WebSocketConnection], Channel],
        routes: HttpRoutes,
        gate: ConnectionGate,
        *,
        max_size: int,
        server_header: str,
        max_write_buffer: int,
        dropped: Callable[[], None] = lambda: None,
    ) -> None:
        """``open_channel`` is called once per completed handshake; ``max_size`` is the hard cap on
        an incoming message (bigger closes 1009 before it is buffered); a connection whose unsent
        data passes ``max_write_buffer`` does not read and is dropped (``dropped`` counts it)."""
        self.open_channel = open_channel
        self.routes = routes
        self.gate = gate
        self.max_size = max_size
        self.server_header = server_header
        self.max_write_buffer = max_write_buffer
        self.dropped = dropped
        self.log = ThrottledLog()
        self.connections: set[WebSocketConnection] = set()
        self.accepting = True
        self._server: asyncio.Server | None = None
        self._all_closed: asyncio.Future[None] | None = None

    async def listen(self, host: str, port: int, sock: socket.socket | None = None) -> None:
        """Listen on ``sock`` when given (already bound), else on ``host`` and ``port``."""
        loop = asyncio.get_running_loop()
        if sock is not None:
            self._server = await loop.create_server(lambda: WebSocketConnection(self), sock=sock)
        else:
            self._server = await loop.create_server(lambda: WebSocketConnection(self), host, port)

    @property
    def port(self) -> int | None:
        sockets = self._server.sockets if self._server is not None else ()
        return int(sockets[0].getsockname()[1]) if sockets else None

    def stop_accepting(self) -> None:
        """Close the listening socket; handshakes still under way are answered HTTP 503."""
        self.accepting = False
        if self._server is not None:
            self._server.close()

    async def close_all(self, code: int, reason: str) -> None:
        """Close every connection (open ones with ``code``) and wait until all are gone."""
        for connection in list(self.connections):
            connection.close(code, reason)
        if self.connections:
            self._all_closed = asyncio.get_running_loop().create_future()
            try:  # each connection drops itself CLOSE_LINGER after its close frame: a bound, but
                # not on a connection whose close waits for a peer that reads nothing
                await asyncio.wait_for(asyncio.shield(self._all_closed), CLOSE_LINGER + 1.0)
            except TimeoutError:
                for connection in list(self.connections):
                    connection.abort()
                await self._all_closed
        if self._server is not None:
            await self._server.wait_closed()

    def forget(self, connection: WebSocketConnection) -> None:
        self.connections.discard(connection)
        if not self.connections and self._all_closed is not None and not self._all_closed.done():
            self._all_closed.set_result(None)


class WebSocketConnection(asyncio.Protocol):
    """One accepted socket: its handshake, its messages in (to its ``Channel``, one at a time, in
    order) and out, its keepalive and its close.

    ``client_address`` is the peer's, or the forwarded client's once a trusted proxy's handshake
    named it; ``last_frame_at`` is the time of its last frame of any kind, pings included;
    ``subprotocol`` the one agreed at the handshake.
    """

    __slots__ = (
        "_abort_timer",
        "_answered",
        "_counted",
        "_dispatching",
        "_fragmented_text",
        "_fragments",
        "_http_task",
        "_lingering",
        "_peer_done",
        "_ping_payload",
        "_plain_http",
        "_pong_awaited",
        "_protocol",
        "_reading_paused",
        "_refused",
        "_server",
        "_serving",
        "_timer",
        "_waiting",
        "channel",
        "client_address",
        "last_frame_at",
        "subprotocol",
        "transport",
    )

    transport: asyncio.Transport

    def __init__(self, server: WebSocketServer) -> None:
        self._server = server
        self._protocol = ServerProtocol(
            subprotocols=_SUBPROTOCOLS,
            select_subprotocol=_select_subprotocol,  # type: ignore[arg-type]
            max_size=server.max_size,
        )
        self.client_address = ""
        self.subprotocol: protocol.Subprotocol = protocol.Subprotocol.MSGPACK
        self.last_frame_at = time.monotonic()
        self.channel: Channel | None = None
        self._counted = False
        self._refused = False  # over a cap at accept: only the 503 is sent
        self._answered = False  # the 503 of a refused connection or the 400 of a bad request
        self._plain_http = False  # a request for another path than /ws: no WebSocket
        self._peer_done = False  # its client half-closed after the request
        self._lingering = False
        self._fragments: list[bytes] = []
        self._fragmented_text = False
        self._waiting: collections.deque[bytes | str] = collections.deque()
        self._serving = False
        self._dispatching = False
        self._reading_paused = False
        self._pong_awaited = False
        self._ping_payload = b""
        self._timer: asyncio.TimerHandle | None = None  # the open timeout, then the keepalive's
        self._abort_timer: asyncio.TimerHandle | None = None
        self._http_task: asyncio.Task[None] | None = None

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self._server.connections.add(self)
        peer = transport.get_extra_info("peername")
        self.client_address = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        if self._server.gate.accept(self.client_address) is None:
            self._counted = True
            self._timer = asyncio.get_running_loop().call_later(OPEN_TIMEOUT, self._open_timed_out)
            return
        self._refused = True
        if self._server.gate.start_lingering():  # answered when its request comes (data_received)
            self._lingering = True
            self._abort_later(REFUSAL_LINGER)
        else:  # no slot left: answer at once and close, the best that can be done in a storm
            self.transport.write(too_many_connections().serialize())
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            self._answer_refused()
            return
        if self._plain_http:
            return  # one request per connection: what follows it is not read
        self._protocol.receive_data(data)
        events = self._protocol.events_received()
        if events:
            self.last_frame_at = time.monotonic()
        for event in events:
            if isinstance(event, Frame):
                self._frame(event)
            elif isinstance(event, Request):
                self._handshake(event)
                if self._plain_http:
                    return  # the HTTP routes answer it; nothing the protocol made is sent
        if isinstance(self._protocol.handshake_exc, InvalidMessage) and not self._answered:
            # not an HTTP request: websockets only hangs up (its FIN waits in data_to_send)
            self._answered = True
            response = _bad_request()
            response.headers["Server"] = self._server.server_header
            self.transport.write(response.serialize())
        self._flush()

    def eof_received(self) -> bool | None:
        if self._plain_http:
            self._peer_done = True
            return True  # its response is still to come
        if not self._refused:
            self._protocol.receive_eof()
            self._flush()
        return None  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._timer, self._abort_timer):
            if timer is not None:
                timer.cancel()
        self._waiting.clear()
        if self._http_task is not None:
            self._http_task.cancel()
        if self._counted:
            self._server.gate.release(self.client_address)
            self._counted = False
        if self._lingering:
            self._server.gate.stop_lingering()
            self._lingering = False
        try:
            if self.channel is not None:
                channel, self.channel = self.channel, None
                channel.closed()
        finally:
            self._server.forget(self)

    # Sending

    def send(self, message: bytes | str) -> None:
        """Send one message (binary for bytes, text for str), unless the connection is closing."""
        self.write_frame(wire_frame(message))

    def write_frame(self, frame: bytes) -> None:
        """Write a frame made by ``wire_frame``, unless the connection is closing."""
        if self._protocol.state is State.OPEN and not self.transport.is_closing():
            self._write(frame)

    def _write(self, data: bytes) -> None:
        """The one place frames are written: a peer that lets ``max_write_buffer`` of them pile up
        (replies, pushes, or the pongs of its own pings) does not read; it is dropped, so that it
        can neither hold memory nor slow anyone down."""
        transport = self.transport
        transport.write(data)
        if transport.get_write_buffer_size() > self._server.max_write_buffer:
            self._server.log.warning("dropping a connection that does not read", self.client_address)
            self._server.dropped()
            transport.abort()

    def write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size()

    def penalize(self) -> None:
        """Closed for flooding: its address may not reconnect at once."""
        self._server.gate.penalize(self.client_address)

    def abort(self) -> None:
        """Drop the socket now (a client that does not read)."""
        self.transport.abort()

    def close(self, code: int, reason: str, *, read_more: bool = True) -> None:
        """Send the close frame after what was already written, then our FIN; drop the socket
        ``CLOSE_LINGER`` seconds later whatever the peer does. A connection not open yet is closed.

        With ``read_more`` False nothing more is read (a flooder): its frames are not even parsed.
        """
        if self._protocol.state is State.CONNECTING:
            self._abort_later(CLOSE_LINGER)  # close() waits for unsent data: bounded
            self.transport.close()
            return
        if self._protocol.state is not State.OPEN:
            return
        self._waiting.clear()
        self._protocol.fail(code, reason.encode()[:120].decode(errors="ignore"))
        if not read_more:
            self.transport.pause_reading()
        self._flush()

    @property
    def waiting(self) -> int:
        """Messages received and not served yet (reading pauses past ``MAX_WAITING``)."""
        return len(self._waiting)

    @property
    def is_open(self) -> bool:
        return self._protocol.state is State.OPEN and not self.transport.is_closing()

    # Serving messages, one at a time

    def served(self) -> None:
        """The channel is done with its message: serve the next one."""
        self._serving = False
        self._serve_waiting()

    def _message(self, message: bytes | str) -> None:
        self._waiting.append(message)
        self._serve_waiting()
        if len(self._waiting) > MAX_WAITING and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()

    def _serve_waiting(self) -> None:
        if self._dispatching:
            return  # served() from within serve(): the loop below goes on
        self._dispatching = True
        try:
            while self._waiting and not self._serving and self.channel is not None and self.is_open:
                self._serving = True
                try:
                    self.channel.serve(self._waiting.popleft())
                except Exception:  # a bug: close this connection, not stall it (nor the loop)
                    logger.exception("serving a message failed")
                    self._serving = False
                    self.close(CloseCode.INTERNAL_ERROR, "the server failed")
        finally:
            self._dispatching = False
        if self._reading_paused and len(self._waiting) <= MAX_WAITING // 2 and self.is_open:
            self._reading_paused = False
            self.transport.resume_reading()

    # Incoming frames

    def _frame(self, frame: Frame) -> None:
        opcode = frame.opcode
        data = cast(bytes, frame.data)  # parsed frames hold bytes
        if opcode is Opcode.BINARY or opcode is Opcode.TEXT:
            if frame.fin:
                self._whole(data, opcode is Opcode.TEXT)
            else:
                self._fragments = [data]
                self._fragmented_text = opcode is Opcode.TEXT
        elif opcode is Opcode.CONT:
            self._fragments.append(data)
            if frame.fin:
                whole, self._fragments = b"".join(self._fragments), []
                self._whole(whole, self._fragmented_text)
        elif opcode is Opcode.PONG and data == self._ping_payload:
            self._pong_awaited = False  # an unsolicited pong does not prove the peer reads
        elif opcode is Opcode.CLOSE:
            self._waiting.clear()  # the peer said goodbye: what it sent before gets no answer

    def _whole(self, data: bytes, text: bool) -> None:
        if self._protocol.state is not State.OPEN:
            return
        if not text:
            self._message(data)
            return
        try:
            self._message(data.decode())
        except UnicodeDecodeError as exc:
            self._protocol.fail(CloseCode.INVALID_DATA, f"invalid UTF-8 at position {exc.start}")

    # The opening handshake and plain HTTP

    def _open_timed_out(self) -> None:
        if self._protocol.state is State.CONNECTING and not self._plain_http:
            self.transport.abort()

    def _handshake(self, request: Request) -> None:
        if self._timer is not None:
            self._timer.cancel()  # the open timeout: the request came
        path = request.path.partition("?")[0]
        if path != "/ws":
            self._plain_http = True
            self._http_task = asyncio.get_running_loop().create_task(self._serve_http(request))
            return
        if self._protocol.eof_sent:
            return  # what came with the request was no WebSocket frame: hung up already
        response = self._refusal(request) or self._protocol.accept(request)
        response.headers["Server"] = self._server.server_header
        self._protocol.send_response(response)
        if response.status_code != http.HTTPStatus.SWITCHING_PROTOCOLS:
            self._close_after_response()
            return
        if self._protocol.subprotocol is not None:
            self.subprotocol = protocol.Subprotocol(self._protocol.subprotocol)
        self._timer = asyncio.get_running_loop().call_later(PING_INTERVAL, self._keepalive)
        self.channel = self._server.open_channel(self)

    def _refusal(self, request: Request) -> Response | None:
        if not self._server.accepting:
            return self._protocol.reject(http.HTTPStatus.SERVICE_UNAVAILABLE, "Server is shutting down.\n")
        self.client_address, refused = self._server.gate.handshake(
            self.client_address, request.headers.get("X-Forwarded-For")
        )
        if refused is not None:
            return too_many_connections()
        return self._server.routes.check_handshake(request)

    async def _serve_http(self, request: Request) -> None:
        """Answer a plain HTTP request from the routes, then hang up (the response says how long
        its body is; our FIN follows it)."""
        try:
            response = await self._server.routes.respond(request)
        except Exception:
            logger.exception("HTTP %s failed", request.path)
            response = self._protocol.reject(http.HTTPStatus.INTERNAL_SERVER_ERROR, "the server failed\n")
        self._http_task = None
        if self.transport.is_closing():
            return
        response.headers["Server"] = self._server.server_header
        self.transport.write(response.serialize())
        if self._peer_done:
            self._abort_later(CLOSE_LINGER)  # close() waits for a flush the peer may never read
            self.transport.close()
            return
        self._write_eof()
        self._close_after_response()

    def _close_after_response(self) -> None:
        self._abort_later(CLOSE_LINGER)

    def _answer_refused(self) -> None:
        """The 503 answers the request, then our FIN follows it; the rest of what the client sends
        is dropped. Answering before the request came confuses some clients, and closing with the
        request unread would send a reset that can destroy the 503."""
        if self._answered or self.transport.is_closing():
            return
        self._answered = True
        self.transport.write(too_many_connections().serialize())
        self._write_eof()

    # Writing, keepalive, timers

    def _flush(self) -> None:
        if self.transport.is_closing():
            return
        for data in self._protocol.data_to_send():
            if self.transport.is_closing():
                return  # dropped by _write: it did not read
            if data:
                self._write(data)
            else:
                self._write_eof()  # our FIN after the close frame (or the HTTP response)
        if self._protocol.state is State.CLOSED:
            self.transport.close()
        elif self._protocol.close_expected():
            self._abort_later(CLOSE_LINGER)

    def _keepalive(self) -> None:
        """A ping every ``PING_INTERVAL``; its pong must come within ``PING_TIMEOUT``."""
        if self._protocol.state is not State.OPEN:
            return
        self._pong_awaited = True
        self._ping_payload = os.urandom(4)
        self._protocol.send_ping(self._ping_payload)
        self._flush()
        self._timer = asyncio.get_running_loop().call_later(PING_TIMEOUT, self._check_pong)

    def _check_pong(self) -> None:
        if self._protocol.state is not State.OPEN:
            return
        if self._pong_awaited:
            self._protocol.fail(CloseCode.INTERNAL_ERROR, "keepalive ping timeout")
            self._flush()
            return
        # a ping every PING_INTERVAL (from one ping to the next, as websockets does it)
        self._timer = asyncio.get_running_loop().call_later(
            max(0.0, PING_INTERVAL - PING_TIMEOUT), self._keepalive
        )

    def _write_eof(self) -> None:
        if not self.transport.can_write_eof():
            self._abort_later(CLOSE_LINGER)
            self.transport.close()
            return
        try:
            self.transport.write_eof()
        except OSError:  # the peer is gone already
            self.transport.abort()

    def _abort_later(self, delay: float) -> None:
        """Drop the socket ``delay`` seconds from now, unless it is gone by then (once)."""
        if self._abort_timer is None:
            self._abort_timer = asyncio.get_running_loop().call_later(delay, self.transport.abort)
