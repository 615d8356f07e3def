"""What the server does with each client request: one method per message type, one route per type.

This layer knows players, games and rooms, but no sockets: it takes a decoded request and the
`Session` it came from and answers the messages to send back to that session, in order. Pushes to
other connections (diffs, game_over) are the rooms' business. Adding a request is one entry in
``_routes`` plus its method.

The hot path is an action on a game in memory whose room is free: ``serve`` has the room apply and
submit it at once and answers from the commit's callback, with no task, future or lock per action.
Anything else (the room busy or not loaded, any other request) is served by a task around ``handle``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import protocol
from engine import Deal, IllegalMoveError
from server.clock import utc_now
from server.committer import Committer, Write
from server.config import Settings
from server.cursors import parse_time_cursor, time_cursor
from server.errors import ErrorCode, Refusal, storage_failures_refused, unavailable
from server.hints import Asker, SolverBusy, SolvingService
from server.ids import hash_token, new_id, new_token
from server.leaderboard import LeaderboardService
from server.quotas import UnfinishedGames
from server.ratelimit import BucketsByKey
from server.room import FinishedGame, GameRoom, PlayerRef
from server.rooms import RoomRegistry
from server.session import Session
from server.storage import Database, LiveGame, PlayerRecord, StorageUnavailable, repository

__all__ = ["Outcome", "Reply", "RequestHandler", "Respond"]

logger = logging.getLogger(__name__)

Reply = list[protocol.ServerMessage]
#: What a request comes to: its replies, in order, or its refusal (the connection answers ``error``).
Outcome = Reply | Refusal
#: Called exactly once per served request, with its outcome.
Respond = Callable[[Outcome], None]
_RANDOM = secrets.SystemRandom()
_ACTIONS = (protocol.MoveRequest, protocol.TapRequest, protocol.AutoRequest, protocol.UndoRequest)


class RequestHandler:
    """Serves decoded requests; owned by the app, shared by every connection."""

    def __init__(
        self,
        settings: Settings,
        database: Database,
        committer: Committer,
        registry: RoomRegistry,
        leaderboards: LeaderboardService,
        version: str,
        solving: SolvingService | None = None,
        *,
        unfinished: UnfinishedGames,
    ) -> None:
        self._settings = settings
        self._database = database
        self._committer = committer
        self._registry = registry
        self._leaderboards = leaderboards
        self._version = version
        self._solving = solving or SolvingService()
        self._unfinished = unfinished
        per_minute = settings.guests_per_address_per_minute
        self._guests = None if per_minute is None else BucketsByKey(per_minute / 60, per_minute)
        self._tasks: set[asyncio.Task[None]] = set()
        self._routes: dict[type[Any], Callable[[Session, Any], Awaitable[Reply]]] = {
            protocol.HelloRequest: self._hello,
            protocol.NewGameRequest: self._new_game,
            protocol.MoveRequest: self._act,
            protocol.TapRequest: self._act,
            protocol.AutoRequest: self._act,
            protocol.UndoRequest: self._act,
            protocol.ResignRequest: self._resign,
            protocol.ResumeRequest: self._resume,
            protocol.WatchRequest: self._watch,
            protocol.UnwatchRequest: self._unwatch,
            protocol.HintRequest: self._hint,
            protocol.LiveRequest: self._live,
            protocol.LeaderboardRequest: self._leaderboard,
            protocol.ProfileRequest: self._profile,
            protocol.GamesRequest: self._games,
        }

    def serve(self, session: Session, request: protocol.ClientMessage, respond: Respond) -> None:
        """Serve ``request``; ``respond`` is called exactly once with its outcome, later (from a task,
        or an action's commit callback) or, when nothing needs waiting for, before this returns. A
        connection serves its next frame only after ``respond``, so one connection's requests are
        answered in order. A failure of the server itself is logged and answered ``internal``."""
        if isinstance(request, _ACTIONS) and session.player is not None:
            room = self._registry.room(request.game)
            if room is not None and self._act_at_once(session, request, room, respond):
                return
        task = asyncio.get_running_loop().create_task(self._outcome(session, request, respond))
        self._tasks.add(task)  # held until done: the loop keeps only a weak reference
        task.add_done_callback(self._tasks.discard)

    async def _outcome(self, session: Session, request: protocol.ClientMessage, respond: Respond) -> None:
        try:
            outcome: Outcome = await self.handle(session, request)
        except Refusal as refusal:
            outcome = refusal
        except Exception:
            logger.exception("request %s failed", request.TYPE)
            outcome = _internal()
        respond(outcome)

    async def handle(self, session: Session, request: protocol.ClientMessage) -> Reply:
        """The replies to ``request``, in order.

        Raises:
            Refusal: the request is refused; reply ``error`` with its code. Storage failures become
                ``unavailable`` here, for every request.
        """
        if session.player is None and not isinstance(request, protocol.HelloRequest):
            raise Refusal(ErrorCode.UNAUTHORIZED, f"say hello before {request.TYPE}")
        try:
            with storage_failures_refused():
                return await self._routes[type(request)](session, request)
        except IllegalMoveError as exc:
            raise Refusal(ErrorCode.ILLEGAL_MOVE, str(exc)) from None

    # ------------------------------------------------------------------ players

    async def _hello(self, session: Session, request: protocol.HelloRequest) -> Reply:
        if session.player is not None:
            raise Refusal(ErrorCode.BAD_REQUEST, "hello was already said on this connection")
        token: str | None = None
        if request.token is not None:
            async with self._database.connection() as conn:
                record = await repository.get_player_by_token_hash(conn, hash_token(request.token))
                if record is None:
                    raise Refusal(ErrorCode.UNAUTHORIZED, "unknown token")
                games, more = await self._unfinished.page(conn, record.id, self._settings.welcome_games)
        else:
            self._check_guest_quota(session)
            token = new_token()
            player_id = new_id()
            record = PlayerRecord(
                id=player_id,
                name=request.name or f"guest-{player_id[:6]}",
                token_hash=hash_token(token),
                created_at=utc_now(),
            )
            await self._committer.stored(Write(player=record))
            games, more = [], None
        session.player = PlayerRef(record.id, record.name)
        return [
            protocol.Welcome(
                request_id=request.request_id,
                player=session.player,
                token=token,
                server=protocol.ServerInfo(self._version, self._settings.node),
                games=tuple(games),
                next_cursor=more,
            )
        ]

    # ------------------------------------------------------------------ playing

    async def _new_game(self, session: Session, request: protocol.NewGameRequest) -> Reply:
        player = _player(session)
        self._check_games_limit(session, None)
        await self._unfinished.make_room(player.id)  # issue 11: unfinished games per player
        deal = request.deal
        daily_date = None
        if deal is None and request.daily:
            daily_date = utc_now().date()
            deal = await self._solving.daily_deal(daily_date, request.cells)
        elif deal is None and request.winnable:
            deal = self._solving.winnable_deal(request.cells)
        elif deal is None:
            deal = Deal.random(_RANDOM, request.cells)
        room = await self._registry.create(player, deal, daily_date=daily_date)
        session.viewing[room.id] = room
        snapshot = await room.view(session, request.request_id)
        return [snapshot if snapshot is not None else room.snapshot(request.request_id)]

    async def _act(self, session: Session, request: Any) -> Reply:
        room = await self._own_room(session, request.game)
        try:
            self._check_games_limit(session, room.id)
            session.viewing[room.id] = room
            return await room.act(session, request.action, request.v, request.request_id)
        finally:
            self._registry.forget_if_idle(room)

    def _act_at_once(
        self, session: Session, request: protocol.ActionRequest, room: GameRoom, respond: Respond
    ) -> bool:
        """``_act`` without a task, for a room in memory whose turn is free: the same checks and
        refusals (answered now), the action applied and submitted now and answered from its commit's
        callback. False, with nothing answered, when the room is busy: the action waits its turn."""
        try:
            _check_owner(session, room.owner.id, room.id)
            self._check_games_limit(session, room.id)
            session.viewing[room.id] = room
            answer = functools.partial(self._acted, room, respond)
            return room.try_act(session, request.action, request.v, request.request_id, answer)
        except Refusal as refusal:
            outcome = refusal
        except IllegalMoveError as exc:
            outcome = Refusal(ErrorCode.ILLEGAL_MOVE, str(exc))
        except Exception:
            logger.exception("request %s failed", request.TYPE)
            outcome = _internal()
        self._registry.forget_if_idle(room)
        respond(outcome)
        return True

    def _acted(self, room: GameRoom, respond: Respond, outcome: Reply | Exception) -> None:
        """An action's answer from its commit's callback (the room's turn is released): the room may go
        if nobody follows it any more (the requester's connection closed meanwhile)."""
        self._registry.forget_if_idle(room)
        if isinstance(outcome, Refusal):
            respond(outcome)
        elif isinstance(outcome, StorageUnavailable):
            respond(unavailable())
        elif isinstance(outcome, Exception):
            logger.error("an action failed after its commit", exc_info=outcome)
            respond(_internal())
        else:
            respond(outcome)

    async def _hint(self, session: Session, request: protocol.HintRequest) -> Reply:
        """The solver's verdict from the game as it stands (committed, in the room's turn); the game
        is stored as hinted first, while it is still being played."""
        room = await self._own_room(session, request.game)
        try:
            v, layout = await room.hint_position(session)
            try:
                asker = Asker(room.owner.id, str(getattr(session.transport, "client_address", "")))
                verdict, move = await self._solving.hint(room.id, v, layout, asker)
            except SolverBusy as exc:
                raise Refusal(exc.code, str(exc)) from None
            return [
                protocol.Hint(
                    room.id, v, protocol.Verdict(verdict.value), move, request_id=request.request_id
                )
            ]
        finally:
            self._registry.forget_if_idle(room)

    async def _resign(self, session: Session, request: protocol.ResignRequest) -> Reply:
        room = await self._own_room(session, request.game)
        try:
            return [await room.resign(session, request.request_id)]
        finally:
            self._registry.forget_if_idle(room)

    async def _resume(self, session: Session, request: protocol.ResumeRequest) -> Reply:
        return await self._follow(session, request.game, request.request_id, as_owner=True)

    # ------------------------------------------------------------------ watching

    async def _watch(self, session: Session, request: protocol.WatchRequest) -> Reply:
        return await self._follow(session, request.game, request.request_id, as_owner=False)

    async def _follow(
        self, session: Session, game_id: str, request_id: protocol.RequestId | None, *, as_owner: bool
    ) -> Reply:
        """``session`` follows ``game_id`` (its owner's game as a viewer, or any game as a spectator);
        its snapshot. A finished game gives its final snapshot and is not followed."""
        while True:  # again if the game ended, or was reloaded, while we waited for its lock
            found = await self._registry.find(game_id)
            if isinstance(found, FinishedGame):
                if as_owner:
                    _check_owner(session, found.owner.id, found.id)
                else:  # counts toward the watch limit like a live game, until unwatched (issue 11)
                    self._check_watch_limit(session, found.id)
                    session.watched_finished.add(found.id)
                return [found.snapshot(request_id)]
            try:
                if as_owner:
                    _check_owner(session, found.owner.id, found.id)
                    self._check_games_limit(session, found.id)
                    snapshot = await found.view(session, request_id)
                    follows = session.viewing
                else:
                    self._check_watch_limit(session, found.id)
                    snapshot = await found.watch(session, request_id)
                    follows = session.watching
                if snapshot is not None:
                    follows[found.id] = found
                    return [snapshot]
            finally:
                self._registry.forget_if_idle(found)

    async def _unwatch(self, session: Session, request: protocol.UnwatchRequest) -> Reply:
        """Stop following a game, watched or one's own (which frees a place under the games limit)."""
        session.unfollow(request.game, self._registry)
        return [protocol.Ok(request_id=request.request_id)]

    async def _live(self, session: Session, request: protocol.LiveRequest) -> Reply:
        """Every unfinished game, on any node, with an action (or its start) in the last
        ``live_window_minutes``, most recently active first: read from the database, a page at a time."""
        after = None if request.after is None else parse_time_cursor(request.after, "live")
        since = utc_now() - dt.timedelta(minutes=self._settings.live_window_minutes)
        async with self._database.connection() as conn:
            found = await repository.live_games(
                conn, active_since=since, after=after, limit=request.limit + 1
            )
        page = found[: request.limit]
        games = tuple(self._live_entry(game) for game in page)
        next_cursor = time_cursor(page[-1].active_at, page[-1].id) if len(found) > len(page) else None
        return [protocol.LivePage(request_id=request.request_id, games=games, next_cursor=next_cursor)]

    def _live_entry(self, game: LiveGame) -> protocol.LiveGame:
        room = self._registry.room(game.id)
        return protocol.LiveGame(
            game=game.id,
            player=protocol.Player(game.player_id, game.player_name),
            code=game.code,
            moves=game.moves,
            score=game.score,
            watchers=0 if room is None else len(room.spectators),
            started_at=game.started_at,
        )

    async def _games(self, session: Session, request: protocol.GamesRequest) -> Reply:
        """A page of the player's own unfinished games (welcome lists only the most recent)."""
        player = _player(session)
        async with self._database.connection() as conn:
            games, more = await self._unfinished.page(conn, player.id, request.limit, request.after)
        return [protocol.GamesPage(request_id=request.request_id, games=tuple(games), next_cursor=more)]

    async def _leaderboard(self, session: Session, request: protocol.LeaderboardRequest) -> Reply:
        return [await self._leaderboards.leaderboard(request)]

    async def _profile(self, session: Session, request: protocol.ProfileRequest) -> Reply:
        player_id = request.player if request.player is not None else _player(session).id
        return [await self._leaderboards.profile(player_id, request.request_id)]

    # ------------------------------------------------------------------ helpers

    def _check_guest_quota(self, session: Session) -> None:
        """At most ``guests_per_address_per_minute`` new guests from one source address (issue 11)."""
        address = str(getattr(session.transport, "client_address", ""))
        if self._guests is not None and not self._guests.allow(address):
            raise Refusal(
                ErrorCode.RATE_LIMITED,
                "too many new guests from your address; retry in a minute, or say hello with your token",
            )

    def _check_games_limit(self, session: Session, game_id: str | None) -> None:
        limit = self._settings.max_games_per_connection
        if game_id not in session.viewing and session.open_count(session.viewing) >= limit:
            raise Refusal(ErrorCode.RATE_LIMITED, f"at most {limit} open games per connection")

    def _check_watch_limit(self, session: Session, game_id: str) -> None:
        limit = self._settings.max_watches_per_connection
        watched = session.open_count(session.watching) + len(session.watched_finished)
        if game_id not in session.watching and game_id not in session.watched_finished and watched >= limit:
            raise Refusal(ErrorCode.RATE_LIMITED, f"at most {limit} watches per connection")

    async def _own_room(self, session: Session, game_id: str) -> GameRoom:
        found = await self._registry.find(game_id)
        if _player(session).id != found.owner.id:
            if isinstance(found, GameRoom):
                self._registry.forget_if_idle(found)
            _check_owner(session, found.owner.id, game_id)
        if isinstance(found, FinishedGame):
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"game {game_id} is over")
        return found


def _internal() -> Refusal:
    return Refusal(ErrorCode.INTERNAL, "the server failed on this request")


def _player(session: Session) -> PlayerRef:
    if session.player is None:
        raise Refusal(ErrorCode.UNAUTHORIZED, "say hello first")
    return session.player


def _check_owner(session: Session, owner_id: str, game_id: str) -> None:
    if _player(session).id != owner_id:
        raise Refusal(ErrorCode.FORBIDDEN, f"game {game_id} is not yours: spectators may only watch")
