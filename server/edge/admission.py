"""Who may open a connection: caps on open connections (per source address and in all), counted by
the client's address (behind the proxies of `server.origins.TrustedProxies`); and the frame budget
an address's connections share.

Room for newcomers: a socket that connects and never finishes its handshake holds a place under the
caps until its open timeout, so a few dozen addresses of them could fill the global cap and turn every
new client away. The gate keeps the connections still in their handshake ("half-open") oldest first:
at the global cap a newcomer takes the place of the oldest half-open connection (never of one past
its handshake), and while more than ``HALF_OPEN_SHARE`` of the cap is half-open ("pressure") a new
connection gets ``PRESSED_OPEN_TIMEOUT`` to send its request and an address may not hold more than
``HALF_OPEN_PER_ADDRESS`` half-open connections (its next ones get a cheap 503, so that an attacker's
many sockets per address are refused, not admitted only to drop someone else's). A real client sends
its request at once, so it is the youngest: the last to go. Nobody is dropped before a place is
needed: an attacker reconnects each dropped socket at once, so dropping old half-open connections at
every accept under pressure only turns them over (some 6,000 drops and 10,000 admissions in 9 s,
where 3,800 sockets sit idle when none is dropped).

Page loads: each new connection takes a token of its address's new-connection bucket at accept, but
the HTTP side answers one request per connection, so a browser's first load of the client opens some
18 (the page, its stylesheet, 14 modules, the clock, the WebSocket), and a few players behind one NAT
address spent the bucket and got 503. A connection that turns out to be a GET answered from memory
gets its token back (``answered_from_memory``), within a budget of such requests per address of its
own: what still counts is what costs (a WebSocket, a request the database answers) and what says
nothing (a half-open socket never gives its token back).

Pure decisions, no sockets: ``server.edge.transport`` asks ``ConnectionGate`` as each TCP connection is
accepted (before its handshake, so a socket that never says anything counts too) and answers a
refusal with HTTP 503 at once; ``app.py`` asks it again at the handshake of a connection from a
trusted proxy (now that the client's address is known), and asks `server.origins.OriginPolicy`,
answering a refusal with HTTP 503 or 403.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from server.origins import TrustedProxies
from server.ratelimit import BucketsByKey, TokenBucket

__all__ = [
    "RESERVED_FILES",
    "AddressBudget",
    "ConnectionCaps",
    "ConnectionGate",
    "HalfOpen",
    "SharedBucket",
    "ThrottledLog",
    "open_files_budget",
    "source_key",
]

logger = logging.getLogger(__name__)

RESERVED_FILES = 64
"""Open files kept for everything but client sockets: the listening socket, the database, logs."""


def open_files_budget() -> int:
    """Raise the soft open-files limit to the hard one and return how many client sockets fit under
    it. Past the limit ``accept()`` fails (EMFILE) and asyncio stops accepting for a second: a
    connection cap below this budget keeps the accept loop going."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass
    return max(1, soft - RESERVED_FILES)


class ThrottledLog:
    """A warning at most once per ``interval`` seconds per reason, counting the ones left out: an
    attack must not turn into a flood of log lines."""

    def __init__(self, interval: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval = interval
        self._clock = clock
        self._last: dict[str, float] = {}
        self._skipped: dict[str, int] = {}

    def warning(self, reason: str, detail: str) -> bool:
        """Log ``reason: detail`` unless ``reason`` was logged less than ``interval`` ago; True when
        logged."""
        now = self._clock()
        if now - self._last.get(reason, float("-inf")) < self._interval:
            self._skipped[reason] = self._skipped.get(reason, 0) + 1
            return False
        self._last[reason] = now
        skipped = self._skipped.pop(reason, 0)
        more = f" ({skipped} more since the last line)" if skipped else ""
        logger.warning("%s: %s%s", reason, detail, more)
        return True


def source_key(address: str, ipv6_prefix: int = 64) -> str:
    """What the per-address limits count ``address`` under: an IPv4 address itself (an IPv4-mapped
    IPv6 one as its IPv4 address, as a dual-stack socket names IPv4 peers, and one of the NAT64
    prefix ``64:ff9b::/96``, as a translator names them), an IPv6 address its network of
    ``ipv6_prefix`` bits, and anything else (a proxy's garbled header) itself.

    One IPv6 subscriber holds a /64 at least, 2**64 addresses: counted by address, one machine could
    connect from a new address each time, as the botnet attack does, and pass every per-address limit.
    """
    if ":" not in address:
        return address  # IPv4: nothing to parse on the accept path
    return _ipv6_key(address, ipv6_prefix)


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052: an IPv4 client behind a translator


@functools.lru_cache(maxsize=4096)
def _ipv6_key(address: str, prefix: int) -> str:
    try:
        parsed = ipaddress.IPv6Address(address)
    except ValueError:
        return address
    if parsed.ipv4_mapped is not None:
        return str(parsed.ipv4_mapped)
    if parsed in _NAT64:
        return str(ipaddress.IPv4Address(int(parsed) & 0xFFFFFFFF))
    host_bits = 128 - prefix
    network = int(parsed) >> host_bits << host_bits  # the zone (%eth0) of a link-local address dropped
    return str(ipaddress.IPv6Network((network, prefix)))


@dataclass(slots=True)
class ConnectionCaps:
    """Counts open connections per source address and in all; ``admit`` refuses past either cap
    (``None``: no cap)."""

    per_address: int | None
    total: int | None
    _open: dict[str, int] = field(default_factory=dict)
    _total_open: int = 0

    @property
    def open_connections(self) -> int:
        return self._total_open

    def open_from(self, address: str) -> int:
        return self._open.get(address, 0)

    @property
    def full(self) -> bool:
        """At the global cap."""
        return self.total is not None and self._total_open >= self.total

    def at_address_cap(self, address: str) -> bool:
        return self.per_address is not None and self._open.get(address, 0) >= self.per_address

    def admit(self, address: str, *, per_address: bool = True) -> str | None:
        """Count a new connection from ``address``; returns why it is refused (and then does not
        count it), or None. Every admitted connection must be ``release``d once. ``per_address``
        False skips the per-address cap (a trusted proxy: ``transfer`` applies it at the handshake)."""
        count = self._open.get(address, 0)
        if per_address and self.per_address is not None and count >= self.per_address:
            return f"{count} connections open from {address}, the cap is {self.per_address}"
        if self.total is not None and self._total_open >= self.total:
            return f"{self._total_open} connections open, the cap is {self.total}"
        self._open[address] = count + 1
        self._total_open += 1
        return None

    def transfer(self, old: str, new: str) -> str | None:
        """Count one connection of ``old`` under ``new`` instead (the client behind a proxy), unless
        ``new`` is at its cap: then returns why, and the connection stays under ``old``."""
        if old == new:
            return None
        count = self._open.get(new, 0)
        if self.per_address is not None and count >= self.per_address:
            return f"{count} connections open from {new}, the cap is {self.per_address}"
        self.release(old)
        self._open[new] = count + 1
        self._total_open += 1
        return None

    def release(self, address: str) -> None:
        count = self._open.get(address, 0)
        if count <= 0:
            return
        self._total_open -= 1
        if count == 1:
            del self._open[address]
        else:
            self._open[address] = count - 1


@dataclass(frozen=True, slots=True)
class AddressBudget:
    """The frames all connections from one address may send together: ``rate`` a second, ``burst``
    at once, as much as ``connections`` connections' own buckets allow."""

    rate: float
    burst: int
    connections: float


class SharedBucket(TokenBucket):
    """The frame bucket of an address's connections. ``crowded`` while more connections than the
    budget is worth are open from it: only then can they pass it (fewer are bound by their own
    buckets already), so only then is it taken from, and a lone client pays nothing per frame."""

    __slots__ = ("crowded",)

    def __init__(self, budget: AddressBudget, clock: Callable[[], float]) -> None:
        super().__init__(budget.rate, budget.burst, clock)
        self.crowded = False


class HalfOpen(Protocol):
    """A connection admitted and still in its opening handshake, as the gate holds it."""

    def evict(self) -> None:
        """Drop it to make room: the gate has released its place already."""


class ConnectionGate:
    """Admits connections under the caps, one address per connection: the peer's at accept, the
    forwarded client's at the handshake when the peer is a trusted proxy; makes room for newcomers
    by evicting half-open connections, oldest first (see the module's docstring)."""

    LINGER_SLOTS = RESERVED_FILES // 2
    """Refused sockets kept open at once until their client read the 503 (taken from the reserve)."""
    HALF_OPEN_SHARE = 0.25
    """Share of the global cap past which the half-open connections put the gate under pressure."""
    PRESSED_OPEN_TIMEOUT = 2.0
    """Seconds a connection has to send its request under pressure (a real client needs one round trip)."""
    HALF_OPEN_PER_ADDRESS = 4
    """Half-open connections one address may hold under pressure (a real client has one at a time)."""

    def __init__(
        self,
        caps: ConnectionCaps,
        proxies: TrustedProxies,
        log: ThrottledLog,
        arrivals: BucketsByKey | None = None,
        *,
        pages: BucketsByKey | None = None,
        frames: AddressBudget | None = None,
        ipv6_prefix: int = 64,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``arrivals``: new connections per address (None: any number); ``pages``: requests per
        address answered from memory whose connections are not counted in ``arrivals`` (None: every
        connection counts); ``frames``: the frame budget an address's connections share (None: none);
        ``ipv6_prefix``: the network an IPv6 address is counted by (``source_key``)."""
        self.caps = caps
        self.proxies = proxies
        self._log = log
        self._arrivals = arrivals
        self._pages = pages
        self._frames = frames
        self._ipv6_prefix = ipv6_prefix
        self._clock = clock
        self._lingering = 0
        self._half_open: dict[HalfOpen, str] = {}  # their addresses, oldest first
        self._half_open_from: dict[str, int] = {}
        self._frame_buckets: dict[str, SharedBucket] = {}
        self._pressure_at = None if caps.total is None else caps.total * self.HALF_OPEN_SHARE

    def start_lingering(self) -> bool:
        """Whether a refused socket may stay open a moment so its client reads the refusal (a close
        with its request still unread would send a reset, which can destroy the refusal first);
        True takes a slot, which ``stop_lingering`` gives back. Past the slots it is closed at once."""
        if self._lingering >= self.LINGER_SLOTS:
            return False
        self._lingering += 1
        return True

    def stop_lingering(self) -> None:
        self._lingering -= 1

    def _arrival(self, address: str) -> str | None:
        if self._arrivals is None or self._arrivals.allow(address):
            return None
        return f"new connections from {address} come too fast (or it was closed for flooding)"

    def key_of(self, peer: str) -> str:
        """The address the limits count a connection from ``peer`` under (``source_key``): what the
        other methods call an address. A trusted proxy is counted under its exact address, not its
        network: its neighbours in it are other clients, and a client it forwards from its own
        network is still counted apart. ``accept``, ``answered_from_memory`` and ``handshake`` take
        the peer itself, whose exact address says whether it is a trusted proxy."""
        if self.proxies.trusts(peer):
            return peer
        return source_key(peer, self._ipv6_prefix)

    def accept(self, peer: str, waiting: HalfOpen | None = None) -> str | None:
        """At accept; returns why the connection is refused (logged), or None. ``waiting`` is the
        connection, half-open until ``opened``: it may be evicted to make room for a newer one."""
        proxy = self.proxies.trusts(peer)
        address = self.key_of(peer)
        refused = None if proxy else self._arrival(address)
        if refused is None and not proxy and self.under_pressure():
            refused = self._too_many_half_open(address)
        if refused is None:
            if self.caps.full and self._half_open and (proxy or not self.caps.at_address_cap(address)):
                self._evict(next(iter(self._half_open)), "the cap is reached")
            refused = self.caps.admit(address, per_address=not proxy)
            self._count_changed(address)
        if refused is not None:
            self._log.warning("connection refused", refused)
        elif waiting is not None:
            self._half_open[waiting] = address
            self._half_open_from[address] = self._half_open_from.get(address, 0) + 1
        return refused

    def answered_from_memory(self, peer: str) -> None:
        """The connection from ``peer`` turned out to be a plain GET answered from memory (a file or a
        page of the browser client, the clock): its new-connection token is given back, within the
        address's ``pages`` budget. A page load opens a connection per file (the HTTP side closes
        after each answer): some 18 for a first load, which spent half of an address's burst, so
        that a few players behind one address (a school, an office) were refused. Charged at accept
        still, a socket that never sends its request (the half-open flood) gets nothing back, nor
        does a WebSocket handshake, nor a request the database answers."""
        if self._arrivals is None or self._pages is None or self.proxies.trusts(peer):
            return  # nothing was taken (a proxy's connections are counted at their handshake)
        address = self.key_of(peer)
        if self._pages.allow(address):
            self._arrivals.give_back(address)

    def _too_many_half_open(self, address: str) -> str | None:
        count = self._half_open_from.get(address, 0)
        if count < self.HALF_OPEN_PER_ADDRESS:
            return None
        return f"{count} connections from {address} still in their handshake, the cap under pressure"

    def under_pressure(self) -> bool:
        """More than ``HALF_OPEN_SHARE`` of the cap is half-open: new connections get
        ``PRESSED_OPEN_TIMEOUT``."""
        return self._pressure_at is not None and len(self._half_open) > self._pressure_at

    def opened(self, waiting: HalfOpen) -> None:
        """Its request came: it is no longer half-open (and never evicted)."""
        self._forget_half_open(waiting)

    def _forget_half_open(self, waiting: HalfOpen) -> str | None:
        """Its address, if it was half-open."""
        address = self._half_open.pop(waiting, None)
        if address is None:
            return None
        count = self._half_open_from.pop(address, 1) - 1
        if count:
            self._half_open_from[address] = count
        return address

    def _evict(self, waiting: HalfOpen, why: str) -> None:
        address = self._forget_half_open(waiting)
        if address is None:
            return
        self._log.warning("dropping the oldest connection still in its handshake", f"{address}: {why}")
        self._release(address)
        waiting.evict()

    def frame_bucket(self, address: str) -> SharedBucket | None:
        """The frame bucket shared by the open connections of ``address`` (None: no such budget)."""
        if self._frames is None:
            return None
        bucket = self._frame_buckets.get(address)
        if bucket is None:
            bucket = self._frame_buckets[address] = SharedBucket(self._frames, self._clock)
            self._count_changed(address)
        return bucket

    def _count_changed(self, address: str) -> None:
        bucket = self._frame_buckets.get(address) if self._frame_buckets else None
        if bucket is not None and self._frames is not None:
            bucket.crowded = self.caps.open_from(address) > self._frames.connections

    def handshake(self, peer: str, forwarded_for: str | None) -> tuple[str, str | None]:
        """At the handshake of an accepted connection: its client's address (``key_of``), and why it
        is refused (logged) or None. Refused, it stays counted under the peer's until ``release``d."""
        address = self.key_of(peer)
        client = self.key_of(self.proxies.client_of(peer, forwarded_for))
        if client == address:
            return address, None
        refused = self._arrival(client) or self.caps.transfer(address, client)
        if refused is not None:
            self._log.warning("connection refused", refused)
            return address, refused
        self._count_changed(address)
        self._count_changed(client)
        return client, None

    def penalize(self, address: str) -> None:
        """``address`` was closed for flooding: it may not connect again for at least the time its
        new-connections bucket takes to refill (2 s by default)."""
        if self._arrivals is not None:
            self._arrivals.penalize(address)

    def release(self, address: str, waiting: HalfOpen | None = None) -> None:
        """A connection admitted from ``address`` is gone (not one the gate evicted: that one it
        released already)."""
        if waiting is not None:
            self._forget_half_open(waiting)
        self._release(address)

    def _release(self, address: str) -> None:
        self.caps.release(address)
        if self._frame_buckets and self.caps.open_from(address) == 0:
            self._frame_buckets.pop(address, None)
        else:
            self._count_changed(address)
