"""A stored game rebuilt through the engine: how a node loads an unfinished game, and how ``verify``
checks a finished one.

Blocking for a long log (up to `protocol.limits.MAX_GAME_ACTIONS`): call it off the event loop.
"""

from __future__ import annotations

from engine import Deal, EngineError, Game, Status, parse_action
from server.storage import StoredGame
from server.storage.unfinished import ABANDONED

__all__ = ["RESIGN", "UnreplayableAction", "replay_stored"]

#: The notation of a resignation in the action log: the row that puts resigning behind the fence.
RESIGN = "resign"

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
    game = Game(Deal.from_code(stored.code))
    for v, text in enumerate(stored.actions, start=1):
        try:
            if text == RESIGN and v == len(stored.actions):
                game.resign()  # the row that put resigning behind the (game, v) fence
            else:
                game.play(parse_action(text))
        except EngineError as exc:
            raise UnreplayableAction(v, text, exc) from exc
    if stored.status in _RESIGNED_OR_ABANDONED and game.status is Status.PLAYING:
        game.resign()  # games resigned before resigning was a row of the log have none; an
        # abandoned game (server.services.quotas) reads as resigned: the server gave up on it
    return game
