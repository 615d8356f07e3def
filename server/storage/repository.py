"""Every query the server makes, as functions on an `AsyncConnection` (SQLAlchemy Core, for speed).

None of these functions commits: the caller owns the unit of work (`Database.transaction()` for writes,
`Database.connection()` for reads) and decides when to commit. They take and return the frozen values of
`server.storage.records`, never ORM rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from sqlalchemy import Row, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from server.storage import leaderboards
from server.storage.records import GameResult, GameStart, PlayerRecord, RankedGame, StoredGame
from server.storage.tables import actions, games, players

_FINAL_STATUSES: Final = frozenset({"won", "resigned"})

# Statements built once: the server inserts actions on its hot path.
_INSERT_PLAYER: Final = insert(players)
_INSERT_GAME: Final = insert(games)
_INSERT_ACTIONS: Final = insert(actions)


def _player(row: Row[Any]) -> PlayerRecord:
    return PlayerRecord(id=row.id, name=row.name, token_hash=row.token_hash, created_at=row.created_at)


async def insert_player(conn: AsyncConnection, player: PlayerRecord) -> None:
    """Add a player.

    Raises:
        sqlalchemy.exc.IntegrityError: when the id or the token hash is already taken.
    """
    await conn.execute(
        _INSERT_PLAYER,
        {
            "id": player.id,
            "name": player.name,
            "token_hash": player.token_hash,
            "created_at": player.created_at,
        },
    )


async def get_player_by_token_hash(conn: AsyncConnection, token_hash: str) -> PlayerRecord | None:
    """The player whose token has this hex SHA-256, or None."""
    result = await conn.execute(select(players).where(players.c.token_hash == token_hash))
    row = result.first()
    return None if row is None else _player(row)


async def get_player(conn: AsyncConnection, player_id: str) -> PlayerRecord | None:
    """The player with this id, or None."""
    result = await conn.execute(select(players).where(players.c.id == player_id))
    row = result.first()
    return None if row is None else _player(row)


async def insert_game(conn: AsyncConnection, game: GameStart) -> None:
    """Add a game being played (status ``playing``, no action yet).

    Raises:
        sqlalchemy.exc.IntegrityError: when the id is taken or the player does not exist.
    """
    await conn.execute(
        _INSERT_GAME,
        {
            "id": game.id,
            "player_id": game.player_id,
            "code": game.code,
            "cells": game.cells,
            "daily_date": game.daily_date,
            "status": "playing",
            "started_at": game.started_at,
        },
    )


async def insert_actions(conn: AsyncConnection, rows: Sequence[tuple[str, int, str]]) -> None:
    """Append actions, possibly of many games, in one round trip (an executemany).

    Args:
        rows: ``(game_id, v, action)`` triples; ``v`` is the version the action produced (from 1) and
            ``action`` its engine notation, e.g. ``"t1-t4:3"``, ``"c2-fH"`` or ``"undo"``.

    Raises:
        sqlalchemy.exc.IntegrityError: when a ``(game_id, v)`` is already stored, i.e. another writer got
            there first (the fence), or a game does not exist. Nothing of the batch should be committed
            then: let the error roll the unit of work back (on PostgreSQL the transaction is aborted
            anyway).
    """
    if not rows:
        return
    await conn.execute(
        _INSERT_ACTIONS, [{"game_id": game_id, "v": v, "action": action} for game_id, v, action in rows]
    )


async def finish_game(conn: AsyncConnection, result: GameResult) -> bool:
    """Write a game's final figures, if it is still being played, and put it on the leaderboards.

    The leaderboard summaries (`leaderboards.record_finished_game`) change in the caller's transaction,
    with the game: a board never shows a game that is not stored, nor misses one that is.

    Returns:
        True when the game was updated; False when there is no such game or it has already ended (the
        caller lost a race to another writer and should reload the game).

    Raises:
        ValueError: when ``result.status`` is not a final status (``won`` or ``resigned``).
    """
    if result.status not in _FINAL_STATUSES:
        raise ValueError(f"finish_game status {result.status!r} is not one of {sorted(_FINAL_STATUSES)}")
    finished = (
        await conn.execute(
            update(games)
            .where(games.c.id == result.id, games.c.status == "playing")
            .values(
                status=result.status,
                score=result.score,
                moves=result.moves,
                undos=result.undos,
                finished_at=result.finished_at,
                duration_ms=result.duration_ms,
                won=result.won,
            )
            .returning(games.c.player_id, games.c.code, games.c.cells, games.c.daily_date, games.c.hinted)
        )
    ).first()
    if finished is None:
        return False
    if finished.hinted:
        return True  # a game played with hints ranks on no leaderboard
    await leaderboards.record_finished_game(
        conn,
        RankedGame(
            id=result.id,
            player_id=finished.player_id,
            code=finished.code,
            cells=finished.cells,
            daily_date=finished.daily_date,
            score=result.score,
            moves=result.moves,
            duration_ms=result.duration_ms,
            won=result.won,
            finished_at=result.finished_at,
        ),
    )
    return True


async def mark_hinted(conn: AsyncConnection, game_id: str) -> None:
    """Note that the player of ``game_id`` asked for a hint: the game will rank on no leaderboard."""
    await conn.execute(
        update(games).where(games.c.id == game_id, games.c.hinted.is_(False)).values(hinted=True)
    )


async def load_game(conn: AsyncConnection, game_id: str) -> StoredGame | None:
    """A game with its actions in version order, or None when there is no such game."""
    game = (await conn.execute(select(games).where(games.c.id == game_id))).first()
    if game is None:
        return None
    notations = await conn.scalars(
        select(actions.c.action).where(actions.c.game_id == game_id).order_by(actions.c.v)
    )
    return _stored_game(game, notations)


async def load_games_after(conn: AsyncConnection, after_id: str | None, limit: int) -> list[StoredGame]:
    """Up to ``limit`` games with their actions, in id order, after the game ``after_id`` (from the first
    when None): a keyset walk over every stored game, two queries per batch."""
    statement = select(games).order_by(games.c.id).limit(limit)
    if after_id is not None:
        statement = statement.where(games.c.id > after_id)
    rows = (await conn.execute(statement)).all()
    if not rows:
        return []
    logs: dict[str, list[str]] = {row.id: [] for row in rows}
    found = await conn.execute(
        select(actions.c.game_id, actions.c.action)
        .where(actions.c.game_id >= rows[0].id, actions.c.game_id <= rows[-1].id)
        .order_by(actions.c.game_id, actions.c.v)
    )
    for game_id, action in found:
        if game_id in logs:  # not a game inserted meanwhile
            logs[game_id].append(action)
    return [_stored_game(row, logs[row.id]) for row in rows]


def _stored_game(row: Row[Any], notations: Iterable[str]) -> StoredGame:
    """A row of ``games`` and its actions in version order."""
    return StoredGame(
        id=row.id,
        player_id=row.player_id,
        code=row.code,
        cells=row.cells,
        daily_date=row.daily_date,
        status=row.status,
        score=row.score,
        moves=row.moves,
        undos=row.undos,
        started_at=row.started_at,
        finished_at=row.finished_at,
        duration_ms=row.duration_ms,
        won=row.won,
        actions=tuple(notations),
    )


async def unfinished_game_ids(conn: AsyncConnection, player_id: str) -> list[str]:
    """The ids of a player's games still being played, oldest first."""
    ids = await conn.scalars(
        select(games.c.id)
        .where(games.c.player_id == player_id, games.c.status == "playing")
        .order_by(games.c.started_at, games.c.id)
    )
    return list(ids)


async def count_games(conn: AsyncConnection) -> int:
    """The number of games stored, whatever their status."""
    count = await conn.scalar(select(func.count()).select_from(games))
    return int(count or 0)
