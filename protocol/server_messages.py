"""The server → client messages of protocol v1 as frozen values, one class per ``type``.

The server side twin of ``protocol.messages``: a reply or a push is built as a value holding engine
and standard values (``Card``, ``Transfer``, ``Status``, ``ErrorCode``, aware ``datetime``), and
``to_wire()`` renders it as the plain dict ``protocol.encode`` takes. ``to_wire`` is field-driven: each
field's wire form follows from its declared type, and `_wire_value` generates each class's own
renderer from them once, at import. So adding a message is one class here plus one entry in
`SERVER_MESSAGE_TYPES`; the tests hold protocol/README.md, protocol/asyncapi.yaml and
``protocol.validate_server_message`` to that table.

Wire names are the field names except ``request_id`` (``id``, always first) and ``next_cursor``
(``next``). A field whose default is None is left out while it is None (``id``, ``token``, ``next``);
every other field is always sent, null included (an empty cell). Values validate nothing (they are
built by the server from its own state); ``validate_server_message`` checks their output in tests.

Diffs are exact: a client that knows no rules keeps an identical copy of the board by applying each
op (take ``cards`` off the top of ``from``, put them on ``to``). Because a snapshot shows only the top
card of each foundation, an op taking a card off a foundation also says the foundation's new ``top``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, Final, TypeAlias, cast

from engine import FOUNDATION_ORDER, Card, Foundation, Game, Layout, Move, Rank, Status, Suit, Transfer
from protocol.errors import ErrorCode, ProtocolError, RequestId
from protocol.timestamps import format_timestamp

__all__ = [
    "SERVER_MESSAGE_TYPES",
    "Ack",
    "Diff",
    "ErrorReply",
    "Foundations",
    "GameOver",
    "GameRow",
    "GamesPage",
    "Hint",
    "LeaderboardPage",
    "LiveGame",
    "LivePage",
    "Ok",
    "Player",
    "PlayerRow",
    "Profile",
    "ProfileGame",
    "ProfileRating",
    "Race",
    "RaceBoard",
    "RaceDiff",
    "RaceLink",
    "RaceSeat",
    "RatingRow",
    "RatingShift",
    "Replay",
    "ReplayStep",
    "ServerInfo",
    "ServerMessage",
    "Snapshot",
    "Streak",
    "Verdict",
    "Welcome",
    "card_text",
    "layout_fields",
    "move_action",
]

#: ``_CARD_TEXT[suit letter][rank]``: the text of every card, made once.
_CARD_TEXT: Final[dict[str, tuple[str, ...]]] = {
    suit.value: ("", *(f"{rank.symbol}{suit.value}" for rank in Rank)) for suit in Suit
}
#: Field name → wire name where they differ.
_WIRE_NAMES: Final = {"request_id": "id", "next_cursor": "next"}
#: The longest ``error`` message: an echo of input stays small.
MAX_ERROR_MESSAGE: Final = 200


def card_text(card: Card) -> str:
    """The wire text of a card (``"TD"``), from a table rather than formatting."""
    return _CARD_TEXT[card.suit._value_][card.rank]


def _card_texts(cards: tuple[Card, ...]) -> list[str]:
    texts = _CARD_TEXT
    return [texts[card.suit._value_][card.rank] for card in cards]


def _cell_texts(cells: tuple[Card | None, ...]) -> list[str | None]:
    texts = _CARD_TEXT
    return [None if card is None else texts[card.suit._value_][card.rank] for card in cells]


def _op(transfer: Transfer) -> dict[str, object]:
    """An op: ``{cards, from, to}``, plus ``top`` (the card now showing) when ``from`` is a foundation."""
    cards = transfer.cards
    source = transfer.source
    if len(cards) == 1:  # most actions: no loop
        card = cards[0]
        texts = [_CARD_TEXT[card.suit._value_][card.rank]]
    else:
        texts = _card_texts(cards)
    op: dict[str, object] = {"cards": texts, "from": source.symbol(), "to": transfer.target.symbol()}
    if type(source) is Foundation:
        # The card left the foundation's top, so the one under it (same suit, a rank lower) shows.
        taken = cards[0]
        op["top"] = _CARD_TEXT[taken.suit._value_][taken.rank - 1] or None
    return op


def move_action(move: Move) -> dict[str, object]:
    """A move as the client request that makes it, without ``id`` and ``game``:
    ``{"type": "move", "from": "t3", "to": "fH", "n": 1}`` (``n`` always written)."""
    return {"type": "move", "from": move.source.symbol(), "to": move.target.symbol(), "n": move.count}


# --------------------------------------------------------------------------- to_wire, field-driven
# ``to_wire`` is on every action's path (the ack, and the diff when someone follows), so each class gets
# its own renderer, generated once from its fields as ``dataclasses`` generates ``__init__``: a dict
# display with each field's conversion inlined, as fast as a hand-written builder.

_Render: TypeAlias = Callable[["_Value"], dict[str, object]]
#: The helpers a generated renderer calls, by the name it calls them.
_HELPERS: Final[dict[str, object]] = {
    "_card_text": card_text,
    "_card_texts": _card_texts,
    "_cell_texts": _cell_texts,
    "_op": _op,
    "_timestamp": format_timestamp,
    "_move_action": move_action,
}
#: The helper giving the wire form of a leaf type; str, int, bool and float go as they are.
_LEAVES: Final[dict[object, str]] = {
    Card: "_card_text",
    Transfer: "_op",
    Move: "_move_action",
    dt.datetime: "_timestamp",
}


def _expression(hint: object, source: str, depth: int = 0) -> str:
    """Python source of the wire value of ``source``, an expression of type ``hint``."""
    if hint in (str, int, bool, float):
        return source
    if hint in _LEAVES:
        return f"{_LEAVES[hint]}({source})"
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return f"{source}._value_"  # the attribute behind the ``value`` property, read directly
    if isinstance(hint, type) and issubclass(hint, _Value):
        return f"{source}.to_wire()"
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple and (len(args) != 2 or args[1] is not Ellipsis):  # a fixed length: inlined
        items = (_expression(arg, f"{source}[{index}]", depth) for index, arg in enumerate(args))
        return f"[{', '.join(items)}]"
    if origin is tuple:
        if args[0] is Card:
            return f"_card_texts({source})"
        if args[0] == Card | None:
            return f"_cell_texts({source})"
        if args[0] in _LEAVES:
            return f"list(map({_LEAVES[args[0]]}, {source}))"
        item = f"_item{depth}"
        inner = _expression(args[0], item, depth + 1)
        return f"list({source})" if inner == item else f"[{inner} for {item} in {source}]"
    if origin in (typing.Union, types.UnionType):
        options = [arg for arg in args if arg is not type(None)]
        if all(isinstance(arg, type) and issubclass(arg, _Value) for arg in options):
            inner = f"{source}.to_wire()"
        else:
            forms = {_expression(option, source, depth) for option in options}
            if len(forms) != 1:
                raise TypeError(f"no one wire form for the type {hint!r}")
            (inner,) = forms
        nullable = len(options) < len(args)
        return f"(None if {source} is None else {inner})" if nullable and inner != source else inner
    raise TypeError(f"no wire form for the type {hint!r}")


def _wire_fields(cls: type[_Value]) -> list[tuple[str, str, bool]]:
    """(attribute, wire name, left out when None) of each field of ``cls``, ``request_id`` first."""
    items = sorted(dataclasses.fields(cls), key=lambda item: item.name != "request_id")  # type: ignore[arg-type]
    return [(item.name, _WIRE_NAMES.get(item.name, item.name), item.default is None) for item in items]


def _renderer(cls: type[_Value]) -> _Render:
    """The generated ``to_wire`` of ``cls``."""
    hints = typing.get_type_hints(cls)
    fields = _wire_fields(cls)
    entries = [] if cls.TYPE is None else [f"'type': {cls.TYPE!r}"]
    entries += [f"{key!r}: {_expression(hints[name], f'self.{name}')}" for name, key, _ in fields]
    lines = ["def to_wire(self):", f"    wire = {{{', '.join(entries)}}}"]
    for _, key, omitted in fields:
        if omitted:
            lines += [f"    if wire[{key!r}] is None:", f"        del wire[{key!r}]"]
    lines.append("    return wire")
    namespace: dict[str, object] = {}
    exec("\n".join(lines), dict(_HELPERS), namespace)  # source made above from field names and types
    return cast(_Render, namespace["to_wire"])


class _Value:
    """A value with a wire form: ``to_wire()`` gives the plain dict (``type`` first for a message)."""

    __slots__ = ()
    TYPE: ClassVar[str | None] = None

    def to_wire(self) -> dict[str, object]:
        """The plain dict of this value (replaced on each class by `_wire_value`)."""
        raise TypeError(f"{type(self).__name__} is not made by @_wire_value")

    @classmethod
    def wire_fields(cls) -> tuple[frozenset[str], frozenset[str]]:
        """(always sent, left out when None): the wire names of the fields, ``type`` aside."""
        fields = _wire_fields(cls)
        return (
            frozenset(key for _, key, omitted in fields if not omitted),
            frozenset(key for _, key, omitted in fields if omitted),
        )


_V = typing.TypeVar("_V", bound=_Value)


def _wire_value(cls: type[_V]) -> type[_V]:
    """Finish a frozen, slotted value class: its generated ``to_wire`` (a field with no wire form
    raises TypeError here, at import), and an ``__init__`` that sets the slots through their
    descriptors where the dataclass's goes through ``object.__setattr__`` field by field (half the
    cost of making an ack, on every action). The class stays frozen (assignment still raises);
    ``__post_init__`` still runs."""
    setattr(cls, "to_wire", _renderer(cls))  # noqa: B010 - mypy refuses assigning to a method
    items = [item for item in dataclasses.fields(cls) if item.init]  # type: ignore[arg-type]
    helpers: dict[str, object] = {f"_set_{item.name}": getattr(cls, item.name).__set__ for item in items}
    helpers |= {
        f"_default_{item.name}": item.default for item in items if item.default is not dataclasses.MISSING
    }
    params = [
        item.name if item.default is dataclasses.MISSING else f"{item.name}=_default_{item.name}"
        for item in items
    ]
    lines = [f"def __init__(self, {', '.join(params)}):"]
    lines += [f"    _set_{item.name}(self, {item.name})" for item in items]
    if hasattr(cls, "__post_init__"):
        lines.append("    self.__post_init__()")
    namespace: dict[str, object] = {}
    exec("\n".join(lines), helpers, namespace)  # source made above from field names
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"  # type: ignore[attr-defined]
    setattr(cls, "__init__", init)  # noqa: B010 - mypy refuses assigning to a method
    return cls


# --------------------------------------------------------------------------- parts of messages


@_wire_value
@dataclass(frozen=True, slots=True)
class Player(_Value):
    """Who plays: ``{id, name}`` in welcome, snapshot, live and leaderboard rows, profile; and
    ``bot: true`` for a bot (left out for a person, so that clients that know no bots read it as
    before)."""

    id: str
    name: str
    bot: bool | None = None

    @classmethod
    def of(cls, player_id: str, name: str, *, bot: bool) -> Player:
        """The player as the wire names it: ``bot`` only when it is one."""
        return cls(player_id, name, True if bot else None)


@_wire_value
@dataclass(frozen=True, slots=True)
class ServerInfo(_Value):
    """The ``server`` of a welcome: the software version and the node serving the connection."""

    version: str
    node: str


@_wire_value
@dataclass(frozen=True, slots=True)
class Foundations(_Value):
    """The top card of each foundation, or None while it is empty."""

    S: Card | None
    H: Card | None
    D: Card | None
    C: Card | None

    @classmethod
    def of(cls, layout: Layout) -> Foundations:
        """The tops of ``layout``'s foundations (the fields are in ``FOUNDATION_ORDER``)."""
        spades, hearts, diamonds, clubs = layout.foundations
        tops = _FOUNDATION_TOPS
        return cls(tops[0][spades], tops[1][hearts], tops[2][diamonds], tops[3][clubs])


#: ``_FOUNDATION_TOPS[i][height]``: the top card of foundation ``FOUNDATION_ORDER[i]`` at that height.
_FOUNDATION_TOPS: Final = tuple((None, *(Card(rank, suit) for rank in Rank)) for suit in FOUNDATION_ORDER)


@_wire_value
@dataclass(frozen=True, slots=True)
class LiveGame(_Value):
    """One entry of a ``live`` page; ``sealed`` (True, else left out) for a game of a shared deal
    whose moves are sealed to the asker: ``watch`` refuses it (docs/fair-play.md)."""

    game: str
    player: Player
    code: str
    moves: int
    score: int
    watchers: int
    started_at: dt.datetime
    sealed: bool | None = None


@_wire_value
@dataclass(frozen=True, slots=True)
class GameRow(_Value):
    """A row of the ``deal``, ``variant`` and ``daily`` boards: a player's best finished game there."""

    rank: int
    player: Player
    game: str
    code: str
    cells: int
    won: bool
    moves: int
    duration_ms: int
    score: int
    finished_at: dt.datetime


def _win_rate(won: int, played: int) -> float:
    return won / played if played else 0.0


@_wire_value
@dataclass(frozen=True, slots=True)
class PlayerRow(_Value):
    """A row of the ``players`` board: finished games ``played`` and ``won``, ``win_rate`` = won / played
    (0 when none), and the best score of a game."""

    rank: int
    player: Player
    played: int
    won: int
    win_rate: float = field(init=False)
    best_score: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "win_rate", _win_rate(self.won, self.played))


@_wire_value
@dataclass(frozen=True, slots=True)
class RatingRow(_Value):
    """A row of the ``rating`` board: a player's race ``rating`` in the variant (the shown ordinal,
    protocol/README.md section 5) and the rated ``races`` behind it."""

    rank: int
    player: Player
    rating: int
    races: int


@_wire_value
@dataclass(frozen=True, slots=True)
class ProfileRating(_Value):
    """A player's race rating in one variant, as a ``profile`` lists it."""

    cells: int
    rating: int
    races: int


@_wire_value
@dataclass(frozen=True, slots=True)
class ProfileGame(_Value):
    """A finished game as a ``profile`` lists it (its ``best`` and ``recent`` games)."""

    game: str
    code: str
    cells: int
    won: bool
    score: int
    moves: int
    duration_ms: int
    finished_at: dt.datetime


@_wire_value
@dataclass(frozen=True, slots=True)
class Streak(_Value):
    """Consecutive UTC days with a won daily challenge: the run ending today or yesterday, the longest."""

    current: int
    best: int


# --------------------------------------------------------------------------- the messages
# Optional fields come last (``request_id`` too, as in requests); on the wire ``id`` comes first.


@_wire_value
@dataclass(frozen=True, slots=True)
class Welcome(_Value):
    """The reply to ``hello``; ``token`` only when a new guest player was made (the one time it is sent);
    ``next_cursor`` when the player has more unfinished games than listed (``games`` pages them)."""

    TYPE: ClassVar[str] = "welcome"
    player: Player
    server: ServerInfo
    games: tuple[str, ...]
    token: str | None = None
    next_cursor: str | None = None
    request_id: RequestId | None = None


@_wire_value
@dataclass(frozen=True, slots=True)
class Snapshot(_Value):
    """The whole state of a game: the reply to new_game, resume and watch."""

    TYPE: ClassVar[str] = "snapshot"
    game: str
    v: int
    code: str
    player: Player
    tableau: tuple[tuple[Card, ...], ...]
    cells: tuple[Card | None, ...]
    foundations: Foundations
    score: int
    moves: int
    status: Status
    started_at: dt.datetime
    request_id: RequestId | None = None

    @classmethod
    def of(
        cls,
        game_id: str,
        game: Game,
        *,
        player: Player,
        started_at: dt.datetime,
        request_id: RequestId | None = None,
    ) -> Snapshot:
        """The snapshot of ``game`` as it stands (its table is immutable: nothing is copied)."""
        layout = game.layout()
        return cls(
            request_id=request_id,
            game=game_id,
            v=game.v,
            code=game.deal.code(),
            player=player,
            tableau=layout.columns,
            cells=layout.cells,
            foundations=Foundations.of(layout),
            score=game.score,
            moves=game.moves,
            status=game.status,
            started_at=started_at,
        )


@_wire_value
@dataclass(frozen=True, slots=True)
class Diff(_Value):
    """What spectators and the player's other connections get after an action; never an ``id``."""

    TYPE: ClassVar[str] = "diff"
    game: str
    v: int
    ops: tuple[Transfer]  # one action, one op
    score: int
    moves: int
    status: Status

    @classmethod
    def of(cls, game_id: str, game: Game, transfer: Transfer) -> Diff:
        """The diff of the action that made ``transfer`` (``game`` after it)."""
        return cls(game_id, game.v, (transfer,), game.score, game.moves, game.status)


@_wire_value
@dataclass(frozen=True, slots=True)
class Ack(_Value):
    """The diff of an action as the reply to the request that made it."""

    TYPE: ClassVar[str] = "ack"
    game: str
    v: int
    ops: tuple[Transfer]  # one action, one op
    score: int
    moves: int
    status: Status
    request_id: RequestId | None = None

    @classmethod
    def of(cls, game_id: str, game: Game, transfer: Transfer, request_id: RequestId | None) -> Ack:
        """The ack of the action that made ``transfer`` (``game`` after it)."""
        return cls(game_id, game.v, (transfer,), game.score, game.moves, game.status, request_id)


@_wire_value
@dataclass(frozen=True, slots=True)
class GameOver(_Value):
    """Sent after the winning action's ack/diff, and as the reply to ``resign``."""

    TYPE: ClassVar[str] = "game_over"
    game: str
    won: bool
    score: int
    moves: int
    duration_ms: int
    request_id: RequestId | None = None


@_wire_value
@dataclass(frozen=True, slots=True)
class ReplayStep(_Value):
    """One action of a replay: its op (as in a ``diff``), the game's figures after it, and when the
    server accepted it: milliseconds after the game's ``started_at`` (None, left out: not known, an
    action stored before the server kept times)."""

    ops: tuple[Transfer]  # one action, one op
    score: int
    moves: int
    elapsed_ms: int | None = None


@_wire_value
@dataclass(frozen=True, slots=True)
class Replay(_Value):
    """The reply to ``replay``: a game from its deal (``tableau``, ``cells``, ``foundations`` at v 0)
    and the ``steps`` that make versions ``since`` + 1, + 2 … (a page); ``v`` is the game's version
    now, so a client asks for the next page while ``since`` + len(``steps``) < ``v``. A client that
    knows no rules steps back by applying the ops from the deal again."""

    TYPE: ClassVar[str] = "replay"
    game: str
    code: str
    player: Player
    started_at: dt.datetime
    status: Status
    v: int
    tableau: tuple[tuple[Card, ...], ...]
    cells: tuple[Card | None, ...]
    foundations: Foundations
    since: int
    steps: tuple[ReplayStep, ...]
    duration_ms: int | None = None
    request_id: RequestId | None = None


@_wire_value
@dataclass(frozen=True, slots=True)
class Ok(_Value):
    """The reply to requests with nothing to say (``unwatch``)."""

    TYPE: ClassVar[str] = "ok"
    request_id: RequestId | None = None


class Verdict(enum.StrEnum):
    """What the solver found from a position."""

    WIN = "win"
    LOST = "lost"
    UNKNOWN = "unknown"


@_wire_value
@dataclass(frozen=True, slots=True)
class Hint(_Value):
    """The reply to ``hint``: the verdict from the game at ``v`` and, with ``win`` only, the next
    ``action`` of a winning line."""

    TYPE: ClassVar[str] = "hint"
    game: str
    v: int
    verdict: Verdict
    action: Move | None = None
    request_id: RequestId | None = None


@_wire_value
@dataclass(frozen=True, slots=True)
class LivePage(_Value):
    """A page of games being played; ``next_cursor`` when there are more (sent back as ``after``)."""

    TYPE: ClassVar[str] = "live"
    games: tuple[LiveGame, ...]
    next_cursor: str | None = None
    request_id: RequestId | None = None


@_wire_value
@dataclass(frozen=True, slots=True)
class GamesPage(_Value):
    """A page of the player's unfinished games, most recent first; ``next_cursor`` when there are more."""

    TYPE: ClassVar[str] = "games"
    games: tuple[str, ...]
    next_cursor: str | None = None
    request_id: RequestId | None = None


@_wire_value
@dataclass(frozen=True, slots=True)
class LeaderboardPage(_Value):
    """A page of a leaderboard: game rows, player rows or rating rows, never two kinds."""

    TYPE: ClassVar[str] = "leaderboard"
    rows: tuple[GameRow | PlayerRow | RatingRow, ...]
    next_cursor: str | None = None
    request_id: RequestId | None = None


@_wire_value
@dataclass(frozen=True, slots=True)
class Profile(_Value):
    """The reply to ``profile``: a player's totals, best won game per variant, daily streak, recent
    games, and race ratings (one per variant raced rated: C8, C4, C2)."""

    TYPE: ClassVar[str] = "profile"
    player: Player
    played: int
    won: int
    win_rate: float = field(init=False)
    best_score: int
    best: tuple[ProfileGame, ...]
    streak: Streak
    recent: tuple[ProfileGame, ...]
    ratings: tuple[ProfileRating, ...] = ()
    request_id: RequestId | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "win_rate", _win_rate(self.won, self.played))


@_wire_value
@dataclass(frozen=True, slots=True)
class ErrorReply(_Value):
    """An ``error``: the request was refused and nothing changed; ``message`` is cut to 200 characters.
    A ``stale`` refusal carries the game's current ``v`` when the server knows it, so that a client
    that missed a change learns where the game is without a ``resume`` round trip."""

    TYPE: ClassVar[str] = "error"
    code: ErrorCode
    message: str
    request_id: RequestId | None = None
    v: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "code", ErrorCode(self.code))  # refuses a code that does not exist
        if len(self.message) > MAX_ERROR_MESSAGE:
            object.__setattr__(self, "message", self.message[: MAX_ERROR_MESSAGE - 1] + "…")

    @classmethod
    def of(cls, error: ProtocolError) -> ErrorReply:
        """The ``error`` to send back for a frame that did not decode or validate."""
        return cls(code=error.code, message=error.message, request_id=error.request_id)


@_wire_value
@dataclass(frozen=True, slots=True)
class RatingShift(_Value):
    """What a finished race did to a seat's shown rating in its variant (protocol/README.md, race)."""

    before: int
    after: int


@_wire_value
@dataclass(frozen=True, slots=True)
class RaceSeat(_Value):
    """One seat of a race's standings: who sits there and how far they are (protocol/README.md, race).

    ``status``: ``waiting`` (before the reveal), ``playing``, ``won``, ``resigned`` or ``left``;
    ``game`` is the seat's game from the reveal on (null before); ``time_ms`` is the time from the
    reveal to the seat's last action; ``place`` is set once the race is over (ties share one);
    ``rating``, once the race is over, for a seat whose player it rated (left out otherwise)."""

    seat: int
    player: Player
    ready: bool
    game: str | None
    status: str
    cards_home: int
    moves: int
    score: int
    time_ms: int
    place: int | None
    rating: RatingShift | None = None


@_wire_value
@dataclass(frozen=True, slots=True)
class RaceLink(_Value):
    """The rematch of a finished race: its id and invitation code (what ``race_join`` takes)."""

    race: str
    code: str


@_wire_value
@dataclass(frozen=True, slots=True)
class Race(_Value):
    """The whole state of a race (its snapshot): the reply to race_create, race_join and race_watch.

    ``deal`` (the game code every seat plays) is null until the reveal; ``starts_at`` is the end of
    the countdown (the reveal), ``ends_at`` the time limit's end; ``rematch``, once a player of the
    finished race asked one (`RaceLink`), left out before."""

    TYPE: ClassVar[str] = "race"
    race: str
    v: int
    code: str
    creator: str
    cells: int
    seats: int
    time_limit: int
    public: bool
    state: str
    starts_at: dt.datetime | None
    ends_at: dt.datetime | None
    deal: str | None
    rows: tuple[RaceSeat, ...]
    #: How late a spectator's boards come (`RaceBoard`), in milliseconds: the server's setting.
    board_delay_ms: int
    request_id: RequestId | None = None
    rematch: RaceLink | None = None


@_wire_value
@dataclass(frozen=True, slots=True)
class RaceDiff(_Value):
    """A change of a race, pushed to everyone who follows it: the race's fields as they are now,
    the seats whose row changed (``rows``) and the seats freed (``gone``); ``v`` is one more than
    the last race or race_diff the follower got; ``rematch`` as in `Race`."""

    TYPE: ClassVar[str] = "race_diff"
    race: str
    v: int
    creator: str
    state: str
    starts_at: dt.datetime | None
    ends_at: dt.datetime | None
    deal: str | None
    rows: tuple[RaceSeat, ...]
    gone: tuple[int, ...]
    rematch: RaceLink | None = None


@_wire_value
@dataclass(frozen=True, slots=True)
class RaceBoard(_Value):
    """A seat's board as it was ``board_delay`` seconds ago, pushed to a race's spectators who hold
    no seat; and every seat's final board to everyone when the race is over."""

    TYPE: ClassVar[str] = "race_board"
    race: str
    seat: int
    board: Snapshot


#: Any server → client message.
ServerMessage: TypeAlias = (
    Welcome
    | Snapshot
    | Ack
    | Diff
    | GameOver
    | Ok
    | Hint
    | LivePage
    | GamesPage
    | LeaderboardPage
    | Profile
    | Replay
    | Race
    | RaceDiff
    | RaceBoard
    | ErrorReply
)

#: Wire ``type`` → message class, in the order of protocol/README.md.
SERVER_MESSAGE_TYPES: Final[dict[str, type[ServerMessage]]] = {
    cls.TYPE: cls
    for cls in (
        Welcome,
        Snapshot,
        Ack,
        Diff,
        GameOver,
        Ok,
        Hint,
        LivePage,
        GamesPage,
        LeaderboardPage,
        Profile,
        Replay,
        Race,
        RaceDiff,
        RaceBoard,
        ErrorReply,
    )
}


def layout_fields(layout: Layout) -> dict[str, object]:
    """``tableau``, ``cells`` and ``foundations`` of a table, as a snapshot carries them."""
    return {
        "tableau": [_card_texts(column) for column in layout.columns],
        "cells": [None if card is None else card_text(card) for card in layout.cells],
        "foundations": Foundations.of(layout).to_wire(),
    }
