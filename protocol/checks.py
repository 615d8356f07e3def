"""The checker of server → client messages: what the server may send, written down as code.

The server does not call this on its hot path (its messages are built from its own state); the
protocol's tests run it on every type of ``protocol.SERVER_MESSAGE_TYPES`` (and check that it expects
the same fields as that table) and on the documented examples, and the server's integration
tests run it on every frame a real client receives. A message that breaks the protocol raises
``ProtocolError`` with code ``internal``: it is the sending side's fault.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Final, NoReturn, cast

from engine import Deal, InvalidCodeError
from protocol.errors import ErrorCode, ProtocolError
from protocol.limits import (
    CURSOR_PATTERN,
    CURSOR_RULE,
    ID_PATTERN,
    ID_RULE,
    INVITE_PATTERN,
    INVITE_RULE,
    MAX_INT,
    MAX_NAME_LENGTH,
    MAX_PROFILE_RECENT,
    MAX_REPLAY_STEPS,
    MAX_REQUEST_ID_LENGTH,
    RACE_SEATS,
    RACE_TIME_LIMIT,
    TOKEN_PATTERN,
    TOKEN_RULE,
)
from protocol.timestamps import parse_timestamp

__all__ = ["checked_fields", "validate_server_message"]

_Check = Callable[[object, str], None]

_CARD_RE = re.compile(r"[A2-9TJQK][SHDC]")
_PILE_RE = re.compile(r"t[1-8]|c[1-8]|f[SHDC]")
_RANKS = "A23456789TJQK"
_ERROR_CODES = frozenset(code.value for code in ErrorCode)


def _fail(path: str, why: str) -> NoReturn:
    raise ProtocolError(ErrorCode.INTERNAL, f"server message breaks the protocol at {path}: {why}")


def _integer(low: int = 0, high: int = MAX_INT) -> _Check:
    def check(value: object, path: str) -> None:
        if type(value) is not int or not low <= value <= high:
            _fail(path, f"expected an integer in {low}..{high}, got {value!r}")

    return check


def _text(pattern: re.Pattern[str], rule: str) -> _Check:
    def check(value: object, path: str) -> None:
        if type(value) is not str or pattern.fullmatch(value) is None:
            _fail(path, f"expected {rule}, got {value!r}")

    return check


def _string(low: int, high: int) -> _Check:
    def check(value: object, path: str) -> None:
        if type(value) is not str or not low <= len(value) <= high:
            _fail(path, f"expected a string of {low}..{high} characters, got {value!r}")

    return check


def _boolean(value: object, path: str) -> None:
    if type(value) is not bool:
        _fail(path, f"expected true or false, got {value!r}")


def _true(value: object, path: str) -> None:
    """A flag sent only when set (its field is left out otherwise)."""
    if value is not True:
        _fail(path, f"expected true (or the field left out), got {value!r}")


def _nullable(check: _Check) -> _Check:
    def nullable(value: object, path: str) -> None:
        if value is not None:
            check(value, path)

    return nullable


def _array(check: _Check, low: int = 0, high: int = 10_000) -> _Check:
    def array(value: object, path: str) -> None:
        if type(value) is not list or not low <= len(value) <= high:
            _fail(path, f"expected an array of {low}..{high} items, got {value!r}")
        for index, item in enumerate(value):
            check(item, f"{path}[{index}]")

    return array


def _fields_of(
    value: object, path: str, fields: Mapping[str, _Check], optional: frozenset[str]
) -> dict[str, object]:
    if type(value) is not dict:
        _fail(path, f"expected a map, got {value!r}")
    for key in value:
        if key not in fields:
            _fail(path, f"unexpected field {key!r}")
    for key, check in fields.items():
        if key in value:
            check(value[key], f"{path}.{key}")
        elif key not in optional:
            _fail(path, f"missing field {key!r}")
    return value


def _record(fields: Mapping[str, _Check], optional: frozenset[str] = frozenset()) -> _Check:
    def record(value: object, path: str) -> None:
        _fields_of(value, path, fields, optional)

    return record


def _request_id(value: object, path: str) -> None:
    if type(value) is int:
        if not 0 <= value <= MAX_INT:
            _fail(path, f"id out of range: {value!r}")
    elif type(value) is not str or len(value) > MAX_REQUEST_ID_LENGTH:
        _fail(path, f"expected an integer or a string of at most 64 characters, got {value!r}")


def _code(value: object, path: str) -> None:
    if type(value) is not str:
        _fail(path, f"expected a game code, got {value!r}")
    try:
        deal = Deal.from_code(value)
    except InvalidCodeError as exc:
        _fail(path, str(exc))
    if deal.code() != value:
        _fail(path, f"game code not in canonical form: {value!r}")


def _timestamp(value: object, path: str) -> None:
    if type(value) is not str:
        _fail(path, f"expected a timestamp, got {value!r}")
    try:
        parse_timestamp(value)
    except ValueError as exc:
        _fail(path, str(exc))


def _one_of(*choices: str) -> _Check:
    allowed = frozenset(choices)

    def check(value: object, path: str) -> None:
        if type(value) is not str or value not in allowed:
            _fail(path, f"expected one of {', '.join(choices)}, got {value!r}")

    return check


def _one_of_integers(*choices: int) -> _Check:
    def check(value: object, path: str) -> None:
        if type(value) is not int or value not in choices:
            _fail(path, f"expected one of {', '.join(map(str, choices))}, got {value!r}")

    return check


def _win_rate(value: object, path: str) -> None:
    if not (type(value) is int or type(value) is float) or math.isnan(value) or not 0 <= value <= 1:
        _fail(path, f"expected a number in 0..1, got {value!r}")


_count = _integer()
_game_id = _text(ID_PATTERN, ID_RULE)
_card = _text(_CARD_RE, "a card such as 'TD'")
_pile = _text(_PILE_RE, "a location t1..t8, c1..c8, fS fH fD fC")
_status = _one_of("playing", "won", "resigned")
_player = _record({"id": _game_id, "name": _string(1, MAX_NAME_LENGTH), "bot": _true}, frozenset({"bot"}))
_cursor = _text(CURSOR_PATTERN, CURSOR_RULE)


# --------------------------------------------------------------------------- semantic checks


def _card_index(text: str) -> tuple[int, str]:
    return _RANKS.index(text[0]) + 1, text[1]


def _check_snapshot(message: dict[str, object]) -> None:
    tableau = cast("list[list[str]]", message["tableau"])
    cells = cast("list[str | None]", message["cells"])
    foundations = cast("dict[str, str | None]", message["foundations"])
    code = cast(str, message["code"])
    if len(cells) != Deal.from_code(code).cells:
        _fail("snapshot.cells", f"{len(cells)} cells, but {code} has {Deal.from_code(code).cells}")
    seen = [card for column in tableau for card in column] + [card for card in cells if card is not None]
    for suit, top in foundations.items():
        if top is not None:
            rank, top_suit = _card_index(top)
            if top_suit != suit:
                _fail(f"snapshot.foundations.{suit}", f"{top} is not a {suit} card")
            seen.extend(f"{_RANKS[r - 1]}{suit}" for r in range(1, rank + 1))
    if len(seen) != 52 or len(set(seen)) != 52:
        _fail("snapshot", "the table does not hold each of the 52 cards exactly once")


def _check_op(op: dict[str, object], path: str) -> None:
    cards = cast("list[str]", op["cards"])
    source = cast(str, op["from"])
    target = cast(str, op["to"])
    if source == target:
        _fail(path, f"from and to are both {source}")
    if (source[0] != "t" or target[0] != "t") and len(cards) != 1:
        _fail(path, "only one card at a time leaves or enters a cell or a foundation")
    for end, location in (("to", target), ("from", source)):
        if location[0] == "f" and cards[0][1] != location[1]:
            _fail(f"{path}.{end}", f"{cards[0]} is not a {location[1]} card")
    if source[0] == "f":
        if "top" not in op:
            _fail(path, "an op from a foundation carries its new top")
        rank, suit = _card_index(cards[0])
        expected = None if rank == 1 else f"{_RANKS[rank - 2]}{suit}"
        if op["top"] != expected:
            _fail(f"{path}.top", f"expected {expected!r} under {cards[0]}, got {op['top']!r}")
    elif "top" in op:
        _fail(path, "only an op from a foundation carries a top")


_op = _record(
    {"cards": _array(_card, 1, 13), "from": _pile, "to": _pile, "top": _nullable(_card)},
    frozenset({"top"}),
)


def _ops(value: object, path: str) -> None:
    _array(_op, 1, 52)(value, path)
    for index, op in enumerate(cast(list[dict[str, object]], value)):
        _check_op(op, f"{path}[{index}]")


def _check_hint(message: dict[str, object]) -> None:
    if ("action" in message) != (message["verdict"] == "win"):
        _fail("hint.action", "an action comes with the verdict win, and only with it")


def _check_rows(message: dict[str, object]) -> None:
    rows = cast("list[dict[str, object]]", message["rows"])
    kinds = {_row_kind(row) for row in rows}
    if len(kinds) > 1:
        _fail("leaderboard.rows", "rows of two kinds (game, player, rating) mixed")
    previous = 0
    for index, row in enumerate(rows):
        path = f"leaderboard.rows[{index}]"
        kind = _row_kind(row)
        if kind == "player":
            _fields_of(row, path, _PLAYER_ROW, frozenset())
            _check_won_played(row, path)
        elif kind == "rating":
            _fields_of(row, path, _RATING_ROW, frozenset())
        else:
            _fields_of(row, path, _GAME_ROW, frozenset())
            _check_cells_of_code(row, path)
        rank = cast(int, row["rank"])
        if rank < previous:
            _fail(f"{path}.rank", f"rank {rank} after rank {previous}: rows come in rank order")
        previous = rank


def _row_kind(row: dict[str, object]) -> str:
    """Which board a row is of: its distinctive field says (``played``, ``races``, else a game)."""
    if "played" in row:
        return "player"
    return "rating" if "races" in row else "game"


def _check_won_played(figures: dict[str, object], path: str) -> None:
    if cast(int, figures["won"]) > cast(int, figures["played"]):
        _fail(path, "more wins than games played")


def _check_cells_of_code(game: dict[str, object], path: str) -> None:
    code = cast(str, game["code"])
    if Deal.from_code(code).cells != game["cells"]:
        _fail(f"{path}.cells", f"{game['cells']} cells, but {code} has {Deal.from_code(code).cells}")


def _check_profile(message: dict[str, object]) -> None:
    _check_won_played(message, "profile")
    for name in ("best", "recent"):
        for index, game in enumerate(cast("list[dict[str, object]]", message[name])):
            _check_cells_of_code(game, f"profile.{name}[{index}]")
    best = cast("list[dict[str, object]]", message["best"])
    if any(not game["won"] for game in best) or len({game["cells"] for game in best}) != len(best):
        _fail("profile.best", "at most one won game per variant")
    streak = cast("dict[str, int]", message["streak"])
    if streak["current"] > streak["best"]:
        _fail("profile.streak", "the current streak is longer than the best one")
    ratings = cast("list[dict[str, object]]", message["ratings"])
    if [rating["cells"] for rating in ratings] != [
        c for c in (8, 4, 2) if c in {r["cells"] for r in ratings}
    ]:
        _fail("profile.ratings", "at most one rating per variant, C8 first, then C4, then C2")


def _check_replay(message: dict[str, object]) -> None:
    _check_snapshot(message)  # the deal: as a snapshot's table, each card once
    steps = cast("list[object]", message["steps"])
    if cast(int, message["since"]) + len(steps) > cast(int, message["v"]):
        _fail("replay.steps", "steps past the game's version v")


def _any_row(value: object, path: str) -> None:
    if type(value) is not dict:
        _fail(path, f"expected a map, got {value!r}")


_cells = _one_of_integers(8, 4, 2)
_GAME_ROW: dict[str, _Check] = {
    "rank": _integer(1),
    "player": _player,
    "game": _game_id,
    "code": _code,
    "cells": _cells,
    "won": _boolean,
    "moves": _count,
    "duration_ms": _count,
    "score": _count,
    "finished_at": _timestamp,
}
_PLAYER_ROW: dict[str, _Check] = {
    "rank": _integer(1),
    "player": _player,
    "played": _count,
    "won": _count,
    "win_rate": _win_rate,
    "best_score": _count,
}
#: A shown rating (an ordinal: a newcomer's is 1000; in principle it may fall below 0).
_rating = _integer(-MAX_INT)
_RATING_ROW: dict[str, _Check] = {
    "rank": _integer(1),
    "player": _player,
    "rating": _rating,
    "races": _integer(1),
}
_PROFILE_RATING = _record({"cells": _cells, "rating": _rating, "races": _integer(1)})
_PROFILE_GAME = _record(
    {
        "game": _game_id,
        "code": _code,
        "cells": _cells,
        "won": _boolean,
        "score": _count,
        "moves": _count,
        "duration_ms": _count,
        "finished_at": _timestamp,
    }
)
_LIVE_GAME = _record(
    {
        "game": _game_id,
        "player": _player,
        "code": _code,
        "moves": _count,
        "score": _count,
        "watchers": _count,
        "started_at": _timestamp,
        "sealed": _true,  # present only when sealed to the asker
    },
    frozenset({"sealed"}),
)
_FOUNDATIONS = _record({suit: _nullable(_card) for suit in "SHDC"})

#: The body an ``ack`` and a ``diff`` share (an ack is a diff answering a request).
_CHANGE_FIELDS: Final[dict[str, _Check]] = {
    "game": _game_id,
    "v": _integer(1),
    "ops": _ops,
    "score": _count,
    "moves": _count,
    "status": _status,
}


_SNAPSHOT_FIELDS: Final[dict[str, _Check]] = {
    "game": _game_id,
    "v": _count,
    "code": _code,
    "player": _player,
    "tableau": _array(_array(_card, 0, 52), 8, 8),
    "cells": _array(_nullable(_card), 2, 8),
    "foundations": _FOUNDATIONS,
    "score": _count,
    "moves": _count,
    "status": _status,
    "started_at": _timestamp,
}
_RACE_STATE = _one_of("lobby", "countdown", "running", "finished", "cancelled")
_SEAT_NUMBER = _integer(1, RACE_SEATS[1])
_RACE_SEAT = _record(
    {
        "seat": _SEAT_NUMBER,
        "player": _player,
        "ready": _boolean,
        "game": _nullable(_game_id),
        "status": _one_of("waiting", "playing", "won", "resigned", "left"),
        "cards_home": _integer(0, 52),
        "moves": _count,
        "score": _count,
        "time_ms": _count,
        "place": _nullable(_integer(1, RACE_SEATS[1])),
        "rating": _record({"before": _rating, "after": _rating}),
    },
    frozenset({"rating"}),
)
#: The fields a ``race`` and a ``race_diff`` share (the race as it is now).
_RACE_NOW: Final[dict[str, _Check]] = {
    "race": _game_id,
    "v": _count,
    "creator": _game_id,
    "state": _RACE_STATE,
    "starts_at": _nullable(_timestamp),
    "ends_at": _nullable(_timestamp),
    "deal": _nullable(_code),
    "rows": _array(_RACE_SEAT, 0, RACE_SEATS[1]),
    #: The finished race's rematch, once asked (left out before).
    "rematch": _record({"race": _game_id, "code": _text(INVITE_PATTERN, INVITE_RULE)}),
}


def _check_race_board(message: dict[str, object]) -> None:
    board = cast("dict[str, object]", message["board"])
    if board.get("type") != "snapshot":
        _fail("race_board.board.type", f"expected 'snapshot', got {board.get('type')!r}")
    body = {key: value for key, value in board.items() if key != "type"}
    _fields_of(body, "race_board.board", _SNAPSHOT_FIELDS, frozenset())
    _check_snapshot(board)


#: type → (fields, optional fields, a check of the whole message or None). ``type`` and ``id`` aside.
_SCHEMAS: dict[str, tuple[dict[str, _Check], frozenset[str], Callable[[dict[str, object]], None] | None]] = {
    "welcome": (
        {
            "player": _player,
            "token": _text(TOKEN_PATTERN, TOKEN_RULE),
            "server": _record({"version": _string(1, 64), "node": _string(1, 64)}),
            "games": _array(_game_id, 0, 100),
            "next": _cursor,
        },
        frozenset({"token", "next"}),
        None,
    ),
    "snapshot": (_SNAPSHOT_FIELDS, frozenset(), _check_snapshot),
    "ack": (_CHANGE_FIELDS, frozenset(), None),
    "diff": (_CHANGE_FIELDS, frozenset(), None),
    "game_over": (
        {"game": _game_id, "won": _boolean, "score": _count, "moves": _count, "duration_ms": _count},
        frozenset(),
        None,
    ),
    "ok": ({}, frozenset(), None),
    "hint": (
        {
            "game": _game_id,
            "v": _count,
            "verdict": _one_of("win", "lost", "unknown"),
            "action": _record({"type": _one_of("move"), "from": _pile, "to": _pile, "n": _integer(1, 13)}),
        },
        frozenset({"action"}),
        _check_hint,
    ),
    "live": ({"games": _array(_LIVE_GAME, 0, 100), "next": _cursor}, frozenset({"next"}), None),
    "leaderboard": ({"rows": _array(_any_row, 0, 100), "next": _cursor}, frozenset({"next"}), _check_rows),
    "games": ({"games": _array(_game_id, 0, 100), "next": _cursor}, frozenset({"next"}), None),
    "profile": (
        {
            "player": _player,
            "played": _count,
            "won": _count,
            "win_rate": _win_rate,
            "best_score": _count,
            "best": _array(_PROFILE_GAME, 0, 3),
            "streak": _record({"current": _count, "best": _count}),
            "recent": _array(_PROFILE_GAME, 0, MAX_PROFILE_RECENT),
            "ratings": _array(_PROFILE_RATING, 0, 3),
        },
        frozenset(),
        _check_profile,
    ),
    "replay": (
        {
            "game": _game_id,
            "code": _code,
            "player": _player,
            "started_at": _timestamp,
            "status": _status,
            "v": _count,
            "tableau": _array(_array(_card, 0, 52), 8, 8),
            "cells": _array(_nullable(_card), 2, 8),
            "foundations": _FOUNDATIONS,
            "since": _count,
            "steps": _array(
                _record(
                    {"ops": _ops, "score": _count, "moves": _count, "elapsed_ms": _count},
                    frozenset({"elapsed_ms"}),
                ),
                0,
                MAX_REPLAY_STEPS,
            ),
            "duration_ms": _count,
        },
        frozenset({"duration_ms"}),
        _check_replay,
    ),
    "race": (
        {
            **_RACE_NOW,
            "code": _text(INVITE_PATTERN, INVITE_RULE),
            "cells": _one_of_integers(8, 4, 2),
            "seats": _integer(*RACE_SEATS),
            "time_limit": _integer(*RACE_TIME_LIMIT),
            "public": _boolean,
            "board_delay_ms": _count,
        },
        frozenset({"rematch"}),
        None,
    ),
    "race_diff": (
        {**_RACE_NOW, "gone": _array(_SEAT_NUMBER, 0, RACE_SEATS[1])},
        frozenset({"rematch"}),
        None,
    ),
    "race_board": (
        {"race": _game_id, "seat": _SEAT_NUMBER, "board": _any_row},
        frozenset(),
        _check_race_board,
    ),
    "error": (
        {"code": _one_of(*sorted(_ERROR_CODES)), "message": _string(0, 200), "v": _count},
        frozenset({"v"}),
        None,
    ),
}
#: Messages that are never a reply, so never carry an ``id``.
_PUSHED_ONLY = frozenset({"diff", "race_diff", "race_board"})


def checked_fields() -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """Every message type this checker knows → the (required, optional) fields it expects, ``type``
    aside (``id`` is optional in every reply): for the tests that hold it to ``SERVER_MESSAGE_TYPES``."""
    return {
        kind: (frozenset(fields) - optional, optional | (frozenset() if kind in _PUSHED_ONLY else {"id"}))
        for kind, (fields, optional, _) in _SCHEMAS.items()
    }


def validate_server_message(message: object) -> None:
    """Check that ``message`` is a server → client message of protocol v1, field by field.

    Beyond shapes it checks what a client relies on: a snapshot holds each card once and as many
    cells as its code says; an op moves one card unless it goes column to column, and an op from a
    foundation says the new top.

    Raises:
        ProtocolError: code ``internal``, naming the first offending field.
    """
    if type(message) is not dict:
        _fail("message", f"expected a map, got {type(message).__name__}")
    kind = message.get("type")
    schema = _SCHEMAS.get(kind) if type(kind) is str else None
    if schema is None:
        _fail("message.type", f"unknown server message type {kind!r}")
    fields, optional, whole = schema
    path = str(kind)
    if "id" in message:
        if kind in _PUSHED_ONLY:
            _fail(path, f"a {kind} is pushed, never a reply: it carries no id")
        _request_id(message["id"], f"{path}.id")
    body = {key: value for key, value in message.items() if key not in ("type", "id")}
    _fields_of(body, path, fields, optional)
    if whole is not None:
        whole(message)
