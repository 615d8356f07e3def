"""The server's clock: every timestamp it stores or sends is aware UTC, taken here (tests patch it)."""

from __future__ import annotations

import datetime as dt

__all__ = ["epoch_ms", "from_epoch_ms", "utc_now"]


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MILLISECOND = dt.timedelta(milliseconds=1)


def epoch_ms(moment: dt.datetime) -> int:
    """``moment`` (aware) as whole milliseconds since the Unix epoch, rounded down (exact: no float):
    how an action's time is stored."""
    return (moment - _EPOCH) // _MILLISECOND


def from_epoch_ms(millis: int) -> dt.datetime:
    """The aware UTC moment of `epoch_ms`."""
    return _EPOCH + millis * _MILLISECOND
