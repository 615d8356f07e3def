"""The server's refusals: a request it will not serve, with the protocol's typed error code.

Handlers raise `Refusal`; the connection turns it into one ``error`` reply. Storage failures are not
refusals where they happen: `server.storage.StorageUnavailable` is mapped to ``unavailable`` in one place,
the request dispatcher (`server.requests.RequestHandler.handle`).
"""

from __future__ import annotations

from protocol.errors import ErrorCode

__all__ = ["ErrorCode", "Refusal", "storage_refusal"]


class Refusal(Exception):
    """A request the server refuses; ``code`` is the protocol error code sent back."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def storage_refusal() -> Refusal:
    """What a request gets when the database fails: retryable, and nothing of it was stored."""
    return Refusal(ErrorCode.UNAVAILABLE, "the database is unavailable; nothing was stored, retry")
