"""What the server does with each client request: one method per message type.

This layer knows players, games and the hub, but no sockets: it takes a decoded request and the
``Client`` it came from and returns the messages to send back to that client, in order. Pushes to
other connections (diffs, game_over) are the hub's business.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import protocol
from engine import Deal, IllegalMoveError
from protocol import builders
from server.committer import Committer, StorageUnavailable, Write
from server.config import Settings
from server.hints import SolverBusy, SolvingService
from server.hub import FinishedGame, GameHub, GameRoom, PlayerRef, Refusal, replay_stored, utc_now
from server.ids import hash_token, new_id, new_token
from server.leaderboard import LeaderboardService
from server.storage import Database, PlayerRecord, repository

__all__ = ["Client", "RequestHandler"]

Reply = list[dict[str, Any]]
_RANDOM = secrets.SystemRandom()


class Client:
    """One connection's session: its player once it said hello, and what it follows."""

    __slots__ = ("games", "last_seen", "player", "subprotocol", "transport", "watching")

    def __init__(self, subprotocol: protocol.Subprotocol, transport: Any = None) -> None:
        self.subprotocol = subprotocol
        self.transport = transport
        self.player: PlayerRef | None = None
        self.games: set[str] = set()
        self.watching: set[str] = set()
        self.last_seen = 0.0


class RequestHandler:
    """Serves decoded requests; owned by the app, shared by every connection."""

    def __init__(
        self,
        settings: Settings,
        database: Database,
        committer: Committer,
        hub: GameHub,
        leaderboards: LeaderboardService,
        version: str,
        solving: SolvingService | None = None,
    ) -> None:
        self._settings = settings
        self._database = database
        self._committer = committer
        self._hub = hub
        self._leaderboards = leaderboards
        self._version = version
        self._solving = solving or SolvingService()
        self._routes: dict[type[Any], Callable[[Client, Any], Awaitable[Reply]]] = {
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
        }

    async def handle(self, client: Client, request: protocol.ClientMessage) -> Reply:
        """The replies to ``request``, in order.

        Raises:
            Refusal: the request is refused; reply ``error`` with its code.
        """
        if client.player is None and not isinstance(request, protocol.HelloRequest):
            raise Refusal("unauthorized", f"say hello before {request.TYPE}")
        try:
            return await self._routes[type(request)](client, request)
        except IllegalMoveError as exc:
            raise Refusal("illegal_move", str(exc)) from None
        except StorageUnavailable:
            raise Refusal("unavailable", "the database is unavailable; nothing was stored, retry") from None

    # ------------------------------------------------------------------ players

    async def _hello(self, client: Client, request: protocol.HelloRequest) -> Reply:
        if client.player is not None:
            raise Refusal("bad_request", "hello was already said on this connection")
        token: str | None = None
        if request.token is not None:
            async with self._database.connection() as conn:
                record = await repository.get_player_by_token_hash(conn, hash_token(request.token))
                if record is None:
                    raise Refusal("unauthorized", "unknown token")
                games = await repository.unfinished_game_ids(conn, record.id)
        else:
            token = new_token()
            player_id = new_id()
            record = PlayerRecord(
                id=player_id,
                name=request.name or f"guest-{player_id[:6]}",
                token_hash=hash_token(token),
                created_at=utc_now(),
            )
            await self._committer.submit(Write(player=record))
            games = []
        client.player = PlayerRef(record.id, record.name)
        return [
            builders.welcome(
                player=client.player.wire(),
                token=token,
                server_version=self._version,
                node=self._settings.node,
                games=games,
                request_id=request.request_id,
            )
        ]

    # ------------------------------------------------------------------ playing

    async def _new_game(self, client: Client, request: protocol.NewGameRequest) -> Reply:
        player = self._player(client)
        self._check_game_room(client)
        deal = request.deal
        daily_date = None
        if deal is None and request.daily:
            daily_date = utc_now().date()
            deal = await self._solving.daily_deal(daily_date, request.cells)
        elif deal is None and request.winnable:
            deal = self._solving.winnable_deal(request.cells)
        elif deal is None:
            deal = Deal.random(_RANDOM, request.cells)
        room = await self._hub.create(player, deal, daily_date=daily_date)
        self._view(client, room)
        return [self._snapshot(room, request.request_id)]

    async def _act(self, client: Client, request: Any) -> Reply:
        room = await self._own_room(client, request.game)
        if client not in room.viewers:
            try:
                self._view(client, room)
            except Refusal:
                self._hub.forget_unfollowed(room)
                raise
        outcome = await self._hub.act(room, client, request.action, request.v)
        replies = [builders.ack(room.id, room.game, outcome.transfer, request.request_id)]
        if outcome.finished_at is not None:
            replies.append(self._hub.game_over_message(room, outcome.finished_at))
        return replies

    async def _hint(self, client: Client, request: protocol.HintRequest) -> Reply:
        """The solver's verdict from the game as it stands; the game is marked as hinted (stored) first."""
        room = await self._own_room(client, request.game)
        v = room.game.v
        try:
            verdict, move = await self._solving.hint(room.id, v, room.game.layout())
        except SolverBusy as exc:
            raise Refusal("unavailable", str(exc)) from None
        try:
            async with self._database.transaction() as conn:
                await repository.mark_hinted(conn, room.id)
        except Exception as exc:  # the database is down: no hint without its mark
            raise Refusal("unavailable", "the database is unavailable; retry") from exc
        return [builders.hint(room.id, v, verdict.value, move, request_id=request.request_id)]

    async def _resign(self, client: Client, request: protocol.ResignRequest) -> Reply:
        room = await self._own_room(client, request.game)
        finished_at = await self._hub.resign(room, client)
        return [self._hub.game_over_message(room, finished_at, request.request_id)]

    async def _resume(self, client: Client, request: protocol.ResumeRequest) -> Reply:
        found = await self._hub.find(request.game)
        if isinstance(found, FinishedGame):
            self._check_owner(client, found.owner.id, found.stored.id)
            return [self._stored_snapshot(found, request.request_id)]
        try:
            self._check_owner(client, found.owner.id, found.id)
            self._view(client, found)
        except Refusal:
            self._hub.forget_unfollowed(found)
            raise
        return [self._snapshot(found, request.request_id)]

    # ------------------------------------------------------------------ watching

    async def _watch(self, client: Client, request: protocol.WatchRequest) -> Reply:
        while True:  # again if the game ended, or was reloaded, while we waited for its lock
            found = await self._hub.find(request.game)
            if isinstance(found, FinishedGame):
                return [self._stored_snapshot(found, request.request_id)]
            limit = self._settings.max_watches_per_connection
            if found.id not in client.watching and len(client.watching) >= limit:
                self._hub.forget_unfollowed(found)
                raise Refusal("rate_limited", f"at most {limit} watches per connection")
            async with found.lock:  # the snapshot and the first diff after it are consecutive versions
                if self._hub.is_current(found):
                    found.spectators.add(client)
                    client.watching.add(found.id)
                    return [self._snapshot(found, request.request_id)]

    async def _unwatch(self, client: Client, request: protocol.UnwatchRequest) -> Reply:
        """Stop following a game, watched or one's own (which frees a place under the games limit)."""
        if request.game in client.watching or request.game in client.games:
            self._hub.unfollow(client, request.game)
        return [builders.ok(request.request_id)]

    async def _live(self, client: Client, request: protocol.LiveRequest) -> Reply:
        rooms = sorted(
            (room for room in self._hub.rooms() if not room.game.is_over()),
            key=lambda room: (room.started_at, room.id),
            reverse=True,
        )
        if request.after is not None:
            cursor = request.after
            rooms = [room for room in rooms if _live_cursor(room) < cursor]
        page = rooms[: request.limit]
        games = [
            builders.live_game(
                room.id,
                player=room.owner.wire(),
                code=room.code,
                moves=room.game.moves,
                score=room.game.score,
                watchers=len(room.spectators),
                started_at=protocol.format_timestamp(room.started_at),
            )
            for room in page
        ]
        after = _live_cursor(page[-1]) if len(rooms) > len(page) else None
        return [builders.live(games, next_cursor=after, request_id=request.request_id)]

    async def _leaderboard(self, client: Client, request: protocol.LeaderboardRequest) -> Reply:
        return [await self._leaderboards.leaderboard(request)]

    async def _profile(self, client: Client, request: protocol.ProfileRequest) -> Reply:
        player_id = request.player if request.player is not None else self._player(client).id
        return [await self._leaderboards.profile(player_id, request.request_id)]

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _player(client: Client) -> PlayerRef:
        if client.player is None:
            raise Refusal("unauthorized", "say hello first")
        return client.player

    def _check_game_room(self, client: Client) -> None:
        if len(client.games) >= self._settings.max_games_per_connection:
            raise Refusal(
                "rate_limited", f"at most {self._settings.max_games_per_connection} open games per connection"
            )

    def _view(self, client: Client, room: GameRoom) -> None:
        if client not in room.viewers:
            if room.id not in client.games:
                self._check_game_room(client)
            client.games.add(room.id)
            room.viewers.add(client)

    async def _own_room(self, client: Client, game_id: str) -> GameRoom:
        found = await self._hub.find(game_id)
        if self._player(client).id != found.owner.id:
            self._hub.forget_unfollowed(found)
            self._check_owner(client, found.owner.id, game_id)
        if isinstance(found, FinishedGame):
            raise Refusal("illegal_move", f"game {game_id} is {found.stored.status}")
        return found

    def _check_owner(self, client: Client, owner_id: str, game_id: str) -> None:
        if self._player(client).id != owner_id:
            raise Refusal("forbidden", f"game {game_id} is not yours: spectators may only watch")

    def _snapshot(self, room: GameRoom, request_id: protocol.RequestId | None) -> dict[str, Any]:
        return builders.snapshot(
            room.id,
            room.game,
            player=room.owner.wire(),
            started_at=protocol.format_timestamp(room.started_at),
            request_id=request_id,
        )

    def _stored_snapshot(
        self, finished: FinishedGame, request_id: protocol.RequestId | None
    ) -> dict[str, Any]:
        stored = finished.stored
        return builders.snapshot(
            stored.id,
            replay_stored(stored),
            player=finished.owner.wire(),
            started_at=protocol.format_timestamp(stored.started_at),
            request_id=request_id,
        )


def _live_cursor(room: GameRoom) -> str:
    return f"{room.started_at.strftime('%Y%m%d%H%M%S%f')}.{room.id}"
