"""Timestamps on the wire: RFC 3339 UTC with milliseconds, always 24 characters
(``2026-11-30T04:48:59.123Z``). The protocol reads no clock: callers pass the moment in.
"""

from __future__ import annotations

import datetime as dt
import re

__all__ = ["format_timestamp", "parse_timestamp"]

_TIMESTAMP_RE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})\.([0-9]{3})Z")


def format_timestamp(moment: dt.datetime) -> str:
    """The wire text of an aware datetime, converted to UTC, truncated to the millisecond.

    Raises:
        ValueError: ``moment`` is naive (a naive time would be read in the server's local zone).
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"a wire timestamp needs an aware datetime, not {moment!r}")
    utc = moment.astimezone(dt.UTC)
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}"
        f".{utc.microsecond // 1000:03d}Z"
    )


def parse_timestamp(text: str) -> dt.datetime:
    """The aware UTC datetime of a wire timestamp, accepting exactly the form ``format_timestamp`` writes.

    Raises:
        ValueError: not a wire timestamp (other offsets, missing milliseconds, impossible dates).
    """
    match = _TIMESTAMP_RE.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"not a wire timestamp (like 2026-11-30T04:48:59.123Z): {text!r}")
    year, month, day, hour, minute, second, millis = (int(part) for part in match.groups())
    return dt.datetime(year, month, day, hour, minute, second, millis * 1000, tzinfo=dt.UTC)
