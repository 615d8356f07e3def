"""The lifecycle of one accepted socket, as data: its ``Phase``, the transitions allowed between
phases (``TRANSITIONS``), and what it holds of the gate's (``Admission``).

Rule 1: every change of a connection's phase goes through `advance`; a change the table does not
allow is a bug of the transport, and raises (``IllegalTransition``). Rule 2: this module knows
nothing of sockets, websockets or the event loop: ``server.edge.transport`` drives it, and
``tests/server/test_connection_state.py`` drives it bare.

Theory of operation. A socket is ``NEW`` until the gate is asked about it at accept: admitted, it is
``HALF_OPEN`` until its request is in; refused, it is ``REFUSED`` and waits for its request only to
answer it 503 (``ANSWERED`` then). A request ends the half-open phase one of three ways: ``OPEN`` (the
WebSocket handshake accepted, 101), ``HTTP`` (another path than ``/ws``: the HTTP routes answer it) or
``ANSWERED`` (a refused handshake, or not HTTP at all: 400). An open connection that floods is
``FLOODED``: nothing more is read, what waits is served, then it is closed 1008. The gate may evict a
connection it still counts as half-open (``EVICTED``). Every phase ends ``CLOSED``, when the socket is
gone.

What websockets' protocol object owns is not repeated here: in ``OPEN`` and ``FLOODED`` its own
state (OPEN, CLOSING, CLOSED) tells the close handshake apart, and whether the server failed the
connection is read off it too. The flags of an open connection that are not phases (reading paused,
writes corked, a message being served, too many waiting) stay fields of the connection, each with
one writer.

Drawn (each line a chain of allowed changes; a phase repeated where it branches)::

    NEW ──► HALF_OPEN ──► OPEN ──► FLOODED
            HALF_OPEN ──► HTTP ──► HTTP_HALF_CLOSED
            HALF_OPEN ──► ANSWERED ──► EVICTED
            HALF_OPEN ──► EVICTED
    NEW ──► REFUSED ──► ANSWERED
    and every phase but NEW and CLOSED ──► CLOSED
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

__all__ = ["TRANSITIONS", "Admission", "IllegalTransition", "Phase", "advance"]


class Phase(enum.Enum):
    """Where one accepted socket is in its life (see the module's docstring)."""

    NEW = "new"
    """Made by the listening socket; the gate has not been asked about it yet."""
    HALF_OPEN = "half-open"
    """Admitted (a place of the gate's); its request not all in yet. The gate may evict it."""
    REFUSED = "refused"
    """Over a cap at accept: its request is awaited only to answer it 503."""
    ANSWERED = "answered"
    """Answered with HTTP in place of a WebSocket (a 503 at accept, a refused handshake, a 400 for
    what is not HTTP) or hung up on: what it sends next is not read."""
    HTTP = "http"
    """A request for another path than ``/ws``: the HTTP routes answer it, nothing more is read."""
    HTTP_HALF_CLOSED = "http, half-closed"
    """The same, its client half-closed after its request: the response then closes the socket."""
    OPEN = "open"
    """The WebSocket handshake accepted (101): its frames are metered and its messages served."""
    FLOODED = "flooded"
    """Open, and flooding: nothing more is read or acted on; what waits is served, then it is
    closed 1008."""
    EVICTED = "evicted"
    """Dropped by the gate while it still counted it half-open, to make room for a newer one (its
    place given back already)."""
    CLOSED = "closed"
    """The socket is gone."""


TRANSITIONS: Mapping[Phase, frozenset[Phase]] = {
    Phase.NEW: frozenset({Phase.HALF_OPEN, Phase.REFUSED}),
    Phase.HALF_OPEN: frozenset({Phase.OPEN, Phase.HTTP, Phase.ANSWERED, Phase.EVICTED, Phase.CLOSED}),
    Phase.REFUSED: frozenset({Phase.ANSWERED, Phase.CLOSED}),
    # a 400 for what is no HTTP request leaves the gate counting it half-open (no request came)
    Phase.ANSWERED: frozenset({Phase.EVICTED, Phase.CLOSED}),
    Phase.HTTP: frozenset({Phase.HTTP_HALF_CLOSED, Phase.CLOSED}),
    Phase.HTTP_HALF_CLOSED: frozenset({Phase.CLOSED}),
    Phase.OPEN: frozenset({Phase.FLOODED, Phase.CLOSED}),
    Phase.FLOODED: frozenset({Phase.CLOSED}),
    Phase.EVICTED: frozenset({Phase.CLOSED}),
    Phase.CLOSED: frozenset(),
}
"""The phases each phase may go to next; any other change is a bug."""


class IllegalTransition(RuntimeError):
    """The transport tried a change of phase ``TRANSITIONS`` does not allow: a bug of its own, never
    the peer's doing."""


def advance(phase: Phase, to: Phase) -> Phase:
    """``to``, the phase a connection in ``phase`` goes to.

    Raises:
        IllegalTransition: when ``TRANSITIONS`` does not allow it.
    """
    if to not in TRANSITIONS[phase]:
        raise IllegalTransition(f"a connection cannot go from {phase.name} to {to.name}")
    return to


class Admission(enum.Enum):
    """What a socket holds of the gate's, decided once at accept and given back when it is gone."""

    ADMITTED = "admitted"
    """A place under the caps, given back when the socket goes (unless the gate evicted it: it gave
    the place back itself)."""
    LINGERING = "lingering"
    """Refused, and one of the gate's lingering slots while its 503 waits for its request."""
    TURNED_AWAY = "turned away"
    """Refused with no lingering slot left: answered 503 and closed at once; it holds nothing."""
