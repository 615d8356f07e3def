"""The transport's phases and whole-frame reads (server/edge/transport.py) without a server: a
``WebSocketServer`` over a stub gate and routes, connections on fake sockets. Each way a socket can go
walks the phases of ``server.edge.connection_state`` and gives back exactly what it held of the gate's;
the fast path's recognizer of whole frames takes only what websockets' parser makes the same frame of.
"""

from __future__ import annotations

import asyncio
import base64
import http
import itertools
import os
from collections.abc import Iterator

import pytest
from websockets.frames import Frame, Opcode
from websockets.http11 import Request, Response
from websockets.protocol import State
from websockets.server import ServerProtocol

from server.edge import transport
from server.edge.connection_state import Phase
from server.edge.transport import WebSocketConnection, WebSocketServer, http_response
from tests.support.sockets import FakeSocket

MAX_SIZE = 4096


class Gate:
    """A gate that admits (or refuses, ``refuse``) and records what is given back to it."""

    PRESSED_OPEN_TIMEOUT = 2.0

    def __init__(self, *, refuse: bool = False, linger: bool = True) -> None:
        self.refuse = refuse
        self.linger = linger
        self.released: list[str] = []
        self.lingering = 0

    def key_of(self, peer: str) -> str:
        return peer

    def accept(self, peer: str, waiting: object = None) -> str | None:
        return "full" if self.refuse else None

    def under_pressure(self) -> bool:
        return False

    def start_lingering(self) -> bool:
        if self.linger:
            self.lingering += 1
        return self.linger

    def stop_lingering(self) -> None:
        self.lingering -= 1

    def opened(self, waiting: object) -> None:
        pass

    def handshake(self, peer: str, forwarded_for: str | None) -> tuple[str, str | None]:
        return peer, None

    def frame_bucket(self, address: str) -> None:
        return None

    def answered_from_memory(self, peer: str) -> None:
        pass

    def penalize(self, address: str) -> None:
        pass

    def release(self, address: str, waiting: object = None) -> None:
        self.released.append(address)


class Routes:
    def check_handshake(self, request: Request) -> Response | None:
        return None

    async def respond(self, request: Request) -> Response:
        return http_response(http.HTTPStatus.OK, b"ok\n", "text/plain")

    def is_answered_from_memory(self, path: str) -> bool:
        return False


class Channel:
    def __init__(self, connection: WebSocketConnection) -> None:
        self.connection = connection
        self.messages: list[bytes | str] = []

    def serve(self, message: bytes | str, within_rate: bool) -> None:
        self.messages.append(message)
        self.connection.served()

    def closed(self) -> None:
        pass


def _server(gate: Gate, *, frame_burst: int = 1000) -> WebSocketServer:
    return WebSocketServer(
        Channel,
        Routes(),
        gate,  # type: ignore[arg-type]
        max_size=MAX_SIZE,
        max_message=MAX_SIZE,
        frame_rate=1.0,
        frame_burst=frame_burst,
        server_header="test",
        max_write_buffer=1 << 20,
    )


def _request(path: str = "/ws") -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    return (
        f"GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    ).encode()


def _phase(connection: WebSocketConnection) -> Phase:
    """Its phase now (a function, not the property: mypy would narrow it from one assert to the next)."""
    return connection.phase


def _connect(server: WebSocketServer) -> tuple[WebSocketConnection, FakeSocket]:
    connection, sock = WebSocketConnection(server), FakeSocket()
    assert _phase(connection) is Phase.NEW
    connection.connection_made(sock)
    return connection, sock


async def test_an_admitted_connection_walks_half_open_open_closed() -> None:
    gate = Gate()
    connection, sock = _connect(_server(gate))
    assert _phase(connection) is Phase.HALF_OPEN
    connection.data_received(_request()[:20])
    assert _phase(connection) is Phase.HALF_OPEN
    connection.data_received(_request()[20:])
    assert _phase(connection) is Phase.OPEN
    assert sock.written[0].startswith(b"HTTP/1.1 101 ")
    connection.connection_lost(None)
    assert _phase(connection) is Phase.CLOSED
    assert gate.released == ["127.0.0.9"]


async def test_a_connection_that_floods_is_flooded_then_closed() -> None:
    """A frame its bucket refuses before any valid request: flooded, closed 1008, nothing more acted on."""
    gate = Gate()
    connection, sock = _connect(_server(gate, frame_burst=1))
    connection.data_received(_request())
    assert connection.channel is not None
    frame = Frame(Opcode.BINARY, b"x").serialize(mask=True)
    connection.data_received(frame)
    connection.data_received(frame)
    assert _phase(connection) is Phase.FLOODED
    assert connection.channel.messages == [b"x"]  # type: ignore[attr-defined]
    assert any(data.startswith(b"\x88") for data in sock.written)  # the close frame
    connection.connection_lost(None)
    assert _phase(connection) is Phase.CLOSED


async def test_a_request_for_another_path_is_http_until_it_is_answered() -> None:
    gate = Gate()
    connection, sock = _connect(_server(gate))
    connection.data_received(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert _phase(connection) is Phase.HTTP
    assert connection.eof_received() is True  # keep our half open: the response is still to come
    assert _phase(connection) is Phase.HTTP_HALF_CLOSED
    await asyncio.sleep(0)  # the routes answer
    assert sock.written[-1].startswith(b"HTTP/1.1 200 ")
    assert sock.closing
    connection.connection_lost(None)
    assert gate.released == ["127.0.0.9"]


async def test_what_is_no_http_request_is_answered_400() -> None:
    connection, sock = _connect(_server(Gate()))
    connection.data_received(b"\x16\x03\x01 not http\r\n")
    assert _phase(connection) is Phase.ANSWERED
    assert next(data for data in sock.written if data).startswith(b"HTTP/1.1 400 ")
    written = len(sock.written)
    connection.data_received(b"more")  # not read: no second answer
    assert len(sock.written) == written
    connection.connection_lost(None)


async def test_a_refused_handshake_is_answered() -> None:
    server = _server(Gate())
    server.accepting = False
    connection, sock = _connect(server)
    connection.data_received(_request())
    assert _phase(connection) is Phase.ANSWERED
    assert sock.written[0].startswith(b"HTTP/1.1 503 ")
    connection.connection_lost(None)


@pytest.mark.parametrize("linger", [True, False], ids=["lingering", "turned away"])
async def test_a_socket_refused_at_accept_is_answered_503_and_holds_no_place(linger: bool) -> None:
    gate = Gate(refuse=True, linger=linger)
    connection, sock = _connect(_server(gate))
    if linger:
        assert _phase(connection) is Phase.REFUSED and not sock.written  # the 503 waits for the request
        connection.data_received(_request())
    assert _phase(connection) is Phase.ANSWERED
    assert sock.written[0].startswith(b"HTTP/1.1 503 ")
    connection.data_received(_request())  # dropped
    assert len(sock.written) == 1
    assert gate.lingering == (1 if linger else 0)
    connection.connection_lost(None)
    assert gate.released == [] and gate.lingering == 0


async def test_an_evicted_connection_is_not_given_back_twice() -> None:
    gate = Gate()
    connection, sock = _connect(_server(gate))
    connection.evict()
    assert _phase(connection) is Phase.EVICTED and sock.closing
    connection.connection_lost(None)
    assert _phase(connection) is Phase.CLOSED
    assert gate.released == []  # the gate gave its place back itself


# The fast path's recognizer, against websockets' parser

LENGTHS = {
    7: [0, 1, 125],
    16: [0, 125, 126, 127, MAX_SIZE - 1, MAX_SIZE, MAX_SIZE + 1, 65535],
    64: [0, 126, MAX_SIZE + 1],
}


def _frame(fin: int, rsv: int, opcode: int, masked: bool, form: int, length: int, room: int) -> bytes:
    """A client frame's bytes, its payload cut at ``room`` bytes (a length of 2**48 is not built)."""
    payload = (bytes(range(256)) * (1 + min(length, room) // 256))[: min(length, room)]
    mask_bit = 0x80 if masked else 0
    head = bytes([fin << 7 | rsv << 4 | opcode])
    if form == 7:
        head += bytes([mask_bit | length])
    elif form == 16:
        head += bytes([mask_bit | 126]) + length.to_bytes(2, "big")
    else:
        head += bytes([mask_bit | 127]) + length.to_bytes(8, "big")
    mask = b"\x11\x22\x33\x44" if masked else b""
    return (
        head
        + mask
        + (bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload)) if masked else payload)
    )


def _reads() -> Iterator[bytes]:
    """Reads of every shape that can matter to the recognizer, valid or not. Every frame shape (each
    opcode, FIN or not, with reserved bits or none, masked or not, a 7-, 16- or 64-bit length,
    minimal or not, about the 7-bit limit and about ``MAX_SIZE``), read whole, a byte short, a byte
    long or a mask's bytes long; and the frames a recognizer could mistake for whole ones (data
    opcodes, reserved bits or not, masked or not, high bits in a 64-bit length) read at every size
    from 2 bytes to past their end, so that no read a wrong size check would take is missed."""
    for fin, rsv, opcode, masked in itertools.product((1, 0), (0, 1, 2, 4, 7), range(16), (True, False)):
        for form, lengths in LENGTHS.items():
            for length in lengths:
                data = _frame(fin, rsv, opcode, masked, form, length, room=length)
                yield from (data[:-1], data, data + b"\x00", data + b"\x82\x80\x00\x00")
    near = {7: [0, 1, 5, 40], 16: [0, 4, 40, 126], 64: [0, 4, 1 << 48 | 4, 1 << 63]}
    for fin, rsv, opcode, masked in itertools.product((1, 0), (0, 4), (1, 2, 3), (True, False)):
        for form, lengths in near.items():
            for length in lengths:
                data = _frame(fin, rsv, opcode, masked, form, length, room=40) + b"\x82\x80" * 4
                yield from (data[:size] for size in range(2, len(data) + 1))


def _parsed(data: bytes) -> tuple[list[object], list[bytes], bool]:
    """What an open server protocol, between frames, makes of ``data``: its events, what it would
    write, and whether it is open and back between frames after it."""
    ws = ServerProtocol(state=State.OPEN, max_size=MAX_SIZE)
    ws.receive_data(data)
    events: list[object] = list(ws.events_received())
    return events, ws.data_to_send(), ws.state is State.OPEN and transport._parser_between_frames(ws)


def test_a_whole_frame_read_is_the_frame_the_parser_makes_of_it() -> None:
    """What the recognizer takes, the parser makes the same one frame of, writes nothing for (no
    refusal, no pong) and ends between frames after: the fast path changes nothing the parser would
    have. And every whole unfragmented binary or text frame within ``MAX_SIZE`` with a 7- or 16-bit
    length it takes: the fast path is not lost on a frame it should serve."""
    taken_count = 0
    for data in _reads():
        taken = transport._whole_data_frame(data, MAX_SIZE)
        events, writes, between = _parsed(data)
        one_data_frame = (
            len(events) == 1
            and isinstance(events[0], Frame)
            and events[0].opcode in (Opcode.BINARY, Opcode.TEXT)
            and events[0].fin
            and writes == []
            and between
        )
        if taken is not None:
            opcode, fin, payload = taken
            assert one_data_frame and events == [Frame(opcode, payload, fin)], data[:16]
            taken_count += 1
        elif one_data_frame:
            assert data[1] & 0x7F == 127, data[:16]  # a 64-bit length: left to the parser
    assert taken_count > 2 * (3 + 6)  # at least: binary or text, masked, whole, each length in bounds
