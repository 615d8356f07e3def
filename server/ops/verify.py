"""``eightoff verify``: every stored game replayed through the engine must end as stored, since only
games played on the server may count on the boards."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine import InvalidCodeError, Status
from server.play.replay import UnreplayableAction, replay_stored
from server.storage import Database, StoredGame, repository
from server.storage.unfinished import ABANDONED

__all__ = ["Mismatch", "check_stored_game", "verify_games"]


@dataclass(frozen=True, slots=True)
class Mismatch:
    """A stored game whose action log does not replay to its stored figures."""

    game_id: str
    problem: str


def check_stored_game(stored: StoredGame) -> str | None:
    """Replay a stored game as the server loads it (`server.play.replay.replay_stored`); None when it
    ends as stored, else what differs.

    Only games played on the server count on the boards: this is the check that every stored result
    is what its actions produce (`eightoff verify` runs it on every game). Every game's actions must
    replay from its deal; an unfinished game's figures (score, moves, undos) are not final, so only
    its status and cells are compared.
    """
    try:
        game = replay_stored(stored)
    except InvalidCodeError as exc:
        return f"code {stored.code!r} is not a game code: {exc}"
    except UnreplayableAction as exc:
        return str(exc)
    if stored.status == ABANDONED:  # its figures are never stored: nothing more to compare
        return None
    compared: list[tuple[str, object, object]] = [
        ("status", stored.status, game.status.value),
        ("cells", stored.cells, game.deal.cells),
    ]
    # An unfinished game's row holds its figures as of a recent action, not necessarily the last
    # (see `server.play.game_room.PROGRESS_INTERVAL`): only a finished game's figures are final.
    if stored.status != Status.PLAYING.value:
        compared += [
            ("won", stored.won, game.status is Status.WON),
            ("score", stored.score, game.score),
            ("moves", stored.moves, game.moves),
            ("undos", stored.undos, game.undos),
        ]
    differences = [
        f"{name} stored {stored_value!r}, replayed {replayed!r}"
        for name, stored_value, replayed in compared
        if stored_value != replayed
    ]
    if stored.status != Status.PLAYING.value and (stored.finished_at is None or stored.duration_ms is None):
        differences.append("finished without finished_at or duration_ms")
    return "; ".join(differences) or None


async def verify_games(
    database: Database,
    *,
    batch: int = 500,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[int, list[Mismatch]]:
    """Check every stored game (`check_stored_game`), in id order, ``batch`` games per read.

    Args:
        progress: called after each batch with (games checked, games stored when the check began).

    Returns:
        The number of games checked and the mismatches found.
    """
    async with database.connection() as conn:
        total = await repository.count_games(conn)
    checked = 0
    mismatches: list[Mismatch] = []
    after: str | None = None
    while True:
        async with database.snapshot() as conn:  # a game and its actions as of one moment
            stored_games = await repository.load_games_after(conn, after, batch)
        if not stored_games:
            break
        for stored in stored_games:
            problem = check_stored_game(stored)
            if problem is not None:
                mismatches.append(Mismatch(stored.id, problem))
        checked += len(stored_games)
        after = stored_games[-1].id
        if progress is not None:
            progress(checked, total)
    return checked, mismatches
