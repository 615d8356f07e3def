"""What the server does with each client request: one method per message type, one route per type.

This layer knows players, games and rooms, but no sockets: it takes a decoded request and the
`Session` it came from and answers the messages to send back to that session, in order (or the
failure that refuses it: `server.errors.refusal_for` makes it the client's error). Pushes to other
connections (diffs, game_over) are the rooms' business. Adding a request is one entry in ``_routes``
plus its method.

An action takes one path whatever the state of its room: its checks here, then an `Act` sent to the
room's driver, whose commit callback answers it. Only when the room is not in memory does a task load
it first; an action on a room in memory needs no task, future or lock. Every other request is served
by a task around its route.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Final

import protocol
from engine import Deal, Status
from server.clock import utc_now
from server.config import Settings
from server.cursors import parse_time_cursor, time_cursor
from server.errors import ErrorCode, Refusal, refusal_for
from server.ids import hash_token, new_id, new_token
from server.play.commands import Act, HintPosition, Resign, View, Watch
from server.play.driver import RoomDriver
from server.play.effects import HintSpot
from server.play.game_room import FinishedGame, PlayerRef
from server.play.race.commands import (
    RaceCommand,
    RaceJoin,
    RaceLeave,
    RaceReady,
    RaceStart,
    RaceWatch,
    Rematch,
)
from server.play.race.quick_match import QuickMatch
from server.play.race.ratings import network_of
from server.play.race.registry import RaceRegistry, RaceRoomDriver
from server.play.race.value import Entrant
from server.play.registry import GameRoomDriver, RoomRegistry
from server.play.replay import replay_page, replay_whole
from server.play.session import Session
from server.ratelimit import BucketsByKey
from server.services.fair_play import FairPlay
from server.services.hints import Asker, SolverBusy, SolvingService
from server.services.live_pages import LivePages
from server.services.quotas import NewGames, UnfinishedGames
from server.services.rankings import LeaderboardService
from server.storage import Database, LiveGame, PlayerRecord, repository
from server.storage.committer import AddPlayer, Committer

__all__ = ["Answer", "Replies", "RequestHandler", "RequestLimits", "Respond"]

#: The messages a request is answered with, in order (not `server.play.effects.Reply`, a room's effect).
Replies = list[protocol.ServerMessage]
#: What a request comes to: its replies, in order, or the failure that refuses it.
Answer = Replies | BaseException
#: Called exactly once per served request, with its answer.
Respond = Callable[[Answer], None]
_RANDOM = secrets.SystemRandom()
#: Finished games whose whole replay the handler keeps (tens of KB each: a long game's steps).
REPLAYS_REMEMBERED: Final = 256
_ACTION_REQUESTS = (protocol.MoveRequest, protocol.TapRequest, protocol.AutoRequest, protocol.UndoRequest)


@dataclass(frozen=True, slots=True)
class RequestLimits:
    """The handler's per-player and per-address buckets (None: that limit is off), built by the
    composition root (`server.app.Services.start`) from the settings."""

    #: Races one player creates (``races_per_player_per_hour``).
    race_creations: BucketsByKey | None
    #: Races the players of one address create (``races_per_address_per_hour``).
    race_creations_by_address: BucketsByKey | None
    #: Race joins and leaves of one player (``race_joins_per_player_per_minute``).
    race_joins: BucketsByKey | None
    #: New guests from one address (``guests_per_address_per_minute``).
    guests: BucketsByKey | None
    #: Reads the database answers, per address (``reads_per_address_per_second``).
    reads: BucketsByKey | None
    #: New games per player and per address.
    new_games: NewGames


class RequestHandler:
    """Serves decoded requests; owned by the app, shared by every connection. What it serves with is
    built by the composition root (`server.app.Services.start`) and handed in."""

    def __init__(
        self,
        settings: Settings,
        database: Database,
        committer: Committer,
        registry: RoomRegistry,
        leaderboards: LeaderboardService,
        version: str,
        solving: SolvingService,
        *,
        unfinished: UnfinishedGames,
        races: RaceRegistry,
        fair_play: FairPlay,
        live_pages: LivePages,
        quick_match: QuickMatch,
        limits: RequestLimits,
    ) -> None:
        self._settings = settings
        self._database = database
        self._committer = committer
        self._registry = registry
        self._leaderboards = leaderboards
        self._version = version
        self._solving = solving
        self._unfinished = unfinished
        self._fair_play = fair_play  # shared deals sealed (docs/fair-play.md)
        self._live_pages = live_pages
        self._replays: OrderedDict[str, protocol.Replay] = OrderedDict()  # finished games' replays
        self._races = races
        self._race_creations = limits.race_creations
        self._race_creations_by_address = limits.race_creations_by_address
        self._race_joins = limits.race_joins
        self.quick_match = quick_match
        self._guests = limits.guests
        self._reads = limits.reads
        self._new_games = limits.new_games
        self._tasks: set[asyncio.Task[None]] = set()
        self._routes: dict[type[Any], Callable[[Session, Any], Awaitable[Replies]]] = {
            protocol.HelloRequest: self._hello,
            protocol.NewGameRequest: self._new_game,
            protocol.ResignRequest: self._resign,
            protocol.ResumeRequest: self._resume,
            protocol.WatchRequest: self._watch,
            protocol.UnwatchRequest: self._unwatch,
            protocol.ReplayRequest: self._replay,
            protocol.HintRequest: self._hint,
            protocol.LiveRequest: self._live,
            protocol.LeaderboardRequest: self._leaderboard,
            protocol.ProfileRequest: self._profile,
            protocol.GamesRequest: self._games,
            protocol.RaceCreateRequest: self._race_create,
            protocol.RaceJoinRequest: self._race_join,
            protocol.RaceWatchRequest: self._race_watch,
            protocol.RaceReadyRequest: self._race_ready,
            protocol.RaceStartRequest: self._race_start,
            protocol.RaceLeaveRequest: self._race_leave,
            protocol.RaceRematchRequest: self._race_rematch,
            protocol.QuickRaceRequest: self._quick_race,
            protocol.QuickRaceLeaveRequest: self._quick_race_leave,
        }

    def serve(self, session: Session, request: protocol.ClientMessage, respond: Respond) -> None:
        """Serve ``request``; ``respond`` is called exactly once with its answer, later (from a task,
        or an action's commit callback) or, when nothing needs waiting for, before this returns. A
        connection serves its next frame only after ``respond``, so one connection's requests are
        answered in order."""
        if session.player is None and not isinstance(request, protocol.HelloRequest):
            respond(Refusal(ErrorCode.UNAUTHORIZED, f"say hello before {request.TYPE}"))
        elif isinstance(request, _ACTION_REQUESTS):
            room = self._registry.room(request.game)
            if room is not None:
                self._act(session, request, room, respond)
            else:
                self._spawn(self._act_once_found(session, request, respond))
        else:
            self._spawn(self._answer(session, request, respond))

    async def handle(self, session: Session, request: protocol.ClientMessage) -> Replies:
        """``serve`` awaited, for callers without a connection (tests, benches): the replies, or the
        refusal the client would be told, raised.

        Raises:
            Refusal: the request is refused.
        """
        answered: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self.serve(session, request, answered.set_result)
        answer = await answered
        if isinstance(answer, BaseException):
            raise refusal_for(answer, request.TYPE) from None
        return answer

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)  # held until done: the loop keeps only a weak reference
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, session: Session, request: protocol.ClientMessage, respond: Respond) -> None:
        try:
            answer: Answer = await self._routes[type(request)](session, request)
        except Exception as failure:
            answer = failure
        respond(answer)

    # ------------------------------------------------------------------ actions

    def _act(
        self, session: Session, request: protocol.ActionRequest, room: GameRoomDriver, respond: Respond
    ) -> None:
        """The one path of an action: the owner and the games limit checked, the connection a viewer
        of the game, then the action sent to the room, which answers it once its commit's outcome
        is known (or at once when it refuses it). A connection already viewing this very room passed
        both checks when it began to (``view`` follows them), and neither can change since: a
        connection's player is said once, and a game it views is within its limit."""
        if session.viewing.get(request.game) is not room:  # (``request.game`` is ``room.id``)
            try:
                _check_owner(session, room.owner.id, room.id)
                self._check_games_limit(session, room.id)
            except Refusal as refusal:
                self._registry.forget_if_idle(room)
                respond(refusal)
                return
            session.view(room)
        room.send(Act(session, request.action, request.v, request.request_id, respond))

    async def _act_once_found(
        self, session: Session, request: protocol.ActionRequest, respond: Respond
    ) -> None:
        """An action on a game not in memory: its room loaded first."""
        try:
            room = await self._own_room(session, request.game)
        except Exception as failure:
            respond(failure)
            return
        self._act(session, request, room, respond)

    # ------------------------------------------------------------------ players

    async def _hello(self, session: Session, request: protocol.HelloRequest) -> Replies:
        if session.player is not None:
            raise Refusal(ErrorCode.BAD_REQUEST, "hello was already said on this connection")
        token: str | None = None
        if request.token is not None:
            async with self._database.connection() as conn:
                record = await repository.get_player_by_token_hash(conn, hash_token(request.token))
                if record is None:
                    raise Refusal(ErrorCode.UNAUTHORIZED, "unknown token")
                _check_bot(request.bot, record)
                games, more = await self._unfinished.page(conn, record.id, self._settings.welcome_games)
        else:
            self._check_guest_quota(session)
            token = new_token()
            player_id = new_id()
            bot = request.bot is True
            record = PlayerRecord(
                id=player_id,
                name=request.name or f"{'bot' if bot else 'guest'}-{player_id[:6]}",
                token_hash=hash_token(token),
                created_at=utc_now(),
                bot=bot,
            )
            await self._committer.stored(AddPlayer(record))
            games, more = [], None
        if more is None:  # every unfinished game of the player is in the page: new_game need not count them
            self._unfinished.known(record.id, len(games))
        session.identify(PlayerRef.of(record.id, record.name, bot=record.bot))
        assert session.player is not None
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

    async def _new_game(self, session: Session, request: protocol.NewGameRequest) -> Replies:
        player = _player(session)
        self._check_games_limit(session, None)
        self._new_games.check(player.id, session.address)  # first: a refused new_game costs nothing
        await self._unfinished.make_room(player.id)  # the cap on a player's unfinished games
        deal = request.deal
        daily_date = None
        if deal is None and request.daily:
            now = utc_now()
            daily_date = now.date()
            deal = await self._solving.daily_deal(daily_date, request.cells)
            await self._fair_play.check_daily_start(player.id, daily_date, deal.cells, deal.code(), now)
        elif deal is None and request.winnable:
            deal = self._solving.winnable_deal(request.cells)
        elif deal is None:
            deal = Deal.random(_RANDOM, request.cells)
        room = await self._registry.create(player, deal, daily_date=daily_date)
        session.view(room)
        replies = await room.ask(lambda reply_to: View(session, request.request_id, reply_to))
        return replies if replies is not None else [room.room.snapshot(request.request_id)]

    async def _hint(self, session: Session, request: protocol.HintRequest) -> Replies:
        """The solver's verdict from the game as it stands (committed); the game is stored as hinted
        first, while it is still being played."""
        room = await self._own_room(session, request.game)
        spot = await room.ask(lambda reply_to: HintPosition(session, reply_to))
        if not isinstance(spot, HintSpot):
            raise spot
        try:
            asker = Asker(room.owner.id, session.address)
            verdict, move = await self._solving.hint(room.id, spot.v, spot.layout, asker)
        except SolverBusy as exc:
            raise Refusal(exc.code, str(exc)) from None
        return [
            protocol.Hint(
                room.id, spot.v, protocol.Verdict(verdict.value), move, request_id=request.request_id
            )
        ]

    async def _resign(self, session: Session, request: protocol.ResignRequest) -> Replies:
        room = await self._own_room(session, request.game)
        outcome = await room.ask(lambda reply_to: Resign(session, request.request_id, reply_to))
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome  # type: ignore[no-any-return]

    async def _resume(self, session: Session, request: protocol.ResumeRequest) -> Replies:
        return await self._follow(session, request.game, request.request_id, as_owner=True)

    # ------------------------------------------------------------------ watching

    async def _watch(self, session: Session, request: protocol.WatchRequest) -> Replies:
        return await self._follow(session, request.game, request.request_id, as_owner=False)

    async def _follow(
        self, session: Session, game_id: str, request_id: protocol.RequestId | None, *, as_owner: bool
    ) -> Replies:
        """``session`` follows ``game_id`` (its owner's game as a viewer, or any game as a spectator);
        its snapshot. A finished game gives its final snapshot and is not followed."""
        if not as_owner:  # a shared deal's moves are sealed to whoever can still play it
            await self._fair_play.check_watch(_player(session).id, game_id, utc_now())
        while True:  # again if the room closed (the game ended, or was reloaded) before our turn
            found = await self._registry.find(game_id)
            if isinstance(found, FinishedGame):
                if as_owner:
                    _check_owner(session, found.owner.id, found.id)
                else:  # counts toward the watch limit like a live game, until unwatched
                    self._check_watch_limit(session, found.id)
                    session.watch_finished(found.id)
                return [found.snapshot(request_id)]
            try:
                if as_owner:
                    _check_owner(session, found.owner.id, found.id)
                    self._check_games_limit(session, found.id)
                else:
                    self._check_watch_limit(session, found.id)
            except Refusal:
                self._registry.forget_if_idle(found)
                raise
            if as_owner:
                session.view(found)
                replies = await found.ask(lambda reply_to: View(session, request_id, reply_to))
            else:
                session.watch(found)
                replies = await found.ask(lambda reply_to: Watch(session, request_id, reply_to))
            if replies is not None:
                return replies  # type: ignore[no-any-return]

    async def _unwatch(self, session: Session, request: protocol.UnwatchRequest) -> Replies:
        """Stop following a game, watched or one's own (which frees a place under the games limit)."""
        session.unfollow(request.game)
        return [protocol.Ok(request_id=request.request_id)]

    async def _replay(self, session: Session, request: protocol.ReplayRequest) -> Replies:
        """A game move by move, from what is stored, sealed as ``watch`` is; it follows nothing (a
        client that wants the moves to come watches too), so it takes no watch slot. A finished
        game never changes: its replay is remembered (`REPLAYS_REMEMBERED`), read and replayed once."""
        whole = self._replays.get(request.game)
        if whole is None:
            self._check_reads(session)
        await self._fair_play.check_watch(_player(session).id, request.game, utc_now())
        if whole is not None:
            self._replays.move_to_end(request.game)
        else:
            whole = await self._replay_stored(request.game)
            if whole.status is not Status.PLAYING:
                self._replays[request.game] = whole
                while len(self._replays) > REPLAYS_REMEMBERED:
                    self._replays.popitem(last=False)
        if request.since > whole.v:  # the asker believes the game is further on than it is
            message = f"since {request.since} is past the game's version {whole.v}"
            raise Refusal(ErrorCode.STALE, message, v=whole.v)
        return [replay_page(whole, request.since, request.request_id)]

    async def _replay_stored(self, game_id: str) -> protocol.Replay:
        async with self._database.connection() as conn:
            stored = await repository.load_game(conn, game_id)
            owner = await repository.get_player(conn, stored.player_id) if stored else None
        if stored is None or owner is None:
            raise Refusal(ErrorCode.NOT_FOUND, f"no game {game_id}")
        player = protocol.Player.of(owner.id, owner.name, bot=owner.bot)
        return await asyncio.to_thread(replay_whole, stored, player)  # a long log must not stall the loop

    async def _live(self, session: Session, request: protocol.LiveRequest) -> Replies:
        """Every unfinished game someone follows, on any node, with an action (or its start) in the
        last ``live_window_minutes``, most recently active first: read from the database, a page at a
        time (``server.play.presence`` says who follows what), shared for a moment by everyone who asks
        (`server.services.live_pages`); what is sealed is the asker's own."""
        after = None if request.after is None else parse_time_cursor(request.after, "live")
        found = await self._live_pages.page(after, request.limit + 1)
        page = found[: request.limit]
        sealed = await self._fair_play.sealed_live(_player(session).id, page, utc_now())
        games = tuple(self._live_entry(game, game.id in sealed) for game in page)
        next_cursor = time_cursor(page[-1].active_at, page[-1].id) if len(found) > len(page) else None
        return [protocol.LivePage(request_id=request.request_id, games=games, next_cursor=next_cursor)]

    def _live_entry(self, game: LiveGame, sealed: bool) -> protocol.LiveGame:
        room = self._registry.room(game.id)
        return protocol.LiveGame(
            game=game.id,
            player=protocol.Player.of(game.player_id, game.player_name, bot=game.player_bot),
            code=game.code,
            moves=game.moves,
            score=game.score,
            watchers=0 if room is None else len(room.spectators),
            started_at=game.started_at,
            sealed=True if sealed else None,
        )

    async def _games(self, session: Session, request: protocol.GamesRequest) -> Replies:
        """A page of the player's own unfinished games (welcome lists only the most recent)."""
        player = _player(session)
        self._check_reads(session)
        async with self._database.connection() as conn:
            games, more = await self._unfinished.page(conn, player.id, request.limit, request.after)
        return [protocol.GamesPage(request_id=request.request_id, games=tuple(games), next_cursor=more)]

    async def _leaderboard(self, session: Session, request: protocol.LeaderboardRequest) -> Replies:
        self._check_reads(session)
        return [await self._leaderboards.leaderboard(request)]

    async def _profile(self, session: Session, request: protocol.ProfileRequest) -> Replies:
        player_id = request.player if request.player is not None else _player(session).id
        self._check_reads(session)
        return [await self._leaderboards.profile(player_id, request.request_id)]

    def _check_reads(self, session: Session) -> None:
        """A request the database answers, within its address's ``reads_per_address_per_second``: each
        costs the process about a millisecond of CPU even on a small database, and the frame budget
        alone lets one address ask a thousand a second (bench_attacks ``boards``)."""
        if self._reads is not None and not self._reads.allow(session.address):
            raise Refusal(ErrorCode.RATE_LIMITED, "too many reads from this address a second; wait a little")

    # ------------------------------------------------------------------ races (docs/races.md)

    async def _race_create(self, session: Session, request: protocol.RaceCreateRequest) -> Replies:
        player = _player(session)
        self._check_reads(session)
        self._check_race_creation(session, player)
        race = await self._races.create(
            _entrant(session, player),
            cells=request.cells,
            seats=request.seats,
            time_limit=request.time_limit,
            public=request.public,
        )
        return await self._ask_race(
            session, lambda: _found(race), lambda to: RaceWatch(session, player, request.request_id, to)
        )

    async def _race_join(self, session: Session, request: protocol.RaceJoinRequest) -> Replies:
        player = _player(session)
        self._check_reads(session)
        _check_rate(self._race_joins, player.id, "race joins and leaves a minute")
        return await self._ask_race(
            session,
            lambda: self._races.find_by_code(request.code),
            lambda to: RaceJoin(session, player, request.request_id, to, _network(session)),
        )

    async def _race_watch(self, session: Session, request: protocol.RaceWatchRequest) -> Replies:
        player = _player(session)
        self._check_reads(session)
        race, code = request.race, request.code
        return await self._ask_race(
            session,
            lambda: self._races.find(race) if race is not None else self._races.find_by_code(str(code)),
            lambda to: RaceWatch(session, player, request.request_id, to),
        )

    async def _race_ready(self, session: Session, request: protocol.RaceReadyRequest) -> Replies:
        player = _player(session)
        self._check_reads(session)
        return await self._ask_race(
            None,
            lambda: self._races.find(request.race),
            lambda to: RaceReady(session, player, request.ready, request.request_id, to),
        )

    async def _race_start(self, session: Session, request: protocol.RaceStartRequest) -> Replies:
        player = _player(session)
        self._check_reads(session)
        return await self._ask_race(
            None,
            lambda: self._races.find(request.race),
            lambda to: RaceStart(session, player, request.request_id, to),
        )

    async def _race_leave(self, session: Session, request: protocol.RaceLeaveRequest) -> Replies:
        player = _player(session)
        self._check_reads(session)
        _check_rate(self._race_joins, player.id, "race joins and leaves a minute")
        replies = await self._ask_race(
            None,
            lambda: self._races.find(request.race),
            lambda to: RaceLeave(session, player, request.request_id, to),
        )
        session.watching.pop(request.race, None)  # the room let this connection go already
        return replies

    async def _race_rematch(self, session: Session, request: protocol.RaceRematchRequest) -> Replies:
        """A player of a finished race asks its rematch: the first ask makes it (the asker seated, as
        by race_create, within the creations allowance), a later one joins it (as by race_join)."""
        player = _player(session)
        self._check_reads(session)
        _check_rate(self._race_joins, player.id, "race joins and leaves a minute")
        rematch = await self._rematch_of(session, player, request)
        made = self._races.room(rematch.race) if rematch.made else None
        if made is not None:
            return await self._ask_race(
                session, lambda: _found(made), lambda to: RaceWatch(session, player, request.request_id, to)
            )
        return await self._ask_race(
            session,
            lambda: self._races.find_by_code(rematch.code),
            lambda to: RaceJoin(session, player, request.request_id, to, _network(session)),
        )

    async def _rematch_of(
        self, session: Session, player: PlayerRef, request: protocol.RaceRematchRequest
    ) -> Rematch:
        """The finished race's rematch, made by this ask or before it; asked again when the room was
        let go before the ask's turn, or another node linked it first (the race is read again)."""
        for _ in range(3):
            race = await self._races.find(request.race)
            if self._races.would_make_rematch(race, player.id):  # a refused ask spends nothing
                self._check_race_creation(session, player)
            try:
                rematch = await self._races.rematch(
                    race, session, _entrant(session, player), request.request_id
                )
            except Refusal as refused:
                if refused.code != ErrorCode.STALE:
                    raise
                continue
            if rematch is not None:
                return rematch
        raise Refusal(ErrorCode.STALE, "the race changed meanwhile; race_watch it again")

    def _check_race_creation(self, session: Session, player: PlayerRef) -> None:
        """A race made, within its player's allowance and its address's (many guests of one address)."""
        _check_rate(self._race_creations, player.id, "races created an hour")
        _check_rate(
            self._race_creations_by_address, session.address, "races created from this address an hour"
        )

    async def _quick_race(self, session: Session, request: protocol.QuickRaceRequest) -> Replies:
        player = _player(session)
        self._check_reads(session)
        _check_rate(self._race_joins, player.id, "race joins and leaves a minute")
        await self.quick_match.enqueue(session, player, request.cells)
        return [protocol.Ok(request_id=request.request_id)]

    async def _quick_race_leave(self, session: Session, request: protocol.QuickRaceLeaveRequest) -> Replies:
        if not await self.quick_match.leave(_player(session).id):
            raise Refusal(ErrorCode.NOT_FOUND, "you do not wait for a quick race")
        return [protocol.Ok(request_id=request.request_id)]

    async def _ask_race(
        self,
        follower: Session | None,
        find: Callable[[], Awaitable[RaceRoomDriver]],
        make: Callable[[Callable[[Any], None]], RaceCommand],
    ) -> Replies:
        """Ask the race ``find`` gives (``follower`` then follows it, within its watch limit); again
        when the room was let go before the request's turn (the race is read again)."""
        for _ in range(3):
            race = await find()
            if follower is not None:
                self._check_watch_limit(follower, race.id)
                if race.is_open():
                    follower.watch(race)
            outcome = await race.ask(make)
            if isinstance(outcome, BaseException):
                raise outcome
            if outcome is not None:
                return outcome  # type: ignore[no-any-return]
        raise Refusal(ErrorCode.STALE, "the race changed meanwhile; race_watch it again")

    # ------------------------------------------------------------------ helpers

    def _check_guest_quota(self, session: Session) -> None:
        """At most ``guests_per_address_per_minute`` new guests from one source address."""
        address = session.address
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

    async def _own_room(self, session: Session, game_id: str) -> GameRoomDriver:
        found = await self._registry.find(game_id)
        if _player(session).id != found.owner.id:
            if isinstance(found, RoomDriver):
                self._registry.forget_if_idle(found)
            _check_owner(session, found.owner.id, game_id)
        if isinstance(found, FinishedGame):
            raise Refusal(ErrorCode.ILLEGAL_MOVE, f"game {game_id} is over")
        return found


def _network(session: Session) -> str | None:
    """What a seat taken from ``session`` keeps of its network (docs/ratings.md, Farming)."""
    return network_of(session.address)


def _entrant(session: Session, player: PlayerRef) -> Entrant:
    return Entrant(player, _network(session))


def _check_rate(buckets: BucketsByKey | None, key: str, what: str) -> None:
    """A player's (or an address's) race creations or joins within their rate (docs/races.md, Limits)."""
    if buckets is not None and not buckets.allow(key):
        raise Refusal(ErrorCode.RATE_LIMITED, f"too many {what}; wait a little and retry")


async def _found(race: RaceRoomDriver) -> RaceRoomDriver:
    return race


def _player(session: Session) -> PlayerRef:
    if session.player is None:
        raise Refusal(ErrorCode.UNAUTHORIZED, "say hello first")
    return session.player


def _check_bot(said: bool | None, record: PlayerRecord) -> None:
    """A hello's ``bot``, when said, must be what the token's player was made as: a player is a
    bot or a person for life (protocol/README.md, hello)."""
    if said is not None and said != record.bot:
        made = "a bot" if record.bot else "a person"
        raise Refusal(
            ErrorCode.FORBIDDEN,
            f"this token's player was made as {made}, for life: say bot: {str(record.bot).lower()}"
            " or leave bot out",
        )


def _check_owner(session: Session, owner_id: str, game_id: str) -> None:
    if _player(session).id != owner_id:
        raise Refusal(ErrorCode.FORBIDDEN, f"game {game_id} is not yours: only its player acts on it")
