"""The cross-node bus: committed actions of every game, for the nodes whose spectators watch it.

One node alone needs no bus (``LocalBus``: its rooms push to their own followers). With
``--redis-url`` every node publishes each committed action on ``eightoff:game:<id>`` and listens to
the pattern ``eightoff:game:*``; a node holding the same game for its own spectators replays the
action through its engine and pushes the diff itself, in both subprotocols. One pattern subscription
per node means no subscribe race when a room appears: the room just ignores what it has already.
Each bus stamps what it publishes with a random instance id and skips only its own: operators may
give two nodes the same name (or none), and the node name is for display and logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import msgpack  # type: ignore[import-untyped]

__all__ = ["Bus", "BusEvent", "LocalBus", "RedisBus"]

logger = logging.getLogger(__name__)

CHANNEL_PREFIX = "eightoff:game:"


@dataclass(frozen=True, slots=True)
class BusEvent:
    """One committed action (or a resignation, with ``action`` None) of a game on some node."""

    node: str
    game: str
    v: int
    action: str | None
    finished_at_ms: int | None = None


class Bus(Protocol):
    async def start(self, deliver: Callable[[BusEvent], None]) -> None: ...

    def publish(self, event: BusEvent) -> None: ...

    async def close(self) -> None: ...


class LocalBus:
    """One node: nothing to tell anyone."""

    async def start(self, deliver: Callable[[BusEvent], None]) -> None:
        return None

    def publish(self, event: BusEvent) -> None:
        return None

    async def close(self) -> None:
        return None


class RedisBus:
    """Redis pub/sub between nodes; publishing never blocks an action (a queue keeps the order)."""

    def __init__(self, url: str) -> None:
        import redis.asyncio as redis

        self._redis: Any = redis.Redis.from_url(url)
        self._instance = secrets.token_hex(8)  # tells our own events apart; node names may repeat
        self._outbox: asyncio.Queue[BusEvent] = asyncio.Queue(maxsize=100_000)
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self, deliver: Callable[[BusEvent], None]) -> None:
        await self._redis.ping()  # fail at start-up, not at the first action
        pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
        await pubsub.psubscribe(CHANNEL_PREFIX + "*")
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._listen(pubsub, deliver), name="bus-listen"),
            loop.create_task(self._publish_forever(), name="bus-publish"),
        ]

    def publish(self, event: BusEvent) -> None:
        try:
            self._outbox.put_nowait(event)
        except asyncio.QueueFull:
            logger.warning(
                "bus outbox full; dropping an event of game %s (spectators will resync)", event.game
            )

    async def _publish_forever(self) -> None:
        while True:
            event = await self._outbox.get()
            try:
                await self._redis.publish(CHANNEL_PREFIX + event.game, self._pack(event))
            except Exception as exc:  # Redis away: remote spectators resync from the database later
                logger.warning("bus publish failed: %s", exc)

    async def _listen(self, pubsub: Any, deliver: Callable[[BusEvent], None]) -> None:
        while True:
            try:
                message = await pubsub.get_message(timeout=1.0)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("bus listen failed: %s; retrying", exc)
                await asyncio.sleep(1.0)
                continue
            if message is None or message.get("type") != "pmessage":
                continue
            try:
                instance, event = self._unpack(message["data"])
            except Exception:
                logger.warning("ignoring a malformed bus message")
                continue
            if instance != self._instance:
                deliver(event)

    def _pack(self, event: BusEvent) -> bytes:
        fields = [self._instance, event.node, event.game, event.v, event.action, event.finished_at_ms]
        packed: bytes = msgpack.packb(fields)
        return packed

    @staticmethod
    def _unpack(data: bytes) -> tuple[str, BusEvent]:
        instance, node, game, v, action, finished_at_ms = msgpack.unpackb(data)
        return instance, BusEvent(node, game, v, action, finished_at_ms)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._redis.aclose()
