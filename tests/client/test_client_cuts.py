"""The tutorial's program (docs/tutorial-first-bot.md), run in-process through a TCP proxy that cuts
its connection at seeded random moments, wins every time and prints a live board after every move:
the Board ``new_game`` returned stays the client's copy through every reconnect and resync.

A cut is one of three, drawn at random: a frame from the server is dropped (its reply is lost), a
request is dropped before the server reads it, or a request is delivered and the connection cut
before its reply (the action applied, its ``ack`` lost: the resend is refused ``stale``)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import random
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from server.app import App
from tests.client.test_client_tutorial import the_program
from tests.support import dbutil, serverutil

#: Chunks forwarded (either way) between two cuts: a cut every few round trips.
CUT_EVERY = (4, 40)
SEEDS = range(5)


class CuttingProxy:
    """Forwards 127.0.0.1:<port> to ``target`` and, once a ``snapshot`` has gone to the client (the
    deal: ``new_game`` is not retried, by design), aborts the connection at random chunks."""

    def __init__(self, target_port: int, seed: int) -> None:
        self._target_port = target_port
        self._random = random.Random(seed)
        self._armed = False
        self._countdown = self._draw()
        self._server: asyncio.Server | None = None
        self.port = 0
        self.cuts = 0

    def _draw(self) -> int:
        return self._random.randint(*CUT_EVERY)

    async def __aenter__(self) -> CuttingProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", self._target_port)
        writers = (client_writer, server_writer)
        await asyncio.gather(
            self._pipe(client_reader, server_writer, writers, upstream=True),
            self._pipe(server_reader, client_writer, writers, upstream=False),
            return_exceptions=True,
        )

    async def _pipe(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        both: tuple[asyncio.StreamWriter, ...],
        *,
        upstream: bool,
    ) -> None:
        try:
            while data := await reader.read(65536):
                self._armed = self._armed or (not upstream and b"snapshot" in data)
                if self._armed and self._due():
                    if upstream and self._random.random() < 0.5:
                        writer.write(data)  # the request reaches the server; its reply will not come
                        await writer.drain()
                    self.cuts += 1
                    return
                writer.write(data)
                await writer.drain()
        finally:
            for each in both:
                each.transport.abort()

    def _due(self) -> bool:
        self._countdown -= 1
        if self._countdown > 0:
            return False
        self._countdown = self._draw()
        return True


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[App]:
    """No limit on new connections: a reconnect every few frames is the subject, not a flood."""
    url = dbutil.sqlite_url(tmp_path / "cuts.db")
    async with serverutil.running_app(
        url, sqlite_synchronous="NORMAL", new_connections_per_address_per_second=None
    ) as app:
        yield app


async def run_the_tutorial(url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The tutorial's program as written, but awaited here instead of ``asyncio.run``; its output."""
    program = the_program()
    assert program.endswith("asyncio.run(main())\n")
    namespace: dict[str, object] = {"__name__": "first_bot"}
    monkeypatch.setattr(sys, "argv", ["first_bot.py", url])
    exec(program.removesuffix("asyncio.run(main())\n"), namespace)
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        await namespace["main"]()  # type: ignore[operator]
    return output.getvalue()


async def test_the_tutorial_wins_through_a_proxy_that_cuts_it_at_random_moments(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    cuts = []
    for seed in SEEDS:
        async with CuttingProxy(app.port, seed) as proxy:
            output = await asyncio.wait_for(
                run_the_tutorial(f"ws://127.0.0.1:{proxy.port}/ws", monkeypatch), 60
            )
        lines = output.splitlines()
        won = re.fullmatch(r"won in (\d+) moves, score \d+, [\d.]+ s", lines[-1])
        assert won, (seed, lines[-1])
        versions = [int(line.split(".")[0]) for line in lines if re.match(r" *\d+\. ", line)]
        # Every move printed at the version it made (a blind board would print 0 each time), the
        # last one the winning move; then the final board: every card home.
        assert versions == sorted(set(versions)) and versions[0] >= 1, (seed, versions[:5])
        assert versions[-1] == int(won[1]), (seed, versions[-5:], lines[-1])
        assert lines[-10] == "foundations: S:KS H:KH D:KD C:KC", (seed, lines[-12:])
        cuts.append(proxy.cuts)
    print(f"cuts per run: {cuts}")
    assert min(cuts) >= 3, cuts
