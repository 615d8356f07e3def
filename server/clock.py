"""The server's clock: every timestamp it stores or sends is aware UTC, taken here (tests patch it)."""

from __future__ import annotations

import datetime as dt

__all__ = ["utc_now"]


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
