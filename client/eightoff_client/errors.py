"""Exceptions: one class per documented error code (protocol/README.md section 8), so a bot catches
what it can handle (`Stale`, `IllegalMove`) and lets the rest surface with the server's words."""

from __future__ import annotations

from typing import ClassVar

from eightoff_client.messages import ErrorReply

__all__ = [
    "BadRequest",
    "ConnectionLost",
    "EightOffError",
    "Forbidden",
    "IllegalMove",
    "Internal",
    "NotFound",
    "ProtocolViolation",
    "RateLimited",
    "ServerError",
    "Stale",
    "TooLarge",
    "Unauthorized",
    "Unavailable",
    "UnsupportedVersion",
]


class EightOffError(Exception):
    """Anything this library raises."""


class ConnectionLost(EightOffError):
    """The connection broke and the request could not be retried safely (or reconnecting gave up):
    whether the server did it is unknown."""


class ProtocolViolation(EightOffError):
    """The server sent something this client cannot read as protocol v1."""


class ServerError(EightOffError):
    """An ``error`` reply: the request was refused and nothing changed. ``code`` is the documented
    code, ``message`` the server's sentence for people (never parse it), ``reply`` the whole message."""

    CODE: ClassVar[str] = ""
    _by_code: ClassVar[dict[str, type[ServerError]]] = {}

    def __init__(self, reply: ErrorReply) -> None:
        super().__init__(f"{reply['code']}: {reply['message']}")
        self.reply = reply
        self.code: str = reply["code"]
        self.message: str = reply["message"]

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        ServerError._by_code[cls.CODE] = cls

    @staticmethod
    def of(reply: ErrorReply) -> ServerError:
        """The exception of ``reply``'s code; a code this version does not know is a plain ServerError
        (section 12: clients ignore what they do not know)."""
        return ServerError._by_code.get(reply["code"], ServerError)(reply)


class BadRequest(ServerError):
    CODE = "bad_request"


class UnsupportedVersion(ServerError):
    CODE = "unsupported_version"


class Unauthorized(ServerError):
    CODE = "unauthorized"


class Forbidden(ServerError):
    CODE = "forbidden"


class NotFound(ServerError):
    CODE = "not_found"


class IllegalMove(ServerError):
    CODE = "illegal_move"


class Stale(ServerError):
    """The action's ``v`` was not the game's: nothing was done. The client has already resumed the
    game, so its board is fresh: look at it and decide again. After a reconnect this is also how an
    action the server applied before the break (its ``ack`` lost) comes back."""

    CODE = "stale"


class RateLimited(ServerError):
    """Too fast, or too many games open or watched: wait 2 seconds and retry, or free a slot."""

    CODE = "rate_limited"


class TooLarge(ServerError):
    CODE = "too_large"


class Unavailable(ServerError):
    """The server could not serve it now (database down, shutting down): retry the same request."""

    CODE = "unavailable"


class Internal(ServerError):
    CODE = "internal"
