"""A fair share of a scarce worker (the hint solver) between players and between source addresses.

Pure policy, no I/O: `FairQueue` decides who may queue a job, who waits and whose job runs next;
`server.services.hints.SolvingService` runs the jobs. One address (or one player) asking as fast as it can
takes at most its share of places and, when every running slot is taken, its turn in a round-robin
over the addresses that wait (and, within an address, over its players): a bystander's hint waits for
the jobs running and at most one job per other address ahead of it, however many the flood queued.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

__all__ = ["Asker", "FairQueue", "Full"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Asker:
    """Who asks: a player (its id) and the source address its connection came from."""

    player: str
    address: str


class Full(Enum):
    """Why a job was not queued."""

    PLAYER = "player"  #: the player holds its share: it is the one over it (``rate_limited``)
    ADDRESS = "address"  #: the address holds its share (``rate_limited``)
    QUEUE = "queue"  #: every place of the queue is held (``unavailable``)


class FairQueue(Generic[T]):
    """Jobs held (waiting or running) per player, per address and in all, and the order they run in.

    Every ``offer``ed job is held until ``done`` is called for it once; ``next`` hands out the next job
    to run while fewer than ``running`` are running.
    """

    def __init__(self, *, running: int, per_player: int, per_address: int, total: int) -> None:
        if min(running, per_player, per_address, total) < 1:
            raise ValueError("every limit of a FairQueue is at least 1")
        self._running_cap = running
        self._per_player = per_player
        self._per_address = per_address
        self._total = total
        self._running = 0
        self._held = 0
        self._by_player: dict[str, int] = {}
        self._by_address: dict[str, int] = {}
        #: waiting jobs: address -> player -> jobs, each level in round-robin order (next first)
        self._waiting: OrderedDict[str, OrderedDict[str, deque[T]]] = OrderedDict()

    @property
    def held(self) -> int:
        """Jobs waiting or running."""
        return self._held

    @property
    def running(self) -> int:
        return self._running

    def held_by(self, asker: Asker) -> tuple[int, int]:
        """Jobs held by ``asker``'s player and by its address."""
        return self._by_player.get(asker.player, 0), self._by_address.get(asker.address, 0)

    def offer(self, asker: Asker, job: T) -> Full | None:
        """Queue ``job`` for ``asker`` unless a share is held (then returns which, and holds nothing)."""
        by_player, by_address = self.held_by(asker)
        if by_player >= self._per_player:
            return Full.PLAYER
        if by_address >= self._per_address:
            return Full.ADDRESS
        if self._held >= self._total:
            return Full.QUEUE
        self._held += 1
        self._by_player[asker.player] = by_player + 1
        self._by_address[asker.address] = by_address + 1
        players = self._waiting.setdefault(asker.address, OrderedDict())
        players.setdefault(asker.player, deque()).append(job)
        return None

    def next(self) -> tuple[Asker, T] | None:
        """The next job to run, now counted as running: the first waiting address's first waiting
        player's oldest job, both then sent to the back of their round; None when ``running`` jobs run
        already or none waits."""
        if self._running >= self._running_cap or not self._waiting:
            return None
        address, players = next(iter(self._waiting.items()))
        player, jobs = next(iter(players.items()))
        job = jobs.popleft()
        if jobs:
            players.move_to_end(player)
        else:
            del players[player]
        if players:
            self._waiting.move_to_end(address)
        else:
            del self._waiting[address]
        self._running += 1
        return Asker(player, address), job

    def done(self, asker: Asker) -> None:
        """A job of ``asker`` handed out by ``next`` finished (answered, failed or cancelled)."""
        self._running -= 1
        self._held -= 1
        for counts, key in ((self._by_player, asker.player), (self._by_address, asker.address)):
            left = counts[key] - 1
            if left:
                counts[key] = left
            else:
                del counts[key]
