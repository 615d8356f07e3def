"""What comes out of a room, in the order it must happen; `server.play.driver` runs them.

Values only (named tuples: immutable, and cheaper to make than frozen dataclasses, which matters
as a few are made per action). A room waits for the outcome of `Commit`, `Load` and `Rebuild` (one
at a time) before it takes its next request; the others complete when run.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from engine import Action, Deal, Game, Layout, Status
from protocol import ServerMessage
from server.play.bus import Event
from server.play.commands import Follower, ReplyTo
from server.storage.commit_backends import Write

__all__ = [
    "Commit",
    "Effect",
    "HintSpot",
    "Hold",
    "Leave",
    "Load",
    "LoadRace",
    "LoadRatings",
    "Observe",
    "Publish",
    "Push",
    "Rebuild",
    "Reply",
    "SeatProgress",
    "Wake",
]


class SeatProgress(NamedTuple):
    """A race seat's game as committed (``v``): what its room tells the race (`Observe`)."""

    game: str
    v: int
    layout: Layout
    score: int
    moves: int
    status: Status
    at: dt.datetime

    @classmethod
    def of(cls, game_id: str, game: Game, at: dt.datetime) -> SeatProgress:
        """``game`` as it stands (its layout is immutable: nothing is copied), committed at ``at``."""
        return cls(game_id, game.v, game.layout(), game.score, game.moves, game.status, at)


class HintSpot(NamedTuple):
    """The answer to `HintPosition`: the committed position (its version and layout)."""

    v: int
    layout: Layout


class Commit(NamedTuple):
    """Store ``write`` through the node's write pipeline; its outcome comes back as `Committed`."""

    write: Write


class Reply(NamedTuple):
    """Answer a request: its messages in order, a `HintSpot`, the exception that refused it (a
    `server.errors.Refusal`, an engine error, `StorageUnavailable`), or None when the room closed
    before the request's turn (find the game again)."""

    reply_to: ReplyTo
    outcome: Any


class Push(NamedTuple):
    """Send ``message()`` to ``audience`` (built only here: most games have no one to push to)."""

    audience: Sequence[Follower]
    message: Callable[[], ServerMessage]


class Publish(NamedTuple):
    """Tell the other nodes of a committed change (a game's action, or a race's revision)."""

    event: Event


class Load(NamedTuple):
    """Read the game as stored and rebuild it (off the event loop); the outcome comes back as `Loaded`."""


class LoadRatings(NamedTuple):
    """Read what race ``race``'s finishing write did to its players' ratings (the commit backend rated
    it in that transaction); the outcome comes back as `server.play.commands.RatingsLoaded`."""

    race: str


class LoadRace(NamedTuple):
    """Read race ``race`` as stored (another node's copy stored a change: the database is the race's
    authority); the outcome comes back as `server.play.commands.RaceLoaded`."""

    race: str


class Hold(NamedTuple):
    """Keep the rooms of ``games`` (a running race's seats) in memory on this node, though nobody
    follows them here: the other nodes' commits replay through them and reach the race (`Observe`).
    Let go when the race leaves the node."""

    race: str
    games: tuple[str, ...]


class Rebuild(NamedTuple):
    """Replay ``log`` from ``deal`` off the event loop (a long game's refused action taken back); the
    outcome comes back as `Rebuilt`."""

    deal: Deal
    log: Sequence[Action]


class Leave(NamedTuple):
    """The room is closed (its game ended, or the stored game could not be read): it leaves the node's
    rooms."""


class Wake(NamedTuple):
    """Send the room ``Tick(at)`` in ``delay`` seconds (by the room's own clock: a race's countdown,
    its time limit, a delayed board): the Tick names the time it was asked for, since a timer may
    fire a little before it."""

    delay: float
    at: dt.datetime


class Observe(NamedTuple):
    """Tell race ``race`` that one of its seats' games committed ``progress`` (its standings)."""

    race: str
    progress: SeatProgress


Effect = (
    Commit | Reply | Push | Publish | Load | LoadRatings | LoadRace | Hold | Rebuild | Leave | Wake | Observe
)
