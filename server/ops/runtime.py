"""How a server process runs: its log lines and its event loop (the CLI's and each worker's)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

__all__ = ["configure_logging", "fast_event_loop"]


def configure_logging(process: str | None) -> None:
    """Log lines on stderr, naming ``process`` (a worker's node, or the supervisor) when there are
    several."""
    where = f" [{process}]" if process else ""
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s %(levelname)s{where} %(name)s: %(message)s")
    logging.getLogger("websockets").setLevel(logging.WARNING)  # not a line per connection and request


def fast_event_loop() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (it is a dependency on POSIX): about 15% more
    actions per second under load; the standard loop elsewhere."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
