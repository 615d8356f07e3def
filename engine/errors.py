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
