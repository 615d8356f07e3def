"""The shipped tables of proven-winnable deals, one per variant, that ``new_game`` with
``winnable: true`` draws from.

Each ``C<cells>.txt`` lists deal codes, one a line (``#`` lines are comments), that the solver
proved winnable from the opening. ``eightoff winnable --cells C --count N`` makes one: it solves
the candidates of ``solver.candidate_numbers(TABLE_SEED)`` in order, in a process pool, and keeps the
won ones. Drawing from a table costs nothing at request time; the price is paid once, offline (see
README.md "Winnable deals" for the CPU time each table took).
"""

from __future__ import annotations

import functools
import random
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from importlib import resources

from engine import Deal
from solver import Solution, candidate_numbers, solve_deal

__all__ = [
    "TABLE_MAX_NODES",
    "TABLE_SEED",
    "random_winnable_deal",
    "search_winnable",
    "winnable_deals",
    "winnable_sequence",
]

TABLE_SEED = 2026
TABLE_MAX_NODES = 200_000


@functools.cache
def winnable_deals(cells: int) -> tuple[Deal, ...]:
    """The shipped table of ``cells``' variant."""
    text = resources.files(__package__).joinpath(f"C{cells}.txt").read_text()
    lines = (line.strip() for line in text.splitlines())
    return tuple(Deal.from_code(line) for line in lines if line and not line.startswith("#"))


def random_winnable_deal(rng: random.Random, cells: int) -> Deal:
    """A deal drawn from the shipped table of ``cells``' variant."""
    return rng.choice(winnable_deals(cells))


def winnable_sequence(rng: random.Random, cells: int, count: int) -> tuple[str, ...]:
    """``count`` distinct deals of the shipped table of ``cells``' variant, in a drawn order: an
    event's sequence (docs/events.md), drawn at its start so that it exists nowhere before.

    Raises:
        ValueError: the table holds fewer than ``count`` deals.
    """
    return tuple(deal.code() for deal in rng.sample(winnable_deals(cells), count))


def _solve(deal: Deal) -> tuple[Deal, Solution]:
    return deal, solve_deal(deal, max_nodes=TABLE_MAX_NODES)


def search_winnable(cells: int, *, workers: int) -> Iterator[tuple[Deal, Solution]]:
    """Every candidate of the table sequence with its solution, in order, solved by ``workers``
    processes (endless: the caller stops; a few solves run ahead)."""
    deals = (Deal(number, cells) for number in candidate_numbers(TABLE_SEED))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        ahead: deque[Future[tuple[Deal, Solution]]] = deque()
        for deal in deals:
            ahead.append(pool.submit(_solve, deal))
            if len(ahead) > 4 * workers:
                yield ahead.popleft().result()
