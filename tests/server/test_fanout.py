"""Fan-out (server/edge/connections.py ``Fanout``) and the server's framing (``wire_frame``): one message
to many clients is rendered once, encoded once per subprotocol and framed once; each frame is exactly
what websockets itself would write; a connection that is closing gets nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.protocol import State

import protocol
from server.edge.connections import Fanout
from server.edge.transport import wire_frame

SIZES = [0, 1, 125, 126, 127, 1000, 65535, 65536, 70000]


@pytest.mark.parametrize("size", SIZES)
def test_a_binary_frame_is_websockets_own(size: int) -> None:
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    assert wire_frame(payload) == Frame(Opcode.BINARY, payload).serialize(mask=False)


@pytest.mark.parametrize("size", SIZES)
def test_a_text_frame_is_websockets_own(size: int) -> None:
    text = ("é" * size)[:size]  # two bytes a character: the length is the encoding's
    assert wire_frame(text) == Frame(Opcode.TEXT, text.encode()).serialize(mask=False)


@pytest.mark.parametrize("size", SIZES)
def test_a_client_parses_the_frame_back(size: int) -> None:
    """What a websockets client reads is the message sent, whole, in one frame."""
    payload = b"x" * size
    client = ClientProtocol("ws://example/", state=State.OPEN, max_size=None)  # type: ignore[arg-type]
    client.receive_data(wire_frame(payload))
    (frame,) = client.events_received()
    assert isinstance(frame, Frame)
    assert (frame.opcode, frame.fin, frame.data) == (Opcode.BINARY, True, payload)


class _Connection:
    def __init__(self, closing: bool = False) -> None:
        self.frames: list[bytes] = []
        self.closing = closing

    def write_frame(self, frame: bytes) -> None:
        if not self.closing:
            self.frames.append(frame)


class _Client:
    def __init__(self, subprotocol: protocol.Subprotocol, closing: bool = False) -> None:
        self.subprotocol = subprotocol
        self.transport = _Connection(closing)
        self.last_seen = 0.0

    def touch(self, now: float) -> None:
        self.last_seen = now


class _Counted:
    """An ``ok`` that counts its renderings."""

    rendered = 0

    def __init__(self, request_id: int) -> None:
        self.request_id = request_id

    def to_wire(self) -> dict[str, Any]:
        type(self).rendered += 1
        return protocol.Ok(request_id=self.request_id).to_wire()


def test_one_message_to_clients_of_both_subprotocols() -> None:
    msgpack_clients = [_Client(protocol.Subprotocol.MSGPACK) for _ in range(3)]
    json_clients = [_Client(protocol.Subprotocol.JSON) for _ in range(2)]
    message = _Counted(request_id=7)
    _Counted.rendered = 0

    Fanout()([*msgpack_clients, *json_clients], message)  # type: ignore[arg-type]

    assert _Counted.rendered == 1  # rendered once for all
    wire = protocol.Ok(request_id=7).to_wire()
    for client in msgpack_clients:
        assert client.transport.frames == [wire_frame(protocol.encode(wire, protocol.Subprotocol.MSGPACK))]
    for client in json_clients:
        assert client.transport.frames == [wire_frame(protocol.encode(wire, protocol.Subprotocol.JSON))]
    framed = {id(client.transport.frames[0]) for client in msgpack_clients}
    assert len(framed) == 1  # framed once: the same bytes object for every msgpack client


def test_clients_sent_to_are_not_idle() -> None:
    clients = [_Client(protocol.Subprotocol.MSGPACK), _Client(protocol.Subprotocol.JSON)]
    Fanout()(clients, protocol.Ok(request_id=1))
    assert all(client.last_seen > 0 for client in clients)


def test_a_closing_connection_gets_nothing_and_the_others_get_theirs() -> None:
    closing = _Client(protocol.Subprotocol.MSGPACK, closing=True)
    other = _Client(protocol.Subprotocol.MSGPACK)
    Fanout()([closing, other], protocol.Ok(request_id=1))
    assert closing.transport.frames == []
    assert len(other.transport.frames) == 1


def test_nobody_to_send_to_renders_nothing() -> None:
    _Counted.rendered = 0
    Fanout()([], _Counted(request_id=1))  # type: ignore[arg-type]
    assert _Counted.rendered == 0


def test_a_reply_is_the_frame_the_fanout_sends_to_each() -> None:
    """``reply`` to one client writes what sending to many writes to each, per subprotocol, and the
    client is not idle."""
    for subprotocol in protocol.Subprotocol:
        alone, among = _Client(subprotocol), _Client(subprotocol)
        Fanout().reply(alone, protocol.Ok(request_id=3))
        Fanout()([among, _Client(subprotocol)], protocol.Ok(request_id=3))
        assert alone.transport.frames == among.transport.frames
        assert len(alone.transport.frames) == 1
        assert alone.last_seen > 0
