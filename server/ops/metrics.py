"""Prometheus metrics, one registry per server instance (tests run several servers in one process).

No ``*_created`` series: each counter and histogram (and each error code's child) would carry one
more series holding its start time, which Prometheus does not need (a restart shows as a counter
reset). prometheus-client's switch for it is process-wide and is read when a metric is made, so
`Metrics` turns it off before making its own.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["HotHistogram", "Metrics"]

_LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class HotHistogram(Collector):
    """A histogram for the per-action path, used from the event loop only: ``observe`` is a bucket
    count and a sum (about a tenth of prometheus-client's ``Histogram.observe``, which takes a lock and
    walks the buckets in Python); the cumulative buckets are built when ``/metrics`` is read."""

    def __init__(self, name: str, documentation: str, buckets: Sequence[float]) -> None:
        self._name = name
        self._documentation = documentation
        self._bounds = tuple(buckets)
        self._counts = [0] * (len(self._bounds) + 1)  # the last one: above every bound
        self._sum = 0.0

    def observe(self, value: float) -> None:
        self._counts[bisect.bisect_left(self._bounds, value)] += 1  # bucket "le" bound: value <= bound
        self._sum += value

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
    """The server's counters, gauges and histograms, exported at ``GET /metrics``."""

    def __init__(self) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # the library leaves it unannotated
        self.registry = CollectorRegistry()
        self.connections = Gauge("eightoff_connections", "Open WebSocket connections", registry=self.registry)
        self.live_games = Gauge("eightoff_live_games", "Games held in memory", registry=self.registry)
        self.actions = Counter("eightoff_actions", "Actions applied and committed", registry=self.registry)
        self.action_latency = HotHistogram(
            "eightoff_action_latency_seconds",
            "From receiving an action to sending its ack (commit included)",
            _LATENCY_BUCKETS,
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
        self.errors = Counter(
            "eightoff_errors", "Error replies sent, by protocol error code", ["code"], registry=self.registry
        )
        self.dropped_slow_readers = Counter(
            "eightoff_dropped_slow_readers",
            "Connections (players or spectators) closed for not reading what was sent to them",
            registry=self.registry,
        )

    def observe_commit(self, writes: int, seconds: float, *, actions: int = 0) -> None:
        """One group commit of ``writes`` writes took ``seconds`` and stored ``actions`` actions (counted
        per commit, not per action: this runs on the event loop's hot path)."""
        self.commit_latency.observe(seconds)
        self.commit_batch.observe(writes)
        if actions:
            self.actions.inc(actions)

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
