"""Composition root: `Services` builds the database, the write pipeline, the rooms and the handlers
without binding a port (unit tests use it directly); `App` serves them, WebSocket and HTTP on one
port, and shuts down gracefully (stop accepting, finish in-flight actions, close with 1001).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import gc
import logging
import signal
import socket
from dataclasses import dataclass

from protocol.limits import DEFAULT_RACE_TIME_LIMIT
from server import __version__
from server.config import Settings, needs
from server.dispatch import RequestHandler, RequestLimits
from server.edge.admission import (
    AddressBudget,
    ConnectionCaps,
    ConnectionGate,
    ThrottledLog,
    open_files_budget,
)
from server.edge.connections import Connections, Fanout
from server.edge.http import HttpEndpoints
from server.edge.transport import WebSocketServer
from server.metrics import Metrics
from server.origins import OriginPolicy, TrustedProxies
from server.play.bus import Bus, LocalBus, RedisBus
from server.play.race.quick_match import QuickMatch
from server.play.race.registry import RaceRegistry
from server.play.registry import RoomRegistry
from server.ratelimit import BucketsByKey
from server.services.fair_play import FairPlay
from server.services.hints import SolvingService
from server.services.live_pages import LivePages
from server.services.pruning import BoardPruning
from server.services.quotas import NewGames, UnfinishedGames
from server.services.rankings import LeaderboardService
from server.storage import Database
from server.storage.commit_backends import CommitBackend, SqlAlchemyBackend, SqliteBackend
from server.storage.committer import Committer
from server.storage.db import describe_database, prepare_for_serving, sqlite_file

__all__ = ["App", "Services", "run"]

logger = logging.getLogger(__name__)

HARD_FRAME_FACTOR = 16


def _commit_backend(settings: Settings, database: Database) -> CommitBackend:
    """The group-commit backend for the configured database: on SQLite, action appends skip the async
    engine (see `server.storage.commit_backends`)."""
    engine_backend = SqlAlchemyBackend(database, asyncio.get_running_loop(), settings.farm_guard())
    sqlite_path = sqlite_file(settings.database_url)
    if sqlite_path is None:
        return engine_backend
    return SqliteBackend(sqlite_path, engine_backend, synchronous=settings.sqlite_synchronous)


def _request_limits(settings: Settings) -> RequestLimits:
    """The request handler's buckets, from the settings (a limit set to None is off)."""
    guests = settings.guests_per_address_per_minute
    reads = settings.reads_per_address_per_second
    return RequestLimits(
        race_creations=_per_player(settings.races_per_player_per_hour, 3600),
        race_creations_by_address=_per_player(settings.races_per_address_per_hour, 3600),
        race_joins=_per_player(settings.race_joins_per_player_per_minute, 60),
        guests=None if guests is None else BucketsByKey(guests / 60, guests),
        reads=None if reads is None else BucketsByKey(reads, max(1, round(2 * reads))),
        new_games=NewGames(
            per_player=settings.new_games_per_player_per_minute,
            per_address=settings.new_games_per_address_per_minute,
        ),
    )


def _per_player(count: int | None, seconds: float) -> BucketsByKey | None:
    """At most ``count`` a player in ``seconds``, as a burst of ``count`` refilled evenly."""
    return None if count is None else BucketsByKey(count / seconds, count)


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
    connections: Connections
    solving: SolvingService
    unfinished: UnfinishedGames
    races: RaceRegistry

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
        committer = Committer(
            _commit_backend(settings, database),
            metrics,
            max_batch=settings.commit_batch,
            linger=settings.commit_linger,
        )
        committer.start()
        fanout = Fanout()
        bus = bus or (RedisBus(settings.redis_url) if settings.redis_url else LocalBus())
        solving = SolvingService()
        # The games tell the races of their seats' commits, and a running race holds its seats' games:
        # each registry holds the other, the races asking for the games when they need them.
        races = RaceRegistry(
            database,
            committer,
            metrics,
            fanout,
            bus.publish,
            lambda: registry,
            winnable=solving.winnable_deal,
            countdown=settings.race_countdown,
            board_delay=settings.race_board_delay,
        )
        # The bus tells quick match of the races other processes formed (the pool is one for the
        # deployment); it names its rows by the process's one name, the presence's.
        registry = RoomRegistry(
            database,
            committer,
            metrics,
            fanout,
            node=settings.node,
            bus=bus,
            races=races,
            quick_races=lambda event: quick_match.seated_elsewhere(event),
        )
        quick_match = QuickMatch(
            database,
            races,
            settings.match_rules(),
            time_limit=DEFAULT_RACE_TIME_LIMIT,
            holder=registry.presence.holder,
            publish=bus.publish,
            node=settings.node,
        )
        with needs("redis_url", what="cannot reach Redis"):
            await registry.remote.start()
        leaderboards = LeaderboardService(database)
        unfinished = UnfinishedGames(
            database,
            committer,
            registry.rooms,
            per_player=settings.max_unfinished_games_per_player,
            abandon_after=settings.abandon_after,
        )
        races.start()  # the sweep: races due that no node holds (their node stopped) are taken up
        handler = RequestHandler(
            settings,
            database,
            committer,
            registry,
            leaderboards,
            __version__,
            solving,
            unfinished=unfinished,
            races=races,
            fair_play=FairPlay(database),
            live_pages=LivePages(
                database, registry.presence, dt.timedelta(minutes=settings.live_window_minutes)
            ),
            quick_match=quick_match,
            limits=_request_limits(settings),
        )
        connections = Connections(settings, handler, registry, metrics, fanout)
        return cls(
            settings,
            database,
            metrics,
            committer,
            registry,
            leaderboards,
            handler,
            connections,
            solving,
            unfinished,
            races,
        )

    async def stop(self) -> None:
        """Commit what was submitted, leave the bus, close the database."""
        await self.handler.quick_match.close()
        await self.races.close()
        await self.registry.presence.stop()
        await self.committer.stop()
        self.metrics.flush()  # a worker's last observations into the node's sums
        await self.registry.remote.close()
        await self.registry.presence.close()
        await self.database.dispose()
        self.solving.close()


@dataclass(slots=True)
class App:
    """A running server: the listening socket and the services behind it."""

    services: Services
    server: WebSocketServer
    sweeper: asyncio.Task[None]
    expirer: asyncio.Task[None]
    pruner: asyncio.Task[None]

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
    def races(self) -> RaceRegistry:
        return self.services.races

    @property
    def connections(self) -> Connections:
        return self.services.connections

    @property
    def metrics(self) -> Metrics:
        return self.services.metrics

    @property
    def unfinished(self) -> UnfinishedGames:
        return self.services.unfinished

    @classmethod
    async def start(
        cls,
        settings: Settings,
        *,
        sock: socket.socket | None = None,
        bus: Bus | None = None,
        start_solver: bool = False,
    ) -> App:
        """Migrate the database to head (refusing one it could not write: `prepare_for_serving`), open
        it and start listening: on ``sock`` when given (a bound socket, shared by the workers of
        `server.ops.workers` with SO_REUSEPORT), else on the configured host and port; ``bus`` is the one
        between those workers (default: as the settings say). ``start_solver``: the solver's worker
        processes start as it listens, and it returns once they are up (``eightoff serve``), not at the
        first hint (tests leave it off: most never ask one).

        Raises:
            server.config.Unavailable: the database, Redis or the address to listen on.
        """
        with needs("database_url", what="cannot open and migrate the database"):
            await asyncio.to_thread(prepare_for_serving, settings.database_url)
        services = await Services.start(settings, bus=bus)
        http = HttpEndpoints(
            services.metrics, services.leaderboards, services.database, OriginPolicy.parse(settings.origins)
        )
        server = WebSocketServer(
            services.connections.open,
            http,
            _connection_gate(settings),  # connection caps (docs/reliability.md)
            # The codec answers frames over max_frame_bytes with too_large and 1009; this hard cap
            # stops the transport from even buffering anything much larger.
            max_size=HARD_FRAME_FACTOR * settings.max_frame_bytes,
            max_message=settings.max_frame_bytes,
            frame_rate=settings.rate_per_second,
            frame_burst=settings.rate_burst,
            server_header=f"eightoff/{__version__}",
            max_write_buffer=settings.max_write_buffer_bytes,
            dropped=services.metrics.dropped_slow_readers.inc,
            flooded=services.metrics.errors.labels("flooding").inc,
        )
        with needs("host", "port", what=f"cannot listen on {settings.host} port {settings.port}"):
            await server.listen(settings.host, settings.port, sock)
        if start_solver:
            await services.solving.start()
        sweeper = asyncio.get_running_loop().create_task(
            services.connections.close_idle_forever(), name="idle-sweeper"
        )
        expirer = asyncio.get_running_loop().create_task(
            services.unfinished.sweep_forever(), name="game-expiry"
        )
        pruner = asyncio.get_running_loop().create_task(  # the leaderboards' closed day and week buckets
            BoardPruning(services.database).prune_forever(), name="board-pruning"
        )
        app = cls(services, server, sweeper, expirer, pruner)
        logger.info("serving on ws://%s:%d/ws", settings.host, app.port)
        return app

    @property
    def port(self) -> int:
        port = self.server.port
        return self.settings.port if port is None else port

    async def shutdown(self) -> None:
        """Stop accepting, let in-flight actions commit, close every connection with 1001. No new
        request is served from its first step (draining), even while the background tasks end."""
        self.server.stop_accepting()
        self.connections.draining = True
        background = (self.sweeper, self.expirer, self.pruner)
        for task in background:
            task.cancel()
        # Ended before the database closes: a task cancelled mid-statement finishes closing its
        # connection first (a prune under way took a moment, and the database was disposed under it).
        await asyncio.gather(*background, return_exceptions=True)
        await self.connections.wait_idle(self.settings.shutdown_grace)
        await self.server.close_all(1001, "the server is shutting down")
        await self.services.stop()


def _connection_gate(settings: Settings) -> ConnectionGate:
    """The connection caps, the global one lowered to fit the open-files limit (the accept loop
    stalls past it), the new connections and page requests per address, the proxies trusted to name
    their clients, the frame budget per address and the network an IPv6 address is counted by."""
    budget = open_files_budget()
    total = settings.max_connections
    if total > budget:
        logger.warning("max_connections %d lowered to %d to fit the open-files limit", total, budget)
        total = budget
    caps = ConnectionCaps(per_address=settings.max_connections_per_address, total=total)
    rate = settings.new_connections_per_address_per_second
    arrivals = None if rate is None else BucketsByKey(rate, max(1, round(2 * rate)))
    page_rate = settings.page_requests_per_address_per_second
    pages = None if page_rate is None else BucketsByKey(page_rate, max(1, round(2 * page_rate)))
    share = settings.address_frame_share
    frames = None
    if share is not None:
        burst = max(1, round(share * settings.rate_burst))
        frames = AddressBudget(share * settings.rate_per_second, burst, share)
    return ConnectionGate(
        caps,
        TrustedProxies.parse(settings.trusted_proxies),
        ThrottledLog(),
        arrivals,
        pages=pages,
        frames=frames,
        ipv6_prefix=settings.ipv6_prefix,
    )


async def run(settings: Settings) -> None:
    """Serve until SIGTERM or SIGINT, then shut down gracefully."""
    app = await App.start(settings, start_solver=True)
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
    print(f"database: {describe_database(settings.database_url)}", flush=True)
    await stop.wait()
    logger.info("shutting down")
    await app.shutdown()
