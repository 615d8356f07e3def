"""The solver off the event loop: hints, the winnable daily deals and winnable random deals.

Solving is CPU work of milliseconds to seconds, so it runs in a process pool (one worker by
default): the event loop only awaits its futures. ``eightoff serve`` starts the workers as it starts
listening, and says it serves once they are up (`SolvingService.start`): a worker's start (a new
interpreter importing the engine and the solver, some 50 MiB and a good part of a second of CPU)
then happens before any player plays, not at the first hint, while others play. Without
``start`` (tests, tools) the pool starts at its first job. The workers run at `SOLVER_NICENESS`:
a hint may wait, a move's acknowledgement should not (under a hint flood the solver would take a
core the server and its players need, on a small machine). What it finds is cached, since the same
question always gets the same answer: a hint per (game, position), a daily deal per (date, variant). A hint
also keeps the rest of its winning line: a player who follows it asks about positions already on the
line, answered without searching again. Random winnable deals come from the shipped tables of
``server.services.winnable`` and cost nothing at request time.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import multiprocessing
import os
import random
import secrets
import threading
import time
from collections import OrderedDict
from concurrent.futures import ProcessPoolExecutor

from engine import Deal, Game, Layout, Move
from protocol.errors import ErrorCode
from server.services.fairqueue import Asker, FairQueue, Full
from server.services.winnable import random_winnable_deal
from solver import Verdict, solve, winnable_daily_deal

__all__ = [
    "HINTS_PER_ADDRESS",
    "HINTS_PER_PLAYER",
    "HINT_MAX_NODES",
    "SOLVER_NICENESS",
    "Asker",
    "Hint",
    "SolverBusy",
    "SolvingService",
]

#: Positions a hint may search (some seconds of one worker at worst).
HINT_MAX_NODES = 100_000
#: How much lower than the server's the solver workers' CPU priority is (``nice(2)``'s increment).
SOLVER_NICENESS = 10
#: How often a solver worker checks that the server that started it is still its parent.
PARENT_CHECK_SECONDS = 1.0
_HINT_CACHE = 4096
#: Hints one player, and one source address, may have waiting or being solved: one
#: connection asks one at a time, so this is a few tabs' worth; an address holds a few players'.
HINTS_PER_PLAYER = 2
HINTS_PER_ADDRESS = 4
_HINTS_QUEUED = 64  # in all: past it, ``unavailable``


class SolverBusy(Exception):
    """A hint the solver will not take now; ``code`` is the reply: ``rate_limited`` when the asker
    (its player or its address) holds its share of the queue, ``unavailable`` when the queue is full."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


Hint = tuple[Verdict, Move | None]
_Job = tuple[tuple[str, Layout], "asyncio.Future[Hint]"]  # a position to solve, and its answer to come
_LINES = 1024  # games whose winning line is kept


def _refusal(full: Full, held: int) -> SolverBusy:
    if full is Full.PLAYER:
        return SolverBusy(
            ErrorCode.RATE_LIMITED, "you have hints waiting for the solver; ask again once one is answered"
        )
    if full is Full.ADDRESS:
        return SolverBusy(
            ErrorCode.RATE_LIMITED,
            "your address has hints waiting for the solver; ask again once one is answered",
        )
    return SolverBusy(ErrorCode.UNAVAILABLE, f"{held} hints are waiting for the solver; retry in a moment")


def _start_worker(server: int) -> None:
    """In each solver worker, as it starts: a lower priority, and an end with the server process.

    A server killed outright (``kill -9``, the OOM killer) cannot stop its pool, and the worker never
    learns it from the queue it reads: it holds that pipe's write end too, so no end-of-file comes. It
    would wait for ever, with the pool's resource tracker, both reparented. So a thread of the worker
    checks every `PARENT_CHECK_SECONDS` that its parent is still the server, and ends the process
    once it is not (what it was solving has no one left to answer).
    """
    os.nice(SOLVER_NICENESS)
    threading.Thread(target=_exit_with, args=(server,), name="parent-watch", daemon=True).start()


def _exit_with(server: int) -> None:
    while os.getppid() == server:
        time.sleep(PARENT_CHECK_SECONDS)
    os._exit(0)


def _ready() -> int:
    """A solver worker's first job when the pool is started ahead of use: its pid, once it is up."""
    return os.getpid()


def _search(layout: Layout, max_nodes: int) -> tuple[Verdict, dict[Layout, Move]]:
    """In a solver worker: the verdict from ``layout`` and, when it is won, each position of the
    winning line with its next move (replaying the line costs milliseconds: not on the event loop)."""
    solution = solve(layout, max_nodes=max_nodes)
    return solution.verdict, _line_steps(layout, solution.moves)


def _line_steps(layout: Layout, moves: tuple[Move, ...]) -> dict[Layout, Move]:
    """Each position of a winning line from ``layout``, with the line's next move from it."""
    game = Game.from_layout(layout)
    steps: dict[Layout, Move] = {}
    for move in moves:
        steps[game.layout()] = move
        game.push(move)
    return steps


class SolvingService:
    """Owned by the app; shared by every connection. ``close()`` stops the worker processes.

    Hints are shared fairly: a `FairQueue` holds at most ``hints_per_player`` hints per
    player, ``hints_per_address`` per source address and ``max_waiting_hints`` in all, and hands the
    solver's ``workers`` slots out in turn between the addresses that wait, then between their players.
    """

    def __init__(
        self,
        *,
        workers: int = 1,
        hint_max_nodes: int = HINT_MAX_NODES,
        max_waiting_hints: int = _HINTS_QUEUED,
        hints_per_player: int = HINTS_PER_PLAYER,
        hints_per_address: int = HINTS_PER_ADDRESS,
    ) -> None:
        self._workers = workers
        self._hint_max_nodes = hint_max_nodes
        self._pool: ProcessPoolExecutor | None = None
        self._hints: OrderedDict[tuple[str, Layout], asyncio.Future[Hint]] = OrderedDict()
        self._lines: OrderedDict[str, dict[Layout, Move]] = OrderedDict()
        self._queue: FairQueue[_Job] = FairQueue(
            running=workers,
            per_player=hints_per_player,
            per_address=hints_per_address,
            total=max_waiting_hints,
        )
        self._unanswered: set[asyncio.Future[Hint]] = set()
        self._solving: set[asyncio.Task[None]] = set()
        self._dailies: dict[tuple[dt.date, int], asyncio.Future[Deal]] = {}
        self._rng: random.Random = secrets.SystemRandom()

    async def start(self) -> None:
        """Start the worker processes now rather than at the first job: each is handed a job that does
        nothing (the pool starts a process per job while none is idle), and this returns once they
        are done, so that a shutdown right after never catches a worker still starting (it would
        fail to attach to the pool's queues, and the exit would wait for it)."""
        loop = asyncio.get_running_loop()
        executor = self._executor()
        await asyncio.gather(*(loop.run_in_executor(executor, _ready) for _ in range(self._workers)))

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # spawn, not fork: the server process has threads (the SQLite writer) and an event loop
            context = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(
                max_workers=self._workers,
                mp_context=context,
                initializer=_start_worker,
                initargs=(os.getpid(),),
            )
        return self._pool

    async def hint(self, game_id: str, v: int, layout: Layout, asker: Asker) -> Hint:
        """The verdict from ``layout`` (the game ``game_id`` at ``v``, in play) and the next winning move,
        asked by ``asker``. Cached by position, not by v: the one position of a (game, v) is the
        caller's to ensure. A position being solved already is shared, whoever asked it.

        Raises:
            SolverBusy: the asker holds its share of the queue, or the queue is full.
        """
        on_line = self._lines.get(game_id, {}).get(layout)
        if on_line is not None:
            return Verdict.WIN, on_line
        key = (game_id, layout)
        cached = self._hints.get(key)
        if cached is None:
            cached = self._queued(key, asker)
        else:
            self._hints.move_to_end(key)
        return await asyncio.shield(cached)

    def _queued(self, key: tuple[str, Layout], asker: Asker) -> asyncio.Future[Hint]:
        """The answer to come for ``key``, queued for ``asker``."""
        future: asyncio.Future[Hint] = asyncio.get_running_loop().create_future()
        full = self._queue.offer(asker, (key, future))
        if full is not None:
            raise _refusal(full, self._queue.held)
        self._unanswered.add(future)
        future.add_done_callback(lambda done: self._hint_done(key, done))
        self._hints[key] = future
        while len(self._hints) > _HINT_CACHE:
            self._hints.popitem(last=False)
        self._start_next()
        return future

    def _start_next(self) -> None:
        while (job := self._queue.next()) is not None:
            asker, (key, future) = job
            task = asyncio.ensure_future(self._run(asker, key, future))
            self._solving.add(task)
            task.add_done_callback(self._solving.discard)

    async def _run(self, asker: Asker, key: tuple[str, Layout], future: asyncio.Future[Hint]) -> None:
        try:
            if future.done():  # cancelled while it waited (the service closed)
                return
            hint = await self._solve_hint(*key)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
        else:
            if not future.done():
                future.set_result(hint)
        finally:
            self._queue.done(asker)
            self._start_next()

    async def _solve_hint(self, game_id: str, layout: Layout) -> Hint:
        loop = asyncio.get_running_loop()
        verdict, steps = await loop.run_in_executor(self._executor(), _search, layout, self._hint_max_nodes)
        if not steps:
            return verdict, None
        self._lines[game_id] = steps
        self._lines.move_to_end(game_id)
        while len(self._lines) > _LINES:
            self._lines.popitem(last=False)
        return verdict, steps[layout]

    def _hint_done(self, key: tuple[str, Layout], done: asyncio.Future[Hint]) -> None:
        self._unanswered.discard(done)
        if (done.cancelled() or done.exception() is not None) and self._hints.get(key) is done:
            del self._hints[key]  # not an answer: ask again next time

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
        """Stop the worker processes; hints not answered yet are cancelled.

        The processes are terminated, not only asked to stop: the pool asks through its queue, which a
        process in the middle of a search does not read, and the interpreter's exit joins every child,
        so a stopping worker waited for its solver (seen in CI: a node stopped 0.05 s after it served,
        one worker never exited). They hold nothing but a search."""
        for future in list(self._unanswered):
            future.cancel()
        if self._pool is not None:
            processes = list(self._pool._processes.values())
            self._pool.shutdown(wait=False, cancel_futures=True)
            for process in processes:
                process.terminate()
            self._pool = None
