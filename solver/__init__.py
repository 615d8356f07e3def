"""The Eight Off solver: pure (engine and the standard library only, no I/O).

Typical use::

    solution = solve_deal(Deal.from_code("EO1-C8-AAAAAFA"))
    if solution.verdict is Verdict.WIN:
        for move in solution.moves: ...
"""

from __future__ import annotations

from solver.daily import DAILY_MAX_CANDIDATES, DAILY_MAX_NODES, candidate_numbers, winnable_daily_deal
from solver.search import Solution, Verdict, solve, solve_deal

__all__ = [
    "DAILY_MAX_CANDIDATES",
    "DAILY_MAX_NODES",
    "Solution",
    "Verdict",
    "candidate_numbers",
    "solve",
    "solve_deal",
    "winnable_daily_deal",
]
