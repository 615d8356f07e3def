"""The server's refusals: a request it will not serve, with the protocol's typed error code.

Handlers raise `Refusal`; the connection turns it into one ``error`` reply. Storage failures are not
refusals where they happen: `server.storage.StorageUnavailable` becomes ``unavailable`` here, in
`storage_failures_refused`, which both doors a request comes in by wrap it in: the WebSocket request
dispatcher (`server.requests.RequestHandler.handle`) and the HTTP JSON API (``server.app``); an action
answered from its commit's callback gets the same `unavailable()`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from protocol.errors import ErrorCode
from server.storage import StorageUnavailable

__all__ = ["ErrorCode", "Refusal", "storage_failures_refused", "unavailable"]


class Refusal(Exception):
    """A request the server refuses; ``code`` is the protocol error code sent back."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def unavailable() -> Refusal:
    """What a request gets for a database failure: ``unavailable``, retryable, and nothing of the
    request was stored."""
    return Refusal(ErrorCode.UNAVAILABLE, "the database is unavailable; nothing was stored, retry")


@contextmanager
def storage_failures_refused() -> Iterator[None]:
    """A database failure inside becomes `unavailable`."""
    try:
        yield
    except StorageUnavailable:
        raise unavailable() from None
