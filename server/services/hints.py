"""The solver off the event loop: hints, the winnable daily deals and winnable random deals.

Solving is CPU work of milliseconds to seconds, so it runs in a process pool (spawned lazily, one
worker by default): the event loop only awaits its futures. What it finds is cached, since the same
question always gets the same answer: a hint per (game, position), a daily deal per (date, variant). A hint
also keeps the rest of its winning line: a player who follows it asks about positions already on the
line, answered without searching again. Random winnable deals come from the shipped tables of
``server.services.winnable`` and cost nothing at request time.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import multiprocessing
import random
import secrets
from collections import OrderedDict
from concurrent.futures import ProcessPoolExecutor

from engine import Deal, Game, Layout, Move
from server.services.winnable import random_winnable_deal
from solver import Verdict, solve, winnable_daily_deal

__all__ = ["HINT_MAX_NODES", "Hint", "SolverBusy", "SolvingService"]

#: Positions a hint may search (some seconds of one worker at worst).
HINT_MAX_NODES = 100_000
_HINT_CACHE = 4096


class SolverBusy(Exception):
    """Too many hints are waiting for the solver: the caller says ``unavailable``."""


Hint = tuple[Verdict, Move | None]
_LINES = 1024  # games whose winning line is kept


def _search(layout: Layout, max_nodes: int) -> tuple[Verdict, tuple[Move, ...]]:
    solution = solve(layout, max_nodes=max_nodes)
    return solution.verdict, solution.moves


def _line_steps(layout: Layout, moves: tuple[Move, ...]) -> dict[Layout, Move]:
    """Each position of a winning line from ``layout``, with the line's next move from it."""
    game = Game.from_layout(layout)
    steps: dict[Layout, Move] = {}
    for move in moves:
        steps[game.layout()] = move
        game.push(move)
    return steps


class SolvingService:
    """Owned by the app; shared by every connection. ``close()`` stops the worker processes."""

    def __init__(
        self, *, workers: int = 1, hint_max_nodes: int = HINT_MAX_NODES, max_waiting_hints: int = 8
    ) -> None:
        self._workers = workers
        self._hint_max_nodes = hint_max_nodes
        self._max_waiting = max_waiting_hints
        self._pool: ProcessPoolExecutor | None = None
        self._hints: OrderedDict[tuple[str, Layout], asyncio.Future[Hint]] = OrderedDict()
        self._lines: OrderedDict[str, dict[Layout, Move]] = OrderedDict()
        self._waiting = 0
        self._dailies: dict[tuple[dt.date, int], asyncio.Future[Deal]] = {}
        self._rng: random.Random = secrets.SystemRandom()

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # spawn, not fork: the server process has threads (the SQLite writer) and an event loop
            context = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(max_workers=self._workers, mp_context=context)
        return self._pool

    async def hint(self, game_id: str, v: int, layout: Layout) -> Hint:
        """The verdict from ``layout`` (the game ``game_id`` at ``v``, in play) and the next winning move.
        Cached by position, not by v: the one position of a (game, v) is the caller's to ensure.

        Raises:
            SolverBusy: more than ``max_waiting_hints`` different positions are being solved.
        """
        on_line = self._lines.get(game_id, {}).get(layout)
        if on_line is not None:
            return Verdict.WIN, on_line
        key = (game_id, layout)
        cached = self._hints.get(key)
        if cached is None:
            if self._waiting >= self._max_waiting:
                raise SolverBusy(f"{self._waiting} hints are being worked out; retry in a moment")
            cached = asyncio.ensure_future(self._solve_hint(game_id, layout))
            self._waiting += 1
            cached.add_done_callback(lambda done: self._hint_done(key, done))
            self._hints[key] = cached
            while len(self._hints) > _HINT_CACHE:
                self._hints.popitem(last=False)
        else:
            self._hints.move_to_end(key)
        return await asyncio.shield(cached)

    async def _solve_hint(self, game_id: str, layout: Layout) -> Hint:
        loop = asyncio.get_running_loop()
        verdict, moves = await loop.run_in_executor(self._executor(), _search, layout, self._hint_max_nodes)
        if not moves:
            return verdict, None
        self._lines[game_id] = _line_steps(layout, moves)
        self._lines.move_to_end(game_id)
        while len(self._lines) > _LINES:
            self._lines.popitem(last=False)
        return verdict, moves[0]

    def _hint_done(self, key: tuple[str, Layout], done: asyncio.Future[Hint]) -> None:
        self._waiting -= 1
        if done.cancelled() or done.exception() is not None:  # not an answer: ask again next time
            self._hints.pop(key, None)

    async def daily_deal(self, date: dt.date, cells: int) -> Deal:
        """The winnable daily deal of ``date`` in ``cells``' variant (``solver.winnable_daily_deal``)."""
        key = (date, cells)
        found = self._dailies.get(key)
        if found is None or (found.done() and found.exception() is not None):
            loop = asyncio.get_running_loop()
            found = loop.run_in_executor(self._executor(), winnable_daily_deal, date, cells)
            self._dailies = {known: deal for known, deal in self._dailies.items() if known[0] >= date}
            self._dailies[key] = found
        return await asyncio.shield(found)

    def winnable_deal(self, cells: int) -> Deal:
        """A random deal of ``cells``' variant from the shipped table of proven-winnable deals."""
        return random_winnable_deal(self._rng, cells)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
