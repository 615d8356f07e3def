"""Composition root: `Services` builds the database, the write pipeline, the rooms and the handlers
without binding a port (unit tests use it directly); `App` serves them, WebSocket and HTTP on one
port, and shuts down gracefully (stop accepting, finish in-flight actions, close with 1001).
"""

from __future__ import annotations

import asyncio
import gc
import importlib.resources
import json
import logging
import signal
import socket
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import ClassVar
from urllib.parse import unquote

import protocol
from server import __version__
from server.admission import (
    ConnectionCaps,
    ConnectionGate,
    OriginPolicy,
    ThrottledLog,
    TrustedProxies,
    open_files_budget,
)
from server.bus import Bus, LocalBus, RedisBus
from server.committer import Committer
from server.config import Settings, needs
from server.connection import ConnectionLoop, Fanout
from server.errors import ErrorCode, Refusal, storage_failures_refused
from server.hints import SolvingService
from server.leaderboard import LeaderboardService, parse_leaderboard_query, parse_profile_path
from server.metrics import Metrics
from server.quotas import UnfinishedGames
from server.ratelimit import BucketsByKey
from server.requests import RequestHandler
from server.rooms import RoomRegistry
from server.storage import Database, StorageUnavailable, upgrade_to_head
from server.storage.commit_backends import CommitBackend, SqlAlchemyBackend, SqliteBackend
from server.storage.db import sqlite_file
from server.transport import Request, Response, WebSocketServer, http_response

__all__ = ["App", "Services", "run"]

logger = logging.getLogger(__name__)

HARD_FRAME_FACTOR = 16
WEB_ROOT = Path(str(importlib.resources.files("web"))).resolve()
_STATIC_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript", ".css": "text/css"}


def _commit_backend(settings: Settings, database: Database) -> CommitBackend:
    """The group-commit backend for the configured database: on SQLite, action appends skip the async
    engine (see `server.storage.commit_backends`)."""
    engine_backend = SqlAlchemyBackend(database, asyncio.get_running_loop())
    sqlite_path = sqlite_file(settings.database_url)
    if sqlite_path is None:
        return engine_backend
    return SqliteBackend(sqlite_path, engine_backend, synchronous=settings.sqlite_synchronous)


@dataclass(slots=True)
class Services:
    """Everything behind the listening socket, built and started without binding a port."""

    settings: Settings
    database: Database
    metrics: Metrics
    committer: Committer
    registry: RoomRegistry
    leaderboards: LeaderboardService
    handler: RequestHandler
    loop: ConnectionLoop
    solving: SolvingService
    unfinished: UnfinishedGames

    @classmethod
    async def start(cls, settings: Settings, *, bus: Bus | None = None) -> Services:
        """Open the (migrated) database, start the write pipeline and the bus (``bus``, else Redis with
        ``redis_url``, else none).

        Raises:
            server.config.Unavailable: Redis cannot be reached.
        """
        database = Database.create(
            settings.database_url,
            sqlite_synchronous=settings.sqlite_synchronous,
            timeout=settings.database_timeout,
        )
        metrics = Metrics()
        committer = Committer(_commit_backend(settings, database), metrics, max_batch=settings.commit_batch)
        committer.start()
        fanout = Fanout()
        bus = bus or (RedisBus(settings.redis_url) if settings.redis_url else LocalBus())
        registry = RoomRegistry(database, committer, metrics, fanout, node=settings.node, bus=bus)
        with needs("redis_url", what="cannot reach Redis"):
            await registry.remote.start()
        leaderboards = LeaderboardService(database)
        solving = SolvingService()
        unfinished = UnfinishedGames(
            database,
            registry.rooms,
            per_player=settings.max_unfinished_games_per_player,
            abandon_after=settings.abandon_after,
        )
        handler = RequestHandler(
            settings, database, committer, registry, leaderboards, __version__, solving, unfinished=unfinished
        )
        loop = ConnectionLoop(settings, handler, registry, metrics, fanout)
        return cls(
            settings, database, metrics, committer, registry, leaderboards, handler, loop, solving, unfinished
        )

    async def stop(self) -> None:
        """Commit what was submitted, leave the bus, close the database."""
        await self.committer.stop()
        self.metrics.flush()  # a worker's last observations into the node's sums
        await self.registry.remote.close()
        await self.database.dispose()
        self.solving.close()


@dataclass(slots=True)
class App:
    """A running server: the listening socket and the services behind it."""

    services: Services
    server: WebSocketServer
    sweeper: asyncio.Task[None]
    expirer: asyncio.Task[None]

    @property
    def settings(self) -> Settings:
        return self.services.settings

    @property
    def database(self) -> Database:
        return self.services.database

    @property
    def committer(self) -> Committer:
        return self.services.committer

    @property
    def registry(self) -> RoomRegistry:
        return self.services.registry

    @property
    def loop(self) -> ConnectionLoop:
        return self.services.loop

    @property
    def metrics(self) -> Metrics:
        return self.services.metrics

    @property
    def unfinished(self) -> UnfinishedGames:
        return self.services.unfinished

    @classmethod
    async def start(
        cls, settings: Settings, *, sock: socket.socket | None = None, bus: Bus | None = None
    ) -> App:
        """Migrate the database to head, open it and start listening: on ``sock`` when given (a bound
        socket, shared by the workers of `server.workers` with SO_REUSEPORT), else on the configured
        host and port; ``bus`` is the one between those workers (default: as the settings say).

        Raises:
            server.config.Unavailable: the database, Redis or the address to listen on.
        """
        with needs("database_url", what="cannot open and migrate the database"):
            await asyncio.to_thread(upgrade_to_head, settings.database_url)
        services = await Services.start(settings, bus=bus)
        http = _HttpRoutes(
            services.metrics, services.leaderboards, services.database, OriginPolicy.parse(settings.origins)
        )
        server = WebSocketServer(
            services.loop.open,
            http,
            _connection_gate(settings),  # issue 11: connection caps
            # The codec answers frames over max_frame_bytes with too_large and 1009; this hard cap
            # stops the transport from even buffering anything much larger.
            max_size=HARD_FRAME_FACTOR * settings.max_frame_bytes,
            server_header=f"eightoff/{__version__}",
            max_write_buffer=settings.max_write_buffer_bytes,
            dropped=services.metrics.dropped_slow_readers.inc,
        )
        with needs("host", "port", what=f"cannot listen on {settings.host} port {settings.port}"):
            await server.listen(settings.host, settings.port, sock)
        sweeper = asyncio.get_running_loop().create_task(
            services.loop.close_idle_forever(), name="idle-sweeper"
        )
        expirer = asyncio.get_running_loop().create_task(
            services.unfinished.sweep_forever(), name="game-expiry"
        )
        app = cls(services, server, sweeper, expirer)
        logger.info("serving on ws://%s:%d/ws", settings.host, app.port)
        return app

    @property
    def port(self) -> int:
        port = self.server.port
        return self.settings.port if port is None else port

    async def shutdown(self) -> None:
        """Stop accepting, let in-flight actions commit, close every connection with 1001."""
        self.server.stop_accepting()
        self.sweeper.cancel()
        self.expirer.cancel()
        self.loop.draining = True
        await self.loop.wait_idle(self.settings.shutdown_grace)
        await self.server.close_all(1001, "the server is shutting down")
        await self.services.stop()


def _connection_gate(settings: Settings) -> ConnectionGate:
    """The connection caps, the global one lowered to fit the open-files limit (the accept loop
    stalls past it), and the proxies trusted to name their clients."""
    budget = open_files_budget()
    total = settings.max_connections
    if total > budget:
        logger.warning("max_connections %d lowered to %d to fit the open-files limit", total, budget)
        total = budget
    caps = ConnectionCaps(per_address=settings.max_connections_per_address, total=total)
    rate = settings.new_connections_per_address_per_second
    arrivals = None if rate is None else BucketsByKey(rate, max(1, round(2 * rate)))
    return ConnectionGate(caps, TrustedProxies.parse(settings.trusted_proxies), ThrottledLog(), arrivals)


class _HttpRoutes:
    """Plain HTTP on the WebSocket port (/healthz, /metrics, the JSON API, the web client), and the
    origin check of a WebSocket handshake (``server.transport.HttpRoutes``).

    ``GET /api/leaderboard?…`` answers the ``leaderboard`` message's rows as JSON ``{rows, next?}`` and
    ``GET /api/players/{id}`` a ``profile`` (without ``type``); refusals are JSON ``{code, message}``
    with the HTTP status of their code.
    """

    _STATUS: ClassVar[dict[ErrorCode, HTTPStatus]] = {
        ErrorCode.BAD_REQUEST: HTTPStatus.BAD_REQUEST,
        ErrorCode.NOT_FOUND: HTTPStatus.NOT_FOUND,
        ErrorCode.UNAVAILABLE: HTTPStatus.SERVICE_UNAVAILABLE,
    }

    def __init__(
        self, metrics: Metrics, leaderboards: LeaderboardService, database: Database, origins: OriginPolicy
    ) -> None:
        self._metrics = metrics
        self._leaderboards = leaderboards
        self._database = database
        self._origins = origins
        self._log = ThrottledLog()

    def check_handshake(self, request: Request) -> Response | None:
        return self._check_origin(request)

    async def respond(self, request: Request) -> Response:
        path, _, query = request.path.partition("?")
        if path == "/healthz":
            return await self._health()
        if path == "/metrics":
            return http_response(
                HTTPStatus.OK, self._metrics.render(), "text/plain; version=0.0.4; charset=utf-8"
            )
        is_api = path == "/api/leaderboard" or path.startswith("/api/players/")
        if is_api:
            return await self._api(path, query)
        return self._static(path)

    async def _health(self) -> Response:
        """200 ``ok`` when the database answers (within its timeout), else 503: a load balancer stops
        sending players to a node that could store nothing."""
        try:
            await self._database.ping()
        except StorageUnavailable:
            return http_response(
                HTTPStatus.SERVICE_UNAVAILABLE, b"database unavailable\n", "text/plain; charset=utf-8"
            )
        return http_response(HTTPStatus.OK, b"ok\n", "text/plain; charset=utf-8")

    def _check_origin(self, request: Request) -> Response | None:
        """None when the handshake may go on; else HTTP 403 (a web page of another site must not
        open our WebSocket from its visitors' browsers)."""
        origin = request.headers.get("Origin")
        if self._origins.allows(origin, request.headers.get("Host")):
            return None
        self._log.warning("origin refused", f"{origin!r} is not an allowed origin")
        return http_response(HTTPStatus.FORBIDDEN, b"origin not allowed\n", "text/plain; charset=utf-8")

    async def _api(self, path: str, query: str) -> Response:
        try:
            with storage_failures_refused():
                if path == "/api/leaderboard":
                    message: protocol.ServerMessage = await self._leaderboards.leaderboard(
                        parse_leaderboard_query(query)
                    )
                else:
                    player_id = parse_profile_path(unquote(path.removeprefix("/api/players/")))
                    message = await self._leaderboards.profile(player_id)
        except protocol.ProtocolError as exc:
            return self._json(HTTPStatus.BAD_REQUEST, {"code": exc.code.value, "message": exc.message})
        except Refusal as refusal:
            status = self._STATUS.get(refusal.code, HTTPStatus.INTERNAL_SERVER_ERROR)
            return self._json(status, {"code": refusal.code.value, "message": refusal.message})
        except Exception:
            logger.exception("GET %s failed", path)
            return self._json(
                HTTPStatus.INTERNAL_SERVER_ERROR, {"code": "internal", "message": "the server failed"}
            )
        wire = message.to_wire()
        return self._json(HTTPStatus.OK, {k: v for k, v in wire.items() if k not in ("type", "id")})

    @staticmethod
    def _json(status: HTTPStatus, body: dict[str, object]) -> Response:
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        response = http_response(status, data, "application/json")
        response.headers["Cache-Control"] = "no-store"
        return response

    @staticmethod
    def _static(path: str) -> Response:
        name = "index.html" if path == "/" else path.lstrip("/")
        target = (WEB_ROOT / name).resolve()
        if WEB_ROOT in target.parents and target.is_file() and target.suffix in _STATIC_TYPES:
            return http_response(HTTPStatus.OK, target.read_bytes(), _STATIC_TYPES[target.suffix])
        return http_response(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")


async def run(settings: Settings) -> None:
    """Serve until SIGTERM or SIGINT, then shut down gracefully."""
    app = await App.start(settings)
    # What start-up built (modules, the schema, compiled statements) lives as long as the process: the
    # cyclic collector need not walk it again at every full collection while actions are served.
    gc.freeze()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    host = f"[{settings.host}]" if ":" in settings.host else settings.host  # an IPv6 address
    print(f"eightoff {__version__} serving ws://{host}:{app.port}/ws", flush=True)
    print(f"browser client: http://{host}:{app.port}/", flush=True)
    await stop.wait()
    logger.info("shutting down")
    await app.shutdown()
