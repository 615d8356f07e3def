"""A token bucket per connection: bursts are fine, a sustained flood is refused and then closed."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["TokenBucket"]


class TokenBucket:
    """``rate`` tokens a second up to ``burst``; each message takes one.

    ``take()`` says whether the message may be served. A client that keeps sending while refused
    builds up ``debt``; past ``burst`` of it the caller should close the connection (1008).
    """

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._stamp = clock()
        self.debt = 0

    def take(self) -> bool:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
        self._stamp = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            self.debt = 0
            return True
        self.debt += 1
        return False

    def is_abusive(self) -> bool:
        """The client went on flooding for a whole burst after being refused."""
        return self.debt > self._burst
