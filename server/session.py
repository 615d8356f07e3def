"""One connection's session: who it is and which games it follows, released in one place on close.

The session is the only writer of its own fields; a room only adds it to or removes it from its
followers, through the room's methods. A room that ended stays in ``viewing`` or ``watching`` until the
session next looks (``open_count``): it no longer counts, and the session drops it then.
"""

from __future__ import annotations

from typing import Any

import protocol
from server.room import GameRoom, PlayerRef
from server.rooms import RoomRegistry

__all__ = ["Session"]


class Session:
    """A connection's player (once it said hello) and the rooms it follows, as a viewer or a spectator."""

    __slots__ = ("last_seen", "player", "subprotocol", "transport", "viewing", "watching")

    def __init__(self, subprotocol: protocol.Subprotocol, transport: Any = None) -> None:
        self.subprotocol = subprotocol
        self.transport = transport
        self.player: PlayerRef | None = None
        self.viewing: dict[str, GameRoom] = {}
        self.watching: dict[str, GameRoom] = {}
        self.last_seen = 0.0

    def open_count(self, follows: dict[str, GameRoom]) -> int:
        """How many rooms of ``follows`` are still open (ended ones are dropped now)."""
        for game_id in [game_id for game_id, room in follows.items() if not room.is_open()]:
            del follows[game_id]
        return len(follows)

    def unfollow(self, game_id: str, registry: RoomRegistry) -> None:
        """Stop following ``game_id``, as a viewer and as a spectator."""
        for follows in (self.viewing, self.watching):
            room = follows.pop(game_id, None)
            if room is not None:
                room.unfollow(self)
                registry.forget_if_idle(room)

    def release(self, registry: RoomRegistry) -> None:
        """The connection closed: leave every room it followed."""
        for game_id in {*self.viewing, *self.watching}:
            self.unfollow(game_id, registry)
