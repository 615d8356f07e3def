"""Codecs and subprotocol negotiation: frame kinds, sizes, the one error type, encoding."""

from __future__ import annotations

import json

import msgpack  # type: ignore[import-untyped]
import pytest

import protocol
from protocol import CloseCode, ErrorCode, ProtocolError, Subprotocol
from protocol import codec as codec_module

MOVE = {"type": "move", "id": 7, "game": "g_1", "from": "t3", "to": "f"}


def test_select_subprotocol_defaults_to_msgpack_when_none_offered() -> None:
    assert protocol.select_subprotocol([]) is Subprotocol.MSGPACK


def test_select_subprotocol_takes_the_first_known_offer_in_client_order() -> None:
    offered = ["chat", "eightoff.v1.json", "eightoff.v1.msgpack"]
    assert protocol.select_subprotocol(offered) is Subprotocol.JSON
    assert protocol.select_subprotocol(["eightoff.v1.msgpack", "eightoff.v1.json"]) is Subprotocol.MSGPACK


def test_select_subprotocol_refuses_only_unknown_offers() -> None:
    assert protocol.select_subprotocol(["eightoff.v2.msgpack", "EIGHTOFF.V1.JSON"]) is None


def test_subprotocol_frame_kinds() -> None:
    assert Subprotocol.MSGPACK.binary and not Subprotocol.JSON.binary
    assert Subprotocol("eightoff.v1.msgpack") is Subprotocol.MSGPACK


@pytest.mark.parametrize("frame", [bytearray(msgpack.packb(MOVE)), memoryview(msgpack.packb(MOVE))])
def test_msgpack_accepts_any_bytes_like_frame(frame: bytearray | memoryview) -> None:
    assert protocol.decode(frame, Subprotocol.MSGPACK) == protocol.decode(  # type: ignore[arg-type]
        msgpack.packb(MOVE), Subprotocol.MSGPACK
    )


@pytest.mark.parametrize("frame", [None, 7, 1.5, ["a"], {"type": "hello"}, object()])
@pytest.mark.parametrize("subprotocol", list(Subprotocol), ids=lambda s: s.name)
def test_a_frame_of_neither_kind_closes_with_1003(frame: object, subprotocol: Subprotocol) -> None:
    with pytest.raises(ProtocolError) as caught:
        protocol.decode(frame, subprotocol)  # type: ignore[arg-type]
    assert caught.value.close_code is CloseCode.UNSUPPORTED_DATA
    assert caught.value.code is ErrorCode.BAD_REQUEST


def test_max_size_counts_utf8_bytes_of_text_frames() -> None:
    name_frame = json.dumps({"type": "hello", "protocol": 1, "name": "é" * 30}, ensure_ascii=False)
    size = len(name_frame.encode())
    assert protocol.decode(name_frame, Subprotocol.JSON, max_size=size)
    with pytest.raises(ProtocolError) as caught:
        protocol.decode(name_frame, Subprotocol.JSON, max_size=size - 1)
    assert (caught.value.code, caught.value.close_code) == (ErrorCode.TOO_LARGE, CloseCode.MESSAGE_TOO_BIG)


def test_max_size_on_binary_frames() -> None:
    frame = msgpack.packb(MOVE)
    assert protocol.decode(frame, Subprotocol.MSGPACK, max_size=len(frame))
    with pytest.raises(ProtocolError) as caught:
        protocol.decode(frame, Subprotocol.MSGPACK, max_size=len(frame) - 1)
    assert caught.value.close_code is CloseCode.MESSAGE_TOO_BIG


def test_an_unexpected_failure_still_surfaces_as_protocol_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(message: object) -> object:
        raise KeyError("a bug")

    monkeypatch.setattr(codec_module, "parse_client_message", broken)
    with pytest.raises(ProtocolError) as caught:
        protocol.decode(msgpack.packb(MOVE), Subprotocol.MSGPACK)
    assert caught.value.code is ErrorCode.INTERNAL and caught.value.close_code is None
    assert isinstance(caught.value.__cause__, KeyError)


def test_encode_gives_the_frame_kind_of_each_subprotocol() -> None:
    message = protocol.Ok(request_id=3).to_wire()
    assert (
        protocol.encode(message, Subprotocol.MSGPACK)
        == msgpack.packb(message)
        == protocol.encode_msgpack(message)
    )
    assert (
        protocol.encode(message, Subprotocol.JSON) == '{"type":"ok","id":3}' == protocol.encode_json(message)
    )


def test_encode_json_keeps_non_ascii_text_and_refuses_nan() -> None:
    assert protocol.encode_json({"name": "Zoë 🂡"}) == '{"name":"Zoë 🂡"}'
    with pytest.raises(ValueError):
        protocol.encode_json({"x": float("nan")})


@pytest.mark.parametrize("subprotocol", list(Subprotocol), ids=lambda s: s.name)
def test_decode_server_message_round_trips_and_checks(subprotocol: Subprotocol) -> None:
    message = protocol.ErrorReply(
        code=ErrorCode.STALE, message="game g_1 is at v=3", request_id="req-1"
    ).to_wire()
    assert protocol.decode_server_message(protocol.encode(message, subprotocol), subprotocol) == message
    with pytest.raises(ProtocolError) as caught:
        protocol.decode_server_message(protocol.encode({"type": "ok", "extra": 1}, subprotocol), subprotocol)
    assert caught.value.code is ErrorCode.INTERNAL


def test_decode_value_returns_plain_values() -> None:
    assert protocol.decode_value(b"\x92\x01\xa1a", Subprotocol.MSGPACK) == [1, "a"]
    assert protocol.decode_value('[1,"a"]', Subprotocol.JSON) == [1, "a"]


def test_protocol_error_reply_and_repr() -> None:
    error = ProtocolError("stale", "game g_1 is at v=3", 5)
    assert protocol.ErrorReply.of(error).to_wire() == {
        "type": "error",
        "id": 5,
        "code": "stale",
        "message": "game g_1 is at v=3",
    }
    assert error.close_code is None and error.code is ErrorCode.STALE
    assert repr(error) == "ProtocolError('stale', 'game g_1 is at v=3', request_id=5, close_code=None)"
    assert ProtocolError("bad_request", "x", close_code=1003).close_code is CloseCode.UNSUPPORTED_DATA
    assert str(error) == "game g_1 is at v=3"
    with pytest.raises(ValueError):
        ProtocolError("nope", "unknown code")


def test_close_codes_are_the_documented_ones() -> None:
    assert {int(code) for code in CloseCode} == {1001, 1003, 1008, 1009, 1011}
