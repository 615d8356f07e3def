"""Cursors of the pages keyed by (a time, a game id): ``live`` and a player's unfinished ``games``.

A cursor is ``YYYYMMDDHHMMSSffffff.<game id>`` in UTC: opaque to clients (they send back a page's
``next`` as ``after``), readable in a log.
"""

from __future__ import annotations

import datetime as dt

from server.errors import ErrorCode, Refusal

__all__ = ["parse_time_cursor", "time_cursor"]

_TIME = "%Y%m%d%H%M%S%f"


def time_cursor(moment: dt.datetime, game_id: str) -> str:
    return f"{moment.astimezone(dt.UTC).strftime(_TIME)}.{game_id}"


def parse_time_cursor(cursor: str, page: str) -> tuple[dt.datetime, str]:
    """The (time, game id) key of ``cursor``.

    Raises:
        Refusal: bad_request, naming ``page``, for a cursor the server did not make.
    """
    moment, _, game_id = cursor.partition(".")
    try:
        at = dt.datetime.strptime(moment, _TIME).replace(tzinfo=dt.UTC)
    except ValueError:
        raise Refusal(
            ErrorCode.BAD_REQUEST, f"after: not a cursor of {page}; send back a page's `next`"
        ) from None
    return at, game_id
