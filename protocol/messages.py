"""The client → server messages of protocol v1 as frozen values, one class per ``type``.

A decoded request holds engine values, not wire text: locations are ``Column`` / ``Cell`` /
``Foundation`` (``from`` becomes ``source``, ``to`` becomes ``target``, ``n`` becomes ``count``), a
game code is a ``Deal``, a date is a ``datetime.date``. The one wire form with no engine value, the bare
destination ``f`` ("the foundation of the moved card's suit"), is the sentinel ``OWN_FOUNDATION``;
``MoveRequest.action(game)`` resolves it against the position.

Optional fields the client omitted hold their documented default. ``to_wire()`` renders a request
back to the dict a client sends, so ``decode(encode(request.to_wire()))`` gives the request back.

Requests are made by ``protocol.parse_client_message`` (through ``protocol.decode``), which checks
every rule; building one directly (in tests, or a Python client) checks nothing.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass, fields
from typing import ClassVar, Final, TypeAlias

from engine import UNDO, Cell, Column, Deal, Foundation, Game, IllegalMoveError, Move, Pile, Undo
from protocol.errors import RequestId
from protocol.limits import DEFAULT_PAGE_SIZE, DEFAULT_RACE_TIME_LIMIT, PROTOCOL_VERSION

__all__ = [
    "CLIENT_MESSAGE_TYPES",
    "OWN_FOUNDATION",
    "ActionRequest",
    "AutoRequest",
    "Board",
    "ClientMessage",
    "GameRequest",
    "GamesRequest",
    "HelloRequest",
    "HintRequest",
    "LeaderboardRequest",
    "LiveRequest",
    "MoveRequest",
    "NewGameRequest",
    "Order",
    "OwnFoundation",
    "Period",
    "ProfileRequest",
    "QuickRaceLeaveRequest",
    "QuickRaceRequest",
    "RaceCreateRequest",
    "RaceJoinRequest",
    "RaceLeaveRequest",
    "RaceReadyRequest",
    "RaceRematchRequest",
    "RaceRequest",
    "RaceStartRequest",
    "RaceWatchRequest",
    "ReplayRequest",
    "ResignRequest",
    "ResumeRequest",
    "TapRequest",
    "TapSource",
    "Target",
    "UndoRequest",
    "UnwatchRequest",
    "WatchRequest",
]


class OwnFoundation(enum.Enum):
    """The destination ``f``: the foundation of the suit of the card that moves."""

    OWN_FOUNDATION = "f"

    def symbol(self) -> str:
        return "f"

    def __repr__(self) -> str:
        return "OWN_FOUNDATION"


OWN_FOUNDATION = OwnFoundation.OWN_FOUNDATION

#: Where a ``move`` may go: any pile, or the bare ``f``.
Target: TypeAlias = Pile | OwnFoundation
#: What ``tap`` and ``auto`` may touch: a column or a cell (never a foundation).
TapSource: TypeAlias = Column | Cell


class Board(enum.StrEnum):
    """Which leaderboard: one deal, one cell variant, one day's daily deal, players overall, or the
    race ratings of one variant."""

    DEAL = "deal"
    VARIANT = "variant"
    DAILY = "daily"
    PLAYERS = "players"
    RATING = "rating"


class Period(enum.StrEnum):
    """How far back a leaderboard looks, counted back from the server's current UTC day."""

    DAY = "day"
    WEEK = "week"
    ALL = "all"


class Order(enum.StrEnum):
    """Leaderboard order. ``score`` is farmable (docs/rules.md, Score), so it is never the default."""

    SCORE = "score"
    MOVES = "moves"
    TIME = "time"
    WINS = "wins"
    RATING = "rating"


#: Field name → wire name where they differ.
_WIRE_NAMES: Final = {"source": "from", "target": "to", "count": "n", "deal": "code", "request_id": "id"}


def _wire_value(value: object) -> object:
    if isinstance(value, Deal):
        return value.code()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value if isinstance(value, str) else value.symbol()  # type: ignore[attr-defined]
    symbol = getattr(value, "symbol", None)  # piles
    return symbol() if callable(symbol) else value


class _Request:
    """``to_wire()``: the dict a client sends for this request, fields at their default left out, so
    that ``parse(request.to_wire()) == request``."""

    __slots__ = ()
    TYPE: ClassVar[str]
    #: Fields a client writes even at their default (after ``type``).
    _WIRE_CONSTANTS: ClassVar[dict[str, object]] = {}

    def to_wire(self) -> dict[str, object]:
        wire: dict[str, object] = {"type": self.TYPE, **self._WIRE_CONSTANTS}
        for field in fields(self):  # type: ignore[arg-type]
            value = getattr(self, field.name)
            if value is None or value == field.default or self._implied(field.name):
                continue
            wire[_WIRE_NAMES.get(field.name, field.name)] = _wire_value(value)
        return wire

    def _implied(self, name: str) -> bool:
        """A field the wire leaves out because another field already says it (the variant of a code)."""
        return name == "cells" and getattr(self, "deal", None) is not None


@dataclass(frozen=True, slots=True)
class HelloRequest(_Request):
    """``hello``: the first message of every connection; no ``token`` asks for a new guest player.

    ``bot`` (None: not said): True, the client is a program; a new player made so is a bot for life
    (its games rank on the bots' boards only). With a ``token``, a ``bot`` said must agree with the
    player (the server refuses it otherwise); not said, it takes the player as made.
    """

    TYPE: ClassVar[str] = "hello"
    _WIRE_CONSTANTS: ClassVar[dict[str, object]] = {"protocol": PROTOCOL_VERSION}
    token: str | None = None
    name: str | None = None
    request_id: RequestId | None = None
    bot: bool | None = None  # last, so that the older positional construction keeps its meaning


@dataclass(frozen=True, slots=True)
class NewGameRequest(_Request):
    """``new_game``: ``deal`` when a code was given; else today's daily deal or a random one of ``cells``
    (``winnable``: drawn from the deals proven winnable).

    ``cells`` is always the variant to play (the code's own when a code was given).
    """

    TYPE: ClassVar[str] = "new_game"
    deal: Deal | None = None
    cells: int = 8
    daily: bool = False
    request_id: RequestId | None = None
    winnable: bool = False  # last, so that the older positional construction keeps its meaning


@dataclass(frozen=True, slots=True)
class MoveRequest(_Request):
    """``move``: ``count`` cards from the top of ``source`` onto ``target``, if the game is at ``v``."""

    TYPE: ClassVar[str] = "move"
    game: str
    source: Pile
    target: Target
    count: int = 1
    v: int | None = None
    request_id: RequestId | None = None

    def action(self, game: Game) -> Move:
        """The engine move this request asks for in ``game`` (``f`` resolved to a suit).

        Raises:
            IllegalMoveError: ``f`` was asked for and ``source`` is empty.
        """
        target = self.target
        if isinstance(target, OwnFoundation):
            card = game.top_card(self.source)
            if card is None:
                raise IllegalMoveError(f"{self.source} is empty")
            target = Foundation(card.suit)
        return Move(self.source, target, self.count)


@dataclass(frozen=True, slots=True)
class TapRequest(_Request):
    """``tap``: send the top card of ``source`` to its foundation."""

    TYPE: ClassVar[str] = "tap"
    game: str
    source: TapSource
    v: int | None = None
    request_id: RequestId | None = None

    def action(self, game: Game) -> Move:
        """The move the tap makes (``Game.tap_move``); raises ``IllegalMoveError`` when there is none."""
        return game.tap_move(self.source)


@dataclass(frozen=True, slots=True)
class AutoRequest(_Request):
    """``auto`` (double tap) on the card ``count``-th from the top of ``source``."""

    TYPE: ClassVar[str] = "auto"
    game: str
    source: TapSource
    count: int = 1
    v: int | None = None
    request_id: RequestId | None = None

    def action(self, game: Game) -> Move:
        """The move the double tap makes (``Game.double_tap_move``); raises ``IllegalMoveError``."""
        return game.double_tap_move(self.source, self.count)


@dataclass(frozen=True, slots=True)
class UndoRequest(_Request):
    """``undo``: take back the last action, if the game is at ``v``."""

    TYPE: ClassVar[str] = "undo"
    game: str
    v: int | None = None
    request_id: RequestId | None = None

    def action(self, game: Game) -> Undo:
        """Always ``UNDO``; ``game.play`` decides whether there is anything to undo."""
        return UNDO


@dataclass(frozen=True, slots=True)
class _GameOnly(_Request):
    game: str
    request_id: RequestId | None = None
    TYPE: ClassVar[str] = ""


@dataclass(frozen=True, slots=True)
class ResignRequest(_GameOnly):
    """``resign``: end the game as lost; the reply is ``game_over``."""

    TYPE: ClassVar[str] = "resign"


@dataclass(frozen=True, slots=True)
class ResumeRequest(_GameOnly):
    """``resume``: a fresh ``snapshot`` of one's own game (after a reconnect or a ``stale``)."""

    TYPE: ClassVar[str] = "resume"


@dataclass(frozen=True, slots=True)
class WatchRequest(_GameOnly):
    """``watch``: a ``snapshot`` of anyone's game, then its diffs; sent again to resync after a gap."""

    TYPE: ClassVar[str] = "watch"


@dataclass(frozen=True, slots=True)
class UnwatchRequest(_GameOnly):
    """``unwatch``: stop the diffs of a watched game; the reply is ``ok``."""

    TYPE: ClassVar[str] = "unwatch"


@dataclass(frozen=True, slots=True)
class ReplayRequest(_Request):
    """``replay``: a game move by move, from its deal: the steps after version ``since``, a page of at
    most ``MAX_REPLAY_STEPS`` (a long game is read in a few pages). Sealed like ``watch``."""

    TYPE: ClassVar[str] = "replay"
    game: str
    since: int = 0
    request_id: RequestId | None = None


@dataclass(frozen=True, slots=True)
class HintRequest(_GameOnly):
    """``hint`` (owner only): the verdict from the game's position and, when it can be won, the next
    action of a winning line."""

    TYPE: ClassVar[str] = "hint"


@dataclass(frozen=True, slots=True)
class LiveRequest(_Request):
    """``live``: a page of the games being played now."""

    TYPE: ClassVar[str] = "live"
    limit: int = DEFAULT_PAGE_SIZE
    after: str | None = None
    request_id: RequestId | None = None


@dataclass(frozen=True, slots=True)
class GamesRequest(_Request):
    """``games``: a page of the player's own unfinished games, most recently started first (the
    rest of ``welcome``'s list)."""

    TYPE: ClassVar[str] = "games"
    limit: int = DEFAULT_PAGE_SIZE
    after: str | None = None
    request_id: RequestId | None = None


@dataclass(frozen=True, slots=True)
class LeaderboardRequest(_Request):
    """``leaderboard``: a page of one board, defaults resolved.

    ``deal`` is set for the ``deal`` board only; ``cells`` is the variant of the ``deal``, ``variant``,
    ``daily`` and ``rating`` boards (None for ``players``); ``date`` may be set for ``daily`` only (None:
    the server's current UTC day); ``period`` is None for ``daily`` (a daily board is one day by nature)
    and ``rating`` (a rating is as it stands now).
    ``around`` (a player id) and ``after`` (a cursor) never come together. ``bots``: the bots'
    board of the same name (bots rank apart from people; the default is the people's board).
    """

    TYPE: ClassVar[str] = "leaderboard"
    board: Board
    deal: Deal | None = None
    cells: int | None = None
    date: dt.date | None = None
    period: Period | None = Period.ALL
    order: Order = Order.MOVES
    limit: int = DEFAULT_PAGE_SIZE
    after: str | None = None
    around: str | None = None
    request_id: RequestId | None = None
    bots: bool = False


@dataclass(frozen=True, slots=True)
class ProfileRequest(_Request):
    """``profile``: a player's figures, best games, daily streak and recent games.

    ``player`` is a player id; None asks for the requesting player's own profile.
    """

    TYPE: ClassVar[str] = "profile"
    player: str | None = None
    request_id: RequestId | None = None


@dataclass(frozen=True, slots=True)
class RaceCreateRequest(_Request):
    """``race_create``: a new race of ``cells``' variant, for 2..8 ``seats``, ``time_limit`` seconds
    long, listed to everyone when ``public``; the creator takes seat 1."""

    TYPE: ClassVar[str] = "race_create"
    cells: int = 8
    seats: int = 8
    time_limit: int = DEFAULT_RACE_TIME_LIMIT
    public: bool = False
    request_id: RequestId | None = None


@dataclass(frozen=True, slots=True)
class RaceJoinRequest(_Request):
    """``race_join``: take a seat in the race of invitation ``code`` (again: the seat one holds)."""

    TYPE: ClassVar[str] = "race_join"
    code: str
    request_id: RequestId | None = None


@dataclass(frozen=True, slots=True)
class _RaceOnly(_Request):
    race: str
    request_id: RequestId | None = None
    TYPE: ClassVar[str] = ""


@dataclass(frozen=True, slots=True)
class RaceWatchRequest(_Request):
    """``race_watch``: the race's snapshot, then its diffs (a seat's connection, or a spectator); the
    race named by its id or by its invitation ``code`` (exactly one of them)."""

    TYPE: ClassVar[str] = "race_watch"
    race: str | None = None
    request_id: RequestId | None = None
    code: str | None = None


@dataclass(frozen=True, slots=True)
class RaceStartRequest(_RaceOnly):
    """``race_start`` (the creator, every seat ready): the countdown begins."""

    TYPE: ClassVar[str] = "race_start"


@dataclass(frozen=True, slots=True)
class RaceLeaveRequest(_RaceOnly):
    """``race_leave``: give up one's seat (or stop watching)."""

    TYPE: ClassVar[str] = "race_leave"


@dataclass(frozen=True, slots=True)
class RaceRematchRequest(_RaceOnly):
    """``race_rematch``: a player of the finished ``race`` asks for a new race of the same settings
    (the first ask makes it, seated; a later one joins the one made)."""

    TYPE: ClassVar[str] = "race_rematch"


@dataclass(frozen=True, slots=True)
class RaceReadyRequest(_Request):
    """``race_ready``: one's seat is ready to start (``ready`` false: no longer)."""

    TYPE: ClassVar[str] = "race_ready"
    race: str
    ready: bool = True
    request_id: RequestId | None = None


@dataclass(frozen=True, slots=True)
class QuickRaceRequest(_Request):
    """``quick_race``: wait for a public race of ``cells``' variant with players near one's rating."""

    TYPE: ClassVar[str] = "quick_race"
    cells: int = 8
    request_id: RequestId | None = None


@dataclass(frozen=True, slots=True)
class QuickRaceLeaveRequest(_Request):
    """``quick_race_leave``: wait for a quick race no longer."""

    TYPE: ClassVar[str] = "quick_race_leave"
    request_id: RequestId | None = None


#: Every race request.
RaceRequest: TypeAlias = (
    RaceCreateRequest
    | RaceJoinRequest
    | RaceWatchRequest
    | RaceReadyRequest
    | RaceStartRequest
    | RaceLeaveRequest
    | RaceRematchRequest
    | QuickRaceRequest
    | QuickRaceLeaveRequest
)
#: The game actions: each has ``action(game)`` giving the engine action, and an optional ``v``.
ActionRequest: TypeAlias = MoveRequest | TapRequest | AutoRequest | UndoRequest
#: Every request naming a ``game``.
GameRequest: TypeAlias = (
    ActionRequest | ResignRequest | ResumeRequest | WatchRequest | UnwatchRequest | HintRequest
)
#: Any decoded client message.
ClientMessage: TypeAlias = (
    HelloRequest
    | NewGameRequest
    | GameRequest
    | LiveRequest
    | LeaderboardRequest
    | ProfileRequest
    | GamesRequest
    | ReplayRequest
    | RaceRequest
)

#: Wire ``type`` → message class, in the order of protocol/README.md.
CLIENT_MESSAGE_TYPES: dict[str, type[ClientMessage]] = {
    cls.TYPE: cls
    for cls in (
        HelloRequest,
        NewGameRequest,
        MoveRequest,
        TapRequest,
        AutoRequest,
        UndoRequest,
        ResignRequest,
        ResumeRequest,
        WatchRequest,
        UnwatchRequest,
        ReplayRequest,
        HintRequest,
        LiveRequest,
        LeaderboardRequest,
        ProfileRequest,
        GamesRequest,
        RaceCreateRequest,
        RaceJoinRequest,
        RaceWatchRequest,
        RaceReadyRequest,
        RaceStartRequest,
        RaceLeaveRequest,
        RaceRematchRequest,
        QuickRaceRequest,
        QuickRaceLeaveRequest,
    )
}
