"""WebSocket and HTTP on one port: websockets' sans-I/O ``ServerProtocol`` driven by a plain
``asyncio.Protocol``, one per accepted socket.

Why not websockets' asyncio server: it runs a task per connection and reassembles every message
through a reader queue and an awaited ``recv()``, most of the CPU a message costs here. In this module
bytes from the socket go through the protocol's parser and come out as whole messages handed to the
connection's ``Channel`` at once (a read that is one whole data frame, nearly every read of a client
waiting for its reply, is unmasked here without the parser: `_whole_data_frame`); replies are
written as soon as they exist, those of one callback (a read's turn of frames) in one write at its
end. Per connection only one request is served at a time (its later messages wait in order) and
reading pauses while a few wait; a peer that lets unsent frames (replies, pushes, the
pongs of its own pings) pile up past ``max_write_buffer`` does not read and is dropped.

No connection may hold the event loop: every frame it sends, control frames included, takes a token
of its ``TokenBucket`` as it is parsed (a flood closes 1008 whatever its frames are: pings, pongs,
tiny fragments, messages; at its first refused frame when no valid request came before, ``vouch``),
and so does every read of an open connection that makes no frame (a frame dribbled a byte per
segment costs a callback a byte: 4 such connections took half a core while each frame was one token),
and one read callback acts on at most ``FRAMES_PER_TURN`` frames: the parser is handed no more bytes
at once than that many of the smallest frames a client can send (``MIN_CLIENT_FRAME``), so that it
cannot make more of them, and the rest of the read waits for the next turn of the loop, with reading
paused meanwhile. A message still incomplete holds at most
``max_message`` bytes (its fragments) for at most ``MESSAGE_TIMEOUT`` seconds, and all connections
together at most ``MAX_PARTIAL_BYTES``.

What the asyncio server gave for free and is done here: the handshake (``/ws`` with subprotocol
selection, the ``Server`` header, HTTP 503 while shutting down; any other path is answered by the
HTTP routes and closed), the open timeout, keepalive pings, close handshakes and lingering closes,
HTTP 400 for a request that is not HTTP. A connection's websockets protocol object (its parser and
state) is made only once its request is all in (``b"\r\n\r\n"``, or ``MAX_HEAD`` bytes, or a first
line that is no GET request line, whose 400 comes at once): a socket refused at accept, or one that
never finishes its request, costs none (a half-open flood reconnecting would make one per socket,
the larger part of an accept's work). Admission (``server.edge.admission``) is asked at accept, before
anything is read, and again at the handshake for the client behind a trusted proxy; until its request
comes a connection is half-open, and the gate may evict it to make room for a newer one (its open
timeout is shorter while many are half-open). Once open, each frame also takes a token of the bucket
its address's connections share (``ConnectionGate.frame_bucket``), when that budget is on.

How it is organized. A connection's lifecycle is data: its ``Phase`` (``server.edge.connection_state``:
half-open, refused, answered, HTTP, open, flooded, evicted, closed; every change checked against the
table there) and, once open, its websockets protocol's own state (open, closing, closed), never a
copy of it; what it holds of the gate's is its ``Admission``, decided at accept and given back when
it is gone. Every frame takes one path, `WebSocketConnection._frame` (metered, fragments bounded, a
message served or queued), whether the parser made it or the read was that one whole frame: the fast
path only recognizes such a read (`_whole_data_frame`, checked against the parser by
``tests/server/test_transport_phases.py``) and leaves everything else, and every refusal, to the
parser. Every read ends in `_read_done` (what websockets queued written, reading paused or resumed).

The only module that imports ``websockets``: the HTTP routes take its ``Request`` and ``Response`` from here.
"""

from __future__ import annotations

import asyncio
import collections
import http
import logging
import os
import socket
import struct
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, cast

from websockets.datastructures import Headers
from websockets.exceptions import InvalidMessage, NegotiationError
from websockets.frames import CloseCode, Frame, Opcode
from websockets.http11 import Request, Response
from websockets.protocol import State
from websockets.server import ServerProtocol
from websockets.streams import StreamReader
from websockets.typing import Subprotocol

try:
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover - websockets built without its C extension
    from websockets.utils import apply_mask

import protocol
from server.edge.admission import ConnectionGate, SharedBucket, ThrottledLog
from server.edge.connection_state import Admission, Phase, advance
from server.ratelimit import Metered, TokenBucket

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
MIN_CLIENT_FRAME = 6
"""Bytes of the smallest frame a client can send (a 2-byte header and its 4-byte mask): the parser
makes every whole frame of the bytes it is handed, so ``n * MIN_CLIENT_FRAME`` bytes hold at most
``n`` frames, with or without the end of one begun in an earlier hand."""
FRAMES_PER_TURN = 32
"""Frames one connection may have acted on in one turn of the event loop (one read callback, each
a message served or a control frame answered: some 1-2 ms of the loop); more of the same read wait
for the next turn (a real client sends a few per read). Frames bigger than ``FRAMES_PER_TURN *
MIN_CLIENT_FRAME`` bytes reach the parser in several hands."""
MESSAGE_TIMEOUT = 10.0
"""Seconds a client has to finish a fragmented message it started (a held fragment costs memory)."""
MAX_HEAD = 16 * 1024
"""Bytes of a request gathered before the parser is made even without its end (websockets then
refuses what is too long)."""
MAX_PARTIAL_BYTES = 8 * 1024 * 1024
"""Bytes of unfinished fragmented messages all connections may hold together; the connection whose
fragment would pass it is closed 1013 (try again later)."""

_READING = frozenset({State.CONNECTING, State.OPEN})
_PARSED = frozenset({Phase.HALF_OPEN, Phase.OPEN, Phase.FLOODED})  # what it sends goes to the parser
_BINARY, _TEXT, _CONT, _PONG, _CLOSE = Opcode.BINARY, Opcode.TEXT, Opcode.CONT, Opcode.PONG, Opcode.CLOSE
_SERVE, _REFUSE, _FLOOD = Metered.SERVE, Metered.REFUSE, Metered.CLOSE
_OPEN = State.OPEN  # (an enum member by attribute costs some 60 ns on 3.11, a module constant 2)
_FLOODED = Phase.FLOODED
_AT_EOF = StreamReader.at_eof.__code__
_HEAD_16 = struct.Struct("!BBH")
_HEAD_64 = struct.Struct("!BBQ")
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


_TOO_MANY_BYTES = too_many_connections().serialize()
"""The 503 written to each socket refused at accept, made once: a flood of refused sockets is answered
thousands of times a second (building it each time is a tenth of the loop's work under the
half-open attack)."""


def _bad_request() -> Response:
    body = b"not an HTTP request\n"
    headers = Headers([("Content-Length", str(len(body))), ("Connection", "close")])
    headers["Content-Type"] = "text/plain; charset=utf-8"
    return Response(400, "Bad Request", headers, body)


def wire_frame(message: bytes | str) -> bytes:
    """The bytes of one unfragmented server frame (binary for bytes, text for str): the same for
    every connection, so a message sent to many is framed once. Written here, not by websockets'
    ``Frame.serialize``: a server frame is a header and the payload (no mask, no extension), and
    building a ``Frame`` for each reply cost more than the rest of its framing (RFC 6455, 5.2)."""
    if isinstance(message, str):
        payload, first = message.encode(), 0x81  # FIN, text
    else:
        payload, first = message, 0x82  # FIN, binary
    size = len(payload)
    if size < 126:
        return bytes((first, size)) + payload
    if size < 65536:
        return _HEAD_16.pack(first, 126, size) + payload
    return _HEAD_64.pack(first, 127, size) + payload


class _ServerProtocol(ServerProtocol):
    """websockets' server side, choosing our subprotocol.

    By a method of a subclass, not websockets' ``select_subprotocol`` argument: that one is bound to
    each protocol object in a field of its own, a reference cycle. A closed connection's objects must
    be freed by reference counting (`_break_cycles` for the other cycles): under a botnet's churn,
    thousands of them a second left to the cyclic collector made full passes of 38-52 ms on the
    event loop, which held every player."""

    def select_subprotocol(self, subprotocols: Sequence[Subprotocol]) -> Subprotocol | None:
        """msgpack (and no header) when the client offers nothing; else the first of ours it offers;
        else refuse the handshake (HTTP 400)."""
        if not subprotocols:
            return None
        chosen = protocol.select_subprotocol(subprotocols)
        if chosen is None:
            raise NegotiationError(f"unsupported subprotocol; offer one of {', '.join(_SUBPROTOCOLS)}")
        return Subprotocol(chosen.value)


def _break_cycles(ws: ServerProtocol) -> None:
    """Break the reference cycles websockets leaves in a protocol object whose connection is gone,
    so that reference counting frees the connection's objects at once (see `_ServerProtocol`).

    Its parser is a generator whose suspended frame holds the protocol: it is closed. Why the
    handshake or the parser failed is kept (in the request too) with a traceback whose frames hold
    the protocol, the request and the exception itself: the tracebacks are dropped."""
    ws.parser.close()
    for failure in (ws.handshake_exc, ws.parser_exc):
        if failure is not None:
            failure.__traceback__ = None
    ws.handshake_exc = ws.parser_exc = None


def _parser_between_frames(protocol: ServerProtocol) -> bool:
    """Whether the open ``protocol``'s parser waits for the first byte of a frame, nothing buffered:
    its innermost generator is then its reader's ``at_eof``, which it waits in between two frames
    and nowhere else (a parser mid-frame waits in ``read_exact``, even with nothing buffered)."""
    if protocol.reader.buffer:
        return False
    waiting = protocol.parser
    while (inner := getattr(waiting, "gi_yieldfrom", None)) is not None:
        waiting = inner
    return getattr(waiting, "gi_code", None) is _AT_EOF


def _whole_data_frame(data: bytes, max_size: int) -> tuple[Opcode, bool, bytes] | None:
    """The frame ``data`` is, exactly, when it is one whole unfragmented data frame of a client that
    websockets' parser accepts as it is: its opcode, FIN and payload (unmasked). None for anything
    else, valid or not: FIN without a reserved bit, binary or text, masked, a 7- or 16-bit length
    within ``max_size``, and not a byte more or less (RFC 6455, 5.2).

    This is the fast path's only knowledge of framing. It decides nothing: what it does not take goes
    to the parser, the one place a frame is refused, and what it takes goes where the parser's frames
    go (`WebSocketConnection._frame`). ``tests/server/test_transport.py`` checks it against the parser."""
    size = len(data)
    if size < MIN_CLIENT_FRAME:
        return None
    head = data[0]
    if head == 0x82:  # FIN, no reserved bit, binary
        opcode = _BINARY
    elif head == 0x81:  # FIN, no reserved bit, text
        opcode = _TEXT
    else:
        return None
    length = data[1] ^ 0x80  # 0 to 127 when the mask bit is set
    if length < 126:
        at = 2
    elif length == 126 and size >= 8:
        length, at = (data[2] << 8) | data[3], 4
    else:
        return None  # unmasked (the parser fails it), or a 64-bit length
    mask = at + 4
    if size != mask + length or length > max_size:
        return None
    return opcode, True, apply_mask(data[mask:], data[at:mask])


def _hand_end(data: bytes, at: int, frames: int, handshake: bool) -> int:
    """Where the next hand of ``data`` to the parser ends: at the end of the request during the
    ``handshake`` (its response is then queued before anything a frame after it makes, such as a
    pong), else after as many bytes as ``frames`` of the smallest frames a client can send."""
    if handshake:
        end = data.find(b"\r\n\r\n", at)
        return len(data) if end < 0 else end + 4
    return min(len(data), at + frames * MIN_CLIENT_FRAME)


def _request_in(data: bytes) -> bool:
    """Whether ``data``, the start of a connection, holds its request's end (or ``MAX_HEAD`` bytes, or a
    first line that is no GET request line: the parser's 400 for it comes at once)."""
    if b"\r\n\r\n" in data or len(data) > MAX_HEAD:
        return True
    return b"\r\n" in data and not data.startswith(b"GET ")


class Channel(Protocol):
    """What the application attaches to an open connection."""

    def serve(self, message: bytes | str, within_rate: bool) -> None:
        """Serve one message; call ``connection.served()`` exactly once when done (maybe before
        returning). The next message waits until then. ``within_rate`` is False when the frame
        that completed the message found the connection's token bucket empty: refuse it."""

    def closed(self) -> None:
        """The connection is gone: let go of everything."""


class HttpRoutes(Protocol):
    """The answers to plain HTTP requests and the checks of a WebSocket handshake."""

    def check_handshake(self, request: Request) -> Response | None:
        """None when the WebSocket handshake on ``/ws`` may go on; else the refusal to send."""

    def respond(self, request: Request) -> Awaitable[Response]:
        """The response to a request for any other path."""

    def is_answered_from_memory(self, path: str) -> bool:
        """Whether a request for ``path`` (any but ``/ws``) is answered from memory: its
        connection's new-connection token is then given back (``ConnectionGate.answered_from_memory``)."""


class WebSocketServer:
    """The listening socket and every connection it accepted."""

    def __init__(
        self,
        open_channel: Callable[[WebSocketConnection], Channel],
        routes: HttpRoutes,
        gate: ConnectionGate,
        *,
        max_size: int,
        max_message: int,
        frame_rate: float,
        frame_burst: int,
        server_header: str,
        max_write_buffer: int,
        dropped: Callable[[], None] = lambda: None,
        flooded: Callable[[], None] = lambda: None,
    ) -> None:
        """``open_channel`` is called once per completed handshake; ``max_size`` is the hard cap on
        an incoming frame (bigger closes 1009 before it is buffered), ``max_message`` on the
        fragments of an unfinished message (more closes 1009 at once); every frame takes a token of
        a bucket of ``frame_burst`` refilled at ``frame_rate`` a second, and a connection that
        floods on while refused is closed 1008 (``flooded`` counts it); a connection whose unsent
        data passes ``max_write_buffer`` does not read and is dropped (``dropped`` counts it)."""
        self.open_channel = open_channel
        self.routes = routes
        self.gate = gate
        self.max_size = max_size
        self.max_message = max_message
        self.frame_rate = frame_rate
        self.frame_burst = frame_burst
        self.server_header = server_header
        self.max_write_buffer = max_write_buffer
        self.dropped = dropped
        self.flooded = flooded
        self.partial_bytes = 0  # held in unfinished fragmented messages, all connections together
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
                async with asyncio.timeout(CLOSE_LINGER + 1.0):  # not wait_for: gh-86296 on 3.11
                    await asyncio.shield(self._all_closed)
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

    Its lifecycle is its ``Phase`` (``server.edge.connection_state``: every change through
    `_advance`, checked against the table) and, once open, its websockets protocol's state; what it
    holds of the gate's is its ``Admission``, decided at accept. The rest are flags of an open
    connection, each with one writer: ``_paused`` (`_pause_reading`), ``_corked`` (`_cork` and
    `_uncork`), ``_parsing`` and ``_between_frames`` (`_parse_turn`), ``_dispatching``
    (`_serve_waiting`), ``_serving`` (`_serve_one`, and `served`), ``_waiting_full``
    (`_count_waiting`), ``_vouched`` (`vouch`).

    ``client_address`` is what the per-address limits count it under (``ConnectionGate.key_of``:
    an IPv6 peer's /64): the peer's, or the forwarded client's once a trusted proxy's handshake named
    it; ``last_frame_at`` is the time of its last frame of any kind, pings included;
    ``subprotocol`` the one agreed at the handshake.
    """

    __slots__ = (
        "_abort_timer",
        "_address_bucket",
        "_admission",
        "_between_frames",
        "_bucket",
        "_corked",
        "_dispatching",
        "_fragment_bytes",
        "_fragment_opcode",
        "_fragment_timer",
        "_fragments",
        "_head",
        "_http_task",
        "_outgoing",
        "_parse_later",
        "_parsing",
        "_paused",
        "_peer",
        "_phase",
        "_ping_unanswered",
        "_protocol",
        "_server",
        "_serving",
        "_timer",
        "_unparsed",
        "_unparsed_at",
        "_vouched",
        "_waiting",
        "_waiting_full",
        "channel",
        "client_address",
        "last_frame_at",
        "subprotocol",
        "transport",
    )

    transport: asyncio.Transport

    def __init__(self, server: WebSocketServer) -> None:
        self._server = server
        self._phase = Phase.NEW
        self._admission: Admission  # decided at accept (connection_made)
        self._protocol: ServerProtocol | None = None  # made once the request is all in (_head)
        self._head = b""  # the request so far, before the protocol is made
        self._peer = ""  # the socket's peer address, exactly
        self.client_address = ""
        self.subprotocol: protocol.Subprotocol = protocol.Subprotocol.MSGPACK
        self.last_frame_at = time.monotonic()
        self.channel: Channel | None = None
        self._bucket = TokenBucket(server.frame_rate, server.frame_burst)
        self._address_bucket: SharedBucket | None = None  # shared with its address's connections, once open
        self._fragments: list[bytes] = []
        self._fragment_bytes = 0  # counted in the server's partial_bytes too
        self._fragment_opcode = _BINARY  # of the unfinished message, while _fragments hold it
        self._fragment_timer: asyncio.TimerHandle | None = None
        self._unparsed = b""  # a read whose rest, from _unparsed_at, is parsed from the next turn
        self._unparsed_at = 0  # (an offset, not a copy of the rest at each turn)
        self._parse_later: asyncio.Handle | None = None
        self._waiting: collections.deque[tuple[bytes | str, bool]] = collections.deque()
        self._serving = False  # its channel has a message (until served())
        self._dispatching = False  # _serve_waiting's loop runs (served() from within serve() returns to it)
        self._vouched = False  # a valid request came (see `vouch`)
        self._waiting_full = False  # reading pauses: more than MAX_WAITING messages wait
        self._parsing = False
        self._between_frames = False  # see `_whole_frame`
        self._paused = False  # reading, as _pause_reading last set it
        self._corked = False  # writes wait in _outgoing until the callback ends (_cork)
        self._outgoing: list[bytes] = []
        self._ping_unanswered: bytes | None = None  # the keepalive ping's payload until its pong
        self._timer: asyncio.TimerHandle | None = None  # the open timeout, then the keepalive's
        self._abort_timer: asyncio.TimerHandle | None = None
        self._http_task: asyncio.Task[None] | None = None

    def _advance(self, to: Phase) -> None:
        """The one writer of ``_phase``: raises ``IllegalTransition`` on a change the table forbids."""
        self._phase = advance(self._phase, to)

    @property
    def phase(self) -> Phase:
        return self._phase

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self._server.connections.add(self)
        peer = transport.get_extra_info("peername")
        self._peer = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        gate = self._server.gate
        self.client_address = gate.key_of(self._peer)
        if gate.accept(self._peer, self) is None:
            self._admission = Admission.ADMITTED
            self._advance(Phase.HALF_OPEN)
            timeout = min(OPEN_TIMEOUT, gate.PRESSED_OPEN_TIMEOUT) if gate.under_pressure() else OPEN_TIMEOUT
            self._timer = asyncio.get_running_loop().call_later(timeout, self._open_timed_out)
            return
        self._advance(Phase.REFUSED)
        if gate.start_lingering():  # answered when its request comes (data_received)
            self._admission = Admission.LINGERING
            self._abort_later(REFUSAL_LINGER)
        else:  # no slot left: answer at once and close, the best that can be done in a storm
            self._admission = Admission.TURNED_AWAY
            self._advance(Phase.ANSWERED)
            self.transport.write(_TOO_MANY_BYTES)
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self._between_frames and self._whole_frame(data):
            return  # nearly every read of a client that waits for its reply: one whole frame
        if self._failed():
            return  # its end of file still comes (`eof_received`), which the parser needs
        if self._phase not in _PARSED:
            if self._phase is Phase.REFUSED:
                self._answer_refused()
            return  # answered (HTTP, 503, 400): what follows is not read
        if self._protocol is None:
            data = self._head + data
            if not _request_in(data):
                self._head = data
                return
            self._head = b""
            self._protocol = _ServerProtocol(subprotocols=_SUBPROTOCOLS, max_size=self._server.max_size)
        if self._unparsed:  # reading pauses while a rest waits; a read that comes anyway follows it
            data = self._unparsed[self._unparsed_at :] + data
        self._parse(data)

    def _whole_frame(self, data: bytes) -> bool:
        """Act on ``data`` when it is one whole unfragmented data frame (`_whole_data_frame`), without
        websockets' parser: False, and nothing done, for anything else (the parser takes it).

        Called only while the parser waits for the first byte of a frame, nothing buffered, no
        fragmented message under way and nothing left unparsed (``_between_frames``, known at the
        end of each parse: nothing else moves the parser): a whole data frame would change nothing
        in its state, so that it is the same as if it had parsed the frame. The frame then goes
        where the parser's frames go (`_frame`: metered, acted on) and the read ends as a parsed
        one does (`_read_done`). The reason: the parser's generators, its ``Frame`` and its checks
        cost more than the rest of the transport's work for a message."""
        frame = _whole_data_frame(data, self._server.max_size)
        protocol = self._protocol
        if frame is None or protocol is None or protocol.state is not _OPEN:
            return False
        self.last_frame_at = time.monotonic()
        self._frame(*frame)
        self._read_done(protocol)
        return True

    def _failed(self) -> bool:
        """Whether the server failed the connection (a frame too big, a protocol error, a flood): its
        parser then only discards what comes (websockets' `discard`, RFC 6455 7.1.7), so a read is
        dropped before it. A fragments flood's connections, failed 1009 and written on, cost 30
        parsed reads each. (A server that fails a connection sends its end of file at once; one that
        closes it cleanly, only once the close handshake is done, and the state is CLOSED then.)"""
        ws = self._protocol
        return ws is not None and ws.eof_sent and ws.state is State.CLOSING

    @property
    def _state(self) -> State:
        return State.CONNECTING if self._protocol is None else self._protocol.state

    @property
    def _ws(self) -> ServerProtocol:
        """The protocol, once the request came (every caller runs after that)."""
        assert self._protocol is not None
        return self._protocol

    def _parse(self, data: bytes, at: int = 0) -> None:
        """Hand ``data`` from ``at`` to the parser and act on its frames, up to ``FRAMES_PER_TURN`` of
        them: the rest waits for the next turn of the loop (reading paused), so that one connection's
        flood of tiny frames never holds the loop for more than a turn's frames. What the turn
        answers goes to the socket in one write."""
        corked = self._cork()
        try:
            self._parse_turn(data, at)
        finally:
            if corked:
                self._uncork()

    def _parse_turn(self, data: bytes, at: int) -> None:
        ws = self._ws
        was_open = ws.state is State.OPEN
        self._parsing = True
        self._between_frames = False  # known again at the end
        self._unparsed = b""
        frames = 0
        size = len(data)
        try:
            while at < size:
                end = _hand_end(data, at, FRAMES_PER_TURN - frames, ws.state is State.CONNECTING)
                ws.receive_data(data if at == 0 and end == size else data[at:end])
                at = end
                frames += self._events()
                if self._phase is not Phase.HALF_OPEN and self._phase is not Phase.OPEN:
                    break  # answered by HTTP, or flooding: what follows is not parsed
                if ws.state not in _READING:
                    break  # closing: the parser only discards
                if (frames >= FRAMES_PER_TURN or self._waiting_full) and at < size:
                    self._unparsed, self._unparsed_at = data, at
                    break
        finally:
            self._parsing = False
        if not frames and was_open:
            self._meter()  # a read that made no frame: a token, as a frame (see the module's docstring)
        self._between_frames = (
            ws.state is State.OPEN
            and not self._unparsed
            and not self._fragments
            and _parser_between_frames(ws)
        )
        if self._phase is Phase.HTTP:
            return  # the HTTP routes answer it; nothing the protocol made is sent
        if self._phase is Phase.HALF_OPEN and isinstance(ws.handshake_exc, InvalidMessage):
            # not an HTTP request: websockets only hangs up (its FIN waits in data_to_send)
            self._advance(Phase.ANSWERED)
            response = _bad_request()
            response.headers["Server"] = self._server.server_header
            self._write(response.serialize())
        self._read_done(ws)

    def _read_done(self, ws: ServerProtocol) -> None:
        """What every read ends with, whole frame or parsed: what websockets queued (a pong, a close,
        a handshake's response; the frames of a reply are written as they are made) goes out, then
        reading is paused or resumed if it must."""
        if ws.writes or ws.state is not _OPEN:
            self._flush()
        if self._paused or self._unparsed or self._waiting_full:  # else reading, as it should be
            self._update_reading()

    def _events(self) -> int:
        """Act on what the parser made of the data handed to it; the number of frames."""
        events = self._ws.events_received()
        if events:
            self.last_frame_at = time.monotonic()
        for event in events:
            if isinstance(event, Frame):
                self._frame(event.opcode, event.fin, cast(bytes, event.data))  # parsed frames hold bytes
            elif isinstance(event, Request):
                self._handshake(event)
                if self._phase is not Phase.OPEN:
                    break  # answered by HTTP instead: nothing after its request is acted on
        return len(events)

    def _update_reading(self) -> None:
        """Pause or resume reading as it must be (a flooder's or a close's for good is theirs):
        paused while too many messages wait to be served or part of a read waits to be parsed, whose
        parse goes on in the next turn of the loop unless too many messages wait (``served`` resumes
        it then)."""
        if self._parsing or not (self._paused or self._unparsed or self._waiting_full):
            return  # done at the end of the parse; or reading, with nothing to change
        if not self.is_open or self._phase is _FLOODED:
            self._unparsed = b""
            return
        self._pause_reading(self._waiting_full or bool(self._unparsed))
        if self._unparsed and not self._waiting_full and self._parse_later is None:
            self._parse_later = asyncio.get_running_loop().call_soon(self._parse_rest)

    def _pause_reading(self, paused: bool) -> None:
        """The one writer of ``_paused``: the transport told only when it changes."""
        if paused is not self._paused:
            self._paused = paused
            if paused:
                self.transport.pause_reading()
            else:
                self.transport.resume_reading()

    def _parse_rest(self) -> None:
        self._parse_later = None
        if self._unparsed and self.is_open and not self._waiting_full:
            self._parse(self._unparsed, self._unparsed_at)

    def eof_received(self) -> bool | None:
        if self._phase is Phase.HTTP:
            self._advance(Phase.HTTP_HALF_CLOSED)
            return True  # its response is still to come
        if self._protocol is not None:  # else it hung up before its request, or was refused
            self._protocol.receive_eof()
            self._flush()
        return None  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        evicted = self._phase is Phase.EVICTED  # its place was given back by the gate
        self._advance(Phase.CLOSED)
        for timer in (self._timer, self._abort_timer, self._parse_later):
            if timer is not None:
                timer.cancel()
        self._waiting.clear()
        self._outgoing.clear()
        self._unparsed = b""
        self._drop_fragments()
        if self._http_task is not None:
            self._http_task.cancel()
        if self._admission is Admission.ADMITTED and not evicted:
            self._server.gate.release(self.client_address, self)
        elif self._admission is Admission.LINGERING:
            self._server.gate.stop_lingering()
        try:
            if self.channel is not None:
                channel, self.channel = self.channel, None
                channel.closed()
        finally:
            self._server.forget(self)
            if self._protocol is not None:
                _break_cycles(self._protocol)

    # Sending

    def send(self, message: bytes | str) -> None:
        """Send one message (binary for bytes, text for str), unless the connection is closing."""
        self.write_frame(wire_frame(message))

    def write_frame(self, frame: bytes) -> None:
        """Write a frame made by ``wire_frame``, unless the connection is closing."""
        protocol = self._protocol
        if protocol is not None and protocol.state is _OPEN and not self.transport.is_closing():
            self._write(frame)

    def _write(self, data: bytes) -> None:
        """The one place frames are written (held while corked): a peer that lets ``max_write_buffer``
        of them pile up (replies, pushes, or the pongs of its own pings) does not read; it is dropped,
        so that it can neither hold memory nor slow anyone down."""
        if self._corked:
            self._outgoing.append(data)
            return
        transport = self.transport
        transport.write(data)
        if transport.get_write_buffer_size() > self._server.max_write_buffer:
            self._server.log.warning("dropping a connection that does not read", self.client_address)
            self._server.dropped()
            transport.abort()

    def _cork(self) -> bool:
        """Hold what is written until ``_uncork``, so that what one callback answers (a turn's replies
        and pongs, the messages served after a slow one) goes to the socket in one write, not a system
        call each: under a flood of tiny frames those were most of the loop's work. False when held
        already (the caller that corked uncorks)."""
        if self._corked:
            return False
        self._corked = True
        return True

    def _uncork(self) -> None:
        """Write what was held, in order, at once (before a FIN or a close: they follow it)."""
        self._corked = False
        outgoing = self._outgoing
        if outgoing:
            data = outgoing[0] if len(outgoing) == 1 else b"".join(outgoing)
            outgoing.clear()
            if not self.transport.is_closing():
                self._write(data)

    def write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size()

    def vouch(self) -> None:
        """A valid request came (its channel decoded one). Until then a frame its own bucket refuses
        closes it 1008 at once, not after a bucketful of refusals: no request of a client is waiting
        to be refused, only a flood (the tiny-frames attack, each reconnect from a new address, would
        be answered a bucketful of errors more per connection)."""
        self._vouched = True

    def penalize(self) -> None:
        """Closed for flooding: its address may not reconnect at once."""
        self._server.gate.penalize(self.client_address)

    def abort(self) -> None:
        """Drop the socket now (a client that does not read)."""
        self.transport.abort()

    def evict(self) -> None:
        """Dropped by the gate while still in its handshake, to make room for a newer connection: its
        place is given back already."""
        self._advance(Phase.EVICTED)
        self.transport.abort()

    def close(self, code: int, reason: str, *, read_more: bool = True) -> None:
        """Send the close frame after what was already written, then our FIN; drop the socket
        ``CLOSE_LINGER`` seconds later whatever the peer does. A connection not open yet is closed.

        With ``read_more`` False nothing more is read (a flooder): its frames are not even parsed.
        """
        if self._state is State.CONNECTING:
            self._abort_later(CLOSE_LINGER)  # close() waits for unsent data: bounded
            self._uncork()
            self.transport.close()
            return
        if self._state is not State.OPEN:
            return
        self._waiting.clear()
        self._unparsed = b""
        self._drop_fragments()
        self._ws.fail(code, reason.encode()[:120].decode(errors="ignore"))
        if not read_more:
            self._pause_reading(True)
        self._flush()

    @property
    def waiting(self) -> int:
        """Messages received and not served yet (reading pauses past ``MAX_WAITING``)."""
        return len(self._waiting)

    @property
    def is_open(self) -> bool:
        return self._state is State.OPEN and not self.transport.is_closing()

    # Serving messages, one at a time

    def served(self) -> None:
        """The channel is done with its message: serve the next one."""
        self._serving = False
        if self._waiting or self._waiting_full or self._phase is _FLOODED:  # else nothing to do
            self._serve_waiting()

    def _message(self, data: bytes, opcode: Opcode, within_rate: bool) -> None:
        """A whole message (of one frame or of fragments), unless the connection is no longer open:
        text decoded, then handed to the channel at once when nothing waits or is being served (the
        common case: no queue, no cork), else queued behind the others."""
        protocol = self._protocol
        if protocol is None or protocol.state is not _OPEN:
            return
        message: bytes | str = data
        if opcode is _TEXT:
            try:
                message = data.decode()
            except UnicodeDecodeError as exc:
                protocol.fail(CloseCode.INVALID_DATA, f"invalid UTF-8 at position {exc.start}")
                return
        channel = self.channel
        if (
            self._waiting
            or self._serving
            or self._dispatching
            or channel is None
            or self.transport.is_closing()
        ):
            self._waiting.append((message, within_rate))
            if self._dispatching:
                self._count_waiting()  # the loop under way serves it in turn
            else:
                self._serve_waiting()
            return
        # (its served() may come within serve(): nothing waits behind it, so there is no loop to
        # return to, and served() finds nothing more to do)
        self._serve_one(channel, message, within_rate)

    def _serve_waiting(self) -> None:
        """Serve what waits, in order, one message at a time: each until its ``served()``, which may
        come within ``serve`` (the loop goes on) or later (`served` calls this again). What the
        messages served in one go answer goes to the socket in one write."""
        if self._dispatching:
            return  # served() from within serve(): the loop below goes on
        self._dispatching = True
        corked = self._cork()
        waiting = self._waiting
        try:
            while waiting and not self._serving and self.channel is not None and self.is_open:
                self._serve_one(self.channel, *waiting.popleft())
        finally:
            self._dispatching = False
            if corked:
                self._uncork()
        self._count_waiting()
        self._close_if_flooded()

    def _serve_one(self, channel: Channel, message: bytes | str, within_rate: bool) -> None:
        """Hand one message to the channel (``served()`` ends it); a bug closes this connection
        instead of stalling it (or the loop)."""
        self._serving = True
        try:
            channel.serve(message, within_rate)
        except Exception:
            logger.exception("serving a message failed")
            self._serving = False
            self.close(CloseCode.INTERNAL_ERROR, "the server failed")

    def _count_waiting(self) -> None:
        """The one writer of ``_waiting_full``: set past ``MAX_WAITING`` messages waiting (reading
        pauses at the end of this read), cleared again at half that (reading resumes)."""
        count = len(self._waiting)
        if count > MAX_WAITING:
            self._waiting_full = True
        elif self._waiting_full and count <= MAX_WAITING // 2:
            self._waiting_full = False
            self._update_reading()

    # Incoming frames

    def _meter(self) -> Metered | None:
        """Meter one frame (every frame takes a token, whatever its kind): SERVE, REFUSE (a message it
        ends is answered rate_limited), or None when it is not to be acted on (flooding: closing)."""
        if self._phase is _FLOODED:
            return None  # parsed with the frame that flooded: not acted on
        metered = self._bucket.take()
        if metered is _REFUSE and not self._vouched:
            metered = Metered.CLOSE  # a bucketful of its own and no valid request: a flood
        shared = self._address_bucket
        if metered is _SERVE and shared is not None and shared.crowded:
            # (closed only after a bucketful of these refusals: a newcomer's hello may find its
            # address's budget in debt)
            metered = shared.take()
        if metered is _FLOOD:
            self._flooding()
            return None
        return metered

    def _frame(self, opcode: Opcode, fin: bool, data: bytes) -> None:
        """Every frame, the parser's or a whole one in a read (`_whole_frame`): metered, then acted
        on: a message whole, a fragment held (within its bounds), a pong checked against the
        keepalive's ping. (Pings are answered and closes handled by websockets' parser.)"""
        metered = self._meter()
        if metered is None:
            return
        if opcode is _BINARY or opcode is _TEXT:
            if fin:
                self._message(data, opcode, metered is _SERVE)
            else:
                self._fragment_opcode = opcode
                self._fragment_timer = asyncio.get_running_loop().call_later(
                    MESSAGE_TIMEOUT, self._fragments_timed_out
                )
                self._hold_fragment(data)
        elif opcode is _CONT:
            if not self._hold_fragment(data) or not fin:
                return
            whole = b"".join(self._fragments)
            self._drop_fragments()
            self._message(whole, self._fragment_opcode, metered is _SERVE)
        elif opcode is _PONG and data == self._ping_unanswered:
            self._ping_unanswered = None  # an unsolicited pong does not prove the peer reads
        elif opcode is _CLOSE:
            self._waiting.clear()  # the peer said goodbye: what it sent before gets no answer

    def _flooding(self) -> None:
        """It went on sending for a whole bucketful of frames while refused (or was refused one before
        any valid request, `vouch`): nothing more is read or parsed, the messages already waiting
        are answered, then it is closed 1008; its address may not reconnect at once."""
        self._advance(Phase.FLOODED)
        self._server.flooded()
        self.penalize()
        self._unparsed = b""
        self._pause_reading(True)
        self._close_if_flooded()

    def _close_if_flooded(self) -> None:
        if self._phase is _FLOODED and not self._serving and not self._waiting:
            reason = "flooding after rate_limited" if self._vouched else "flooding before any valid request"
            self.close(CloseCode.POLICY_VIOLATION, reason, read_more=False)

    def _hold_fragment(self, data: bytes) -> bool:
        """Keep a fragment of an unfinished message, within this connection's bound (``max_message``:
        the message would be refused as too large anyway) and everyone's (``MAX_PARTIAL_BYTES``);
        False, and the connection closing, past either."""
        server = self._server
        if self._fragment_bytes + len(data) > server.max_message:
            self._ws.fail(CloseCode.MESSAGE_TOO_BIG, f"message over {server.max_message} bytes")
            self._drop_fragments()
            return False
        if server.partial_bytes + len(data) > MAX_PARTIAL_BYTES:
            server.log.warning("closing a connection: unfinished messages hold too much", self.client_address)
            self._ws.fail(CloseCode.TRY_AGAIN_LATER, "the server holds too many unfinished messages")
            self._drop_fragments()
            return False
        self._fragments.append(data)
        self._fragment_bytes += len(data)
        server.partial_bytes += len(data)
        return True

    def _drop_fragments(self) -> None:
        self._server.partial_bytes -= self._fragment_bytes
        self._fragment_bytes = 0
        self._fragments = []
        if self._fragment_timer is not None:
            self._fragment_timer.cancel()
            self._fragment_timer = None

    def _fragments_timed_out(self) -> None:
        self._fragment_timer = None
        if self._state is State.OPEN and self._fragments:
            self.close(CloseCode.POLICY_VIOLATION, f"a message unfinished after {MESSAGE_TIMEOUT:g} s")

    # The opening handshake and plain HTTP

    def _open_timed_out(self) -> None:
        # the open timer runs until the request comes (_handshake cancels it): half-open, or answered 400
        if self._state is State.CONNECTING:
            self.transport.abort()

    def _handshake(self, request: Request) -> None:
        if self._timer is not None:
            self._timer.cancel()  # the open timeout: the request came
        self._server.gate.opened(self)
        path = request.path.partition("?")[0]
        if path != "/ws":
            self._advance(Phase.HTTP)
            if self._server.routes.is_answered_from_memory(path):
                self._server.gate.answered_from_memory(self._peer)
            self._http_task = asyncio.get_running_loop().create_task(self._serve_http(request))
            return
        if self._ws.eof_sent:
            self._advance(Phase.ANSWERED)
            return  # what came with the request was no WebSocket frame: hung up already
        response = self._refusal(request) or self._ws.accept(request)
        response.headers["Server"] = self._server.server_header
        self._ws.send_response(response)
        if response.status_code != http.HTTPStatus.SWITCHING_PROTOCOLS:
            self._advance(Phase.ANSWERED)
            self._abort_later(CLOSE_LINGER)
            return
        self._advance(Phase.OPEN)
        if self._ws.subprotocol is not None:
            self.subprotocol = protocol.Subprotocol(self._ws.subprotocol)
        self._timer = asyncio.get_running_loop().call_later(PING_INTERVAL, self._keepalive)
        self._address_bucket = self._server.gate.frame_bucket(self.client_address)
        self.channel = self._server.open_channel(self)

    def _refusal(self, request: Request) -> Response | None:
        if not self._server.accepting:
            return self._ws.reject(http.HTTPStatus.SERVICE_UNAVAILABLE, "Server is shutting down.\n")
        self.client_address, refused = self._server.gate.handshake(
            self._peer, request.headers.get("X-Forwarded-For")
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
            response = self._ws.reject(http.HTTPStatus.INTERNAL_SERVER_ERROR, "the server failed\n")
        self._http_task = None
        if self.transport.is_closing():
            return
        response.headers["Server"] = self._server.server_header
        if "Connection" not in response.headers:  # one request per connection (RFC 9112 9.6)
            response.headers["Connection"] = "close"
        self.transport.write(response.serialize())
        if self._phase is Phase.HTTP_HALF_CLOSED:
            self._abort_later(CLOSE_LINGER)  # close() waits for a flush the peer may never read
            self.transport.close()
            return
        self._write_eof()
        self._abort_later(CLOSE_LINGER)

    def _answer_refused(self) -> None:
        """The 503 answers the request, then our FIN follows it; the rest of what the client sends
        is dropped. Answering before the request came confuses some clients, and closing with the
        request unread would send a reset that can destroy the 503."""
        if self.transport.is_closing():
            return
        self._advance(Phase.ANSWERED)
        self.transport.write(_TOO_MANY_BYTES)
        self._write_eof()

    # Writing, keepalive, timers

    def _flush(self) -> None:
        if self.transport.is_closing() or self._protocol is None:
            return
        writes = self._protocol.data_to_send()
        if not writes and self._protocol.state is _OPEN:
            return  # nothing to send (an action's frames are written as they are made)
        for data in writes:
            if self.transport.is_closing():
                return  # dropped by _write: it did not read
            if data:
                self._write(data)
            else:
                self._write_eof()  # our FIN after the close frame (or the HTTP response)
        if self._protocol.state is State.CLOSED:
            self._uncork()
            self.transport.close()
        elif self._protocol.close_expected():
            self._abort_later(CLOSE_LINGER)

    def _keepalive(self) -> None:
        """A ping every ``PING_INTERVAL``; its pong must come within ``PING_TIMEOUT``."""
        if self._state is not State.OPEN:
            return
        self._ping_unanswered = os.urandom(4)
        self._ws.send_ping(self._ping_unanswered)
        self._flush()
        self._timer = asyncio.get_running_loop().call_later(PING_TIMEOUT, self._check_pong)

    def _check_pong(self) -> None:
        if self._state is not State.OPEN:
            return
        if self._ping_unanswered is not None:
            self._ws.fail(CloseCode.INTERNAL_ERROR, "keepalive ping timeout")
            self._flush()
            return
        # a ping every PING_INTERVAL (from one ping to the next, as websockets does it)
        self._timer = asyncio.get_running_loop().call_later(
            max(0.0, PING_INTERVAL - PING_TIMEOUT), self._keepalive
        )

    def _write_eof(self) -> None:
        self._uncork()
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
