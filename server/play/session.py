"""One connection's session: who it is and which games it follows, released in one place on close.

A connection is two objects: the socket (`server.edge.transport.WebSocketConnection`) and its
session. The transport sees the session as its ``Channel`` (messages in, one at a time, and the
close), served by its host (`server.edge.connections.Connections`); a room sees it as a
``Follower`` (something messages are pushed to). The session is the only writer of its own fields,
through its methods; a room only adds it to or removes it from its own followers. A room that
closed stays in ``viewing`` or ``watching`` until the session next looks (``open_count``): it no
longer counts, and the session drops it then.
"""

from __future__ import annotations

from typing import Any, NoReturn, Protocol

import protocol
from server.play.commands import Unfollow
from server.play.driver import RoomDriver
from server.play.game_room import PlayerRef

__all__ = ["Session", "SessionHost"]


class SessionHost(Protocol):
    """What serves a session's messages (`server.edge.connections.Connections`)."""

    def serve(self, session: Session, message: bytes | str, within_rate: bool) -> None: ...

    def answer(self, session: Session, outcome: Any) -> None: ...

    def release(self, session: Session) -> None: ...


class Session:
    """A connection's player (once it said hello) and the rooms it follows, as a viewer or a spectator."""

    __slots__ = (
        "_before_hello",
        "_host",
        "last_seen",
        "player",
        "request",
        "started",
        "subprotocol",
        "transport",
        "viewing",
        "watched_finished",
        "watching",
    )

    def __init__(
        self, subprotocol: protocol.Subprotocol, transport: Any = None, host: SessionHost | None = None
    ) -> None:
        self.subprotocol = subprotocol
        self.transport = transport
        self._host = host
        self.player: PlayerRef | None = None
        self.viewing: dict[str, RoomDriver[Any]] = {}
        self.watching: dict[str, RoomDriver[Any]] = {}
        self.watched_finished: set[str] = set()  # finished games watched: they count toward the limit
        self.last_seen = 0.0
        self._before_hello = 0  # requests other than hello while no player is identified
        # The request being served (a connection serves one at a time) and when it came: what
        # `respond` answers. Kept here, not in a closure made per request.
        self.request: Any = None
        self.started = 0.0

    @property
    def address(self) -> str:
        """The source address its per-address limits count (the client's, behind a trusted proxy; an
        IPv6 client's network): ``""`` for a session with no transport."""
        return str(getattr(self.transport, "client_address", ""))

    # The transport's Channel

    def serve(self, message: bytes | str, within_rate: bool) -> None:
        """A message of the connection, whole (``within_rate`` False: its frame found the rate
        exceeded); the next one comes once this one is answered.

        A method, not the host's method bound to the session once (a ``partial`` in a field): that
        would make a reference cycle, and every closed connection's objects would wait for the cyclic
        collector, whose full passes hold the event loop for tens of ms under a botnet's churn."""
        if self._host is None:
            _no_host()
        self._host.serve(self, message, within_rate)

    def respond(self, outcome: Any) -> None:
        """The handler's answer to the request being served."""
        if self._host is None:
            _no_host()
        self._host.answer(self, outcome)

    def closed(self) -> None:
        """The connection is gone: let go of everything."""
        if self._host is not None:
            self._host.release(self)

    # Its own fields

    def identify(self, player: PlayerRef) -> None:
        """The connection said hello as ``player``."""
        self.player = player

    def asked_before_hello(self) -> int:
        """One more request other than ``hello`` came before the connection said hello: how many so far."""
        self._before_hello += 1
        return self._before_hello

    def touch(self, now: float) -> None:
        """Something was sent to or read from the connection at ``now`` (it is not idle)."""
        self.last_seen = now

    def view(self, room: RoomDriver[Any]) -> None:
        """Follow ``room`` as a connection of its owner (it counts toward the games limit)."""
        self.viewing[room.id] = room

    def watch(self, room: RoomDriver[Any]) -> None:
        self.watching[room.id] = room

    def watch_finished(self, game_id: str) -> None:
        """A finished game was watched: it counts toward the watch limit until unwatched."""
        self.watched_finished.add(game_id)

    def open_count(self, follows: dict[str, RoomDriver[Any]]) -> int:
        """How many rooms of ``follows`` are still open (closed ones are dropped now)."""
        for game_id in [game_id for game_id, room in follows.items() if not room.is_open()]:
            del follows[game_id]
        return len(follows)

    def unfollow(self, game_id: str) -> None:
        """Stop following ``game_id``, as a viewer and as a spectator (the room goes once idle)."""
        self.watched_finished.discard(game_id)
        for follows in (self.viewing, self.watching):
            room = follows.pop(game_id, None)
            if room is not None:
                room.send(Unfollow(self))

    def release(self) -> None:
        """The connection closed: leave every room it followed."""
        for game_id in {*self.viewing, *self.watching}:
            self.unfollow(game_id)


def _no_host() -> NoReturn:
    raise AssertionError("a session without a host serves no connection")
