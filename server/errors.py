"""The server's refusals: a request it will not serve, with the protocol's typed error code.

`refusal_for` is the one place a failure becomes the refusal a client is told, for the WebSocket
requests (`server.edge.connections`) and the HTTP JSON API (``server.app``) alike: a `Refusal` as it is,
the rules' refusal (`engine.IllegalMoveError`) as ``illegal_move``,
`server.storage.StorageUnavailable` as ``unavailable`` (retryable: nothing was stored), anything
else (a bug, logged) as ``internal``.
"""

from __future__ import annotations

import logging

from engine import IllegalMoveError
from protocol.errors import ErrorCode
from server.storage import StorageUnavailable

__all__ = ["ErrorCode", "Refusal", "refusal_for", "unavailable"]

logger = logging.getLogger(__name__)


class Refusal(Exception):
    """A request the server refuses; ``code`` is the protocol error code sent back, ``v`` the game's
    current version for a ``stale`` refusal that knows it."""

    def __init__(self, code: ErrorCode, message: str, *, v: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.v = v


def unavailable() -> Refusal:
    """What a request gets for a database failure: ``unavailable``, retryable, and nothing of the
    request was stored."""
    return Refusal(ErrorCode.UNAVAILABLE, "the database is unavailable; nothing was stored, retry")


def refusal_for(failure: BaseException, doing: str) -> Refusal:
    """What a client is told of ``failure`` while the server was ``doing`` (for the log)."""
    if isinstance(failure, Refusal):
        return failure
    if isinstance(failure, IllegalMoveError):
        return Refusal(ErrorCode.ILLEGAL_MOVE, str(failure))
    if isinstance(failure, StorageUnavailable):
        return unavailable()
    logger.error("%s failed", doing, exc_info=failure)
    return Refusal(ErrorCode.INTERNAL, "the server failed on this request")
