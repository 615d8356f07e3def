"""The client: one WebSocket to an Eight Off server, kept open across breaks, with a board copy of every
game it follows.

Every request waits for its reply and returns it typed, or raises the `ServerError` of its code.
A reader task takes every frame in order: it resolves replies, applies each ``ack``, ``diff``,
``snapshot`` and ``game_over`` to the boards (protocol/README.md section 7) and hands pushes to
`Client.pushes` listeners. When the connection breaks, the client reconnects, says ``hello`` with its
token, watches and resumes its games again, then resends the requests that were waiting, each action
with the same ``v`` it had (section 4, "Versions"): one the server had applied before the break is
refused as ``stale``, never applied twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import Counter
from collections.abc import AsyncIterator, Coroutine, Generator
from types import TracebackType
from typing import Any, Literal, cast

from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
from websockets.typing import Subprotocol

from eightoff_client.board import Board
from eightoff_client.codec import SUBPROTOCOLS, Encoding, decode, encode, request
from eightoff_client.errors import (
    ConnectionLost,
    EightOffError,
    ProtocolViolation,
    ServerError,
    Stale,
    Unauthorized,
    UnsupportedVersion,
)
from eightoff_client.messages import (
    Ack,
    Action,
    Change,
    GameOver,
    GamesPage,
    Hint,
    LeaderboardPage,
    LivePage,
    Player,
    Profile,
    Snapshot,
    Welcome,
)
from eightoff_client.pacing import DEFAULT_BURST, DEFAULT_RATE, Pace

__all__ = ["Client", "connect"]

PROTOCOL = 1
Message = dict[str, Any]


class _Dropped(Exception):
    """The connection broke before the reply came (internal: the request is retried or ConnectionLost)."""


class Client:
    """A connection that says ``hello`` as ``name`` (a new guest) or as the player of ``token``.

    ``bot=True``: the client is a program, and a new guest it makes is a bot for life (its games rank
    on the bots' boards only, protocol section 5 ``hello``); with a token, ``bot`` must agree with the
    token's player or is left out (``None``). A person's client leaves it out.

    ``reconnect``: after a break, reconnect for up to ``reconnect_timeout`` seconds (with backoff)
    and retry what was waiting; ``False``: a break raises `ConnectionLost`. ``rate_per_second`` and
    ``rate_burst``: the pace the client keeps to (`Pace`), the server's request rate or under it;
    ``rate_per_second=None`` sends as fast as it is answered. Use `connect` to make one.
    """

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        token: str | None = None,
        bot: bool | None = None,
        encoding: Encoding = "msgpack",
        reconnect: bool = True,
        reconnect_timeout: float = 30.0,
        open_timeout: float = 10.0,
        rate_per_second: float | None = DEFAULT_RATE,
        rate_burst: int = DEFAULT_BURST,
    ) -> None:
        self.url = url
        self.name = name
        self.token = token
        self.bot = bot
        self.encoding: Encoding = encoding
        self.reconnect = reconnect
        self.reconnect_timeout = reconnect_timeout
        self.open_timeout = open_timeout
        self._pace = None if rate_per_second is None else Pace(rate_per_second, rate_burst)
        self.player: Player | None = None
        self.welcome: Welcome | None = None
        self.boards: dict[str, Board] = {}
        #: How many times the connection was opened again after a break, and how many fresh snapshots
        #: a missed diff took (a spectator that reads every frame needs none).
        self.reconnects = 0
        self.resyncs = 0
        self._ws: ClientConnection | None = None
        self._ready = asyncio.Event()
        self._fatal: EightOffError | None = None
        self._closing = False
        self._reconnecting = False
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[Message, asyncio.Future[Message]]] = {}
        self._open: set[str] = set()  # own games open on this connection: resumed after a break
        self._watched: set[str] = set()  # watched games: watched again after a break
        self._acting: Counter[str] = Counter()  # games with an action waiting: its retry resumes them
        self._ended: dict[str, asyncio.Event] = {}
        self._listeners: set[asyncio.Queue[Message | None]] = set()  # None: the client closed
        self._tasks: set[asyncio.Task[None]] = set()

    # --- opening and closing

    async def start(self) -> Client:
        """Open the connection and say ``hello``; raises `ServerError` (``unauthorized`` for an unknown
        token), OSError or websockets' InvalidHandshake when it cannot."""
        try:
            await self._open_connection()
        except BaseException:
            await self.close()
            raise
        return self

    async def close(self) -> None:
        """Close the connection; requests still waiting raise `ConnectionLost`."""
        self._closing = True
        self._fail(ConnectionLost("the client was closed"))
        for queue in self._listeners:
            queue.put_nowait(None)
        if self._ws is not None:
            await self._ws.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    @property
    def is_connected(self) -> bool:
        """Open and past ``hello`` (false while reconnecting)."""
        return self._ws is not None and self._ready.is_set() and self._fatal is None

    async def wait_connected(self) -> None:
        """Return once the connection is open again (after a break: games resumed and watched), or
        raise `ConnectionLost` when reconnecting gave up."""
        await self._connection()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()

    # --- playing one's own games

    async def new_game(
        self,
        *,
        code: str | None = None,
        cells: int | None = None,
        daily: bool = False,
        winnable: bool = False,
    ) -> Board:
        """Deal a game (``code``: that deal; ``winnable``: a deal the solver proved winnable) and return
        its board. Not retried after a break (a second game could be dealt): `ConnectionLost` then."""
        fields = {"code": code, "cells": cells, "daily": daily or None, "winnable": winnable or None}
        snapshot = await self._request(request("new_game", **fields), retry=False)
        return self.boards[cast(Snapshot, snapshot)["game"]]

    async def move(self, game: str, source: str, target: str, n: int = 1) -> Ack:
        """Move ``n`` cards from the top of ``source`` onto ``target`` (``f``: the card's foundation)."""
        return await self._act(game, request("move", **{"from": source, "to": target, "n": n}))

    async def tap(self, game: str, source: str) -> Ack:
        """Send the top card of ``source`` to its foundation."""
        return await self._act(game, request("tap", **{"from": source}))

    async def auto(self, game: str, source: str, n: int = 1) -> Ack:
        """A double tap on the ``n``-th card from the top of ``source``: the server's best place for it."""
        return await self._act(game, request("auto", **{"from": source, "n": n}))

    async def undo(self, game: str) -> Ack:
        return await self._act(game, request("undo"))

    async def play(self, game: str, action: Action) -> Ack:
        """Make an action given as a map, such as a hint's ``action``."""
        fields = {key: value for key, value in action.items() if key in ("from", "to", "n")}
        return await self._act(game, request(action["type"], **fields))

    async def resign(self, game: str) -> GameOver:
        """Not retried after a break: `ConnectionLost` then (`resume` tells whether it was done)."""
        return cast(GameOver, await self._request(request("resign", game=game), retry=False))

    async def resume(self, game: str) -> Board:
        """A fresh snapshot of one's own game, which this connection then follows."""
        snapshot = await self._request(request("resume", game=game), retry=True)
        return self.boards[cast(Snapshot, snapshot)["game"]]

    async def hint(self, game: str) -> Hint:
        """The server's solver on the game as it stands (a hinted game ranks on no leaderboard)."""
        return cast(Hint, await self._request(request("hint", game=game), retry=True))

    # --- watching

    async def watch(self, game: str) -> Board:
        """Spectate any game: its board is kept up to date from the diffs until it ends."""
        snapshot = await self._request(request("watch", game=game), retry=True)
        return self.boards[cast(Snapshot, snapshot)["game"]]

    async def unwatch(self, game: str) -> None:
        """Stop following the game (watched, or one's own opened here); its board stays as it was."""
        self._watched.discard(game)
        self._open.discard(game)
        await self._request(request("unwatch", game=game), retry=True)

    async def wait_game_over(self, game: str, timeout: float | None = None) -> GameOver:
        """The game's ``game_over``, once it has come (at once if it has)."""
        board = self.boards.get(game)
        if board is None or (board.result is None and game not in self._open | self._watched):
            raise EightOffError(f"game {game} is not followed by this client")
        if board.result is None:  # asyncio.timeout: 3.11's wait_for can lose a cancel (gh-86296)
            async with asyncio.timeout(timeout):
                await self._ended.setdefault(game, asyncio.Event()).wait()
        assert board.result is not None
        return board.result

    async def pushes(self) -> AsyncIterator[Message]:
        """Every pushed message (``diff``, ``game_over``, a resync ``snapshot``) from now on, after the
        boards have taken it; the iteration ends when the client is closed."""
        queue: asyncio.Queue[Message | None] = asyncio.Queue()
        self._listeners.add(queue)
        try:
            while not self._closing and (push := await queue.get()) is not None:
                yield push
        finally:
            self._listeners.discard(queue)

    # --- reading

    async def leaderboard(
        self,
        board: Literal["deal", "variant", "daily", "players", "rating"],
        *,
        code: str | None = None,
        cells: int | None = None,
        date: str | None = None,
        period: Literal["day", "week", "all"] | None = None,
        order: Literal["moves", "time", "score", "wins", "rating"] | None = None,
        limit: int | None = None,
        after: str | None = None,
        around: str | None = None,
        bots: bool | None = None,
    ) -> LeaderboardPage:
        """A page of a leaderboard (protocol section 5): pass its ``next`` as ``after`` for the next;
        ``bots=True`` reads the bots' board of the same name (a person's games rank on the other)."""
        message = request(
            "leaderboard",
            board=board,
            code=code,
            cells=cells,
            date=date,
            period=period,
            order=order,
            limit=limit,
            after=after,
            around=around,
            bots=bots,
        )
        return cast(LeaderboardPage, await self._request(message, retry=True))

    async def live(self, *, limit: int | None = None, after: str | None = None) -> LivePage:
        return cast(LivePage, await self._request(request("live", limit=limit, after=after), retry=True))

    async def profile(self, player: str | None = None) -> Profile:
        return cast(Profile, await self._request(request("profile", player=player), retry=True))

    async def games(self, *, limit: int | None = None, after: str | None = None) -> GamesPage:
        """A page of one's unfinished games after the ones ``welcome`` listed."""
        return cast(GamesPage, await self._request(request("games", limit=limit, after=after), retry=True))

    # --- requests

    async def _act(self, game: str, message: Message) -> Ack:
        """An action with ``v`` set from the board (resumed first if this client has none)."""
        board = self.boards.get(game) or await self.resume(game)
        message = {**message, "game": game, "v": board.v}
        self._acting[game] += 1
        try:
            return cast(Ack, await self._request(message, retry=True))
        except Stale:
            await self.resume(game)  # section 4: on stale, resume; the board is fresh for the caller
            raise
        finally:
            self._acting[game] -= 1

    async def _request(self, message: Message, *, retry: bool) -> Message:
        """Send and wait for the reply; after a break, resend the same message if ``retry``."""
        while True:
            ws = await self._connection()
            try:
                return await self._exchange(ws, message)
            except _Dropped:
                if not retry:
                    raise ConnectionLost(f"the connection broke before the {message['type']} reply") from None

    async def _connection(self) -> ClientConnection:
        while True:
            if self._fatal is not None:
                raise self._fatal
            if self._ws is not None and self._ready.is_set():
                return self._ws
            await self._ready.wait()
            if self._fatal is None and self._ws is None:
                self._ready.clear()

    async def _exchange(self, ws: ClientConnection, message: Message) -> Message:
        if self._pace is not None:
            await self._pace.wait()  # before it is pending: a break meanwhile has nothing of it to fail
        request_id = next(self._ids)
        reply: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (message, reply)
        try:
            try:
                await ws.send(encode(self.encoding, {**message, "id": request_id}))
            except ConnectionClosed:
                self._lost(ws)
                raise _Dropped from None
            answer = await reply
        finally:
            self._pending.pop(request_id, None)
        if answer["type"] == "error":
            raise ServerError.of(cast(Any, answer))
        return answer

    # --- the connection

    async def _open_connection(self) -> None:
        ws = await ws_connect(
            self.url,
            subprotocols=[Subprotocol(SUBPROTOCOLS[self.encoding])],
            open_timeout=self.open_timeout,
            max_size=2**22,
        )
        self._ws = ws
        self._spawn(self._read(ws))
        hello = request(
            "hello",
            protocol=PROTOCOL,
            token=self.token,
            name=None if self.token else self.name,
            bot=self.bot,
        )
        welcome = cast(Welcome, await self._exchange(ws, hello))
        self.token = welcome.get("token", self.token)
        self.player, self.welcome = welcome["player"], welcome
        for game in sorted(self._watched):
            await self._follow_again(ws, "watch", game, self._watched)
        for game in sorted(self._open):
            if not self._acting[game]:  # a waiting action is resent with its v: it opens the game
                await self._follow_again(ws, "resume", game, self._open)
        self._ready.set()

    async def _follow_again(self, ws: ClientConnection, kind: str, game: str, following: set[str]) -> None:
        try:
            await self._exchange(ws, request(kind, game=game))
        except ServerError:  # gone, or sealed now: stop following it
            following.discard(game)

    async def _read(self, ws: ClientConnection) -> None:
        try:
            async for frame in ws:
                self._take(decode(self.encoding, frame))
        except ConnectionClosed:
            pass
        except ProtocolViolation as exc:
            self._fail(exc)
            await ws.close()
        finally:
            self._lost(ws)

    def _lost(self, ws: ClientConnection) -> None:
        """``ws`` broke: fail what waits on it, then reconnect (or fail every later request)."""
        if ws is not self._ws:
            return
        self._ws = None
        self._ready.clear()
        for _, reply in self._pending.values():
            if not reply.done():
                reply.set_exception(_Dropped())
        if self._closing or self._fatal is not None or self._reconnecting:
            return  # a reconnect under way tries again by itself
        if not self.reconnect:
            self._fail(ConnectionLost("the connection broke (reconnect is off)"))
            return
        self._spawn(self._reconnect())

    async def _reconnect(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.reconnect_timeout
        delay = 0.05
        self._reconnecting = True
        try:
            await self._reconnect_until(deadline, delay)
        finally:
            self._reconnecting = False

    async def _reconnect_until(self, deadline: float, delay: float) -> None:
        loop = asyncio.get_running_loop()
        while not self._closing:
            try:
                await self._open_connection()
                self.reconnects += 1
                return
            except (Unauthorized, UnsupportedVersion) as exc:  # the hello refused: no retry helps
                self._fail(exc)
                return
            except (
                OSError,
                TimeoutError,
                InvalidHandshake,
                InvalidURI,
                _Dropped,
                ConnectionClosed,
                ServerError,  # unavailable, rate_limited, internal: later, it may work
            ) as exc:
                if self._ws is not None:
                    await self._ws.close()
                    self._ws = None
                if loop.time() + delay > deadline:
                    self._fail(ConnectionLost(f"could not reconnect in {self.reconnect_timeout:g} s: {exc}"))
                    return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    def _fail(self, error: EightOffError) -> None:
        self._fatal = self._fatal or error
        self._ready.set()
        for _, reply in self._pending.values():
            if not reply.done():
                reply.set_exception(error)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- what the server sends

    def _take(self, message: Message) -> None:
        """Apply one message to the boards, in the order frames came, then deliver it."""
        pending = self._pending.get(message["id"]) if "id" in message else None
        asked = pending[0] if pending else None
        kind = message["type"]
        if kind == "snapshot":
            self._took_snapshot(cast(Snapshot, message), asked)
        elif kind in ("ack", "diff"):
            self._took_change(cast(Change, message))
        elif kind == "game_over":
            self._took_game_over(cast(GameOver, message))
        if pending is not None:
            if not pending[1].done():
                pending[1].set_result(message)
        elif "id" not in message:
            for queue in self._listeners:
                queue.put_nowait(message)

    def _took_snapshot(self, snapshot: Snapshot, asked: Message | None) -> None:
        game = snapshot["game"]
        board = self.boards[game] = Board.from_snapshot(snapshot)
        if asked is not None and asked["type"] == "watch":
            self._watched.add(game)
        elif asked is not None:  # new_game, resume
            self._open.add(game)
        if board.status != "playing":
            self._open.discard(game)
            self._watched.discard(game)

    def _took_change(self, change: Change) -> None:
        game = change["game"]
        board = self.boards.get(game)
        if board is not None and board.apply(change) == "gap":
            self._spawn(self._resync(game))
        if change["type"] == "ack" and change["status"] == "playing":
            self._open.add(game)  # acting opens the game (section 4)

    def _took_game_over(self, game_over: GameOver) -> None:
        game = game_over["game"]
        board = self.boards.get(game)
        if board is not None:
            board.end(game_over)
        self._open.discard(game)
        self._watched.discard(game)
        self._ended.setdefault(game, asyncio.Event()).set()

    async def _resync(self, game: str) -> None:
        """A diff was missed: a fresh snapshot (section 7, step 2)."""
        kind = "watch" if game in self._watched else "resume"
        self.resyncs += 1
        with contextlib.suppress(EightOffError):  # the next request about the game says what is wrong
            await self._request(request(kind, game=game), retry=True)


class _Connect:
    """`connect`'s result: awaited, a started `Client`; with ``async with``, one closed after the block."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def __await__(self) -> Generator[Any, None, Client]:
        return self._client.start().__await__()

    async def __aenter__(self) -> Client:
        return await self._client.start()

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self._client.close()


def connect(
    url: str,
    *,
    name: str | None = None,
    token: str | None = None,
    bot: bool | None = None,
    encoding: Encoding = "msgpack",
    reconnect: bool = True,
    reconnect_timeout: float = 30.0,
    open_timeout: float = 10.0,
    rate_per_second: float | None = DEFAULT_RATE,
    rate_burst: int = DEFAULT_BURST,
) -> _Connect:
    """Connect to ``url`` (``ws://HOST:PORT/ws``) and say ``hello``: ``client = await connect(...)``,
    or ``async with connect(...) as client:`` to close it after the block."""
    return _Connect(
        Client(
            url,
            name=name,
            token=token,
            bot=bot,
            encoding=encoding,
            reconnect=reconnect,
            reconnect_timeout=reconnect_timeout,
            open_timeout=open_timeout,
            rate_per_second=rate_per_second,
            rate_burst=rate_burst,
        )
    )
