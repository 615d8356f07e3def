"""bench_load on PostgreSQL (``--postgres-url``): the server runs on a database of the bench's own,
dropped afterwards, and the CPU of the PostgreSQL backends serving it is read at the window's edges and
reported per action beside the server's."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import pytest

from bench.bench_load import cpu_spent, plain_dsn
from tests.support import dbutil
from tests.support.ci import unavailable

ROOT = Path(__file__).parents[2]
_PG_LINE = re.compile(
    r"^N=1 saturated: server CPU per action (?P<own>[\d.]+) µs .*"
    r"\+ PostgreSQL backends (?P<backends>[\d.]+) µs = (?P<total>[\d.]+) µs.*"
    r"backends: (?P<read>\d+) read",
    re.MULTILINE,
)


def _postgres_server_url() -> str:
    """The test server's URL; outside CI without it the test is skipped, in CI it fails."""
    url = dbutil.postgres_server_url()
    if url is None:
        unavailable(dbutil.POSTGRES_SKIP_REASON)
    return url


async def _databases_named(server_url: str, prefix: str) -> list[str]:
    conn = await asyncpg.connect(plain_dsn(server_url))
    try:
        rows = await conn.fetch("SELECT datname FROM pg_database WHERE datname LIKE $1", f"{prefix}%")
    finally:
        await conn.close()
    return [row["datname"] for row in rows]


def _run_bench(module: str, *args: str) -> tuple[int, str]:
    """Run ``bench.<module>`` with ``args`` to its end; its pid and its output (it must succeed)."""
    bench = subprocess.Popen(
        [sys.executable, "-m", f"bench.{module}", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = bench.communicate(timeout=180)
    assert bench.returncode == 0, err[-3000:]
    return bench.pid, out


def test_a_tiny_run_reports_the_backends_cpu_per_action_and_drops_its_database() -> None:
    server_url = _postgres_server_url()
    pid, out = _run_bench(
        "bench_load", "--quick", "--n", "1", "--only", "server", "--postgres-url", server_url
    )
    found = _PG_LINE.search(out)
    assert found, out[-3000:]
    own, backends, total = (float(found[key]) for key in ("own", "backends", "total"))
    assert int(found["read"]) >= 1  # the server's pooled connection(s), found in pg_stat_activity
    assert own > 0 and backends > 0  # every action was committed by a backend: it cannot be free
    assert total == pytest.approx(own + backends, abs=0.11)  # printed to 0.1 µs each
    assert "synchronous_commit=" in out
    assert asyncio.run(_databases_named(server_url, f"bench_load_{pid}_")) == []


def test_cpu_spent_counts_a_process_started_in_the_window_whole_and_loses_one_gone() -> None:
    start = {10: 1.0, 11: 2.0, 12: 5.0}
    end = {10: 1.5, 11: 2.25, 13: 0.5}  # 12 exited (its CPU is lost), 13 connected meanwhile
    assert cpu_spent(start, end) == pytest.approx(0.5 + 0.25 + 0.5)


def test_bench_pg_append_prints_each_variant_beside_the_baseline_and_drops_its_databases() -> None:
    server_url = _postgres_server_url()
    sizes = ("--batch", "3", "--rounds", "1", "--commits", "5", "--games", "4")
    pid, out = _run_bench("bench_pg_append", "--postgres-url", server_url, *sizes)
    rows = re.findall(r"^\| 3 \| ([^|]+) \|.*\| ([\d.]+) \| [\d.]+ \|$", out, re.MULTILINE)
    assert [name.strip() for name, _ in rows] == ["executemany", "unnest", "unnest, no pre-ping"]
    assert rows[0][1] == "1.00"  # the baseline's ratio to itself
    assert asyncio.run(_databases_named(server_url, f"bench_load_{pid}_")) == []
