"""The two codecs of protocol v1 and subprotocol negotiation: frames in, plain values out, and back.

``eightoff.v1.msgpack`` travels in binary frames, ``eightoff.v1.json`` in text frames; both carry the
same maps. This module owns the frame → value step and its failures: a frame that is not a
well-formed document of its subprotocol (broken msgpack or JSON, invalid UTF-8, trailing bytes,
``NaN``, the wrong frame kind) is ``ProtocolError`` with close code 1003. A well-formed document
that is not a valid message (duplicate keys, non-string keys, nesting past the parser's depth, and
everything ``protocol.parse`` checks) is a ``bad_request`` reply and the connection stays open.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NoReturn, cast, overload

import msgpack  # type: ignore[import-untyped]

from protocol.checks import validate_server_message
from protocol.errors import CloseCode, ErrorCode, ProtocolError
from protocol.messages import ClientMessage
from protocol.parse import parse_client_message

__all__ = [
    "Subprotocol",
    "decode",
    "decode_server_message",
    "decode_value",
    "encode",
    "encode_json",
    "encode_msgpack",
    "select_subprotocol",
]


class Subprotocol(enum.Enum):
    """The WebSocket subprotocols of protocol v1; the value is the ``Sec-WebSocket-Protocol`` token."""

    MSGPACK = "eightoff.v1.msgpack"
    JSON = "eightoff.v1.json"

    @property
    def binary(self) -> bool:
        """True when messages travel in binary frames (msgpack), False for text frames (JSON)."""
        return self is Subprotocol.MSGPACK


_BY_TOKEN = {subprotocol.value: subprotocol for subprotocol in Subprotocol}


def select_subprotocol(offered: Sequence[str]) -> Subprotocol | None:
    """The subprotocol to speak with a client that offered ``offered`` (in its order of preference).

    Returns ``MSGPACK`` when the client offered none (send no ``Sec-WebSocket-Protocol`` then), the
    first offered one this server speaks otherwise, and None when it offered only unknown ones (refuse
    the handshake).
    """
    if not offered:
        return Subprotocol.MSGPACK
    for token in offered:
        found = _BY_TOKEN.get(token)
        if found is not None:
            return found
    return None


# --------------------------------------------------------------------------- frame → value


class _DuplicateKey(Exception):
    pass


class _BadKey(Exception):
    pass


def _pairs_to_dict(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    """Build a map, refusing duplicate keys: two parsers might disagree on which one wins."""
    try:
        result = dict(pairs)
    except TypeError:  # an array or map used as a key (msgpack allows it)
        raise _BadKey from None
    if len(result) != len(pairs):
        raise _DuplicateKey
    return result


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


_JSON_DECODER = json.JSONDecoder(object_pairs_hook=_pairs_to_dict, parse_constant=_refuse_constant)
_JSON_ENCODER = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), check_circular=False, allow_nan=False
)
#: One packer for every frame: ``msgpack.packb`` makes a new one per call, a third of an ack's packing.
#: ``pack`` holds the GIL throughout and starts afresh after a failure, so sharing it is safe.
_MSGPACK_PACKER = msgpack.Packer()


def _undecodable(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.BAD_REQUEST, message, None, CloseCode.UNSUPPORTED_DATA)


def _too_large(max_size: int) -> ProtocolError:
    return ProtocolError(ErrorCode.TOO_LARGE, f"frame over {max_size} bytes", None, CloseCode.MESSAGE_TOO_BIG)


def _utf8_length_over(text: str, limit: int) -> bool:
    if len(text) > limit:
        return True
    if len(text) * 4 <= limit or text.isascii():
        return False
    return len(text.encode("utf-8", "surrogatepass")) > limit


def decode_value(frame: object, subprotocol: Subprotocol, *, max_size: int | None = None) -> object:
    """The plain value (maps, arrays, strings, numbers …) a frame holds, not yet validated.

    Args:
        frame: ``bytes`` from a binary frame (msgpack), ``str`` from a text frame (JSON).
        max_size: refuse frames over this many bytes (None: the transport enforces the limit).

    Raises:
        ProtocolError: close 1003 for a frame that is not a document of ``subprotocol`` or the
            wrong frame kind; close 1009 (``too_large``) over ``max_size``; no close for duplicate
            or non-string map keys and nesting beyond the parser's depth.
    """
    try:
        if subprotocol is Subprotocol.MSGPACK:
            if not isinstance(frame, bytes | bytearray | memoryview):
                raise _undecodable("a text frame on eightoff.v1.msgpack: send binary frames")
            size = frame.nbytes if isinstance(frame, memoryview) else len(frame)
            if max_size is not None and size > max_size:
                raise _too_large(max_size)
            return msgpack.unpackb(
                frame, raw=False, strict_map_key=False, object_pairs_hook=_pairs_to_dict, use_list=True
            )
        if type(frame) is not str:
            raise _undecodable("a binary frame on eightoff.v1.json: send text frames")
        if max_size is not None and _utf8_length_over(frame, max_size):
            raise _too_large(max_size)
        return _JSON_DECODER.decode(frame)
    except ProtocolError:
        raise
    except _DuplicateKey:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "a map repeats a key") from None
    except _BadKey:
        raise ProtocolError(ErrorCode.BAD_REQUEST, "map keys must be strings") from None
    except (RecursionError, msgpack.StackError):
        raise ProtocolError(ErrorCode.BAD_REQUEST, "values nested too deep") from None
    except Exception as exc:
        kind = "msgpack" if subprotocol is Subprotocol.MSGPACK else "JSON"
        raise _undecodable(f"not a {kind} document: {type(exc).__name__}") from exc


def decode(frame: bytes | str, subprotocol: Subprotocol, *, max_size: int | None = None) -> ClientMessage:
    """Decode and validate one client frame.

    Raises:
        ProtocolError: always and only this, whatever ``frame`` holds. With a ``close_code`` the
            server closes the connection with it; otherwise it replies ``error`` (``ErrorReply.of(exc)``),
            which echoes ``request_id`` when the frame carried a valid ``id``.
    """
    try:
        return parse_client_message(decode_value(frame, subprotocol, max_size=max_size))
    except ProtocolError:
        raise
    except Exception as exc:  # a bug in this package; still, the caller gets the one error type
        raise ProtocolError(ErrorCode.INTERNAL, "the server failed to read this message") from exc


# --------------------------------------------------------------------------- value → frame


def encode_msgpack(message: Mapping[str, object]) -> bytes:
    """A server message as a binary frame."""
    return cast(bytes, _MSGPACK_PACKER.pack(message))


def encode_json(message: Mapping[str, object]) -> str:
    """A server message as a text frame (compact, UTF-8 characters kept as they are)."""
    return _JSON_ENCODER.encode(message)


@overload
def encode(message: Mapping[str, object], subprotocol: Literal[Subprotocol.MSGPACK]) -> bytes: ...
@overload
def encode(message: Mapping[str, object], subprotocol: Literal[Subprotocol.JSON]) -> str: ...
@overload
def encode(message: Mapping[str, object], subprotocol: Subprotocol) -> bytes | str: ...
def encode(message: Mapping[str, object], subprotocol: Subprotocol) -> bytes | str:
    """A server message (a ``protocol.ServerMessage``'s ``to_wire()``) as the frame of ``subprotocol``.

    Not validated, for speed: tests check every message type with ``validate_server_message``.
    """
    if subprotocol is Subprotocol.MSGPACK:
        return cast(bytes, _MSGPACK_PACKER.pack(message))
    return _JSON_ENCODER.encode(message)


def decode_server_message(frame: bytes | str, subprotocol: Subprotocol) -> dict[str, object]:
    """Decode a frame the server sent and check it against the protocol (for test clients and bots).

    Raises:
        ProtocolError: the frame is undecodable, or the message breaks the protocol (code ``internal``).
    """
    value = decode_value(frame, subprotocol)
    validate_server_message(value)
    return cast(dict[str, object], value)
