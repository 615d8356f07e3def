"""Stand-ins for what a room meets, for the room's own tests (which read its effects, not sockets)."""

from __future__ import annotations

from typing import Any


class Person:
    """A connection as a room sees it (`server.play.commands.Follower`), named for the test's words;
    its fields are typed as the protocol types them and never used (a room only hands them on)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.subprotocol: Any = None
        self.transport: Any = None

    def __repr__(self) -> str:
        return self.name
