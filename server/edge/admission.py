"""Who may open a connection: caps on open connections (per source address and in all), the
proxies whose ``X-Forwarded-For`` names the client, and the allowed ``Origin`` values of a handshake.

Pure decisions, no sockets: ``server.edge.transport`` asks ``ConnectionGate`` as each TCP connection is
accepted (before its handshake, so a socket that never says anything counts too) and answers a
refusal with HTTP 503 at once; ``app.py`` asks it again at the handshake of a connection from a
trusted proxy (now that the client's address is known), and asks ``OriginPolicy``, answering a
refusal with HTTP 503 or 403.
"""

from __future__ import annotations

import ipaddress
import logging
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from server.edge.ratelimit import BucketsByKey

__all__ = [
    "RESERVED_FILES",
    "ConnectionCaps",
    "ConnectionGate",
    "OriginPolicy",
    "ThrottledLog",
    "TrustedProxies",
    "open_files_budget",
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

    def admit(self, address: str, *, per_address: bool = True) -> str | None:
        """Count a new connection from ``address``; returns why it is refused (and then does not
        count it), or None. Every admitted connection must be ``release``d once. ``per_address``
        False skips the per-address cap (a trusted proxy: ``transfer`` applies it at the handshake)."""
        if self.total is not None and self._total_open >= self.total:
            return f"{self._total_open} connections open, the cap is {self.total}"
        count = self._open.get(address, 0)
        if per_address and self.per_address is not None and count >= self.per_address:
            return f"{count} connections open from {address}, the cap is {self.per_address}"
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
class TrustedProxies:
    """The proxies (addresses or networks) whose ``X-Forwarded-For`` header names the client: its
    last entry, the one the proxy appended (the ones before it are the client's word)."""

    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()

    @classmethod
    def parse(cls, setting: str) -> TrustedProxies:
        """``"10.0.0.2, 172.16.0.0/12"``; raises ValueError for an entry that is neither."""
        networks = []
        for entry in (entry.strip() for entry in setting.split(",")):
            if entry:
                try:
                    networks.append(ipaddress.ip_network(entry, strict=False))
                except ValueError:
                    raise ValueError(f"trusted proxy {entry!r} is not an address or a network") from None
        return cls(tuple(networks))

    def trusts(self, peer: str) -> bool:
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        return any(address in network for network in self.networks)

    def client_of(self, peer: str, forwarded_for: str | None) -> str:
        """The client's address: the last ``X-Forwarded-For`` entry when ``peer`` is trusted."""
        if forwarded_for is None or not self.trusts(peer):
            return peer
        entries = [entry.strip() for entry in forwarded_for.split(",") if entry.strip()]
        return entries[-1][:64] if entries else peer


class ConnectionGate:
    """Admits connections under the caps, one address per connection: the peer's at accept, the
    forwarded client's at the handshake when the peer is a trusted proxy."""

    LINGER_SLOTS = RESERVED_FILES // 2
    """Refused sockets kept open at once until their client read the 503 (taken from the reserve)."""

    def __init__(
        self,
        caps: ConnectionCaps,
        proxies: TrustedProxies,
        log: ThrottledLog,
        arrivals: BucketsByKey | None = None,
    ) -> None:
        """``arrivals``: new connections per address (None: any number)."""
        self.caps = caps
        self.proxies = proxies
        self._log = log
        self._arrivals = arrivals
        self._lingering = 0

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

    def accept(self, peer: str) -> str | None:
        """At accept; returns why the connection is refused (logged), or None."""
        proxy = self.proxies.trusts(peer)
        refused = (None if proxy else self._arrival(peer)) or self.caps.admit(peer, per_address=not proxy)
        if refused is not None:
            self._log.warning("connection refused", refused)
        return refused

    def handshake(self, peer: str, forwarded_for: str | None) -> tuple[str, str | None]:
        """At the handshake of an accepted connection: its client address, and why it is refused
        (logged) or None. Refused, it stays counted under ``peer`` until ``release``d."""
        client = self.proxies.client_of(peer, forwarded_for)
        refused = None if client == peer else self._arrival(client) or self.caps.transfer(peer, client)
        if refused is not None:
            self._log.warning("connection refused", refused)
            return peer, refused
        return client, None

    def penalize(self, address: str) -> None:
        """``address`` was closed for flooding: it may not connect again for at least the time its
        new-connections bucket takes to refill (2 s by default)."""
        if self._arrivals is not None:
            self._arrivals.penalize(address)

    def release(self, address: str) -> None:
        self.caps.release(address)


SELF = "self"
NO_ORIGIN = "none"
ANY = "*"


@dataclass(frozen=True, slots=True)
class OriginPolicy:
    """The ``Origin`` values a WebSocket handshake may carry.

    Built from the ``origins`` setting, a comma-separated list of: ``self`` (the server's own origin:
    an Origin whose host and port are the request's ``Host``, as for the browser client served on
    this port), ``none`` (no Origin header: bots, command-line clients), ``*`` (any origin), or an
    origin such as ``https://play.example.org``.
    """

    allowed: frozenset[str]
    same_origin: bool
    no_origin: bool
    any_origin: bool

    @classmethod
    def parse(cls, setting: str) -> OriginPolicy:
        """Raises ValueError for an entry that is not a keyword nor a ``scheme://host[:port]``."""
        entries = {entry.strip() for entry in setting.split(",") if entry.strip()}
        origins = entries - {SELF, NO_ORIGIN, ANY}
        for origin in origins:
            parts = urlsplit(origin)
            if parts.scheme not in ("http", "https") or not parts.netloc or parts.path:
                raise ValueError(f"origin {origin!r} is not self, none, * or scheme://host[:port]")
        return cls(
            allowed=frozenset(origin.lower() for origin in origins),
            same_origin=SELF in entries,
            no_origin=NO_ORIGIN in entries,
            any_origin=ANY in entries,
        )

    def allows(self, origin: str | None, host: str | None) -> bool:
        """Whether a handshake with this ``Origin`` (None when absent) to this ``Host`` may go on."""
        if origin is None:
            return self.no_origin or self.any_origin
        origin = origin.strip().lower()
        if self.any_origin or origin in self.allowed:
            return True
        if self.same_origin and host:
            try:
                parts = urlsplit(origin)
            except ValueError:  # e.g. "http://[::1": no origin of ours
                return False
            return parts.scheme in ("http", "https") and parts.netloc == host.strip().lower()
        return False
