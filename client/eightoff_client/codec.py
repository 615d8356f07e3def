"""The two subprotocols of protocol v1 (section 1): the same maps as msgpack binary frames or JSON text
frames. Pure functions, so the encoding can be checked without a server."""

from __future__ import annotations

import json
from typing import Any, Literal

import msgpack  # type: ignore[import-untyped]

from eightoff_client.errors import ProtocolViolation

__all__ = ["SUBPROTOCOLS", "Encoding", "decode", "encode", "request"]

Encoding = Literal["msgpack", "json"]
SUBPROTOCOLS: dict[Encoding, str] = {"msgpack": "eightoff.v1.msgpack", "json": "eightoff.v1.json"}


def request(type_: str, **fields: object) -> dict[str, Any]:
    """A request map; fields given as None are left out, since the server refuses ``null`` (section 2)."""
    return {"type": type_, **{key: value for key, value in fields.items() if value is not None}}


def encode(encoding: Encoding, message: dict[str, Any]) -> bytes | str:
    if encoding == "json":
        return json.dumps(message, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    packed: bytes = msgpack.packb(message)
    return packed


def decode(encoding: Encoding, frame: bytes | str) -> dict[str, Any]:
    """One server message. Raises ProtocolViolation for the wrong frame kind or anything not a map with
    a string ``type``."""
    try:
        if encoding == "json":
            if not isinstance(frame, str):
                raise ProtocolViolation("a binary frame on the JSON subprotocol")
            message = json.loads(frame)
        else:
            if not isinstance(frame, bytes):
                raise ProtocolViolation("a text frame on the msgpack subprotocol")
            message = msgpack.unpackb(frame)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise ProtocolViolation(f"an undecodable frame: {exc}") from exc
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ProtocolViolation(f"not a message: {message!r:.80}")
    return message
