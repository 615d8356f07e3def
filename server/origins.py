"""Where a connection comes from: the proxies whose ``X-Forwarded-For`` names the client
(`TrustedProxies`), and the ``Origin`` values a WebSocket handshake may carry (`OriginPolicy`).

Each is parsed from its setting (``--trusted-proxies``, ``--origins``): by `server.config` to refuse a
bad value before the server starts, and by ``server.app`` for the edge that asks them
(`server.edge.admission.ConnectionGate` the proxies, `server.edge.http` the origins). Pure: no I/O.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["OriginPolicy", "TrustedProxies"]


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
        """Asked at every accept (under a half-open flood, parsing each peer's address is half of the
        admission work): nothing to parse when no proxy is trusted, and each peer parsed once."""
        return bool(self.networks) and _within(peer, self.networks)

    def client_of(self, peer: str, forwarded_for: str | None) -> str:
        """The client's address: the last ``X-Forwarded-For`` entry when ``peer`` is trusted."""
        if forwarded_for is None or not self.trusts(peer):
            return peer
        entries = [entry.strip() for entry in forwarded_for.split(",") if entry.strip()]
        return entries[-1][:64] if entries else peer


@functools.lru_cache(maxsize=4096)
def _within(peer: str, networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]) -> bool:
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return False
    return any(address in network for network in networks)


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
