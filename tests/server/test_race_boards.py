"""The spectators' board stream of a race (`server.play.race.boards`): never early, at most one a
second per seat, never stalled, bounded, whatever the pace and interleaving of the seats' commits
and however early the room's timer fires."""

from __future__ import annotations

import datetime as dt
import itertools

from hypothesis import given
from hypothesis import strategies as st

from engine import Deal, Game, Status
from server.play.effects import SeatProgress
from server.play.race.boards import DelayedBoards

T0 = dt.datetime(2026, 12, 2, 5, 0, tzinfo=dt.UTC)
DELAY = 30.0
LAYOUT = Game(Deal.from_code("EO1-C8-AAAAAAB")).layout()


def commit(game: str, v: int, seconds: float) -> SeatProgress:
    return SeatProgress(game, v, LAYOUT, 0, v, Status.PLAYING, T0 + dt.timedelta(seconds=seconds))


commits = st.lists(
    st.tuples(st.integers(1, 8), st.floats(0, 0.8, allow_nan=False)),  # seat, seconds since the last
    min_size=1,
    max_size=300,
)


def drive(
    boards: DelayedBoards, plan: list[tuple[int, float]], early: float
) -> tuple[list[tuple[dt.datetime, int, SeatProgress]], dict[int, SeatProgress]]:
    """Commit ``plan`` in time order and wake the boards as the room does (at `next_due`, ``early``
    seconds before it as a timer may), until nothing is held: what was shown, and each seat's last."""
    shown: list[tuple[dt.datetime, int, SeatProgress]] = []
    last: dict[int, SeatProgress] = {}
    now, versions = 0.0, dict.fromkeys(range(1, 9), 0)
    events = []
    for seat, gap in plan:
        now += gap
        versions[seat] += 1
        events.append((now, seat, commit(f"g{seat}", versions[seat], now)))

    def wake_until(limit: dt.datetime) -> None:
        for _ in range(100_000):
            due = boards.next_due()
            if due is None or due > limit:
                return
            at = due - dt.timedelta(seconds=early)
            shown.extend((at, seat, progress) for seat, progress in boards.release(at).items())
            shown.extend((due, seat, progress) for seat, progress in boards.release(due).items())
        raise AssertionError("the boards never ran out")

    for seconds, seat, progress in events:
        wake_until(T0 + dt.timedelta(seconds=seconds))
        boards.keep(seat, progress)
        last[seat] = progress
        assert all(len(held) <= DELAY + 2 for held in boards._held.values())  # bounded: a second each
    wake_until(dt.datetime.max.replace(tzinfo=dt.UTC))
    return shown, last


@given(commits, st.sampled_from([0.0, 0.0008, 0.3]))
def test_the_board_stream_is_never_early_throttled_and_never_stalls(
    plan: list[tuple[int, float]], early: float
) -> None:
    shown, last = drive(DelayedBoards(DELAY), plan, early)
    for at, _, progress in shown:
        assert at >= progress.at + dt.timedelta(seconds=DELAY)  # never early
    for seat in last:
        times = [at for at, shown_seat, _ in shown if shown_seat == seat]
        assert all(b - a >= dt.timedelta(seconds=1) for a, b in itertools.pairwise(times))
        versions = [progress.v for _, shown_seat, progress in shown if shown_seat == seat]
        assert versions == sorted(versions)  # in commit order
        assert versions[-1] == last[seat].v  # never stalled: the seat's last board is shown
    assert DelayedBoards(DELAY).next_due() is None


def test_two_seats_interleaving_keep_their_boards_coming() -> None:
    """Two seats committing alternately every 0.3 s for a minute (what stalled the stream after a few
    boards): each seat's boards keep coming about once a second, each its latest commit that is due."""
    plan = [(1 + n % 2, 0.3) for n in range(200)]
    shown, _ = drive(DelayedBoards(DELAY), plan, early=0.0008)
    per_seat = {seat: [at for at, s, _ in shown if s == seat] for seat in (1, 2)}
    assert all(55 <= len(times) <= 62 for times in per_seat.values()), {
        s: len(t) for s, t in per_seat.items()
    }
