"""Group commit: the node's one write pipeline, with a backend per database.

A request's ``Write`` (one of the kinds of `server.storage.commit_backends`) is atomic (an action and
the result it ends the game with commit together or not at all), and the callback ``submit()`` takes is
called only after its transaction committed (or failed): that is what makes an ``ack`` mean "durable".
The writes of one event-loop iteration are handed to the writer thread together; it takes everything
queued, has the backend (`server.storage.commit_backends`) commit it as one transaction, and hands the
whole batch back to the event loop in one callback, which calls each write's callback in batch order: no
task and no future per write (an action's ack is written from its callback), and the thread is woken,
and the GIL changes hands, about once per commit, not once per write. ``stored()`` wraps a write's
outcome in a future, for the callers that await it (hello, new_game, resign, the hint mark, the presence
writer).

While a commit is in flight the next batch gathers, so commits
per second stay flat while writes per commit grow with the load, and the next batch starts as soon as
the previous one ends, without waiting for a busy event loop.

Below saturation a commit's flush (fdatasync) is most of its cost, and batches stay small: at 2,000
actions a second a commit held 2.4 writes, so each action paid most of a flush of its own. With a
``linger``, the writer that finds a small batch waits up to that long for more writes, but only while
writes arrive fast enough for the wait to gather at least one more (`ArrivalRate`): a lone player's
ack never waits for writes that are not coming.

If the database refuses a batch (the (game, v) fence, a finished game), each of its writes is committed
alone, so that only the conflicting ones fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence

from server.metrics import Metrics
from server.storage import StorageUnavailable
from server.storage.commit_backends import (
    AbandonGames,
    AddGame,
    AddPlayer,
    AppendActions,
    CommitBackend,
    MarkHinted,
    SetLiveRooms,
    StoreRace,
    StoreRatings,
    Write,
    WriteConflict,
    actions_of,
)

__all__ = [
    "AbandonGames",
    "AddGame",
    "AddPlayer",
    "AppendActions",
    "ArrivalRate",
    "Committer",
    "Done",
    "MarkHinted",
    "SetLiveRooms",
    "StoreRace",
    "StoreRatings",
    "Write",
    "WriteConflict",
    "settle_future",
]

logger = logging.getLogger(__name__)

#: Told a write's outcome, on the event loop: None once it is committed, else why nothing was stored.
Done = Callable[[Exception | None], None]
_Pending = tuple[Write, Done]
_STOP = object()  # queued by stop(): commit what came before, then end the thread


class Committer:
    """Owns the write queue and the writer thread that drains it in group commits."""

    def __init__(
        self, backend: CommitBackend, metrics: Metrics, *, max_batch: int = 1024, linger: float = 0.0
    ) -> None:
        self._backend = backend
        self._metrics = metrics
        self._max_batch = max_batch
        self._linger = linger
        self._arrivals = ArrivalRate()  # the writer thread's
        self._queue: queue.SimpleQueue[list[_Pending] | object] = queue.SimpleQueue()  # object: _STOP
        self._submitted: list[_Pending] = []  # this loop iteration's writes, queued together after it
        self._carried: list[_Pending] = []  # the writer thread's: taken beyond ``max_batch``, for next time
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False

    def start(self) -> None:
        """Start the writer thread; writes are handed back to the running event loop."""
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="group-commit", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        """Commit everything already submitted, then stop (new submissions are refused)."""
        self._stopping = True
        if self._thread is not None:
            self._hand_over()
            self._queue.put(_STOP)
            await asyncio.to_thread(self._thread.join)

    def submit(self, write: Write, done: Done) -> None:
        """Queue ``write``; ``done`` is called on the event loop with its outcome, later (never from
        here), in the order writes were submitted within a batch: None once committed, else
        `StorageUnavailable` (the database is unreachable or failed) or `WriteConflict` (the write
        contradicts what is stored); either way nothing of it was stored. An exception ``done`` raises is
        logged; the rest of the batch is answered all the same.

        Raises:
            StorageUnavailable: at once, when stopping (``done`` is never called then).
        """
        if self._stopping or self._loop is None:
            raise StorageUnavailable("the server is stopping")
        if not self._submitted:
            self._loop.call_soon(self._hand_over)
        self._submitted.append((write, done))

    def stored(self, write: Write) -> asyncio.Future[None]:
        """``submit(write)`` for a caller that awaits the outcome: the future is done once the write is
        committed, or raises as ``submit`` says (at once when stopping). Cancelling it does not
        withdraw the write.
        """
        if self._loop is None:
            raise StorageUnavailable("the server is stopping")
        future = self._loop.create_future()
        self.submit(write, functools.partial(settle_future, future))
        return future

    def _hand_over(self) -> None:
        """Queue this loop iteration's writes for the writer thread at once: it is woken (and takes the
        GIL) once per iteration at most, not once per write."""
        if self._submitted:
            self._queue.put(self._submitted)
            self._submitted = []

    # ------------------------------------------------------------------ the writer thread

    def _run(self) -> None:
        stopping = False
        try:
            while not stopping:
                batch, lingered, stopping = self._take_batch()
                if batch:
                    started = time.perf_counter()
                    errors = self._commit([write for write, _ in batch])
                    self._hand_back(batch, errors, time.perf_counter() - started, lingered)
                    self._tidy()
        finally:
            self._backend.close()

    def _tidy(self) -> None:
        """The backend's work that no write waits for; a failure is logged, the thread goes on."""
        try:
            self._backend.tidy()
        except Exception:
            logger.exception("the write backend's tidying failed")

    def _take_batch(self) -> tuple[list[_Pending], bool, bool]:
        """Block for the first writes (unless some were carried over), then take whatever else is
        queued, up to ``max_batch``: the rest is carried over to the next batch; a small batch waits up
        to ``linger`` for more while writes keep coming. Then whether it waited, and whether ``stop()``
        came."""
        batch, self._carried = self._carried, []
        block = not batch
        deadline: float | None = None
        while len(batch) < self._max_batch:
            timeout = None if deadline is None else deadline - time.monotonic()
            if timeout is not None and timeout <= 0:
                break
            try:
                item = self._queue.get(block=block or timeout is not None, timeout=timeout)
            except queue.Empty:
                if deadline is not None or not self._worth_lingering():
                    break
                deadline = time.monotonic() + self._linger  # small batch, writes coming: gather more
                continue
            if not isinstance(item, list):  # _STOP
                return batch, deadline is not None, True
            self._arrivals.add(len(item), time.monotonic())
            batch.extend(item)
            block = False
        batch, self._carried = batch[: self._max_batch], batch[self._max_batch :]
        return batch, deadline is not None, False

    def _worth_lingering(self) -> bool:
        """Waiting ``linger`` would likely gather another write (see `ArrivalRate`)."""
        return self._linger > 0 and self._arrivals.per_second(time.monotonic()) * self._linger >= 1.0

    def _commit(self, writes: Sequence[Write]) -> list[Exception | None]:
        """Each write's error (None: committed). A refused batch is committed again one write at a time,
        so that only the conflicting writes fail; an unexpected failure is answered ``unavailable`` and
        the thread goes on (one bug must not freeze every game)."""
        try:
            self._backend.commit(writes)
        except WriteConflict as conflict:
            if len(writes) == 1:
                return [conflict]
            return [self._commit_alone(write) for write in writes]
        except StorageUnavailable as exc:
            logger.warning("group commit of %d writes failed: %s", len(writes), exc)
            return [exc] * len(writes)
        except Exception:
            logger.exception("group commit of %d writes failed unexpectedly", len(writes))
            return [StorageUnavailable("the server failed to store this; retry")] * len(writes)
        return [None] * len(writes)

    def _commit_alone(self, write: Write) -> Exception | None:
        try:
            self._backend.commit([write])
        except (WriteConflict, StorageUnavailable) as exc:
            return exc
        except Exception:
            logger.exception("committing one write failed unexpectedly")
            return StorageUnavailable("the server failed to store this; retry")
        return None

    def _hand_back(
        self, batch: list[_Pending], errors: list[Exception | None], seconds: float, lingered: bool
    ) -> None:
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            self._loop.call_soon_threadsafe(self._settle, batch, errors, seconds, lingered)

    # ------------------------------------------------------------------ back on the event loop

    def _settle(
        self, batch: list[_Pending], errors: list[Exception | None], seconds: float, lingered: bool
    ) -> None:
        stored = 0
        for (write, done), error in zip(batch, errors, strict=True):
            if error is None:
                stored += len(actions_of(write))
            try:
                done(error)
            except Exception:  # one caller's bug must not leave the rest of the batch unanswered
                logger.exception("the callback of a committed write failed")
        self._metrics.observe_commit(len(batch), seconds, actions=stored, lingered=lingered)


class ArrivalRate:
    """Writes a second over the last ``window`` seconds (the writer thread's, to decide a linger).

    Two halves of the window are counted, the current and the one before, so the rate follows a change
    of load within a window without a timestamp kept per write."""

    __slots__ = ("_current", "_previous", "_started", "_window")

    def __init__(self, window: float = 0.2) -> None:
        self._window = window
        self._started = 0.0
        self._current = 0
        self._previous = 0

    def add(self, writes: int, now: float) -> None:
        self._roll(now)
        self._current += writes

    def per_second(self, now: float) -> float:
        self._roll(now)
        elapsed = now - self._started + self._window / 2
        return (self._current + self._previous) / elapsed

    def _roll(self, now: float) -> None:
        half = self._window / 2
        if now - self._started < half:
            return
        self._previous = self._current if now - self._started < self._window else 0
        self._current = 0
        self._started = now


def settle_future(future: asyncio.Future[None], error: Exception | None) -> None:
    """A `Done` that settles ``future`` with the write's outcome (unless it was cancelled: its caller
    went away; the write was committed or failed all the same)."""
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
