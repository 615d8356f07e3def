"""Validation of untrusted client messages: a decoded map in, a frozen request out, or ProtocolError.

This module owns every rule about what a client may send (field names, types, ranges, lengths,
combinations); the codecs only turn frames into plain values. The checks are strict on purpose:
an unknown or extra field, a ``null``, a float where an integer belongs, ``true`` where an integer
belongs, or a string over its limit are all ``bad_request``, so that clients find their bugs at once
and the server never holds input it did not expect.

It must never raise anything but ``ProtocolError``: every value is type-checked (``type(x) is int``,
not ``isinstance``, since ``bool`` is an ``int`` in Python) before it is used.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from collections.abc import Callable, Collection, Mapping
from typing import NoReturn, TypeVar

from engine import PILES, Cell, Column, Deal, InvalidCodeError, Pile
from protocol.errors import ErrorCode, ProtocolError, RequestId
from protocol.limits import (
    CURSOR_PATTERN,
    CURSOR_RULE,
    DEFAULT_PAGE_SIZE,
    ID_PATTERN,
    ID_RULE,
    INVITE_PATTERN,
    INVITE_RULE,
    MAX_CODE_LENGTH,
    MAX_GAME_ACTIONS,
    MAX_GROUP,
    MAX_INT,
    MAX_NAME_LENGTH,
    MAX_PAGE_SIZE,
    MAX_REQUEST_ID_LENGTH,
    PROTOCOL_VERSION,
    RACE_SEATS,
    RACE_TIME_LIMIT,
    TOKEN_PATTERN,
    TOKEN_RULE,
)
from protocol.messages import (
    OWN_FOUNDATION,
    AutoRequest,
    Board,
    ClientMessage,
    GamesRequest,
    HelloRequest,
    HintRequest,
    LeaderboardRequest,
    LiveRequest,
    MoveRequest,
    NewGameRequest,
    Order,
    Period,
    ProfileRequest,
    QuickRaceLeaveRequest,
    QuickRaceRequest,
    RaceCreateRequest,
    RaceJoinRequest,
    RaceLeaveRequest,
    RaceReadyRequest,
    RaceRematchRequest,
    RaceStartRequest,
    RaceWatchRequest,
    ReplayRequest,
    ResignRequest,
    ResumeRequest,
    TapRequest,
    TapSource,
    Target,
    UndoRequest,
    UnwatchRequest,
    WatchRequest,
)

__all__ = ["PROTOCOL_VERSION", "parse_client_message"]  # the version is re-exported from limits

_MISSING = object()
_T = TypeVar("_T")
_DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
#: Unicode categories a name may not contain: controls, format characters (bidi overrides,
#: invisible marks), surrogates, private use, unassigned, line and paragraph separators.
_NAME_BANNED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
#: Format characters that scripts need inside words (zero-width non-joiner and joiner).
_NAME_ALLOWED_FORMAT = frozenset({"\u200c", "\u200d"})

_SOURCES: dict[str, Pile] = {pile.symbol(): pile for pile in PILES}
_TAP_SOURCES: dict[str, TapSource] = {
    text: pile for text, pile in _SOURCES.items() if isinstance(pile, Column | Cell)
}
_TARGETS: dict[str, Target] = {**_SOURCES, "f": OWN_FOUNDATION}


# --------------------------------------------------------------------------- helpers


def _show(value: object) -> str:
    """A short, safe description of a client value for error messages (never the whole of it)."""
    if value is None or type(value) is bool:
        return "true" if value is True else "false" if value is False else "null"
    if type(value) is int:
        return str(value) if -(10**20) < value < 10**20 else "a huge integer"
    if type(value) is str:
        text = repr(value) if len(value) <= 40 else repr(value[:37]) + "…"
        return f"the string {text}"
    if type(value) is float:
        return "a float"
    if type(value) is dict:
        return "a map"
    if type(value) is list:
        return "an array"
    if type(value) is bytes:
        return "binary data"
    return "an extension value"


def _bad(message: str, request_id: RequestId | None) -> NoReturn:
    raise ProtocolError(ErrorCode.BAD_REQUEST, message, request_id)


def _check_fields(
    message: dict[object, object],
    allowed: frozenset[str],
    required: Collection[str],
    request_id: RequestId | None,
) -> None:
    """Refuse extra fields (non-string keys included) and missing ones."""
    if not message.keys() <= allowed:
        extra = sorted(repr(key[:40]) if type(key) is str else _show(key) for key in message.keys() - allowed)
        _bad(f"{message['type']}: unexpected field(s) {', '.join(extra[:4])}", request_id)
    for name in required:
        if name not in message:
            _bad(f"{message['type']}: missing field {name!r}", request_id)


def _int(value: object, field: str, low: int, high: int, request_id: RequestId | None) -> int:
    if type(value) is not int:
        _bad(f"{field} must be an integer, not {_show(value)}", request_id)
    if not low <= value <= high:
        _bad(f"{field} must be in {low}..{high}, not {_show(value)}", request_id)
    return value


def _pattern(value: object, field: str, pattern: re.Pattern[str], rule: str, rid: RequestId | None) -> str:
    if type(value) is not str or pattern.fullmatch(value) is None:
        _bad(f"{field} must be {rule}, not {_show(value)}", rid)
    return value


def _game_id(value: object, field: str, request_id: RequestId | None) -> str:
    return _pattern(value, field, ID_PATTERN, ID_RULE, request_id)


def _cursor(value: object, request_id: RequestId | None) -> str:
    return _pattern(value, "after", CURSOR_PATTERN, CURSOR_RULE, request_id)


def _choice(value: object, field: str, choices: Mapping[str, _T], rid: RequestId | None) -> _T:
    found = choices.get(value) if type(value) is str else None
    if found is None:
        _bad(f"{field} must be one of {', '.join(choices)}, not {_show(value)}", rid)
    return found


def _is_encodable(text: str) -> bool:
    """False for strings holding lone surrogates (possible via JSON escapes), which no encoder takes."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _request_id(value: object) -> RequestId:
    if type(value) is int:
        if 0 <= value <= MAX_INT:
            return value
    elif type(value) is str and len(value) <= MAX_REQUEST_ID_LENGTH and _is_encodable(value):
        return value
    _bad(f"id must be an integer in 0..2^53-1 or a string of at most 64 characters, not {_show(value)}", None)


def _name(value: object, request_id: RequestId | None) -> str:
    if type(value) is not str:
        _bad(f"name must be a string, not {_show(value)}", request_id)
    text: str = value
    if not 1 <= len(text) <= MAX_NAME_LENGTH:
        _bad(f"name must have 1..{MAX_NAME_LENGTH} characters, not {len(text)}", request_id)
    if text[0].isspace() or text[-1].isspace():
        _bad("name must not start or end with a blank", request_id)
    if not text.isprintable():
        for char in text:
            if unicodedata.category(char) in _NAME_BANNED_CATEGORIES and char not in _NAME_ALLOWED_FORMAT:
                _bad(f"name must not contain the character U+{ord(char):04X}", request_id)
    return text


def _deal(value: object, field: str, request_id: RequestId | None) -> Deal:
    if type(value) is not str or len(value) > MAX_CODE_LENGTH:
        _bad(f"{field} must be a game code such as 'EO1-C8-AAAAAFA', not {_show(value)}", request_id)
    try:
        return Deal.from_code(value)
    except InvalidCodeError as exc:
        _bad(str(exc), request_id)


def _cells(value: object, request_id: RequestId | None) -> int:
    if type(value) is not int or value not in (8, 4, 2):
        _bad(f"cells must be 8, 4 or 2, not {_show(value)}", request_id)
    return value


def _bool(value: object, field: str, request_id: RequestId | None) -> bool:
    if type(value) is not bool:
        _bad(f"{field} must be true or false, not {_show(value)}", request_id)
    return value


def _version(message: dict[object, object], rid: RequestId | None) -> int | None:
    value = message.get("v", _MISSING)
    return None if value is _MISSING else _int(value, "v", 0, MAX_INT, rid)


def _count(message: dict[object, object], rid: RequestId | None) -> int:
    value = message.get("n", _MISSING)
    return 1 if value is _MISSING else _int(value, "n", 1, MAX_GROUP, rid)


def _limit(message: dict[object, object], rid: RequestId | None) -> int:
    value = message.get("limit", _MISSING)
    return DEFAULT_PAGE_SIZE if value is _MISSING else _int(value, "limit", 1, MAX_PAGE_SIZE, rid)


def _location(value: object, field: str, table: Mapping[str, _T], rule: str, rid: RequestId | None) -> _T:
    found = table.get(value) if type(value) is str else None
    if found is None:
        _bad(f"{field} must be {rule}, not {_show(value)}", rid)
    return found


_PILE_RULE = "t1..t8, c1..c8, fS, fH, fD or fC"


# --------------------------------------------------------------------------- one parser per type

_HELLO = frozenset({"type", "id", "protocol", "token", "name", "bot"})


def _hello(message: dict[object, object], rid: RequestId | None) -> HelloRequest:
    # The version comes first: a newer client's hello may carry fields v1 does not know.
    version = message.get("protocol", _MISSING)
    if version is _MISSING:
        _bad("hello: missing field 'protocol'", rid)
    if type(version) is not int:
        _bad(f"protocol must be an integer, not {_show(version)}", rid)
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            ErrorCode.UNSUPPORTED_VERSION,
            f"protocol {_show(version)} is not supported; this server speaks protocol {PROTOCOL_VERSION}",
            rid,
        )
    _check_fields(message, _HELLO, (), rid)
    token = message.get("token", _MISSING)
    name = message.get("name", _MISSING)
    bot = message.get("bot", _MISSING)
    return HelloRequest(
        token=None if token is _MISSING else _pattern(token, "token", TOKEN_PATTERN, TOKEN_RULE, rid),
        name=None if name is _MISSING else _name(name, rid),
        request_id=rid,
        bot=None if bot is _MISSING else _bool(bot, "bot", rid),
    )


_NEW_GAME = frozenset({"type", "id", "code", "cells", "daily", "winnable"})


def _new_game(message: dict[object, object], rid: RequestId | None) -> NewGameRequest:
    _check_fields(message, _NEW_GAME, (), rid)
    code = message.get("code", _MISSING)
    cells = message.get("cells", _MISSING)
    daily = message.get("daily", _MISSING)
    winnable = message.get("winnable", _MISSING)
    is_daily = False if daily is _MISSING else _bool(daily, "daily", rid)
    is_winnable = False if winnable is _MISSING else _bool(winnable, "winnable", rid)
    variant = 8 if cells is _MISSING else _cells(cells, rid)
    if code is _MISSING:
        return NewGameRequest(None, variant, is_daily, rid, is_winnable)
    deal = _deal(code, "code", rid)
    if is_daily:
        _bad("new_game: 'code' and 'daily' exclude each other", rid)
    if is_winnable:
        _bad("new_game: 'code' and 'winnable' exclude each other", rid)
    if cells is not _MISSING and variant != deal.cells:
        _bad(f"new_game: cells {variant} contradicts the code {deal.code()}", rid)
    return NewGameRequest(deal, deal.cells, False, rid)


_MOVE = frozenset({"type", "id", "game", "from", "to", "n", "v"})
_MOVE_REQUIRED = ("game", "from", "to")


def _move(message: dict[object, object], rid: RequestId | None) -> MoveRequest:
    _check_fields(message, _MOVE, _MOVE_REQUIRED, rid)
    return MoveRequest(
        _game_id(message["game"], "game", rid),
        _location(message["from"], "from", _SOURCES, _PILE_RULE, rid),
        _location(message["to"], "to", _TARGETS, "t1..t8, c1..c8, fS, fH, fD, fC or f", rid),
        _count(message, rid),
        _version(message, rid),
        rid,
    )


_TAP = frozenset({"type", "id", "game", "from", "v"})
_AUTO = frozenset({"type", "id", "game", "from", "n", "v"})
_GAME_FROM = ("game", "from")
_TAP_RULE = "a column or a cell: t1..t8 or c1..c8"


def _tap(message: dict[object, object], rid: RequestId | None) -> TapRequest:
    _check_fields(message, _TAP, _GAME_FROM, rid)
    return TapRequest(
        _game_id(message["game"], "game", rid),
        _location(message["from"], "from", _TAP_SOURCES, _TAP_RULE, rid),
        _version(message, rid),
        rid,
    )


def _auto(message: dict[object, object], rid: RequestId | None) -> AutoRequest:
    _check_fields(message, _AUTO, _GAME_FROM, rid)
    return AutoRequest(
        _game_id(message["game"], "game", rid),
        _location(message["from"], "from", _TAP_SOURCES, _TAP_RULE, rid),
        _count(message, rid),
        _version(message, rid),
        rid,
    )


_UNDO = frozenset({"type", "id", "game", "v"})
_GAME = ("game",)


def _undo(message: dict[object, object], rid: RequestId | None) -> UndoRequest:
    _check_fields(message, _UNDO, _GAME, rid)
    return UndoRequest(_game_id(message["game"], "game", rid), _version(message, rid), rid)


def _id_only(
    cls: type[
        ResignRequest
        | ResumeRequest
        | WatchRequest
        | UnwatchRequest
        | HintRequest
        | RaceStartRequest
        | RaceLeaveRequest
        | RaceRematchRequest
    ],
    field: str = "game",
) -> Callable[[dict[object, object], RequestId | None], ClientMessage]:
    """A request whose one field is the id of a game (or of a race: ``field``)."""
    allowed = frozenset({"type", "id", field})

    def parse(message: dict[object, object], rid: RequestId | None) -> ClientMessage:
        _check_fields(message, allowed, (field,), rid)
        return cls(_game_id(message[field], field, rid), rid)

    return parse


_REPLAY = frozenset({"type", "id", "game", "since"})


def _replay(message: dict[object, object], rid: RequestId | None) -> ReplayRequest:
    _check_fields(message, _REPLAY, _GAME, rid)
    since = message.get("since", _MISSING)
    game = _game_id(message["game"], "game", rid)
    return ReplayRequest(
        game, 0 if since is _MISSING else _int(since, "since", 0, MAX_GAME_ACTIONS, rid), rid
    )


_LIVE = frozenset({"type", "id", "limit", "after"})


def _live(message: dict[object, object], rid: RequestId | None) -> LiveRequest:
    _check_fields(message, _LIVE, (), rid)
    after = message.get("after", _MISSING)
    return LiveRequest(_limit(message, rid), None if after is _MISSING else _cursor(after, rid), rid)


def _games(message: dict[object, object], rid: RequestId | None) -> GamesRequest:
    _check_fields(message, _LIVE, (), rid)  # the same fields as live: limit and after
    after = message.get("after", _MISSING)
    return GamesRequest(_limit(message, rid), None if after is _MISSING else _cursor(after, rid), rid)


_LEADERBOARD = frozenset(
    {"type", "id", "board", "code", "cells", "date", "period", "order", "limit", "after", "around", "bots"}
)
_BOARDS: dict[str, Board] = {board.value: board for board in Board}
_PERIODS: dict[str, Period] = {period.value: period for period in Period}
_GAME_ORDERS: dict[str, Order] = {order.value: order for order in (Order.MOVES, Order.TIME, Order.SCORE)}
_PLAYER_ORDERS: dict[str, Order] = {order.value: order for order in (Order.WINS, Order.SCORE)}
_RATING_ORDERS: dict[str, Order] = {Order.RATING.value: Order.RATING}
#: Each board's orders and its default order.
_ORDERS: dict[Board, tuple[dict[str, Order], Order]] = {
    Board.DEAL: (_GAME_ORDERS, Order.MOVES),
    Board.VARIANT: (_GAME_ORDERS, Order.MOVES),
    Board.DAILY: (_GAME_ORDERS, Order.MOVES),
    Board.PLAYERS: (_PLAYER_ORDERS, Order.WINS),
    Board.RATING: (_RATING_ORDERS, Order.RATING),
}
#: Which optional fields each board takes (besides period/order/limit/after/around).
_BOARD_FIELDS: dict[Board, frozenset[str]] = {
    Board.DEAL: frozenset({"code", "period"}),
    Board.VARIANT: frozenset({"cells", "period"}),
    Board.DAILY: frozenset({"cells", "date"}),
    Board.PLAYERS: frozenset({"period"}),
    Board.RATING: frozenset({"cells"}),
}


def _leaderboard(message: dict[object, object], rid: RequestId | None) -> LeaderboardRequest:
    _check_fields(message, _LEADERBOARD, ("board",), rid)
    board = _choice(message["board"], "board", _BOARDS, rid)
    takes = _BOARD_FIELDS[board]
    for field in ("code", "cells", "date", "period"):
        if field in message and field not in takes:
            _bad(f"leaderboard: the {board.value} board takes no {field!r}", rid)
    get = message.get
    deal: Deal | None = None
    cells: int | None = None
    if board is Board.DEAL:
        if "code" not in message:
            _bad("leaderboard: the deal board needs a 'code'", rid)
        deal = _deal(message["code"], "code", rid)
        cells = deal.cells
    elif board is not Board.PLAYERS:
        value = get("cells", _MISSING)
        cells = 8 if value is _MISSING else _cells(value, rid)
    date: dt.date | None = None
    if "date" in message:
        text = _pattern(message["date"], "date", _DATE_RE, "a date YYYY-MM-DD", rid)
        try:
            date = dt.date.fromisoformat(text)
        except ValueError:
            _bad(f"date must be a real date YYYY-MM-DD, not {_show(text)}", rid)
    period: Period | None = None
    if board is not Board.DAILY and board is not Board.RATING:
        value = get("period", _MISSING)
        period = Period.ALL if value is _MISSING else _choice(value, "period", _PERIODS, rid)
    orders, order = _ORDERS[board]
    value = get("order", _MISSING)
    if value is not _MISSING:
        order = _choice(value, f"order of the {board.value} board", orders, rid)
    after = get("after", _MISSING)
    around = get("around", _MISSING)
    if after is not _MISSING and around is not _MISSING:
        _bad("leaderboard: 'after' and 'around' exclude each other", rid)
    bots = get("bots", _MISSING)
    if board is Board.RATING and bots is not _MISSING and _bool(bots, "bots", rid):
        _bad("leaderboard: the rating board has no bots' twin: bots race unrated", rid)
    return LeaderboardRequest(
        board=board,
        deal=deal,
        cells=cells,
        date=date,
        period=period,
        order=order,
        limit=_limit(message, rid),
        after=None if after is _MISSING else _cursor(after, rid),
        around=None if around is _MISSING else _game_id(around, "around", rid),
        request_id=rid,
        bots=False if bots is _MISSING else _bool(bots, "bots", rid),
    )


_PROFILE = frozenset({"type", "id", "player"})


def _profile(message: dict[object, object], rid: RequestId | None) -> ProfileRequest:
    _check_fields(message, _PROFILE, (), rid)
    player = message.get("player", _MISSING)
    return ProfileRequest(None if player is _MISSING else _game_id(player, "player", rid), rid)


_RACE_CREATE = frozenset({"type", "id", "cells", "seats", "time_limit", "public"})


def _race_create(message: dict[object, object], rid: RequestId | None) -> RaceCreateRequest:
    _check_fields(message, _RACE_CREATE, (), rid)
    cells = message.get("cells", _MISSING)
    seats = message.get("seats", _MISSING)
    limit = message.get("time_limit", _MISSING)
    public = message.get("public", _MISSING)
    default = RaceCreateRequest()
    return RaceCreateRequest(
        default.cells if cells is _MISSING else _cells(cells, rid),
        default.seats if seats is _MISSING else _int(seats, "seats", *RACE_SEATS, rid),
        default.time_limit if limit is _MISSING else _int(limit, "time_limit", *RACE_TIME_LIMIT, rid),
        default.public if public is _MISSING else _bool(public, "public", rid),
        rid,
    )


_RACE_JOIN = frozenset({"type", "id", "code"})


def _race_join(message: dict[object, object], rid: RequestId | None) -> RaceJoinRequest:
    _check_fields(message, _RACE_JOIN, ("code",), rid)
    return RaceJoinRequest(_pattern(message["code"], "code", INVITE_PATTERN, INVITE_RULE, rid), rid)


_RACE_READY = frozenset({"type", "id", "race", "ready"})


_RACE_WATCH = frozenset({"type", "id", "race", "code"})


def _race_watch(message: dict[object, object], rid: RequestId | None) -> RaceWatchRequest:
    _check_fields(message, _RACE_WATCH, (), rid)
    race, code = message.get("race", _MISSING), message.get("code", _MISSING)
    if (race is _MISSING) == (code is _MISSING):
        _bad("race_watch: name the race by exactly one of race and code", rid)
    if code is not _MISSING:
        return RaceWatchRequest(None, rid, _pattern(code, "code", INVITE_PATTERN, INVITE_RULE, rid))
    return RaceWatchRequest(_game_id(race, "race", rid), rid)


def _race_ready(message: dict[object, object], rid: RequestId | None) -> RaceReadyRequest:
    _check_fields(message, _RACE_READY, ("race",), rid)
    ready = message.get("ready", _MISSING)
    return RaceReadyRequest(
        _game_id(message["race"], "race", rid), True if ready is _MISSING else _bool(ready, "ready", rid), rid
    )


_QUICK_RACE = frozenset({"type", "id", "cells"})
_QUICK_RACE_LEAVE = frozenset({"type", "id"})


def _quick_race(message: dict[object, object], rid: RequestId | None) -> QuickRaceRequest:
    _check_fields(message, _QUICK_RACE, (), rid)
    cells = message.get("cells", _MISSING)
    return QuickRaceRequest(QuickRaceRequest().cells if cells is _MISSING else _cells(cells, rid), rid)


def _quick_race_leave(message: dict[object, object], rid: RequestId | None) -> QuickRaceLeaveRequest:
    _check_fields(message, _QUICK_RACE_LEAVE, (), rid)
    return QuickRaceLeaveRequest(rid)


_PARSERS: dict[str, Callable[[dict[object, object], RequestId | None], ClientMessage]] = {
    "hello": _hello,
    "new_game": _new_game,
    "move": _move,
    "tap": _tap,
    "auto": _auto,
    "undo": _undo,
    "resign": _id_only(ResignRequest),
    "resume": _id_only(ResumeRequest),
    "watch": _id_only(WatchRequest),
    "unwatch": _id_only(UnwatchRequest),
    "replay": _replay,
    "hint": _id_only(HintRequest),
    "live": _live,
    "leaderboard": _leaderboard,
    "profile": _profile,
    "games": _games,
    "race_create": _race_create,
    "race_join": _race_join,
    "race_watch": _race_watch,
    "race_ready": _race_ready,
    "race_start": _id_only(RaceStartRequest, "race"),
    "race_leave": _id_only(RaceLeaveRequest, "race"),
    "race_rematch": _id_only(RaceRematchRequest, "race"),
    "quick_race": _quick_race,
    "quick_race_leave": _quick_race_leave,
}


def parse_client_message(message: object) -> ClientMessage:
    """Validate a decoded client message (a map of plain values) and build its request.

    Raises:
        ProtocolError: ``bad_request`` (or ``unsupported_version`` for a ``hello`` of another
            protocol), with ``request_id`` set whenever the message carried a valid ``id``;
            ``close_code`` is always None (the frame itself was fine).
    """
    if type(message) is not dict:
        _bad(f"a message is a map with a 'type', not {_show(message)}", None)
    rid: RequestId | None = None
    raw_id = message.get("id", _MISSING)
    if raw_id is not _MISSING:
        rid = _request_id(raw_id)
    kind = message.get("type", _MISSING)
    if kind is _MISSING:
        _bad("a message needs a 'type'", rid)
    parser = _PARSERS.get(kind) if type(kind) is str else None
    if parser is None:
        _bad(f"unknown message type: {_show(kind)}", rid)
    return parser(message, rid)
