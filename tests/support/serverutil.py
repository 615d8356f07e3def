"""A real server for tests: started in-process on a free loopback port, always shut down after.

Import it as ``from tests.support import serverutil``.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from server.app import App
from server.config import Settings


@asynccontextmanager
async def running_app(database_url: str, **settings: Any) -> AsyncIterator[App]:
    """An ``App`` on 127.0.0.1 port 0 over ``database_url`` (migrated on start, as in production)."""
    app = await App.start(Settings(host="127.0.0.1", port=0, database_url=database_url, **settings))
    try:
        yield app
    finally:
        await app.shutdown()


def ws_url(app: App) -> str:
    return f"ws://127.0.0.1:{app.port}/ws"


def socket_from(address: str, port: int) -> socket.socket:
    """A TCP socket connected to the server on 127.0.0.1 from the loopback ``address`` (127.0.0.2 …):
    a client with a source address of its own, for the per-address limits."""
    sock = socket.socket()
    sock.bind((address, 0))
    sock.connect(("127.0.0.1", port))
    return sock
