"""Plain HTTP on the WebSocket port: ``/healthz``, ``/metrics``, the JSON API and the browser client's
files, and the origin check of a WebSocket handshake (the transport's ``HttpRoutes``)."""

from __future__ import annotations

import importlib.resources
import json
import logging
from http import HTTPStatus
from pathlib import Path
from typing import ClassVar
from urllib.parse import unquote

import protocol
from protocol.limits import ID_PATTERN
from server.clock import utc_now
from server.edge.admission import ThrottledLog
from server.edge.static import TYPES, StaticFiles
from server.edge.transport import Request, Response, http_response
from server.errors import ErrorCode, refusal_for
from server.metrics import Metrics
from server.origins import OriginPolicy
from server.services.rankings import LeaderboardService, parse_leaderboard_query, parse_profile_path
from server.storage import Database, StorageUnavailable

__all__ = ["WEB_ROOT", "HttpEndpoints"]

logger = logging.getLogger(__name__)

WEB_ROOT = Path(str(importlib.resources.files("web"))).resolve()


class HttpEndpoints:
    """Plain HTTP on the WebSocket port (/healthz, /metrics, the JSON API, the web client), and the
    origin check of a WebSocket handshake (``server.edge.transport.HttpRoutes``).

    The client's files come from ``server.edge.static`` (ETag, 304, gzip, versioned URLs).

    ``GET /api/leaderboard?…`` answers the ``leaderboard`` message's rows as JSON ``{rows, next?}`` and
    ``GET /api/players/{id}`` a ``profile`` (without ``type``); refusals are JSON ``{code, message}``
    with the HTTP status of their code. ``GET /api/time`` answers ``{now}``, the server's clock.
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
        self._static = StaticFiles(WEB_ROOT)  # read, hashed and gzipped once, at start

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
        if path == "/api/time":  # the browser client sets its game clock by the server's
            return self._json(HTTPStatus.OK, {"now": protocol.format_timestamp(utc_now())})
        if path.startswith("/g/"):  # a game's page: its replay, or the game live (web/replay.html)
            return self._game_page(unquote(path.removeprefix("/g/")), request)
        is_api = path == "/api/leaderboard" or path.startswith("/api/players/")
        if is_api:
            return await self._api(path, query)
        if path.startswith("/r/"):  # an invitation link: the page reads the code from its address
            # (web/race.js), so an unknown or malformed code is the page's message, not a 404
            return self._static.respond("/index.html", request.headers)
        return self._static.respond(path, request.headers, query)

    def is_answered_from_memory(self, path: str) -> bool:
        """Whether a GET of ``path`` is answered from what the process holds (the client's files and
        pages, the clock), touching no database: the gate then gives its connection's new-connection
        token back (``ConnectionGate.answered_from_memory``), so that a page load, one connection per
        file, does not spend its address's budget."""
        return self._static.has(path) or path == "/api/time" or path.startswith(("/r/", "/g/"))

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
            if path == "/api/leaderboard":
                message: protocol.ServerMessage = await self._leaderboards.leaderboard(
                    parse_leaderboard_query(query)
                )
            else:
                player_id = parse_profile_path(unquote(path.removeprefix("/api/players/")))
                message = await self._leaderboards.profile(player_id)
        except protocol.ProtocolError as exc:
            return self._json(HTTPStatus.BAD_REQUEST, {"code": exc.code.value, "message": exc.message})
        except Exception as failure:
            refusal = refusal_for(failure, f"GET {path}")
            status = self._STATUS.get(refusal.code, HTTPStatus.INTERNAL_SERVER_ERROR)
            return self._json(status, {"code": refusal.code.value, "message": refusal.message})
        wire = message.to_wire()
        return self._json(HTTPStatus.OK, {k: v for k, v in wire.items() if k not in ("type", "id")})

    @staticmethod
    def _json(status: HTTPStatus, body: dict[str, object]) -> Response:
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        response = http_response(status, data, "application/json")
        response.headers["Cache-Control"] = "no-store"
        return response

    def _game_page(self, game_id: str, request: Request) -> Response:
        """``/g/GAME_ID``: the replay page; what is not a game id gets the same page with 400 (it says
        so; whether the game exists is the ``replay`` request's answer)."""
        if ID_PATTERN.fullmatch(game_id) is not None:
            return self._static.respond("/replay.html", request.headers)
        return http_response(HTTPStatus.BAD_REQUEST, self._static.body("/replay.html"), TYPES[".html"])
