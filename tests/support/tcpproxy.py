"""A loopback TCP proxy a test can cut, blackhole and restore, to take a database away from a server."""

from __future__ import annotations

import asyncio
import contextlib


class TcpProxy:
    """Forwards 127.0.0.1:<port> to ``target``.

    ``cut()`` drops every connection and refuses new ones (the database is down); ``blackhole()`` keeps
    every connection open and accepts new ones but forwards nothing either way (a network partition:
    nothing answers, nothing fails); ``start()`` after either forwards again (connections that lived
    through a blackhole are dropped then, as TCP would have given up on them).
    """

    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._blackholed = False
        self.port = 0

    async def start(self) -> None:
        if self._blackholed:
            self._blackholed = False
            self._drop_all()
        if self._server is None or not self._server.is_serving():
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
            self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()
        self._drop_all()

    def blackhole(self) -> None:
        self._blackholed = True

    def _drop_all(self) -> None:
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._blackholed:
            self._writers.add(writer)
            await self._swallow(reader)
            return
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, upstream_writer))
        await asyncio.gather(
            self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer), return_exceptions=True
        )

    async def _swallow(self, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(Exception):
            while await reader.read(65536):
                pass

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                if not self._blackholed:
                    writer.write(data)
                    await writer.drain()
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.transport.abort()
