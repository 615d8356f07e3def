"""How a server process runs: its log lines and its event loop (the CLI's and each worker's)."""

from __future__ import annotations

import asyncio
import faulthandler
import logging
from collections.abc import Callable

__all__ = ["configure_logging", "fast_event_loop"]


def configure_logging(process: str | None) -> None:
    """Log lines on stderr, naming ``process`` (a worker's node, or the supervisor) when there are
    several.

    A fatal signal is reported there too (`faulthandler`: ``Fatal Python error: Bus error`` and each
    thread's stack), so that a process killed from inside (SQLite's memory-mapped ``-shm`` file gone
    unwritable is a SIGBUS) never vanishes without a word; a Python signal handler could not do it,
    as it would run only after the faulting instruction, which runs again."""
    faulthandler.enable()
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
