"""A stored game rebuilt through the engine: how a node loads an unfinished game, how ``verify``
checks a finished one, and what a ``replay`` request shows of it, step by step.

Blocking for a long log (up to `protocol.limits.MAX_GAME_ACTIONS`): call it off the event loop.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import protocol
from engine import Deal, EngineError, Game, Status, parse_action
from protocol.limits import MAX_REPLAY_STEPS
from server.clock import epoch_ms, from_epoch_ms
from server.storage import StoredGame
from server.storage.unfinished import ABANDONED

__all__ = ["RESIGN", "UnreplayableAction", "elapsed_times", "replay_page", "replay_stored", "replay_whole"]

#: The notation of a resignation in the action log: the row that puts resigning behind the fence.
RESIGN = "resign"

_MS = dt.timedelta(milliseconds=1)
_RESIGNED_OR_ABANDONED = frozenset({Status.RESIGNED.value, ABANDONED})


class UnreplayableAction(EngineError):
    """An action of a stored log (``v`` counts from 1) that does not replay where it stands."""

    def __init__(self, v: int, text: str, reason: EngineError) -> None:
        super().__init__(f"action v={v} {text!r} does not replay: {reason}")
        self.v = v


def replay_stored(stored: StoredGame) -> Game:
    """Rebuild a stored game through the engine, checking every action again; a ``resign`` row (the
    last one) resigns it.

    Raises:
        InvalidCodeError: the stored code is not a game code.
        UnreplayableAction: an action (a resign row included) is not legal where it stands.
    """
    return _replayed(stored, Game(Deal.from_code(stored.code)), None)


def replay_whole(stored: StoredGame, player: protocol.Player) -> protocol.Replay:
    """A stored game as one ``replay`` of all its steps (`replay_page` cuts the pages a client gets);
    a resignation is its status, not a step.

    Raises:
        InvalidCodeError, UnreplayableAction: as `replay_stored`.
    """
    game = Game(Deal.from_code(stored.code))
    deal = game.layout()
    steps: list[protocol.ReplayStep] = []
    _replayed(stored, game, steps)
    return protocol.Replay(
        game=stored.id,
        code=stored.code,
        player=player,
        started_at=stored.started_at,
        status=game.status,
        v=game.v,
        tableau=deal.columns,
        cells=deal.cells,
        foundations=protocol.Foundations.of(deal),
        since=0,
        steps=tuple(steps),
        duration_ms=stored.duration_ms if game.is_over() else None,
    )


def replay_page(whole: protocol.Replay, since: int, request_id: protocol.RequestId | None) -> protocol.Replay:
    """The page of `replay_whole` a client asked for: the steps after version ``since``, at most
    `MAX_REPLAY_STEPS`."""
    steps = whole.steps[since : since + MAX_REPLAY_STEPS]
    return dataclasses.replace(whole, since=since, steps=steps, request_id=request_id)


def elapsed_times(stored: StoredGame) -> tuple[int | None, ...]:
    """When each stored action was accepted, in milliseconds after the game's start, one per action;
    None where not known: no time stored, or one before the start (a clock stepped back, or another
    node's behind: `eightoff verify` reports it; no client is told a guess)."""
    started_at = stored.started_at
    start = epoch_ms(started_at)
    times = stored.action_times or (None,) * len(stored.actions)
    # rounded down from the exact start, as the game's duration_ms is: never past it (0 within the
    # start's own millisecond)
    return tuple(
        None if at_ms is None or at_ms < start else max(0, (from_epoch_ms(at_ms) - started_at) // _MS)
        for at_ms in times
    )


def _replayed(stored: StoredGame, game: Game, steps: list[protocol.ReplayStep] | None) -> Game:
    """``game`` (dealt from ``stored.code``) with the stored actions played; each action's step goes
    to ``steps`` when given, with its time."""
    elapsed = elapsed_times(stored) if steps is not None else ()
    for v, text in enumerate(stored.actions, start=1):
        try:
            if text == RESIGN and v == len(stored.actions):
                game.resign()  # the row that put resigning behind the (game, v) fence
            else:
                transfer = game.play(parse_action(text))
                if steps is not None:
                    steps.append(protocol.ReplayStep((transfer,), game.score, game.moves, elapsed[v - 1]))
        except EngineError as exc:
            raise UnreplayableAction(v, text, exc) from exc
    if stored.status in _RESIGNED_OR_ABANDONED and game.status is Status.PLAYING:
        game.resign()  # games resigned before resigning was a row of the log have none; an
        # abandoned game (server.services.quotas) reads as resigned: the server gave up on it
    return game
