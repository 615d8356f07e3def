"""`HotHistogram`, the per-action histogram: what ``/metrics`` shows of it is what prometheus-client's own
``Histogram`` shows for the same observations (values on a bucket's bound, between bounds, above every
bound, zero and negative)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from server.ops.metrics import HotHistogram

BOUNDS = (0.001, 0.01, 0.1)
VALUES = [0.0, -1.0, 0.001, 0.0010001, 0.005, 0.01, 0.5, 7.0, 0.1]


def exposition(registry: CollectorRegistry) -> list[str]:
    return [line for line in generate_latest(registry).decode().splitlines() if not line.startswith("#")]


def test_the_exposition_matches_prometheus_clients_histogram() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    hot = HotHistogram("latency_seconds", "help", BOUNDS)
    ours.register(hot)
    reference = Histogram("latency_seconds", "help", buckets=BOUNDS, registry=theirs)
    assert exposition(ours) == [line for line in exposition(theirs) if "_created" not in line]
    for value in VALUES:
        hot.observe(value)
        reference.observe(value)
    assert exposition(ours) == [line for line in exposition(theirs) if "_created" not in line]
