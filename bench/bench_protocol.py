"""Protocol benchmark: decode+validate and encode per second, beside the raw codec in the same run.

Run from the project root::

    .venv/bin/python -m bench.bench_protocol        (or: .venv/bin/python bench/bench_protocol.py)

For each subprotocol (msgpack, JSON) it times what the server does per message:

- decode a ``move`` request: ``protocol.decode`` (parse + every validation + the frozen request),
  against the bare ``msgpack.unpackb`` / ``json.loads`` of the same frame;
- encode a ``snapshot``: ``protocol.encode`` of a built snapshot, against ``msgpack.packb`` /
  ``json.dumps`` of the same dict; and build + encode (``protocol.Snapshot.of`` a ``Game``, then
  encode), which is what answering a ``watch`` costs;
- build + encode an ``ack`` from the game and the action's transfer (the reply to every move).

Each line prints operations per second and microseconds per operation for ours and the baseline,
and the ratio ours/baseline in time (how many times the bare codec's cost). Each figure is the best
of a few repeats; the whole run takes a few seconds. This is not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import msgpack  # type: ignore[import-untyped]

import protocol
from engine import Game, Transfer
from protocol import Subprotocol

REPEATS = 5
BUDGET = 0.05  # seconds per repeat, roughly

MOVE = {"type": "move", "id": 17, "game": "g_7Kq2-Xw", "from": "t1", "to": "t4", "n": 3, "v": 12}
PLAYER = protocol.Player("p_3fQ9", "Ann")
STARTED = dt.datetime(2026, 11, 30, 4, 48, 59, 123000, tzinfo=dt.UTC)


def per_call(run: Callable[[], object]) -> float:
    """Seconds per call: the best of ``REPEATS`` timed loops of about ``BUDGET`` seconds each."""
    calls = 1
    while True:  # calibrate the loop length
        start = time.perf_counter()
        for _ in range(calls):
            run()
        if time.perf_counter() - start > BUDGET / 10:
            break
        calls *= 2
    calls = max(1, int(calls * BUDGET / max(time.perf_counter() - start, 1e-9) / 10) * 10)
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(calls):
            run()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def row(name: str, ours: float, baseline: float, baseline_name: str) -> None:
    print(
        f"{name:34} {1 / ours:>12,.0f}/s {ours * 1e6:>7.2f} µs   "
        f"{baseline_name:20} {1 / baseline:>12,.0f}/s {baseline * 1e6:>7.2f} µs   x{ours / baseline:5.2f}"
    )


def bench(subprotocol: Subprotocol, game: Game, after: Game, transfer: Transfer) -> None:
    """The four lines of one subprotocol."""
    label = "msgpack" if subprotocol is Subprotocol.MSGPACK else "json"
    snapshot = protocol.Snapshot.of(
        "g_7Kq2-Xw", game, player=PLAYER, started_at=STARTED, request_id=2
    ).to_wire()
    ack = protocol.Ack.of("g_7Kq2-Xw", after, transfer, 17).to_wire()
    frame: bytes | str
    if subprotocol is Subprotocol.MSGPACK:
        frame = msgpack.packb(MOVE)
        raw_decode: Callable[[bytes | str], object] = msgpack.unpackb
        raw_encode: Callable[[object], object] = msgpack.packb
        names = "msgpack.unpackb", "msgpack.packb"
    else:
        frame = json.dumps(MOVE)
        raw_decode = json.loads
        raw_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
        names = "json.loads", "json.dumps"
    assert protocol.decode(frame, subprotocol).TYPE == "move"

    def build_snapshot() -> object:
        message = protocol.Snapshot.of("g_7Kq2-Xw", game, player=PLAYER, started_at=STARTED, request_id=2)
        return protocol.encode(message.to_wire(), subprotocol)

    def build_ack() -> object:
        return protocol.encode(protocol.Ack.of("g_7Kq2-Xw", after, transfer, 17).to_wire(), subprotocol)

    encode_snapshot = per_call(lambda: raw_encode(snapshot))
    row(f"decode move [{label}]", per_call(lambda: protocol.decode(frame, subprotocol)),
        per_call(lambda: raw_decode(frame)), names[0])  # fmt: skip
    row(
        f"encode snapshot [{label}]",
        per_call(lambda: protocol.encode(snapshot, subprotocol)),
        encode_snapshot,
        names[1],
    )
    row(f"build+encode snapshot [{label}]", per_call(build_snapshot), encode_snapshot, names[1])
    row(f"build+encode ack [{label}]", per_call(build_ack), per_call(lambda: raw_encode(ack)), names[1])


def main() -> None:
    game = Game.from_code("EO1-C8-AAAAAFA")
    after = game.copy()
    transfer = after.play(next(iter(game.legal_moves)))
    print(
        f"protocol v{protocol.PROTOCOL_VERSION}, msgpack {msgpack.version}, Python {sys.version.split()[0]}"
    )
    print(f"{'operation':34} {'ours':>27}   {'baseline':>41}   ratio")
    for subprotocol in Subprotocol:
        bench(subprotocol, game, after, transfer)


if __name__ == "__main__":
    # No options: --help says what it measures instead of running it, and a stray flag is refused.
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None).parse_args()
    main()
