"""`HotHistogram`, the per-action histogram: what ``/metrics`` shows of it is what prometheus-client's own
``Histogram`` shows for the same observations (values on a bucket's bound, between bounds, above every
bound, zero and negative). And a node's shared metrics directory (the sums over workers themselves are
tried with real worker processes in tests/server/test_workers.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from server.metrics import MULTIPROC_DIR_VARIABLE, HotHistogram, Metrics, SharedMetricsDir

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


def test_a_nodes_shared_directory_is_new_named_to_workers_and_removed() -> None:
    """The supervisor's directory for its workers' metrics: empty at the start,
    named in the environment the workers inherit; a dead worker's gauges go (its counters stay in the
    node's sums); removed with the variable when the node stops."""
    shared = SharedMetricsDir()
    try:
        path = Path(shared.path)
        assert os.environ[MULTIPROC_DIR_VARIABLE] == shared.path and list(path.iterdir()) == []
        for name in ("gauge_livesum_4242.db", "counter_4242.db", "gauge_livesum_4343.db"):
            (path / name).write_bytes(b"")
        shared.worker_exited(4242)
        assert sorted(file.name for file in path.iterdir()) == ["counter_4242.db", "gauge_livesum_4343.db"]
    finally:
        shared.remove()
    assert not path.exists() and MULTIPROC_DIR_VARIABLE not in os.environ


def test_metrics_refuse_a_shared_directory_named_after_prometheus_client_was_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Named too late, the worker's values would stay in its own memory and the node's sums would
    silently miss them: the worker refuses to start instead."""
    monkeypatch.setenv(MULTIPROC_DIR_VARIABLE, str(tmp_path))
    with pytest.raises(RuntimeError, match="set after prometheus_client was imported"):
        Metrics()
