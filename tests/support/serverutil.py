"""A real server for tests: started in-process on a free loopback port, always shut down after.

Import it as ``from tests.support import serverutil``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

from server.app import App
from server.config import Settings
from tests.support.ci import unavailable


@asynccontextmanager
async def running_app(database_url: str, **settings: Any) -> AsyncIterator[App]:
    """An ``App`` on 127.0.0.1 (or ``host=``) port 0 over ``database_url`` (migrated on start, as in
    production)."""
    settings = {"host": "127.0.0.1", "port": 0, "database_url": database_url, **settings}
    app = await App.start(Settings(**settings))
    try:
        yield app
    finally:
        drop_closed_connections(app)
        await app.shutdown()


def drop_closed_connections(app: App) -> None:
    """Drop the sockets of the connections the server has closed already and only keeps for their
    peer to read what it sent (``CLOSE_LINGER``, 2 s; one closed for a bad frame or a flood reads
    nothing more, so not even its peer's FIN ends the wait): the test that made them is over, and
    the shutdown would wait the linger out for each. Open connections are left to the shutdown,
    which closes them 1001 as in production."""
    for connection in list(app.server.connections):
        if not connection.is_open:
            connection.abort()


def ws_url(app: App) -> str:
    host = app.settings.host
    return f"ws://[{host}]:{app.port}/ws" if ":" in host else f"ws://{host}:{app.port}/ws"


IPV6_FREEBIND = 78  # linux/in6.h: bind an address the host does not hold (the socket module lacks it)


def socket_from(address: str, port: int) -> socket.socket:
    """A TCP socket connected to the server on 127.0.0.1 from the loopback ``address`` (127.0.0.2 …),
    or on ::1 from an IPv6 ``address`` of ``ipv6_sources``: a client with a source address of its
    own, for the per-address limits."""
    if ":" not in address:
        sock = socket.socket()
        sock.bind((address, 0))
        sock.connect(("127.0.0.1", port))
        return sock
    sock = socket.socket(socket.AF_INET6)
    sock.setsockopt(socket.IPPROTO_IPV6, IPV6_FREEBIND, 1)
    sock.bind((address, 0))
    sock.settimeout(5.0)  # without the route a connect would wait for its SYN's answer for minutes
    sock.connect(("::1", port))
    sock.settimeout(None)
    return sock


@contextlib.contextmanager
def ipv6_sources() -> Iterator[ipaddress.IPv6Network]:
    """A /48 of documentation addresses (2001:db8::/32, one per process) routed to the loopback while
    the block runs, so that clients can connect to ::1 from as many IPv6 addresses as a test wants
    (Linux has only ::1 on lo). Adding the route takes root: CI runs as root and fails without it,
    elsewhere the test skips."""
    network = ipaddress.IPv6Network(f"2001:db8:{os.getpid() % 0xFFFF + 1:x}::/48")
    ip = shutil.which("ip")
    if ip is None:
        unavailable("the ip command (iproute2) is missing: no IPv6 addresses can be routed to the loopback")
    route = [str(ip), "-6", "route", "add", "local", str(network), "dev", "lo"]
    added = subprocess.run(route, capture_output=True, text=True, check=False)
    if added.returncode != 0:
        unavailable(f"cannot route {network} to the loopback (it takes root): {added.stderr.strip()}")
    try:
        yield network
    finally:
        route[3] = "del"
        subprocess.run(route, capture_output=True, check=False)
