"""The client's own pace: at most the server's request rate, so that a bot never meets ``rate_limited``.

The server meters every frame it reads with a token bucket per connection (protocol/README.md
section 10, "Pacing": 400 at once, 200 a second by default). Waiting for each reply is not enough
to stay under it: on a local link a request's round trip takes about a millisecond, so a bot that
plays as fast as it is answered sends several hundred frames a second. `Pace` is the same bucket on
the client's side, a little smaller, so the few control frames (pings, pongs) fit in the margin.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["DEFAULT_BURST", "DEFAULT_RATE", "Pace"]

#: Just under the server's defaults (200 a second, 400 at once): the rest is the control frames'.
DEFAULT_RATE = 190.0
DEFAULT_BURST = 380


class Pace:
    """A token bucket of ``burst`` frames refilled at ``rate`` a second; `wait` takes one."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a pace needs a rate above 0 and a burst of at least 1")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()

    def delay(self) -> float:
        """Take a frame's token: how many seconds to wait before sending it (0.0: at once)."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    async def wait(self) -> None:
        """Wait until one more frame keeps within the pace."""
        delay = self.delay()
        if delay > 0:
            await asyncio.sleep(delay)
