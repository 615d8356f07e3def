"""Prometheus metrics, one registry per server instance (tests run several servers in one process).

The workers of ``eightoff serve --workers N`` are one node to an operator: the supervisor gives them
a directory of their own (`SharedMetricsDir`) in ``PROMETHEUS_MULTIPROC_DIR``, prometheus-client's
multiprocess mode, where each worker's values live in files of its own; whichever worker takes a
scrape answers the sums over every worker (gauges summed over the live workers).

No ``*_created`` series: each counter and histogram (and each error code's child) would carry one
more series holding its start time, which Prometheus does not need (a restart shows as a counter
reset). prometheus-client's switch for it is process-wide and is read when a metric is made, so
`Metrics` turns it off before making its own.
"""

from __future__ import annotations

import asyncio
import bisect
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from typing import Final, Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
    multiprocess,
    values,
)
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

__all__ = ["MULTIPROC_DIR_VARIABLE", "SHARED_FLUSH_SECONDS", "HotHistogram", "Metrics", "SharedMetricsDir"]

_LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
#: prometheus-client's switch for its multiprocess mode, read when it is first imported.
MULTIPROC_DIR_VARIABLE: Final = "PROMETHEUS_MULTIPROC_DIR"
#: Seconds at most a worker's `HotHistogram` observations wait before the node's scrapes see them.
SHARED_FLUSH_SECONDS: Final = 1.0


class SharedMetricsDir:
    """The directory of one node's worker metrics, made by its supervisor: new and empty at the node's
    start, named to the workers in ``PROMETHEUS_MULTIPROC_DIR`` (set in this process's environment,
    which the workers inherit, before any of them starts and imports prometheus-client), and removed
    when the node stops (a supervisor killed with SIGKILL leaves it in the temporary directory)."""

    def __init__(self) -> None:
        self.path = tempfile.mkdtemp(prefix="eightoff-metrics-")
        os.environ[MULTIPROC_DIR_VARIABLE] = self.path

    def worker_exited(self, pid: int) -> None:
        """Drop the gauges of the worker ``pid`` (its counters stay in the node's sums)."""
        multiprocess.mark_process_dead(pid, self.path)  # type: ignore[no-untyped-call]

    def remove(self) -> None:
        if os.environ.get(MULTIPROC_DIR_VARIABLE) == self.path:
            del os.environ[MULTIPROC_DIR_VARIABLE]
        shutil.rmtree(self.path, ignore_errors=True)


def shared_dir() -> str | None:
    """The node's shared metrics directory when this process is one of its workers, else None.

    Raises:
        RuntimeError: the directory was named after prometheus-client was imported: its values would
            stay in this process, and the node's scrapes would miss them.
    """
    path = os.environ.get(MULTIPROC_DIR_VARIABLE)
    if not path:
        return None
    if values.ValueClass is values.MutexValue:
        raise RuntimeError(f"{MULTIPROC_DIR_VARIABLE} was set after prometheus_client was imported")
    return path


class _Value(Protocol):
    """One series' value in prometheus-client (in a worker, a slot of its file in the shared directory)."""

    def inc(self, amount: float) -> None: ...


class _SharedHistogram:
    """A histogram's series in the node's shared directory, as prometheus-client's own multiprocess
    ``Histogram`` writes them: a count per bucket (the collector makes them cumulative) and the sum."""

    def __init__(self, name: str, documentation: str, bounds: Sequence[float]) -> None:
        def value(suffix: str, labels: tuple[str, ...], label_values: tuple[str, ...]) -> _Value:
            made: _Value = values.ValueClass(
                "histogram", name, name + suffix, labels, label_values, documentation
            )
            return made

        bounds_as_labels = (*map(floatToGoString, bounds), "+Inf")
        self._buckets = [value("_bucket", ("le",), (le,)) for le in bounds_as_labels]
        self._sum = value("_sum", (), ())

    def add(self, counts: Sequence[int], total: float) -> None:
        for bucket, count in zip(self._buckets, counts, strict=True):
            if count:
                bucket.inc(count)
        self._sum.inc(total)


class HotHistogram(Collector):
    """A histogram for the per-action path, used from the event loop only: ``observe`` is a bucket
    count and a sum (about a tenth of prometheus-client's ``Histogram.observe``, which takes a lock and
    walks the buckets in Python); the cumulative buckets are built when ``/metrics`` is read.

    ``shared``: a worker of a node; what it observes is also added to the node's shared directory at
    most `SHARED_FLUSH_SECONDS` later (a timer on the running loop) or at ``flush``, in one write per
    bucket however many observations came meanwhile."""

    def __init__(
        self, name: str, documentation: str, buckets: Sequence[float], *, shared: bool = False
    ) -> None:
        self._name = name
        self._documentation = documentation
        self._bounds = tuple(buckets)
        self._counts = [0] * (len(self._bounds) + 1)  # the last one: above every bound
        self._sum = 0.0
        self._shared = _SharedHistogram(name, documentation, self._bounds) if shared else None
        self._unshared = [0] * len(self._counts)
        self._unshared_sum = 0.0
        self._flush_due = False

    def observe(self, value: float) -> None:
        index = bisect.bisect_left(self._bounds, value)  # bucket "le" bound: value <= bound
        self._counts[index] += 1
        self._sum += value
        if self._shared is not None:
            self._unshared[index] += 1
            self._unshared_sum += value
            if not self._flush_due:
                self._flush_due = True
                asyncio.get_running_loop().call_later(SHARED_FLUSH_SECONDS, self.flush)

    def flush(self) -> None:
        """Add what was observed since the last flush to the node's shared directory (if shared)."""
        self._flush_due = False
        if self._shared is not None and any(self._unshared):
            self._shared.add(self._unshared, self._unshared_sum)
            self._unshared = [0] * len(self._counts)
            self._unshared_sum = 0.0

    def collect(self) -> Iterator[Metric]:
        cumulative: list[tuple[str, float]] = []
        total = 0
        for bound, count in zip((*map(str, self._bounds), "+Inf"), self._counts, strict=True):
            total += count
            cumulative.append((bound, total))
        family = HistogramMetricFamily(self._name, self._documentation)
        family.add_metric([], cumulative, sum_value=self._sum)
        yield family


class Metrics:
    """The server's counters, gauges and histograms, exported at ``GET /metrics``: this process's, or
    in a worker of a node (`shared_dir`) the node's, summed over its workers."""

    def __init__(self) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # the library leaves it unannotated
        self.registry = CollectorRegistry()
        shared = shared_dir()
        self._exposed = self.registry
        if shared is not None:
            self._exposed = CollectorRegistry()
            multiprocess.MultiProcessCollector(self._exposed, shared)  # type: ignore[no-untyped-call]
        self.connections = Gauge(
            "eightoff_connections",
            "Open WebSocket connections",
            registry=self.registry,
            multiprocess_mode="livesum",
        )
        self.live_games = Gauge(
            "eightoff_live_games", "Games held in memory", registry=self.registry, multiprocess_mode="livesum"
        )
        self.actions = Counter("eightoff_actions", "Actions applied and committed", registry=self.registry)
        self.action_latency = HotHistogram(
            "eightoff_action_latency_seconds",
            "From receiving an action to sending its ack (commit included)",
            _LATENCY_BUCKETS,
            shared=shared is not None,
        )
        self.registry.register(self.action_latency)
        self.commit_latency = Histogram(
            "eightoff_commit_latency_seconds",
            "Duration of one group commit",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.commit_batch = Histogram(
            "eightoff_commit_batch_writes",
            "Writes grouped into one commit",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
            registry=self.registry,
        )
        self.commit_lingers = Counter(
            "eightoff_commit_lingers",
            "Group commits whose writer waited for more writes before committing (--commit-linger)",
            registry=self.registry,
        )
        self.errors = Counter(
            "eightoff_errors", "Error replies sent, by protocol error code", ["code"], registry=self.registry
        )
        self.live_races = Gauge(
            "eightoff_live_races", "Races held in memory", registry=self.registry, multiprocess_mode="livesum"
        )
        self.races_made = Counter("eightoff_races_made", "Races made (race_create)", registry=self.registry)
        self.races_ended = Counter(
            "eightoff_races_ended",
            "Races over, by how they ended (won, time, resigned: every seat gave up; cancelled)",
            ["how"],
            registry=self.registry,
        )
        self.race_updates = Counter(
            "eightoff_race_updates",
            "Standings diffs and delayed boards pushed to races' followers (one per follower)",
            registry=self.registry,
        )
        self.dropped_slow_readers = Counter(
            "eightoff_dropped_slow_readers",
            "Connections (players or spectators) closed for not reading what was sent to them",
            registry=self.registry,
        )

    def observe_commit(
        self, writes: int, seconds: float, *, actions: int = 0, lingered: bool = False
    ) -> None:
        """One group commit of ``writes`` writes took ``seconds`` and stored ``actions`` actions, after
        a linger or not (counted per commit, not per action: this runs on the event loop's hot path)."""
        self.commit_latency.observe(seconds)
        self.commit_batch.observe(writes)
        if lingered:
            self.commit_lingers.inc()
        if actions:
            self.actions.inc(actions)

    def flush(self) -> None:
        """Add what this worker observed lately to the node's sums now (a scrape, a shutdown)."""
        self.action_latency.flush()

    def render(self) -> bytes:
        """The text exposition format."""
        self.flush()
        return generate_latest(self._exposed)
