"""The boards a race keeps for its spectators until they are old enough to show (fair play: a
spectator who holds no seat sees each seat's board ``delay`` seconds late). Pure: the race room
(`server.play.race.room`) says what was committed and what time it is.

Three promises, whatever the pace of play (docs/races.md, Spectators' boards):
- never early: a board is shown once its own commit is ``delay`` old;
- at most one a second per seat: when several are due within a second, the latest of them is shown
  (a throttled send shows the newest board it may);
- never stalled: `next_due` always names the next time something can be shown, so the room's timer
  is armed again after every release, a timer that fired early included.

What is held is bounded by seats × delay: one board per seat per second of commits.
"""

from __future__ import annotations

import collections
import datetime as dt

from server.play.effects import SeatProgress

__all__ = ["DelayedBoards"]

_EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


class DelayedBoards:
    """Each seat's committed boards, one per second of commits (the latest of that second), until
    they are due; see the module docstring."""

    __slots__ = ("_held", "_shown_at", "delay", "spacing")

    def __init__(self, delay: float, spacing: float = 1.0) -> None:
        self.delay = dt.timedelta(seconds=delay)
        self.spacing = dt.timedelta(seconds=spacing)
        self._held: dict[int, collections.deque[tuple[int, dt.datetime, SeatProgress]]] = {}
        self._shown_at: dict[int, dt.datetime] = {}

    def keep(self, seat: int, progress: SeatProgress) -> None:
        """Hold ``seat``'s board of ``progress`` until it is due."""
        due = progress.at + self.delay
        second = (due - _EPOCH) // self.spacing
        held = self._held.setdefault(seat, collections.deque())
        if held and held[-1][0] == second:
            held[-1] = (second, due, progress)  # the latest of its second, due at its own time
        else:
            held.append((second, due, progress))

    def release(self, now: dt.datetime) -> dict[int, SeatProgress]:
        """The boards to show at ``now``: per seat, the latest one due, unless the seat's last board was
        shown less than a second ago (then it waits: `next_due`)."""
        released: dict[int, SeatProgress] = {}
        for seat, held in self._held.items():
            if not held or held[0][1] > now or now < self._next_show(seat):
                continue
            latest = held.popleft()
            while held and held[0][1] <= now:
                latest = held.popleft()
            released[seat] = latest[2]
            self._shown_at[seat] = now
        return released

    def next_due(self) -> dt.datetime | None:
        """When `release` next has a board to show (None: nothing is held)."""
        times = [max(held[0][1], self._next_show(seat)) for seat, held in self._held.items() if held]
        return min(times, default=None)

    def _next_show(self, seat: int) -> dt.datetime:
        shown = self._shown_at.get(seat)
        return _EPOCH if shown is None else shown + self.spacing
