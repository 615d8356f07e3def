"""The protocol's one exception, its error codes and the WebSocket close codes it may ask for.

    ProtocolError (ValueError)
        code        an ErrorCode, sent to the client in an ``error`` message
        request_id  the ``id`` of the offending request when it could be read, echoed in the reply
        close_code  None: reply ``error`` and keep the connection; a CloseCode: close with it

Every failure to decode or validate a client frame is a ``ProtocolError``; nothing else escapes
``protocol.decode``.
"""

from __future__ import annotations

import enum
from typing import TypeAlias

__all__ = ["CloseCode", "ErrorCode", "ProtocolError", "RequestId"]

#: A request's ``id`` as the client sent it: an int in 0..2^53-1 or a string of at most 64 characters.
RequestId: TypeAlias = int | str


class ErrorCode(enum.StrEnum):
    """The ``code`` of an ``error`` message; protocol/README.md says when each is sent."""

    BAD_REQUEST = "bad_request"
    UNSUPPORTED_VERSION = "unsupported_version"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    ILLEGAL_MOVE = "illegal_move"
    STALE = "stale"
    RATE_LIMITED = "rate_limited"
    TOO_LARGE = "too_large"
    UNAVAILABLE = "unavailable"
    INTERNAL = "internal"


class CloseCode(enum.IntEnum):
    """WebSocket close codes (RFC 6455 section 7.4.1) the server uses."""

    GOING_AWAY = 1001
    """The server is shutting down; reconnect (to another node) and ``resume``."""
    UNSUPPORTED_DATA = 1003
    """A frame that could not be decoded, or the wrong frame kind for the subprotocol."""
    POLICY_VIOLATION = 1008
    """Floods and other abuse."""
    MESSAGE_TOO_BIG = 1009
    """A frame over the size limit."""
    INTERNAL_ERROR = 1011
    """The server failed; the client may reconnect and ``resume``."""


class ProtocolError(ValueError):
    """A client frame the protocol refuses, with the reply it deserves.

    Args:
        code: what went wrong, as the client will see it.
        message: one sentence for people (logs, developer consoles); never parsed by clients.
        request_id: the request's ``id`` when it could be read, so the reply can echo it.
        close_code: set when the connection must be closed (the frame could not even be decoded);
            None when the server replies ``error`` and carries on.
    """

    __slots__ = ("close_code", "code", "message", "request_id")

    def __init__(
        self,
        code: ErrorCode | str,
        message: str,
        request_id: RequestId | None = None,
        close_code: CloseCode | int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = ErrorCode(code)
        self.message = message
        self.request_id = request_id
        self.close_code = None if close_code is None else CloseCode(close_code)

    def __repr__(self) -> str:
        return (
            f"ProtocolError({self.code.value!r}, {self.message!r}, request_id={self.request_id!r}, "
            f"close_code={None if self.close_code is None else int(self.close_code)!r})"
        )
