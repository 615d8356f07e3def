"""Wire timestamps: RFC 3339 UTC with milliseconds, both ways."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import format_timestamp, parse_timestamp


def test_format_converts_to_utc_and_truncates_to_milliseconds() -> None:
    moment = dt.datetime(2026, 11, 30, 5, 48, 59, 123999, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert format_timestamp(moment) == "2026-11-30T04:48:59.123Z"


def test_format_refuses_naive_datetimes() -> None:
    with pytest.raises(ValueError):
        format_timestamp(dt.datetime(2026, 11, 30))


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-30T04:48:59Z",
        "2026-11-30T04:48:59.123+00:00",
        "2026-11-30 04:48:59.123Z",
        "2026-02-30T00:00:00.000Z",
        "2026-11-30T04:48:59.1234Z",
        "2026-11-30t04:48:59.123z",
        "",
    ],
)
def test_parse_refuses_other_forms(text: str) -> None:
    with pytest.raises(ValueError):
        parse_timestamp(text)


@settings(max_examples=300)
@given(
    st.datetimes(
        timezones=st.just(dt.UTC), min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30)
    )
)
def test_parse_format_round_trip(moment: dt.datetime) -> None:
    text = format_timestamp(moment)
    assert len(text) == 24
    assert parse_timestamp(text) == moment.replace(microsecond=moment.microsecond // 1000 * 1000)
    assert format_timestamp(parse_timestamp(text)) == text
