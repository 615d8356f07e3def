"""Identifiers and secrets: random ids, player tokens and the hashes stored in their place."""

from __future__ import annotations

import hashlib
import secrets

__all__ = ["hash_token", "new_id", "new_token"]


def new_id() -> str:
    """A 16-character URL-safe id (96 random bits): unguessable, so a game id is no enumeration handle.
    Never one that starts with ``-``: a command line (``eightoff export ID``) would read it as an option
    (one id in 64 did, and the CLI tests failed when their game's id began ``-h``)."""
    while True:
        candidate = secrets.token_urlsafe(12)
        if not candidate.startswith("-"):
            return candidate


def new_token() -> str:
    """A player's secret: 192 random bits, sent once and stored only as its hash."""
    return secrets.token_urlsafe(24)


def hash_token(token: str) -> str:
    """Hex SHA-256 of a token; a fast hash is right here because tokens are random, not passwords."""
    return hashlib.sha256(token.encode()).hexdigest()
