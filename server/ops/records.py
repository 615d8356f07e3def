"""Game records of stored games: what ``eightoff export`` writes (the format is protocol.records).

A stored game becomes a record by replaying it (``server.play.replay.replay_stored``): the record's actions
and figures are what the engine makes of the stored log, and a game that does not replay as stored
(``server.ops.verify.check_stored_game``) is refused rather than exported.
"""

from __future__ import annotations

from protocol import GameRecord, RecordResult
from server.ops.verify import check_stored_game
from server.play.replay import replay_stored
from server.storage import Database, StoredGame, repository

__all__ = ["ExportError", "load_record", "record_of"]


class ExportError(Exception):
    """The game cannot be exported: unknown, or not what its stored log replays to."""


def record_of(stored: StoredGame, player_name: str | None) -> GameRecord:
    """The record of ``stored`` (its log replayed: a resign row becomes the result, not an action).

    Raises:
        ExportError: the stored game does not replay as stored.
    """
    problem = check_stored_game(stored)
    if problem is not None:
        raise ExportError(f"game {stored.id} does not replay as stored ({problem}): run eightoff verify")
    game = replay_stored(stored)
    return GameRecord(
        deal=game.deal,
        actions=game.log,
        result=RecordResult("*" if stored.status == "playing" else stored.status),
        game=stored.id,
        player=player_name,
        player_id=stored.player_id,
        daily=stored.daily_date,
        started_at=stored.started_at,
        finished_at=stored.finished_at,
        duration_ms=stored.duration_ms,
        score=game.score,
        moves=game.moves,
        undos=game.undos,
    )


async def load_record(database: Database, game_id: str) -> GameRecord:
    """The record of the stored game ``game_id``, read as of one moment.

    Raises:
        ExportError: no game has that id, or it does not replay as stored.
    """
    async with database.snapshot() as conn:
        stored = await repository.load_game(conn, game_id)
        player = None if stored is None else await repository.get_player(conn, stored.player_id)
    if stored is None:
        raise ExportError(f"no game has the id {game_id!r}")
    return record_of(stored, player.name if player is not None else None)
