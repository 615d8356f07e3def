"""Builders of the server → client messages: plain dicts, ready for ``protocol.encode``.

The server calls these on every action, so they read the engine's state directly into lists and
dicts of strings and ints (card and pile texts come from precomputed tables) and validate nothing;
``protocol.validate_server_message`` checks their output in tests.

Diffs are exact: a client that knows no rules keeps an identical copy of the board by applying
each op (take ``cards`` off the top of ``from``, put them on ``to``). Because a snapshot shows only
the top card of each foundation, an op taking a card off a foundation also says the foundation's new
``top`` (a card, or null when it is empty again).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from engine import FOUNDATION_ORDER, Card, Foundation, Game, Layout, Move, Rank, Status, Suit, Transfer
from protocol.errors import ErrorCode, RequestId

__all__ = [
    "ack",
    "card_text",
    "diff",
    "error",
    "game_over",
    "game_row",
    "hint",
    "layout_fields",
    "leaderboard",
    "live",
    "live_game",
    "move_action",
    "ok",
    "ops",
    "player_info",
    "player_row",
    "profile",
    "profile_game",
    "snapshot",
    "welcome",
]

#: ``_CARD_TEXT[suit letter][rank]``: the text of every card, made once.
_CARD_TEXT: dict[str, tuple[str, ...]] = {
    suit.value: ("", *(f"{rank.symbol}{suit.value}" for rank in Rank)) for suit in Suit
}
#: ``_FOUNDATION_TOP[i][height]``: the top card text of foundation ``FOUNDATION_ORDER[i]``, or None.
_FOUNDATION_TOP: tuple[tuple[str | None, ...], ...] = tuple(
    (None, *_CARD_TEXT[suit.value][1:]) for suit in FOUNDATION_ORDER
)
_FOUNDATION_KEYS = tuple(suit.value for suit in FOUNDATION_ORDER)
_STATUS_TEXT = {status: status.value for status in Status}


def card_text(card: Card) -> str:
    """The wire text of a card (``"TD"``), from a table rather than formatting."""
    return _CARD_TEXT[card.suit._value_][card.rank]


def layout_fields(layout: Layout) -> dict[str, object]:
    """``tableau`` (8 lists, bottom card first), ``cells`` (card or None per usable cell) and
    ``foundations`` (``{S, H, D, C}``: top card or None) of a table, as a snapshot carries them."""
    texts = _CARD_TEXT
    return {
        "tableau": [[texts[card.suit._value_][card.rank] for card in column] for column in layout.columns],
        "cells": [None if card is None else texts[card.suit._value_][card.rank] for card in layout.cells],
        "foundations": {
            key: tops[height]
            for key, tops, height in zip(_FOUNDATION_KEYS, _FOUNDATION_TOP, layout.foundations, strict=True)
        },
    }


def move_action(move: Move) -> dict[str, object]:
    """A move as the client request that makes it, without ``id`` and ``game``:
    ``{"type": "move", "from": "t3", "to": "fH", "n": 1}`` (``n`` always written)."""
    return {"type": "move", "from": move.source.symbol(), "to": move.target.symbol(), "n": move.count}


def hint(
    game_id: str, v: int, verdict: str, action: Move | None, *, request_id: RequestId | None = None
) -> dict[str, object]:
    """The reply to ``hint``: the verdict from the game at ``v`` (``win``, ``lost`` or ``unknown``) and,
    with ``win``, the next ``action`` of a winning line."""
    message = _head("hint", request_id)
    message["game"] = game_id
    message["v"] = v
    message["verdict"] = verdict
    if action is not None:
        message["action"] = move_action(action)
    return message


def player_info(player_id: str, name: str) -> dict[str, object]:
    """The ``player`` object of welcome, snapshot, live and leaderboard rows: ``{id, name}``."""
    return {"id": player_id, "name": name}


def _head(kind: str, request_id: RequestId | None) -> dict[str, object]:
    return {"type": kind} if request_id is None else {"type": kind, "id": request_id}


def snapshot(
    game_id: str,
    game: Game,
    *,
    player: Mapping[str, object],
    started_at: str,
    request_id: RequestId | None = None,
) -> dict[str, object]:
    """The whole state of a game: the reply to new_game, resume and watch.

    Args:
        player: the owner, as ``player_info`` makes it.
        started_at: when the game was dealt, as ``format_timestamp`` writes it.
    """
    message = _head("snapshot", request_id)
    message["game"] = game_id
    message["v"] = game.v
    message["code"] = game.deal.code()
    message["player"] = player
    message.update(layout_fields(game.layout()))
    message["score"] = game.score
    message["moves"] = game.moves
    message["status"] = _STATUS_TEXT[game.status]
    message["started_at"] = started_at
    return message


def ops(transfer: Transfer) -> list[dict[str, object]]:
    """The ops of one applied action: ``[{cards, from, to}]``, plus ``top`` when ``from`` is a foundation."""
    texts = _CARD_TEXT
    cards = transfer.cards
    source = transfer.source
    op: dict[str, object] = {
        "cards": [texts[card.suit._value_][card.rank] for card in cards],
        "from": source.symbol(),
        "to": transfer.target.symbol(),
    }
    if type(source) is Foundation:
        # The card left the foundation's top, so the one under it (same suit, a rank lower) shows.
        taken = cards[0]
        op["top"] = texts[taken.suit._value_][taken.rank - 1] or None
    return [op]


def _change(message: dict[str, object], game_id: str, game: Game, transfer: Transfer) -> dict[str, object]:
    """Fill in the body that ``diff`` and ``ack`` share: the version, ops and figures after an action."""
    message["game"] = game_id
    message["v"] = game.v
    message["ops"] = ops(transfer)
    message["score"] = game.score
    message["moves"] = game.moves
    message["status"] = _STATUS_TEXT[game.status]
    return message


def diff(game_id: str, game: Game, transfer: Transfer) -> dict[str, object]:
    """What spectators and the player's other connections get after an action (``game`` after it)."""
    return _change({"type": "diff"}, game_id, game, transfer)


def ack(game_id: str, game: Game, transfer: Transfer, request_id: RequestId | None) -> dict[str, object]:
    """The diff of an action, as the reply to the request that made it (``game`` after it)."""
    return _change(_head("ack", request_id), game_id, game, transfer)


def game_over(
    game_id: str,
    *,
    won: bool,
    score: int,
    moves: int,
    duration_ms: int,
    request_id: RequestId | None = None,
) -> dict[str, object]:
    """Sent after the winning action's ack/diff, and as the reply to ``resign``.

    Takes the result rather than a ``Game`` so that a game rebuilt from storage needs no replay.
    """
    message = _head("game_over", request_id)
    message["game"] = game_id
    message["won"] = won
    message["score"] = score
    message["moves"] = moves
    message["duration_ms"] = duration_ms
    return message


def welcome(
    *,
    player: Mapping[str, object],
    server_version: str,
    node: str,
    games: Iterable[str],
    token: str | None = None,
    request_id: RequestId | None = None,
) -> dict[str, object]:
    """The reply to ``hello``; ``token`` only when a new guest player was made (the one time it is sent)."""
    message = _head("welcome", request_id)
    message["player"] = player
    if token is not None:
        message["token"] = token
    message["server"] = {"version": server_version, "node": node}
    message["games"] = list(games)
    return message


def ok(request_id: RequestId | None = None) -> dict[str, object]:
    """The reply to requests with nothing to say (``unwatch``)."""
    return _head("ok", request_id)


def live_game(
    game_id: str,
    *,
    player: Mapping[str, object],
    code: str,
    moves: int,
    score: int,
    watchers: int,
    started_at: str,
) -> dict[str, object]:
    """One entry of a ``live`` page."""
    return {
        "game": game_id,
        "player": player,
        "code": code,
        "moves": moves,
        "score": score,
        "watchers": watchers,
        "started_at": started_at,
    }


def live(
    games: Sequence[Mapping[str, object]],
    *,
    next_cursor: str | None = None,
    request_id: RequestId | None = None,
) -> dict[str, object]:
    """A page of games being played; ``next_cursor`` when there are more (send it back as ``after``)."""
    message = _head("live", request_id)
    message["games"] = list(games)
    if next_cursor is not None:
        message["next"] = next_cursor
    return message


def game_row(
    *,
    rank: int,
    player: Mapping[str, object],
    game_id: str,
    code: str,
    cells: int,
    won: bool,
    moves: int,
    duration_ms: int,
    score: int,
    finished_at: str,
) -> dict[str, object]:
    """A row of the ``deal``, ``variant`` and ``daily`` boards: a player's best finished game there."""
    return {
        "rank": rank,
        "player": player,
        "game": game_id,
        "code": code,
        "cells": cells,
        "won": won,
        "moves": moves,
        "duration_ms": duration_ms,
        "score": score,
        "finished_at": finished_at,
    }


def player_row(
    *,
    rank: int,
    player: Mapping[str, object],
    played: int,
    won: int,
    best_score: int,
) -> dict[str, object]:
    """A row of the ``players`` board: finished games ``played`` and ``won``, ``win_rate`` = won / played
    (0 when none), and the best score of a game."""
    return {
        "rank": rank,
        "player": player,
        "played": played,
        "won": won,
        "win_rate": won / played if played else 0.0,
        "best_score": best_score,
    }


def leaderboard(
    rows: Sequence[Mapping[str, object]],
    *,
    next_cursor: str | None = None,
    request_id: RequestId | None = None,
) -> dict[str, object]:
    """A page of a leaderboard (rows from ``game_row`` or ``player_row``)."""
    message = _head("leaderboard", request_id)
    message["rows"] = list(rows)
    if next_cursor is not None:
        message["next"] = next_cursor
    return message


def profile_game(
    game_id: str,
    *,
    code: str,
    cells: int,
    won: bool,
    score: int,
    moves: int,
    duration_ms: int,
    finished_at: str,
) -> dict[str, object]:
    """A finished game as a ``profile`` lists it (its ``best`` and ``recent`` games)."""
    return {
        "game": game_id,
        "code": code,
        "cells": cells,
        "won": won,
        "score": score,
        "moves": moves,
        "duration_ms": duration_ms,
        "finished_at": finished_at,
    }


def profile(
    *,
    player: Mapping[str, object],
    played: int,
    won: int,
    best_score: int,
    best: Sequence[Mapping[str, object]],
    streak_current: int,
    streak_best: int,
    recent: Sequence[Mapping[str, object]],
    request_id: RequestId | None = None,
) -> dict[str, object]:
    """The reply to ``profile``: a player's totals, best game per variant, daily streak, recent games.

    Args:
        best: ``profile_game`` entries, at most one per cell variant.
        recent: ``profile_game`` entries, newest first.
    """
    message = _head("profile", request_id)
    message["player"] = player
    message["played"] = played
    message["won"] = won
    message["win_rate"] = won / played if played else 0.0
    message["best_score"] = best_score
    message["best"] = list(best)
    message["streak"] = {"current": streak_current, "best": streak_best}
    message["recent"] = list(recent)
    return message


def error(code: ErrorCode | str, message: str, request_id: RequestId | None = None) -> dict[str, object]:
    """An ``error`` reply; ``message`` is cut to 200 characters so an echo of input stays small."""
    reply = _head("error", request_id)
    reply["code"] = ErrorCode(code).value
    reply["message"] = message if len(message) <= 200 else message[:199] + "…"
    return reply
