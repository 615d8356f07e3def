"""What goes into a race room (`server.play.race.room`): its followers' requests, its seats' games'
commits, and its timer. Values only (named tuples, like `server.play.commands`); the outcome of a
race's write is the game room's `Committed`, and a connection that closed sends the same `Unfollow`.
"""

from __future__ import annotations

from typing import NamedTuple

from protocol import Player as PlayerRef
from protocol.errors import RequestId
from server.play.commands import Follower, RaceLoaded, RatingsLoaded, ReplyTo, Tick
from server.play.effects import SeatProgress
from server.storage.records import RaceRecord

__all__ = [
    "RaceChanged",
    "RaceCommand",
    "RaceJoin",
    "RaceLeave",
    "RaceReady",
    "RaceRematch",
    "RaceStart",
    "RaceWatch",
    "Rematch",
    "SeatChanged",
]


class RaceJoin(NamedTuple):
    """``player`` takes a seat (or, holding one, follows the race again); ``network`` is the digest of
    where it joins from (`server.play.race.ratings.network_of`), what its rating is judged by."""

    follower: Follower
    player: PlayerRef
    request_id: RequestId | None
    reply_to: ReplyTo
    network: str | None = None


class RaceWatch(NamedTuple):
    """A connection follows the race: as its player's seat when it holds one, else as a spectator."""

    follower: Follower
    player: PlayerRef
    request_id: RequestId | None
    reply_to: ReplyTo


class RaceReady(NamedTuple):
    follower: Follower
    player: PlayerRef
    ready: bool
    request_id: RequestId | None
    reply_to: ReplyTo


class RaceStart(NamedTuple):
    follower: Follower
    player: PlayerRef
    request_id: RequestId | None
    reply_to: ReplyTo


class RaceLeave(NamedTuple):
    follower: Follower
    player: PlayerRef
    request_id: RequestId | None
    reply_to: ReplyTo


class RaceRematch(NamedTuple):
    """``player`` asks a rematch of the finished race: ``made`` is the new race the registry prepared
    (the asker seated, not stored yet), stored with the link unless the race has a rematch already;
    the reply is the race's `Rematch`."""

    follower: Follower
    player: PlayerRef
    made: RaceRecord
    request_id: RequestId | None
    reply_to: ReplyTo


class Rematch(NamedTuple):
    """A finished race's answer to `RaceRematch`: its rematch, and whether this ask made it (else the
    asker joins the one made)."""

    race: str
    code: str
    made: bool


class SeatChanged(NamedTuple):
    """A seat's game committed a change (from its game room, on this node)."""

    progress: SeatProgress


class RaceChanged(NamedTuple):
    """Another node stored the race at ``revision`` (from the bus): a copy behind it reads it again."""

    revision: int


RaceCommand = (
    RaceJoin
    | RaceWatch
    | RaceReady
    | RaceStart
    | RaceLeave
    | RaceRematch
    | SeatChanged
    | Tick
    | RatingsLoaded
    | RaceChanged
    | RaceLoaded
)
