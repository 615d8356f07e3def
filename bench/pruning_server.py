"""``eightoff`` whose leaderboard pruner runs once, when told, for bench/bench_prune.py.

    .venv/bin/python -m bench.pruning_server REPORT serve [eightoff serve's flags]

The server is the real one; only its ``board-pruning`` task differs. Instead of a run every
`PRUNE_INTERVAL` seconds, it waits for SIGUSR1, then runs `BoardPruning.prune` once, its clock fixed
at bench_leaderboard's `NOW` (the last day of its backlog, whatever the date of the run: the same
buckets are closed every time), and writes to REPORT, as JSON, the ``time.monotonic()`` instants it
started and ended at (CLOCK_MONOTONIC: the bench's clock too, on Linux) and what it did (`Pruned`), or
the error it failed with. Not a test, and not part of the server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

USAGE = "usage: python -m bench.pruning_server REPORT serve [eightoff serve's flags]"


def _prune_once_when_told(report: Path) -> None:
    """Replace the pruner's loop by one run on SIGUSR1, its clock at bench_leaderboard's `NOW`."""
    from bench.bench_leaderboard import NOW
    from server.services import pruning

    async def prune_once(pruner: pruning.BoardPruning) -> None:
        told = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, told.set)
        await told.wait()
        started = time.monotonic()
        outcome: dict[str, Any]
        try:
            outcome = dataclasses.asdict(await pruner.prune())
        except Exception as exc:  # the bench reports it instead of waiting for ever
            outcome = {"error": f"{type(exc).__name__}: {exc}"}
        written = report.with_suffix(".tmp")
        written.write_text(json.dumps({"started": started, "ended": time.monotonic(), **outcome}))
        written.replace(report)  # whole or not at all: the bench polls for it

    setattr(pruning, "utc_now", lambda: NOW)  # noqa: B010 (a bench's patch: the pruner's clock only)
    setattr(pruning.BoardPruning, "prune_forever", prune_once)  # noqa: B010


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):  # --help, or the report's path forgotten
        print(USAGE, __doc__, sep="\n\n", file=sys.stderr if len(sys.argv) < 2 else sys.stdout)
        sys.exit(0 if sys.argv[1:] in (["-h"], ["--help"]) else 2)
    report = Path(sys.argv.pop(1))
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # until the pruner listens: never a kill
    _prune_once_when_told(report)
    from server.ops.cli import main as eightoff

    sys.exit(eightoff())


if __name__ == "__main__":
    main()
