"""A leaderboard read's statements built once (templates with bound parameters) against built anew for
each read, as they were: CPU per read on an empty in-memory SQLite board, so that what is left is
SQLAlchemy's work on the event loop's thread (building the statement tree, its cache key, binding)
and the smallest execution.

Run: ``.venv/bin/python -m bench.bench_board_statements`` (a few seconds). Rounds alternate the two
ways; it prints each read's CPU per way and their ratio. Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from collections.abc import Callable

from sqlalchemy import Connection, create_engine

from server.storage import leaderboards as boards
from server.storage.tables import Base

SCOPE = "V/8/m/a"
KEY = (5 << 41, dt.datetime(2026, 12, 1, tzinfo=dt.UTC), "g1")


def reads(conn: Connection) -> dict[str, tuple[Callable[[], object], Callable[[], object]]]:
    """Per read: (built anew, template)."""
    board = boards._GAME_BOARD
    around = boards._around_read(board, SCOPE, "p1", 20)
    rank = boards._rank_read(board, SCOPE, [KEY])
    page = boards._page_read(board, SCOPE, KEY, 21)
    return {
        "around": (
            lambda: conn.execute(boards._around_template(board), around[1]).all(),
            lambda: conn.execute(*around).all(),
        ),
        "rank": (
            lambda: conn.execute(boards._rank_template(board, "buckets"), rank[1]).all(),
            lambda: conn.execute(*rank).all(),
        ),
        "page after a cursor": (
            lambda: conn.execute(boards._page_template(board, after=True), page[1]).all(),
            lambda: conn.execute(*page).all(),
        ),
    }


def cpu_per_call(read: Callable[[], object], count: int) -> float:
    started = time.thread_time()
    for _ in range(count):
        read()
    return (time.thread_time() - started) / count


def main(count: int, rounds: int) -> None:
    engine = create_engine("sqlite://")
    Base.metadata.create_all(engine)
    with engine.connect() as conn:
        for name, (anew, template) in reads(conn).items():
            cpu_per_call(anew, count // 5), cpu_per_call(template, count // 5)  # warm-up
            results: dict[str, list[float]] = {"anew": [], "template": []}
            for _ in range(rounds):
                results["anew"].append(cpu_per_call(anew, count))
                results["template"].append(cpu_per_call(template, count))
            built, kept = min(results["anew"]), min(results["template"])
            print(
                f"{name:<20} built anew {built * 1e3:6.3f} ms   template {kept * 1e3:6.3f} ms   "
                f"template / anew {kept / built:5.2f}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=500, help="reads per round and way")
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    main(arguments.count, arguments.rounds)
