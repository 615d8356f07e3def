"""The daily challenge that can be won, and the candidate sequences both it and the table of
winnable deals draw from.

Rule (protocol/README.md section 11): let d be the days from 1970-01-01 to the UTC date; the
candidates are the top 35 bits of the 1st, 2nd, 3rd … outputs of SplitMix64 seeded with d (the
first is the old daily deal, ``engine.daily_deal``). The daily deal of a variant is the first
candidate that ``solve`` proves winnable in that variant within ``DAILY_MAX_NODES`` positions. The
budget is a node count, never a time, so every node and every client that runs this finds the same
deal. Should no candidate among the first ``DAILY_MAX_CANDIDATES`` be proven winnable, the first
candidate is the daily deal.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from engine import Deal
from engine.deal import DEAL_NUMBER_BITS, splitmix64
from solver.search import Verdict, solve_deal

__all__ = ["DAILY_MAX_CANDIDATES", "DAILY_MAX_NODES", "candidate_numbers", "winnable_daily_deal"]

DAILY_MAX_NODES = 100_000
DAILY_MAX_CANDIDATES = 5_000
_EPOCH = dt.date(1970, 1, 1)


def candidate_numbers(seed: int) -> Iterator[int]:
    """Deal numbers: the top 35 bits of each SplitMix64 output seeded with ``seed``, endlessly."""
    for output in splitmix64(seed):
        yield output >> (64 - DEAL_NUMBER_BITS)


def winnable_daily_deal(date: dt.date, cells: int = 8) -> Deal:
    """The daily challenge of ``date`` in ``cells``' variant: the first candidate proven winnable.

    Costs one solve per candidate tried: about 1 for C8, 7 for C4 and a few hundred for C2
    (a second or two of CPU for C2): callers keep it off their event loop and cache it per day.
    """
    numbers = candidate_numbers((date - _EPOCH).days)
    first: Deal | None = None
    for number, _ in zip(numbers, range(DAILY_MAX_CANDIDATES), strict=False):
        deal = Deal(number, cells)
        first = first or deal
        if solve_deal(deal, max_nodes=DAILY_MAX_NODES).verdict is Verdict.WIN:
            return deal
    assert first is not None
    return first
