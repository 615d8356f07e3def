"""Fuzzing decode: whatever the frame, it returns a valid request or raises ProtocolError.

Four sources of frames: arbitrary bytes and text; valid frames with random byte or character
mutations (a seeded loop: fast, so tens of thousands of cases); and maps built from the protocol's
own field names with values of every msgpack kind (hypothesis: it reaches past the type checks).
"""

from __future__ import annotations

import json
import random
from typing import Any

import msgpack  # type: ignore[import-untyped]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import protocol
from protocol import CloseCode, ErrorCode, ProtocolError, Subprotocol
from tests.support.wire import VECTORS, frame_of

_SETTINGS = settings(max_examples=2500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_REQUEST_TYPES = tuple(protocol.CLIENT_MESSAGE_TYPES.values())


def check_decode(frame: Any, subprotocol: Subprotocol) -> None:
    """The property: a valid, round-tripping request, or a ProtocolError with a sendable reply."""
    try:
        request = protocol.decode(frame, subprotocol)
    except ProtocolError as exc:
        assert exc.code is not ErrorCode.INTERNAL, f"decode hit a bug: {exc.__cause__!r}"
        assert exc.close_code in (None, CloseCode.UNSUPPORTED_DATA)
        if exc.close_code is not None:
            assert exc.request_id is None
        reply = protocol.ErrorReply.of(exc).to_wire()
        protocol.validate_server_message(reply)
        protocol.encode(reply, subprotocol)
        return
    assert isinstance(request, _REQUEST_TYPES)
    assert protocol.decode(frame_of(request.to_wire(), subprotocol), subprotocol) == request
    protocol.encode(
        protocol.Ok(request_id=request.request_id).to_wire(), subprotocol
    )  # an echoed id always encodes


@_SETTINGS
@given(st.binary(max_size=300))
def test_arbitrary_bytes_on_msgpack(frame: bytes) -> None:
    check_decode(frame, Subprotocol.MSGPACK)


@_SETTINGS
@given(st.text(max_size=300))
def test_arbitrary_text_on_json(frame: str) -> None:
    check_decode(frame, Subprotocol.JSON)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=50), st.text(max_size=50)), st.sampled_from(list(Subprotocol)))
def test_frames_of_either_kind_on_either_subprotocol(frame: bytes | str, subprotocol: Subprotocol) -> None:
    check_decode(frame, subprotocol)


def _valid_frames(subprotocol: Subprotocol) -> list[Any]:
    return [frame_of(case["message"], subprotocol) for case in VECTORS["valid"]]


def _mutate_bytes(frame: bytes, rng: random.Random) -> bytes:
    data = bytearray(frame)
    for _ in range(rng.randint(1, 4)):
        choice = rng.random()
        position = rng.randrange(len(data) + 1)
        if choice < 0.4 and data:
            data[min(position, len(data) - 1)] = rng.randrange(256)
        elif choice < 0.6:
            data.insert(position, rng.randrange(256))
        elif choice < 0.8 and data:
            del data[min(position, len(data) - 1)]
        else:
            del data[position:]
    return bytes(data)


_JSON_NOISE = [*'{}[]",:0123456789-.eEtrufalsn\\ \ud800\u00e9', '"type"', '"id"', "1e400", "NaN"]


def _mutate_text(frame: str, rng: random.Random) -> str:
    chars = list(frame)
    for _ in range(rng.randint(1, 4)):
        choice = rng.random()
        position = rng.randrange(len(chars) + 1)
        if choice < 0.4 and chars:
            chars[min(position, len(chars) - 1)] = rng.choice(_JSON_NOISE)
        elif choice < 0.7:
            chars.insert(position, rng.choice(_JSON_NOISE))
        elif choice < 0.9 and chars:
            del chars[min(position, len(chars) - 1)]
        else:
            del chars[position:]
    return "".join(chars)


def test_mutated_valid_msgpack_frames() -> None:
    rng = random.Random(20261130)
    frames = _valid_frames(Subprotocol.MSGPACK)
    for _ in range(20_000):
        check_decode(_mutate_bytes(rng.choice(frames), rng), Subprotocol.MSGPACK)


def test_mutated_valid_json_frames() -> None:
    rng = random.Random(20261201)
    frames = _valid_frames(Subprotocol.JSON)
    for _ in range(20_000):
        check_decode(_mutate_text(rng.choice(frames), rng), Subprotocol.JSON)


# --------------------------------------------------------------------------- structure-aware

_FIELD_NAMES = sorted(
    {"type", "id", "protocol", "token", "name", "code", "cells", "daily", "game", "from", "to", "n", "v"}
    | {"limit", "after", "board", "date", "period", "order", "around", "x"}
)
_GOOD_STRINGS = [
    *protocol.CLIENT_MESSAGE_TYPES,
    *(
        "t1",
        "t8",
        "c1",
        "c8",
        "fS",
        "fH",
        "f",
        "EO1-C8-AAAAAFA",
        "eo1-c2-aaaaafa",
        "g_1",
        "Ann",
        "2026-11-30",
    ),
    *("players", "deal", "variant", "daily", "week", "all", "moves", "wins", "score"),
]
_GOOD_INTS = [0, 1, 2, 4, 8, 13, 14, 100, 101, 2**53 - 1, 2**53, -1]
_json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.sampled_from(_GOOD_INTS),
    st.floats(allow_nan=False),
    st.sampled_from(_GOOD_STRINGS),
    st.text(max_size=70),
)
_msgpack_scalars = st.one_of(
    _json_scalars,
    st.floats(allow_nan=True),
    st.binary(max_size=10),
    st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=4)),
)


def _nested(scalars: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    def extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3))

    return st.recursive(scalars, extend, max_leaves=4)


@st.composite
def _messages(draw: st.DrawFn, values: st.SearchStrategy[Any], odd_keys: bool) -> dict[Any, Any]:
    """A map of a known type with a few protocol field names, mostly plausible values."""
    message: dict[Any, Any] = {"type": draw(st.sampled_from(list(protocol.CLIENT_MESSAGE_TYPES)))}
    for name in draw(st.lists(st.sampled_from(_FIELD_NAMES), max_size=6, unique=True)):
        message[name] = draw(st.one_of(st.sampled_from(_GOOD_STRINGS), st.sampled_from(_GOOD_INTS), values))
    if draw(st.booleans()):
        message["protocol"] = 1
    if odd_keys and draw(st.integers(0, 20)) == 0:
        message[draw(st.one_of(st.integers(-(2**63), 2**64 - 1), st.binary(max_size=3)))] = 1
    return message


_STRUCTURED = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_STRUCTURED
@given(_messages(_nested(_msgpack_scalars), odd_keys=True))
def test_structured_maps_on_msgpack(message: dict[Any, Any]) -> None:
    check_decode(msgpack.packb(message, use_bin_type=True), Subprotocol.MSGPACK)


@_STRUCTURED
@given(_messages(_nested(_json_scalars), odd_keys=False))
def test_structured_maps_on_json(message: dict[Any, Any]) -> None:
    check_decode(json.dumps(message, ensure_ascii=False), Subprotocol.JSON)


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if roll < 0.35:
        return rng.choice(_GOOD_STRINGS)
    if roll < 0.6:
        return rng.choice(_GOOD_INTS)
    if roll < 0.7:
        return rng.choice([None, True, False, 1.0, 2.5, -0.0, "", "x" * 65, "\u202e", "a b", b"t1"])
    if roll < 0.8:
        return msgpack.ExtType(rng.randrange(128), b"\x01")
    if roll < 0.9 and depth < 3:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    if depth < 3:
        return {rng.choice(_FIELD_NAMES): _random_value(rng, depth + 1) for _ in range(rng.randrange(3))}
    return rng.getrandbits(64) - 2**63


def test_many_random_maps_on_both_codecs() -> None:
    rng = random.Random(7)
    for _ in range(10_000):
        message: dict[Any, Any] = {"type": rng.choice(list(protocol.CLIENT_MESSAGE_TYPES))}
        for name in rng.sample(_FIELD_NAMES, rng.randrange(6)):
            message[name] = _random_value(rng)
        if rng.random() < 0.5:
            message["protocol"] = 1
        check_decode(msgpack.packb(message, use_bin_type=True), Subprotocol.MSGPACK)
        try:
            text = json.dumps(message)
        except TypeError:  # bytes or an extension value: msgpack only
            continue
        check_decode(text, Subprotocol.JSON)
