"""server.services.sealing: whose moves on a shared deal a viewer may see, and when they open (pure
policy)."""

from __future__ import annotations

import datetime as dt

import pytest

from server.services.sealing import NOT_PLAYED, Sealed, SharedDeal, Standing, may_start, seal

DAY = dt.date(2026, 12, 1)
DAILY = SharedDeal.daily(DAY, 8, "EO1-C8-AAAAAFA")
MIDNIGHT = dt.datetime(2026, 12, 2, tzinfo=dt.UTC)
NOON = dt.datetime(2026, 12, 1, 12, tzinfo=dt.UTC)


def test_the_daily_closes_at_the_next_utc_midnight() -> None:
    assert DAILY.closes_at == MIDNIGHT
    assert DAILY.name == "the daily of 2026-12-01 (8 cells)"
    assert DAILY.is_open(MIDNIGHT - dt.timedelta(microseconds=1))
    assert not DAILY.is_open(MIDNIGHT)


def test_a_viewer_who_has_not_played_is_sealed_until_the_close() -> None:
    assert seal(DAILY, viewer="b", owner="a", standing=NOT_PLAYED, now=NOON) == Sealed(DAILY, MIDNIGHT)


def test_anyone_not_signed_in_is_sealed_like_a_viewer_who_has_not_played() -> None:
    assert seal(DAILY, viewer=None, owner="a", standing=NOT_PLAYED, now=NOON) == Sealed(DAILY, MIDNIGHT)


def test_a_viewer_who_finished_it_sees_every_game_of_it() -> None:
    assert seal(DAILY, viewer="b", owner="a", standing=Standing(finished=True), now=NOON) is None


def test_a_viewer_still_playing_it_is_sealed_until_they_finish_even_after_the_close() -> None:
    """An unfinished daily game still counts on its board when it ends, closed day or not: finishing
    another game of it (or the day's end) does not open the others to its player."""
    for standing in (Standing(playing=True), Standing(finished=True, playing=True)):
        for now in (NOON, MIDNIGHT + dt.timedelta(days=3)):
            assert seal(DAILY, viewer="b", owner="a", standing=standing, now=now) == Sealed(DAILY, None)


def test_the_close_opens_it_to_whoever_has_no_unfinished_game_of_it() -> None:
    assert seal(DAILY, viewer="b", owner="a", standing=NOT_PLAYED, now=MIDNIGHT) is None
    assert seal(DAILY, viewer=None, owner="a", standing=NOT_PLAYED, now=MIDNIGHT) is None


def test_ones_own_game_and_a_game_of_no_shared_deal_are_never_sealed() -> None:
    assert seal(DAILY, viewer="a", owner="a", standing=Standing(playing=True), now=NOON) is None
    assert seal(None, viewer="b", owner="a", standing=Standing(playing=True), now=NOON) is None


@pytest.mark.parametrize(
    ("standing", "now", "allowed"),
    [
        (NOT_PLAYED, NOON, True),
        (Standing(playing=True), NOON, True),  # a second game while the first is unfinished
        (Standing(finished=True), NOON, False),  # one finished game each
        (NOT_PLAYED, MIDNIGHT, False),  # closed
    ],
)
def test_a_daily_game_starts_only_while_open_and_not_yet_finished(
    standing: Standing, now: dt.datetime, allowed: bool
) -> None:
    assert may_start(DAILY, standing, now) is allowed


def test_the_refusal_says_when_the_game_opens() -> None:
    until_close = Sealed(DAILY, MIDNIGHT).message("g1")
    assert "g1" in until_close and "the daily of 2026-12-01 (8 cells)" in until_close
    assert "2026-12-02T00:00:00.000Z" in until_close and "finish it first" in until_close
    assert DAILY.code not in until_close  # a race's deal is secret until it starts: never named by code
    until_finished = Sealed(DAILY, None).message("g1")
    assert "finish your own game of it first" in until_finished and "Z" not in until_finished


def test_a_race_deal_is_sealed_to_seats_and_spectators_until_the_race_is_over() -> None:
    """A seated player counts as still playing the race's deal until it is over, even once its own
    game ended; anyone else is sealed until the race closes."""
    ends = dt.datetime(2026, 12, 2, 5, 5, tzinfo=dt.UTC)
    running = SharedDeal.race("r1", "EO1-C8-AAAAAAB", ends)
    before = ends - dt.timedelta(minutes=1)
    seated, spectator = Standing(playing=True), NOT_PLAYED
    assert seal(running, viewer="bo", owner="ann", standing=seated, now=before) == Sealed(running, None)
    assert seal(running, viewer="cy", owner="ann", standing=spectator, now=before) == Sealed(running, ends)
    over = SharedDeal.race("r1", "EO1-C8-AAAAAAB", before)  # the race ended: it closes then
    assert seal(over, viewer="cy", owner="ann", standing=spectator, now=before) is None
    assert seal(over, viewer="bo", owner="ann", standing=Standing(), now=before) is None
    assert running.name == "race r1"
