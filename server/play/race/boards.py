"""The boards a race keeps for its spectators until they are old enough to show (fair play: a
spectator who holds no seat sees each seat's board ``delay`` seconds late). Pure: the race room
(`server.play.race.room`) says what was committed and what time it is.
"""

from __future__ import annotations

import collections
import datetime as dt

from server.play.effects import SeatProgress

__all__ = ["DelayedBoards"]


class DelayedBoards:
    """Each seat's committed positions, in commit order, until ``delay`` has passed; at most one a
    second per seat is kept (a later one within the second replaces it), so what is held is bounded
    by seats × delay whatever the rate of play."""

    __slots__ = ("_due", "delay")

    def __init__(self, delay: float) -> None:
        self.delay = dt.timedelta(seconds=delay)
        self._due: collections.deque[tuple[dt.datetime, int, SeatProgress]] = collections.deque()

    def keep(self, seat: int, progress: SeatProgress) -> dt.datetime | None:
        """Keep ``seat``'s board of ``progress``; when it is the first one held, the time it is due
        (the caller asks to be woken then)."""
        due = progress.at + self.delay
        queue = self._due
        if queue and queue[-1][1] == seat and (due - queue[-1][0]).total_seconds() < 1:
            queue[-1] = (queue[-1][0], seat, progress)
            return None
        queue.append((due, seat, progress))
        return due if len(queue) == 1 else None

    def release(self, now: dt.datetime) -> dict[int, SeatProgress]:
        """The boards due by ``now``: the latest of each seat, in seat order of first release."""
        released: dict[int, SeatProgress] = {}
        while self._due and self._due[0][0] <= now:
            _, seat, progress = self._due.popleft()
            released[seat] = progress
        return released

    def next_due(self) -> dt.datetime | None:
        return self._due[0][0] if self._due else None
