"""The server's CPU per flooding connection: the ``tiny`` attack's connections one after the other.

Run from the project root::

    .venv/bin/python -m bench.bench_flood_cost                    (300 connections: a few seconds)
    .venv/bin/python -m bench.bench_flood_cost --hello --connections 200

Each connection comes from a new address (127.x.y.z, as the ``tiny`` attack of bench/bench_attacks.py
reconnects), writes 256 KiB of 7-byte ``{}`` frames (an invalid message) at a time and reads what the
server answers until it is closed; with ``--hello`` it says ``hello`` first (a new guest, a valid request).
The server is ``eightoff serve`` at the default limits (bench_attacks' ``DEFAULT_LIMITS``). It prints
the server's CPU time (its process tree, all threads) over the connections, divided by their number,
and the bytes each read: the work the attack buys per connection, apart from the bystander's noise
(bench_attacks' ``tiny`` row measures what a player feels). The attacker does not wait out the
server's lingering close (it hangs up once closed), so the connections come one after the other as
fast as the server takes them. Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import msgpack  # type: ignore[import-untyped]
from websockets.frames import Opcode

from bench.bench_attacks import (
    DEFAULT_LIMITS,
    TINY_WRITE,
    Tally,
    _botnet_addresses,
    _drain_raw,
    _masked,
    _raw_socket,
)
from bench.bench_load import cpu_seconds, start_target, stop_process

HELLO = _masked(Opcode.BINARY, msgpack.packb({"type": "hello", "protocol": 1, "id": 1}))
WARM_UP = 3  # connections before the count (first-use costs)


async def _flooder(url: str, address: str, tally: Tally, hello: bool) -> None:
    """One connection from ``address``: the flood until the server closes it."""
    reader, writer = await _raw_socket(url, address)
    if hello:
        writer.write(HELLO)
        await asyncio.sleep(0.02)  # its welcome before the flood (a guest made on the database)
    drained = asyncio.create_task(_drain_raw(reader, tally))
    with contextlib.suppress(ConnectionError, RuntimeError):
        while not drained.done() and not writer.is_closing():
            writer.write(TINY_WRITE)
            drain = asyncio.ensure_future(writer.drain())
            await asyncio.wait([drain, drained], return_when=asyncio.FIRST_COMPLETED)
            if not drain.done():  # closed while the server no longer reads
                drain.cancel()
                break
    writer.transport.abort()
    await drained


async def _run(url: str, pid: int, connections: int, hello: bool) -> tuple[float, float, Tally]:
    """CPU seconds of the server per connection, the wall time, what the connections read."""
    tally = Tally()
    addresses: Iterator[str] = _botnet_addresses(50_000)
    for _ in range(WARM_UP):
        await _flooder(url, next(addresses), Tally(), hello)
    await asyncio.sleep(0.5)
    cpu_before, started = cpu_seconds(pid) or 0.0, time.monotonic()
    for _ in range(connections):
        await _flooder(url, next(addresses), tally, hello)
    await asyncio.sleep(0.3)  # the last closes handled
    cpu = (cpu_seconds(pid) or 0.0) - cpu_before
    return cpu / connections, time.monotonic() - started, tally


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=300, help="connections counted (default 300)")
    parser.add_argument("--hello", action="store_true", help="say hello before the flood")
    parser.add_argument("--server-launcher", default=None, help="command in place of `python -m server`")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="eightoff-flood-cost-") as workdir:
        target = start_target("server", Path(workdir), args.server_launcher, extra=DEFAULT_LIMITS)
        try:
            per_connection, wall, tally = asyncio.run(
                _run(target.url, target.process.pid, args.connections, args.hello)
            )
        finally:
            stop_process(target.process)
    read = tally.counts["bytes read"] / args.connections
    print(
        f"{args.connections} connections{' (hello first)' if args.hello else ''} in {wall:.1f} s: server CPU "
        f"{per_connection * 1000:.2f} ms per connection, {read:,.0f} bytes read by each"
    )
    print(f"command: python -m bench.bench_flood_cost {' '.join(argv if argv is not None else sys.argv[1:])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
