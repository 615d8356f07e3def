"""The engine's exceptions, one root for everything the rules refuse.

EngineError (ValueError)
├── InvalidNotationError      text that is not a card, pile, move or action
│   └── InvalidCodeError      text that is not a game code
└── IllegalMoveError          a well-formed action the rules refuse here
"""

from __future__ import annotations

__all__ = ["EngineError", "IllegalMoveError", "InvalidCodeError", "InvalidNotationError"]


class EngineError(ValueError):
    """Root of every error the engine raises on bad input."""


class InvalidNotationError(EngineError):
    """Text that does not parse as a card, pile, move or action."""


class InvalidCodeError(InvalidNotationError):
    """Text that is not a game code such as ``EO1-C8-AAAAAFA``; the message names the bad part."""


class IllegalMoveError(EngineError):
    """An action the rules refuse in the current position.

    Attributes:
        reason: one sentence saying which rule refused it, for players and logs.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def quoted(value: object, limit: int = 40) -> str:
    """``repr(value)`` cut to about ``limit`` characters, for messages that echo untrusted input.

    Error messages go back to clients and into logs: a megabyte of junk must not come back with them.
    """
    if isinstance(value, str | bytes) and len(value) > limit:
        value = value[:limit]
        cut = True
    else:
        cut = False
    try:
        text = repr(value)
    except ValueError:  # an int too long to print
        return f"<{type(value).__name__} too long to show>"
    if len(text) > limit:
        text, cut = text[:limit], True
    return f"{text}…" if cut else text
