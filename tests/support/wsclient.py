"""A plain test client speaking the wire protocol with raw msgpack/json, as a client in any language would."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Sequence
from typing import Any

import msgpack  # type: ignore[import-untyped]
from websockets.asyncio.client import ClientConnection, connect

import protocol

SUBPROTOCOLS = ("eightoff.v1.msgpack", "eightoff.v1.json")


class WsClient:
    """Requests get their reply by ``id``; pushed messages (diffs, game_over) queue up in ``pushed``."""

    def __init__(self, ws: ClientConnection, subprotocol: str) -> None:
        self.ws = ws
        self.subprotocol = subprotocol
        self.pushed: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._ids = itertools.count(1)
        self.token: str | None = None
        self.player: dict[str, Any] | None = None
        self.reply_timeout = 10.0  # seconds `request` waits for each message

    @classmethod
    async def open(cls, url: str, subprotocol: str = SUBPROTOCOLS[0], **kwargs: Any) -> WsClient:
        """A connection to ``url``. It reads every frame the server sends whether the test reads it or
        not (no ``max_queue``): with websockets' default of 16 a client that let more pushes pile up
        unread (a race's standings, a game's diffs) stopped reading the socket, never saw the
        server's close frame, and its ``close`` waited out the 10 s ``close_timeout``. A test of a
        client that does not read pauses its transport itself."""
        kwargs.setdefault("max_queue", None)
        ws = await connect(url, subprotocols=[subprotocol], max_size=None, **kwargs)  # type: ignore[list-item]
        return cls(ws, subprotocol)

    def encode(self, message: dict[str, Any]) -> bytes | str:
        if self.subprotocol.endswith("json"):
            return json.dumps(message)
        frame: bytes = msgpack.packb(message)
        return frame

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send(self.encode(message))

    async def recv(self, timeout: float = 10.0) -> dict[str, Any]:
        # asyncio.timeout, not wait_for: on Python 3.11, wait_for loses a cancel that comes once the
        # frame is read (it returns the frame), so a cancelled request loop could go on for ever.
        async with asyncio.timeout(timeout):
            frame = await self.ws.recv()
        if self.subprotocol.endswith("json"):
            assert isinstance(frame, str), "JSON subprotocol must answer in text frames"
            message: dict[str, Any] = json.loads(frame)
        else:
            assert isinstance(frame, bytes), "msgpack subprotocol must answer in binary frames"
            message = msgpack.unpackb(frame)
        protocol.validate_server_message(message)  # everything the server sends follows the spec
        return message

    async def request(self, type_: str, **fields: Any) -> dict[str, Any]:
        """Send a request with a fresh id and return its reply (waiting at most ``reply_timeout``
        seconds for each message); pushes that arrive first are kept."""
        (reply,) = await self.pipeline([(type_, fields)])
        return reply

    async def pipeline(self, requests: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
        """Send every request at once, then return their replies in the order sent (pushes between
        them are kept). A line of moves costs one round trip instead of one each: under a loaded
        machine each round trip waits for the server's and the database's turn on a core."""
        ids = [next(self._ids) for _ in requests]
        for request_id, (type_, fields) in zip(ids, requests, strict=True):
            await self.send({"type": type_, "id": request_id, **fields})
        awaited = set(ids)
        replies: dict[int, dict[str, Any]] = {}
        while len(replies) < len(ids):
            message = await self.recv(self.reply_timeout)
            if message.get("id") in awaited:
                replies[message["id"]] = message
            else:
                await self.pushed.put(message)
        return [replies[request_id] for request_id in ids]

    async def next_push(self, timeout: float = 10.0) -> dict[str, Any]:
        if not self.pushed.empty():
            return self.pushed.get_nowait()
        message = await self.recv(timeout)
        assert "id" not in message, f"expected a push, got a reply {message}"
        return message

    async def hello(self, **fields: Any) -> dict[str, Any]:
        welcome = await self.request("hello", protocol=1, **fields)
        assert welcome["type"] == "welcome", welcome
        self.token = welcome.get("token", self.token)
        self.player = welcome["player"]
        return welcome

    async def close(self) -> None:
        await self.ws.close()


async def player(
    url: str, subprotocol: str = SUBPROTOCOLS[0], *, forwarded_for: str | None = None, **hello: Any
) -> WsClient:
    """A connection to ``url`` that said hello with ``hello``'s fields (a name, a token ...); with
    ``forwarded_for``, as the client a proxy on 127.0.0.1 names (a server that trusts it counts the
    connection under that address: its per-address limits, a seat's network for ratings)."""
    headers = {} if forwarded_for is None else {"X-Forwarded-For": forwarded_for}
    client = await WsClient.open(url, subprotocol, additional_headers=headers)
    await client.hello(**hello)
    return client
