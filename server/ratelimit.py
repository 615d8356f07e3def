"""Token buckets: a flood is refused, and a client that keeps flooding is closed, whatever its pace.

Pure: no I/O, the clock is passed in. One ``TokenBucket`` per connection meters its frames (every
frame, valid or not, control frames included: see ``server.edge.transport``). ``BucketsByKey``
holds one bucket per source address for rarer things (guests created per minute).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable

__all__ = ["BucketsByKey", "Metered", "TokenBucket"]

Clock = Callable[[], float]


class Metered(enum.Enum):
    """What to do with one frame."""

    SERVE = "serve"
    REFUSE = "refuse"  # answer rate_limited
    CLOSE = "close"  # close 1008: the client went on flooding for a whole bucketful while refused


_SERVE = Metered.SERVE


class TokenBucket:
    """``rate`` tokens a second up to ``burst``; each frame takes one.

    Refusals add up in ``debt``, and only a full bucket forgets them: a client must pause until the
    bucket has refilled (``burst / rate`` seconds) to be forgiven. Serving a token that trickled in
    meanwhile does not forgive anything, so a flood paced just above ``rate`` is closed after
    ``burst`` refusals like an unpaced one (only later: at pace ``p`` after ``burst / (p - rate)``
    seconds).
    """

    __slots__ = ("_burst", "_clock", "_rate", "_stamp", "_tokens", "debt")

    def __init__(self, rate: float, burst: int, clock: Clock = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"a token bucket needs rate > 0 and burst >= 1, not {rate} and {burst}")
        self._rate = rate
        self._burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._stamp = clock()
        self.debt = 0

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
        self._stamp = now
        if self._tokens >= self._burst:
            self.debt = 0

    def is_full(self) -> bool:
        self._refill()
        return self._tokens >= self._burst

    def give_back(self) -> None:
        """Return a token taken for something that turned out not to count; never past the burst,
        and never into a bucket below zero (a penalty, ``owe``, is paid back by time alone)."""
        self._refill()
        if self._tokens >= 0.0:
            self._tokens = min(self._burst, self._tokens + 1.0)

    def owe(self, tokens: float) -> None:
        """Leave the bucket ``tokens`` below zero at most: a penalty that only time pays back. It
        does not add up: closures at once (one address's many connections) cost no more than one."""
        self._refill()
        self._tokens = min(self._tokens, -tokens)

    def take(self) -> Metered:
        """Meter one frame (``_refill`` written out: this runs for every frame)."""
        now = self._clock()
        tokens = self._tokens + (now - self._stamp) * self._rate
        burst = self._burst
        if tokens >= burst:
            tokens = burst
            self.debt = 0
        self._stamp = now
        if tokens >= 1.0:
            self._tokens = tokens - 1.0
            return _SERVE
        self._tokens = tokens
        self.debt += 1
        return Metered.CLOSE if self.debt > self._burst else Metered.REFUSE


class BucketsByKey:
    """One token bucket per key (a source address), forgotten once full again so memory stays
    bounded by the keys active in the last ``burst / rate`` seconds."""

    def __init__(self, rate: float, burst: int, clock: Clock = time.monotonic) -> None:
        self._rate = rate
        self._burst = burst
        self._clock = clock
        self._buckets: dict[str, TokenBucket] = {}
        self._swept_at = clock()

    def allow(self, key: str) -> bool:
        """Take a token from ``key``'s bucket; False when it is empty (nothing is taken then)."""
        self._sweep()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket(self._rate, self._burst, self._clock)
        return bucket.take() is Metered.SERVE

    def give_back(self, key: str) -> None:
        """Return a token ``allow`` took from ``key``'s bucket (see ``TokenBucket.give_back``); a
        bucket forgotten meanwhile was full."""
        bucket = self._buckets.get(key)
        if bucket is not None:
            bucket.give_back()

    def penalize(self, key: str) -> None:
        """Empty ``key``'s bucket and then some: nothing more passes for ``burst / rate`` seconds
        from now (not longer for several penalties at once)."""
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket(self._rate, self._burst, self._clock)
        bucket.owe(self._burst)

    def __len__(self) -> int:
        return len(self._buckets)

    def _sweep(self) -> None:
        """Drop full buckets, at most once per refill period (amortised O(1) per call)."""
        now = self._clock()
        if now - self._swept_at < self._burst / self._rate:
            return
        self._swept_at = now
        for key in [key for key, bucket in self._buckets.items() if bucket.is_full()]:
            del self._buckets[key]
