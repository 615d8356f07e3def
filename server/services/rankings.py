"""Leaderboards and profiles as the server serves them: decoded requests in, protocol messages out.

`LeaderboardService` answers the ``leaderboard`` and ``profile`` requests (the ``rating`` board and a
profile's ``ratings`` read the race ratings of `server.storage.ratings`) of the WebSocket protocol and
their HTTP twins (``GET /api/leaderboard?…`` and ``GET /api/players/{id}``, parsed here by
`parse_leaderboard_query` with the protocol's own rules). What is stored, and why it is fast, is in
`server.storage.leaderboards`; this module maps the protocol's boards, orders and periods to its
scopes, reads the clock (periods are UTC calendar periods), and owns the cursor format. That only
games played on the server count is checked by ``eightoff verify`` (`server.ops.verify`).

The cursor is opaque to clients: base64url of a version byte, a CRC-32 of the scope it pages, the UTC
day the first page was served on, and the last row's key (sort key, finish time and game id, or sort
key and player id). The next page starts strictly after that key (keyset pagination, never an
offset), so rows arriving meanwhile never shift it; the day pins the period bucket (and the default
daily date), so paging across UTC midnight stays on the board it started on. Only the current and the
previous day and week buckets are kept (`server.storage.pruning`): a cursor pinning an older one is
refused ``not_found`` (whether or not the pruner got to it yet), and the client asks for the first page
again. Ranks are counted afresh for every page.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import re
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal
from urllib.parse import parse_qsl

import protocol
from protocol import Board, LeaderboardRequest, Order, Period
from server import clock
from server.errors import ErrorCode, Refusal
from server.storage import Database
from server.storage import leaderboards as boards
from server.storage import pruning as kept
from server.storage import ratings as stored_ratings
from server.storage.records import (
    BoardGame,
    BoardPlayer,
    FinishedGameFigures,
    GameKey,
    PlayerKey,
    RatedPlayer,
    Rating,
)

__all__ = [
    "LeaderboardService",
    "daily_streaks",
    "parse_leaderboard_query",
    "parse_profile_path",
]

_CURSOR_VERSION: Final = 1
_ID_RE: Final = re.compile(r"[A-Za-z0-9_-]{1,32}")
_CURSOR_HEAD: Final = struct.Struct(">BIi")  # version, crc32 of the scope, as-of day (days since 1970)
_GAME_KEY: Final = struct.Struct(">qq")  # sort key, finished_at in microseconds since 1970
_PLAYER_KEY: Final = struct.Struct(">q")  # sort key
_CURSOR_RE: Final = re.compile(r"[A-Za-z0-9_-]+")
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_DAY: Final = dt.date(1970, 1, 1)
_MICROSECOND: Final = dt.timedelta(microseconds=1)
_GAME_ORDERS: Final[dict[Order, boards.GameOrder]] = {
    Order.MOVES: "moves",
    Order.TIME: "time",
    Order.SCORE: "score",
}
_PERIODS: Final[dict[Period, boards.Period]] = {Period.DAY: "day", Period.WEEK: "week", Period.ALL: "all"}
_CLOSABLE_PERIODS: Final[dict[Period, kept.ClosablePeriod]] = {Period.DAY: "day", Period.WEEK: "week"}
#: Query parameters whose value is an integer on the wire.
_INTEGER_PARAMETERS: Final = frozenset({"cells", "limit"})
#: Query parameters whose value is true or false on the wire (written ``true`` / ``false``).
_BOOLEAN_PARAMETERS: Final = frozenset({"bots"})
_BOOLEANS: Final = {"true": True, "false": False}
_DIGITS: Final = re.compile(r"[0-9]{1,16}")


@dataclass(frozen=True, slots=True)
class _Target:
    """The stored scope a request reads, and how to read it."""

    kind: Literal["games", "players", "ratings"]
    scope: str
    player_order: boards.PlayerOrder = "wins"
    cells: int = 8  # the variant of a rating board


def _target(request: LeaderboardRequest, day: dt.date) -> _Target:
    """The scope of ``request`` when the current UTC day is ``day`` (the bots' twin with ``bots``)."""
    target = _people_target(request, day)
    if not request.bots:
        return target
    return _Target(target.kind, boards.bots_scope(target.scope, True), target.player_order)


def _people_target(request: LeaderboardRequest, day: dt.date) -> _Target:
    if request.board is Board.RATING:
        cells = request.cells or 8
        return _Target("ratings", f"R/{cells}", cells=cells)
    period = _PERIODS[request.period or Period.ALL]
    if request.board is Board.PLAYERS:
        order: boards.PlayerOrder = "score" if request.order is Order.SCORE else "wins"
        return _Target("players", boards.player_scope(boards.period_bucket(period, day)), order)
    game_order = _GAME_ORDERS[request.order]
    bucket = boards.period_bucket(period, day)
    if request.board is Board.DEAL:
        if request.deal is None:  # pragma: no cover - the parser guarantees a code
            raise Refusal(ErrorCode.BAD_REQUEST, "code: the deal board needs a code")
        return _Target("games", boards.deal_scope(request.deal.code(), game_order, bucket))
    cells = request.cells or 8
    if request.board is Board.VARIANT:
        return _Target("games", boards.variant_scope(cells, game_order, bucket))
    return _Target("games", boards.daily_scope(request.date or day, cells, game_order))


# --------------------------------------------------------------------------- cursors


def _micros(moment: dt.datetime) -> int:
    return (moment - _EPOCH) // _MICROSECOND


def _encode_cursor(target: _Target, day: dt.date, key: GameKey | PlayerKey) -> str:
    head = _CURSOR_HEAD.pack(_CURSOR_VERSION, _scope_checksum(target), (day - _EPOCH_DAY).days)
    if isinstance(key, GameKey):
        body = _GAME_KEY.pack(key.sort_key, _micros(key.finished_at)) + key.game_id.encode()
    else:
        body = _PLAYER_KEY.pack(key.sort_key) + key.player_id.encode()
    return base64.urlsafe_b64encode(head + body).rstrip(b"=").decode("ascii")


def _scope_checksum(target: _Target) -> int:
    """Ties a cursor to its board, period and order (the players board's order is not in its scope)."""
    return zlib.crc32(f"{target.scope}|{target.player_order}".encode())


def _bad_cursor(why: str) -> Refusal:
    return Refusal(ErrorCode.BAD_REQUEST, f"after: {why}; send back the `next` of a page of the same board")


def _decode_cursor_head(text: str) -> tuple[dt.date, bytes, int]:
    """The as-of day, the key bytes and the scope checksum of a cursor.

    Raises:
        Refusal: bad_request naming ``after``.
    """
    if _CURSOR_RE.fullmatch(text) is None:
        raise _bad_cursor("not a cursor of this server")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        version, checksum, days = _CURSOR_HEAD.unpack_from(raw)
        day = _EPOCH_DAY + dt.timedelta(days=days)
    except (binascii.Error, struct.error, ValueError, OverflowError):
        raise _bad_cursor("not a cursor of this server") from None
    if version != _CURSOR_VERSION:
        raise _bad_cursor("a cursor of another version")
    return day, raw[_CURSOR_HEAD.size :], checksum


def _check_kept(request: LeaderboardRequest, day: dt.date, today: dt.date) -> None:
    """A cursor of a ``day`` or ``week`` board pins the bucket of the day its first page was served
    on: only the current and the previous bucket of a period are kept (`server.storage.pruning`).

    Raises:
        Refusal: not_found, for a cursor of an older bucket, pruned or soon to be.
    """
    period = _CLOSABLE_PERIODS.get(request.period or Period.ALL)
    if request.board in (Board.DAILY, Board.RATING) or period is None:
        return
    if not kept.is_kept(period, day, today):
        what = f"day {day.isoformat()}" if period == "day" else f"week of {kept.bucket_start(period, day)}"
        raise Refusal(
            ErrorCode.NOT_FOUND,
            f"after: the {period} board of the {what} is closed and no longer kept (only the current "
            f"and the previous {period} are); ask for the first page again, without after",
        )


def _decode_key(target: _Target, body: bytes) -> GameKey | PlayerKey:
    try:
        if target.kind == "games":
            sort_key, micros = _GAME_KEY.unpack_from(body)
            game_id = body[_GAME_KEY.size :].decode("ascii")
            finished_at = _EPOCH + dt.timedelta(microseconds=micros)
            if _ID_RE.fullmatch(game_id) is None:  # a forged id would reach SQL (NUL: a driver error)
                raise ValueError("not a game id")
            return GameKey(sort_key, finished_at, game_id)
        (sort_key,) = _PLAYER_KEY.unpack_from(body)
        player_id = body[_PLAYER_KEY.size :].decode("ascii")
        if _ID_RE.fullmatch(player_id) is None:
            raise ValueError("not a player id")
        return PlayerKey(sort_key, player_id)
    except (struct.error, UnicodeDecodeError, ValueError, OverflowError):
        raise _bad_cursor("not a cursor of this server") from None


# --------------------------------------------------------------------------- rows


def _game_row(row: BoardGame) -> protocol.GameRow:
    return protocol.GameRow(
        rank=row.rank,
        player=protocol.Player.of(row.player_id, row.player_name, bot=row.player_bot),
        game=row.game_id,
        code=row.code,
        cells=row.cells,
        won=row.won,
        moves=row.moves,
        duration_ms=row.duration_ms,
        score=row.score,
        finished_at=row.finished_at,
    )


def _player_row(row: BoardPlayer) -> protocol.PlayerRow:
    return protocol.PlayerRow(
        rank=row.rank,
        player=protocol.Player.of(row.player_id, row.player_name, bot=row.player_bot),
        played=row.played,
        won=row.won,
        best_score=row.best_score,
    )


def _rating_row(row: RatedPlayer) -> protocol.RatingRow:
    return protocol.RatingRow(
        rank=row.rank,
        player=protocol.Player.of(row.player_id, row.player_name, bot=row.player_bot),
        rating=row.rating.display,
        races=row.rating.races,
    )


def _wire_row(
    row: BoardGame | BoardPlayer | RatedPlayer,
) -> protocol.GameRow | protocol.PlayerRow | protocol.RatingRow:
    if isinstance(row, BoardGame):
        return _game_row(row)
    if isinstance(row, BoardPlayer):
        return _player_row(row)
    return _rating_row(row)


def _profile_ratings(found: dict[int, Rating]) -> tuple[protocol.ProfileRating, ...]:
    """A player's ratings, C8 first, then C4, then C2."""
    return tuple(
        protocol.ProfileRating(cells=cells, rating=found[cells].display, races=found[cells].races)
        for cells in (8, 4, 2)
        if cells in found
    )


def _profile_game(game: FinishedGameFigures) -> protocol.ProfileGame:
    return protocol.ProfileGame(
        game=game.game_id,
        code=game.code,
        cells=game.cells,
        won=game.won,
        score=game.score,
        moves=game.moves,
        duration_ms=game.duration_ms,
        finished_at=game.finished_at,
    )


def daily_streaks(days_won: Sequence[dt.date], today: dt.date) -> tuple[int, int]:
    """(current, best) runs of consecutive days in ``days_won`` (sorted, distinct).

    The current run is the one ending today, or yesterday (today's daily may still be played); any
    older run is over, and the current streak is 0.
    """
    best = run = 0
    previous: dt.date | None = None
    for day in days_won:
        run = run + 1 if previous is not None and (day - previous).days == 1 else 1
        best = max(best, run)
        previous = day
    current = run if previous is not None and (today - previous).days in (0, 1) else 0
    return current, best


# --------------------------------------------------------------------------- the service


class LeaderboardService:
    """Serves leaderboard pages and profiles from the database; owned by the app.

    Args:
        database: where the games and their summaries are.
        clock: the current time (aware); by default ``server.clock.utc_now``, looked up at each call.
    """

    def __init__(self, database: Database, *, clock: Callable[[], dt.datetime] | None = None) -> None:
        self._database = database
        self._clock = clock

    def _today(self) -> dt.date:
        now = self._clock() if self._clock is not None else clock.utc_now()
        return now.astimezone(dt.UTC).date()

    async def leaderboard(self, request: LeaderboardRequest) -> protocol.LeaderboardPage:
        """The ``leaderboard`` reply to ``request``.

        Raises:
            Refusal: ``bad_request`` for a cursor that is not one of this board. StorageUnavailable: when
                the database cannot be read.
        """
        day = self._today()
        key: GameKey | PlayerKey | None = None
        if request.after is not None:
            day, body, checksum = _decode_cursor_head(request.after)
            target = _target(request, day)
            if checksum != _scope_checksum(target):
                raise _bad_cursor("the cursor is of another board, order or period")
            key = _decode_key(target, body)
            _check_kept(request, day, self._today())
        else:
            target = _target(request, day)
        async with self._database.connection() as conn:
            await boards.use_one_snapshot(conn)
            rows, has_more = await self._read(conn, target, request, key)
        next_cursor = None
        if has_more and rows:
            next_cursor = _encode_cursor(target, day, rows[-1].key)
        wire = tuple(map(_wire_row, rows))
        return protocol.LeaderboardPage(request_id=request.request_id, rows=wire, next_cursor=next_cursor)

    @staticmethod
    async def _read(
        conn: Any, target: _Target, request: LeaderboardRequest, key: GameKey | PlayerKey | None
    ) -> tuple[Sequence[BoardGame] | Sequence[BoardPlayer] | Sequence[RatedPlayer], bool]:
        limit = request.limit
        if target.kind == "ratings":
            if request.around is not None:
                rating_page = await boards.rating_around(conn, target.cells, request.around, limit=limit)
            else:
                after_rating = key if isinstance(key, PlayerKey) else None
                rating_page = await boards.rating_page(conn, target.cells, after=after_rating, limit=limit)
            return rating_page.rows, rating_page.has_more
        if target.kind == "games":
            if request.around is not None:
                game_page = await boards.game_around(conn, target.scope, request.around, limit=limit)
            else:
                after = key if isinstance(key, GameKey) else None
                game_page = await boards.game_page(conn, target.scope, after=after, limit=limit)
            return game_page.rows, game_page.has_more
        order = target.player_order
        if request.around is not None:
            player_page = await boards.player_around(conn, target.scope, order, request.around, limit=limit)
        else:
            after_player = key if isinstance(key, PlayerKey) else None
            player_page = await boards.player_page(conn, target.scope, order, after=after_player, limit=limit)
        return player_page.rows, player_page.has_more

    async def profile(self, player_id: str, request_id: protocol.RequestId | None = None) -> protocol.Profile:
        """The ``profile`` reply for ``player_id``.

        Raises:
            Refusal: ``not_found`` for an unknown player.
            StorageUnavailable: the database cannot be read.
        """
        async with self._database.connection() as conn:
            await boards.use_one_snapshot(conn)
            found = await boards.get_profile(conn, player_id)
            ratings = await stored_ratings.player_ratings(conn, player_id) if found is not None else {}
        if found is None:
            raise Refusal(ErrorCode.NOT_FOUND, f"no player {player_id}")
        current, best = daily_streaks(found.daily_wins, self._today())
        return protocol.Profile(
            request_id=request_id,
            player=protocol.Player.of(found.player_id, found.name, bot=found.bot),
            played=found.played,
            won=found.won,
            best_score=found.best_score,
            best=tuple(_profile_game(game) for game in found.best),
            streak=protocol.Streak(current, best),
            recent=tuple(_profile_game(game) for game in found.recent),
            ratings=_profile_ratings(ratings),
        )


# --------------------------------------------------------------------------- HTTP query strings


def parse_leaderboard_query(query: str) -> LeaderboardRequest:
    """The request of ``GET /api/leaderboard?QUERY``: the message's fields as query parameters.

    Values are text; ``cells`` and ``limit`` made of digits become integers, ``bots=true`` and
    ``bots=false`` flags. The result goes through the protocol's own validation, so the rules and
    the ``bad_request`` messages (naming the parameter) are those of the ``leaderboard`` message.

    Raises:
        protocol.ProtocolError: ``bad_request``.
    """
    message: dict[object, object] = {"type": LeaderboardRequest.TYPE}
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query), max_num_fields=32)
    except ValueError as exc:
        raise protocol.ProtocolError(protocol.ErrorCode.BAD_REQUEST, f"malformed query: {exc}") from None
    for name, value in pairs:
        if name in ("type", "id"):
            raise protocol.ProtocolError(protocol.ErrorCode.BAD_REQUEST, f"unexpected parameter {name!r}")
        if name in message:
            raise protocol.ProtocolError(protocol.ErrorCode.BAD_REQUEST, f"{name}: given more than once")
        message[name] = _query_value(name, value)
    request = protocol.parse_client_message(message)
    if not isinstance(request, LeaderboardRequest):  # pragma: no cover - the type is fixed above
        raise protocol.ProtocolError(protocol.ErrorCode.BAD_REQUEST, "not a leaderboard request")
    return request


def _query_value(name: str, value: str) -> object:
    """A query parameter's text as the message's value: digits for integers, true/false for flags;
    anything else stays text, for the protocol's own check to refuse."""
    if name in _INTEGER_PARAMETERS and _DIGITS.fullmatch(value):
        return int(value)
    if name in _BOOLEAN_PARAMETERS and value in _BOOLEANS:
        return _BOOLEANS[value]
    return value


def parse_profile_path(player_id: str) -> str:
    """The player id of ``GET /api/players/{id}``, checked like the ``profile`` message's ``player``.

    Raises:
        protocol.ProtocolError: ``bad_request``.
    """
    request = protocol.parse_client_message({"type": "profile", "player": player_id})
    if not isinstance(request, protocol.ProfileRequest) or request.player is None:  # pragma: no cover
        raise protocol.ProtocolError(protocol.ErrorCode.BAD_REQUEST, "not a profile request")
    return request.player
