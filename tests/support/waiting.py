"""Waiting for a condition instead of sleeping: a test says what it waits for, and fails with those
words when it does not come true in time, however slow the machine."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

#: How often a condition is checked again while waited for: often enough not to slow a test down,
#: rarely enough not to compete with the server it waits on.
INTERVAL = 0.01


async def eventually(
    predicate: Callable[[], bool | Awaitable[bool]], what: str, *, timeout: float = 10.0
) -> None:
    """Return once ``predicate()`` (a plain or async check) is true; raise AssertionError naming
    ``what`` after ``timeout`` seconds. The check runs at least once, also after the deadline passed."""
    deadline = time.monotonic() + timeout
    while True:
        outcome = predicate()
        if outcome if isinstance(outcome, bool) else await outcome:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting until {what}")
        await asyncio.sleep(INTERVAL)
