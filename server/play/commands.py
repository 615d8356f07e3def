"""What goes into a room: the requests of its followers, other nodes' commits, and the outcomes of the
effects it asked for. Values only (named tuples, like the effects): a room decides what each one
does (`server.play.game_room`).

``reply_to`` is the requester's answer, opaque to the room: it hands it back in a `Reply` effect
and never calls it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from engine import Action, Game
from protocol.errors import RequestId
from server.play.bus import BusEvent
from server.storage.records import RaceRecord

__all__ = [
    "Act",
    "Command",
    "Committed",
    "Follower",
    "HintPosition",
    "Loaded",
    "Outcome",
    "RaceLoaded",
    "RatingsLoaded",
    "Rebuilt",
    "RemoteCommit",
    "ReplyTo",
    "Request",
    "Resign",
    "Tick",
    "Unfollow",
    "View",
    "Watch",
]


class Follower(Protocol):
    """A connection as a room sees it: something messages are pushed to (`server.play.session.Session`)."""

    subprotocol: Any
    transport: Any


#: Told a request's outcome, once (see `server.play.effects.Reply`).
ReplyTo = Callable[[Any], None]


class Act(NamedTuple):
    """The owner's action: ``resolve`` turns the game as it stands into the action (a tap or a
    double tap depends on the position); refused ``stale`` unless the game is at ``expected_v``."""

    follower: Follower
    resolve: Callable[[Game], Action]
    expected_v: int | None
    request_id: RequestId | None
    reply_to: ReplyTo


class Resign(NamedTuple):
    follower: Follower
    request_id: RequestId | None
    reply_to: ReplyTo


class View(NamedTuple):
    """A connection of the owner follows the game (new_game, resume, or before acting)."""

    follower: Follower
    request_id: RequestId | None
    reply_to: ReplyTo


class Watch(NamedTuple):
    """A spectator follows the game."""

    follower: Follower
    request_id: RequestId | None
    reply_to: ReplyTo


class Unfollow(NamedTuple):
    """A connection no longer follows the game (unwatch, or it closed)."""

    follower: Follower


class HintPosition(NamedTuple):
    """The committed position a hint is about; the game is stored as hinted first (once per room)."""

    follower: Follower
    reply_to: ReplyTo


class RemoteCommit(NamedTuple):
    """Another node committed a change of this game (from the bus, in commit order)."""

    event: BusEvent


class Committed(NamedTuple):
    """The outcome of the room's `Commit`: None once stored, else why nothing was."""

    error: Exception | None


class Loaded(NamedTuple):
    """The outcome of the room's `Load`: the game as stored (None: not found), when it finished, or
    why it could not be read."""

    game: Game | None
    finished_at: dt.datetime | None = None
    error: Exception | None = None


class Rebuilt(NamedTuple):
    """The outcome of the room's `Rebuild`: the game without its last, refused action."""

    game: Game


class RatingsLoaded(NamedTuple):
    """The outcome of the room's `LoadRatings`: each rated player's shown rating (before, after),
    empty when the race rated nobody; ``error`` when it could not be read (then shown nowhere)."""

    shifts: dict[str, tuple[int, int]]
    error: Exception | None = None


class RaceLoaded(NamedTuple):
    """The outcome of the room's `LoadRace`: the race as stored (None: not found), or ``error`` when it
    could not be read."""

    record: RaceRecord | None
    error: Exception | None = None


class Tick(NamedTuple):
    """A time the race asked to be woken at (`Wake`) has come, about (its timer may fire a little
    early: the room reads its clock); ``at`` is None for a Tick no Wake asked for (a race taken up)."""

    at: dt.datetime | None = None


Request = Act | Resign | View | Watch | Unfollow | HintPosition | RemoteCommit
"""Commands that wait their turn: one at a time, in arrival order."""
Outcome = Committed | Loaded | Rebuilt
"""Commands that answer what the room is waiting for: they go first."""
Command = Request | Outcome
