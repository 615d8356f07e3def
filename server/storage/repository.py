"""Every query the server makes, as functions on an `AsyncConnection` (SQLAlchemy Core, for speed).

None of these functions commits: the caller owns the unit of work (`Database.transaction()` for writes,
`Database.connection()` for reads) and decides when to commit. They take and return the frozen values of
`server.storage.records`, never ORM rows.
"""

from __future__ import annotations

import datetime as dt
import functools
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any, Final

from sqlalchemy import (
    BigInteger,
    Integer,
    Row,
    String,
    and_,
    bindparam,
    delete,
    exists,
    func,
    insert,
    or_,
    select,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from server.storage import leaderboards
from server.storage.records import (
    ActionRecord,
    DailyStanding,
    GameDaily,
    GameResult,
    GameStart,
    LiveGame,
    LiveRoomsChange,
    PlayerRecord,
    RankedGame,
    StoredGame,
)
from server.storage.tables import action_journal, actions, games, live_rooms, players

_FINAL_STATUSES: Final = frozenset({"won", "resigned"})

#: An action row as `insert_actions` takes it: ``(game_id, v, action, at_ms)`` (an `ActionRecord`'s
#: first four fields).
StoredAction = tuple[str, int, str, int | None]

# Statements built once: the server inserts actions on its hot path (the SQLite writer thread compiles
# the public ones for its plain driver: action appends, new players, new games and hinted marks).
INSERT_PLAYER: Final = insert(players)
INSERT_GAME: Final = insert(games)
MARK_HINTED: Final = (
    update(games).where(games.c.id == bindparam("h_game"), games.c.status == "playing").values(hinted=True)
)
#: A result for a game played with hints, which ranks on no leaderboard: the whole of `finish_game`
#: for it (the SQLite writer commits those itself; the values are `result_values`'s).
FINISH_HINTED: Final = update(games).where(
    games.c.id == bindparam("f_game"), games.c.status == "playing", games.c.hinted.is_(True)
)
INSERT_ACTIONS: Final = insert(actions)
#: The presence writer's statements (`set_live_rooms`; the SQLite writer commits them itself too).
DELETE_LIVE_ROOM: Final = delete(live_rooms).where(
    live_rooms.c.holder == bindparam("l_holder"), live_rooms.c.game_id == bindparam("l_game")
)
INSERT_LIVE_ROOM: Final = insert(live_rooms)
_UNNESTED: Final = (
    func.unnest(
        bindparam("game_ids", type_=ARRAY(String)),
        bindparam("versions", type_=ARRAY(Integer)),
        bindparam("notations", type_=ARRAY(String)),
        bindparam("times", type_=ARRAY(BigInteger)),
    )
    .table_valued("game_id", "v", "action", "at_ms")
    .render_derived(name="unnested")
)
#: `INSERT_ACTIONS` on PostgreSQL: the rows as four arrays, one statement for the whole batch. An
#: executemany through asyncpg binds and runs the statement once per row, each time an executor start-up
#: and the row's protocol messages in the backend (docs/benchmarks.md: its CPU per action). The fence
#: and the finished-game trigger still apply to every row: a duplicate (game_id, v) fails the statement.
INSERT_ACTIONS_UNNEST: Final = insert(actions).from_select(
    ["game_id", "v", "action", "at_ms"],
    select(_UNNESTED.c.game_id, _UNNESTED.c.v, _UNNESTED.c.action, _UNNESTED.c.at_ms),
)
#: Every stored action: on SQLite, those of the journal not yet moved into ``actions`` too. One
#: statement reads both tables in one snapshot, so a compaction between two reads loses or doubles none.
STORED_ACTIONS: Final = union_all(
    select(actions.c.game_id, actions.c.v, actions.c.action, actions.c.at_ms),
    select(action_journal.c.game_id, action_journal.c.v, action_journal.c.action, action_journal.c.at_ms),
).subquery("stored_actions")
#: Games (and rows) per statement of SQLite's fence and journal: at most 192 parameters each, and
#: at most 64 shapes of each, prepared once.
SQLITE_ROWS_PER_STATEMENT: Final = 64
#: SQLite: the journal moved into ``actions`` in key order (a game's rows then share its pages), then
#: emptied, in one transaction that holds the write lock throughout (the compaction).
SQLITE_MOVE_JOURNAL: Final = (
    "INSERT INTO actions (game_id, v, action, at_ms) "
    "SELECT game_id, v, action, at_ms FROM action_journal ORDER BY game_id, v"
)
SQLITE_EMPTY_JOURNAL: Final = "DELETE FROM action_journal"
#: The same for a slice of the journal: its ``?`` oldest rows (the sequence has no gaps: a row's is
#: the largest one's plus one), the bound read again by the DELETE from the journal the INSERT left
#: as it was (one statement fewer: each one the driver steps is a wait for the GIL on a busy server).
SQLITE_MOVE_JOURNAL_SLICE: Final = (
    "INSERT INTO actions (game_id, v, action, at_ms) SELECT game_id, v, action, at_ms FROM action_journal "
    "WHERE seq < (SELECT min(seq) FROM action_journal) + ? ORDER BY game_id, v"
)
SQLITE_EMPTY_JOURNAL_SLICE: Final = (
    "DELETE FROM action_journal WHERE seq < (SELECT min(seq) FROM action_journal) + ?"
)
#: The journal's rows, from its sequence alone (no scan).
SQLITE_JOURNAL_ROWS: Final = "SELECT coalesce(max(seq) - min(seq) + 1, 0) FROM action_journal"
#: Why SQLite's fence refused a batch (`fence_spans`, `sqlite_fence_sql`), as every writer says it.
FENCE_REPEATED: Final = "the batch holds a version of a game twice"
FENCE_MISSED: Final = "a game of the batch has a version of its actions already, or ended, or is unknown"
RECORD_FIGURES: Final = (
    update(games)
    .where(games.c.id == bindparam("p_game"))
    .values(
        score=bindparam("p_score"),
        moves=bindparam("p_moves"),
        undos=bindparam("p_undos"),
        active_at=bindparam("p_at"),
    )
)


def _player(row: Row[Any]) -> PlayerRecord:
    return PlayerRecord(
        id=row.id, name=row.name, token_hash=row.token_hash, created_at=row.created_at, bot=row.bot
    )


async def insert_player(conn: AsyncConnection, player: PlayerRecord) -> None:
    """Add a player.

    Raises:
        sqlalchemy.exc.IntegrityError: when the id or the token hash is already taken.
    """
    await conn.execute(INSERT_PLAYER, player_values(player))


def player_values(player: PlayerRecord) -> dict[str, Any]:
    """The row of a new player, for `INSERT_PLAYER`."""
    return {
        "id": player.id,
        "name": player.name,
        "token_hash": player.token_hash,
        "created_at": player.created_at,
        "bot": player.bot,
    }


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
    await conn.execute(INSERT_GAME, game_values(game))


def game_values(game: GameStart) -> dict[str, Any]:
    """The row of a new game, for `INSERT_GAME`."""
    return {
        "id": game.id,
        "player_id": game.player_id,
        "code": game.code,
        "cells": game.cells,
        "daily_date": game.daily_date,
        "status": "playing",
        "started_at": game.started_at,
        "active_at": game.started_at,
        "race_id": game.race_id,
    }


async def insert_actions(conn: AsyncConnection, given: Sequence[StoredAction | tuple[str, int, str]]) -> None:
    """Append actions, possibly of many games, in one round trip (an executemany; on PostgreSQL one
    statement, `INSERT_ACTIONS_UNNEST`).

    Args:
        given: ``(game_id, v, action, at_ms)``, or without ``at_ms`` (unknown); ``v`` is the
            version the action produced (from 1), ``action`` its engine notation, e.g.
            ``"t1-t4:3"``, ``"c2-fH"`` or ``"undo"``, and
            ``at_ms`` when the server accepted it (milliseconds since the Unix epoch; None: unknown).

    On SQLite the rows go to the action journal, fenced by ``game_fences`` (`sqlite_fence_sql`), as
    the writer thread appends them.

    Raises:
        sqlalchemy.exc.IntegrityError: when a ``(game_id, v)`` is already stored, i.e. another writer got
            there first (the fence), or a game does not exist, or is no longer played. Nothing of the
            batch should be committed then: let the error roll the unit of work back (on PostgreSQL the
            transaction is aborted anyway).
    """
    if not given:
        return
    rows = [(row[0], row[1], row[2], row[3] if len(row) > 3 else None) for row in given]
    if conn.dialect.name == "sqlite":
        await _journal_actions(conn, rows)
        return
    if conn.dialect.name == "postgresql":
        game_ids, versions, notations, times = zip(*rows, strict=True)
        await conn.execute(
            INSERT_ACTIONS_UNNEST,
            {
                "game_ids": list(game_ids),
                "versions": list(versions),
                "notations": list(notations),
                "times": list(times),
            },
        )
        return
    await conn.execute(
        INSERT_ACTIONS,
        [{"game_id": game_id, "v": v, "action": action, "at_ms": at} for game_id, v, action, at in rows],
    )


@functools.cache
def sqlite_fence_sql(games: int) -> str:
    """SQLite's (game, v) fence for ``games`` games at once: each game's row of ``game_fences`` moved
    from a version below its first action's to its last action's (parameters: `fence_spans`). The
    count of rows changed says whether every game was there: a game at that version or later (another
    writer got there first), ended (no row) or unknown (none either) changes none."""
    values = ", ".join(["(?, ?, ?)"] * games)
    return (
        "UPDATE game_fences SET v = f.last FROM (SELECT column1 AS game_id, column2 AS first, "
        f"column3 AS last FROM (VALUES {values})) AS f "
        "WHERE game_fences.game_id = f.game_id AND game_fences.v < f.first"
    )


@functools.cache
def sqlite_journal_sql(rows: int) -> str:
    """The journal's INSERT of ``rows`` actions at once (``game_id``, ``v``, ``action``, ``at_ms`` each)."""
    return "INSERT INTO action_journal (game_id, v, action, at_ms) VALUES " + ", ".join(
        ["(?, ?, ?, ?)"] * rows
    )


def fence_spans(rows: Sequence[StoredAction] | Sequence[ActionRecord]) -> list[list[Any]] | None:
    """Each game of ``rows`` with its first and last version (``[game_id, first, last]``, the
    parameters of `sqlite_fence_sql`), or None when ``rows`` hold a version of a game twice (the fence
    sees spans only). A version below 1 needs no check here: no game's fence is below 0."""
    spans: dict[str, list[Any]] = {}
    for row in rows:
        game_id, v = row[0], row[1]
        span = spans.get(game_id)
        if span is None:
            spans[game_id] = [game_id, v, v]
        elif v < span[1]:
            span[1] = v
        elif v > span[2]:
            span[2] = v
    if len(spans) < len(rows) and len({(row[0], row[1]) for row in rows}) < len(rows):
        return None
    return list(spans.values())


def sqlite_journal_statements(
    rows: Sequence[StoredAction] | Sequence[ActionRecord],
) -> list[tuple[str, list[Any], int | None]] | None:
    """What appending ``rows`` on SQLite runs, in order: the fence statements, each with the count
    of rows it must change (else a game missed its fence: `FENCE_MISSED`), then the journal's
    INSERTs (None: any count), each of at most `SQLITE_ROWS_PER_STATEMENT` games or rows; None when
    ``rows`` hold a version of a game twice (`FENCE_REPEATED`). The writer thread's driver and the
    engine run the same statements."""
    spans = fence_spans(rows)
    if spans is None:
        return None
    step = SQLITE_ROWS_PER_STATEMENT
    statements: list[tuple[str, list[Any], int | None]] = []
    for start in range(0, len(spans), step):
        some = spans[start : start + step]
        statements.append(
            (sqlite_fence_sql(len(some)), [value for span in some for value in span], len(some))
        )
    for start in range(0, len(rows), step):
        chunk = rows[start : start + step]
        values = [value for row in chunk for value in (row[0], row[1], row[2], row[3])]
        statements.append((sqlite_journal_sql(len(chunk)), values, None))
    return statements


async def _journal_actions(conn: AsyncConnection, rows: Sequence[StoredAction]) -> None:
    """`insert_actions` on SQLite: the writer's statements (`sqlite_journal_statements`), through the
    engine."""
    statements = sqlite_journal_statements(rows)
    if statements is None:
        raise IntegrityError("fence", None, sqlite3.IntegrityError(FENCE_REPEATED))
    for sql, parameters, changes in statements:
        done = await conn.exec_driver_sql(sql, tuple(parameters))
        if changes is not None and done.rowcount != changes:
            raise IntegrityError("fence", None, sqlite3.IntegrityError(FENCE_MISSED))


async def append_actions(conn: AsyncConnection, records: Sequence[ActionRecord]) -> None:
    """Append actions, possibly of many games, and bring each game's row to the figures of its last
    action that carries them.

    Raises:
        sqlalchemy.exc.IntegrityError: a ``(game_id, v)`` is already stored (the fence), a game does not
            exist, or a game is no longer playing (refused by the database's trigger). Let it roll the unit
            of work back.
    """
    await insert_actions(conn, [record[:4] for record in records])
    await record_figures(conn, records)


async def record_figures(conn: AsyncConnection, records: Sequence[ActionRecord]) -> None:
    """Set each game's running figures and ``active_at`` from its last record in ``records`` that
    carries them."""
    last = {record.game_id: record.figures for record in records if record.figures is not None}
    if last:
        await conn.execute(
            RECORD_FIGURES,
            [
                {"p_game": game, "p_score": p.score, "p_moves": p.moves, "p_undos": p.undos, "p_at": p.at}
                for game, p in last.items()
            ],
        )


#: Whether the player of the game being updated is a bot (read in the same statement).
_PLAYER_IS_BOT: Final = (
    select(players.c.bot).where(players.c.id == games.c.player_id).scalar_subquery().label("bot")
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
    if not is_final(result.status):
        raise ValueError(f"finish_game status {result.status!r} is not one of {sorted(_FINAL_STATUSES)}")
    finished = (
        await conn.execute(
            update(games)
            .where(games.c.id == result.id, games.c.status == "playing")
            .values(result_values(result))
            .returning(
                games.c.player_id,
                games.c.code,
                games.c.cells,
                games.c.daily_date,
                games.c.hinted,
                _PLAYER_IS_BOT,
            )
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
            bot=bool(finished.bot),
        ),
    )
    return True


def result_values(result: GameResult) -> dict[str, Any]:
    """The final figures of a game, for its row (`finish_game`, `FINISH_HINTED`)."""
    return {
        "status": result.status,
        "score": result.score,
        "moves": result.moves,
        "undos": result.undos,
        "finished_at": result.finished_at,
        "duration_ms": result.duration_ms,
        "won": result.won,
    }


def is_final(status: str) -> bool:
    """Whether a game may end with ``status`` (`finish_game` refuses any other)."""
    return status in _FINAL_STATUSES


async def mark_hinted(conn: AsyncConnection, game_id: str) -> bool:
    """Note that the player of ``game_id`` asked for a hint: the game will rank on no leaderboard. Only
    while it is being played: False (nothing changed) once it is finished, when it may already rank."""
    marked = await conn.execute(MARK_HINTED, {"h_game": game_id})
    return marked.rowcount == 1


async def load_game(conn: AsyncConnection, game_id: str) -> StoredGame | None:
    """A game with its actions in version order, or None when there is no such game."""
    game = (await conn.execute(select(games).where(games.c.id == game_id))).first()
    if game is None:
        return None
    found = await conn.execute(
        select(STORED_ACTIONS.c.action, STORED_ACTIONS.c.at_ms)
        .where(STORED_ACTIONS.c.game_id == game_id)
        .order_by(STORED_ACTIONS.c.v)
    )
    return _stored_game(game, [(action, at_ms) for action, at_ms in found])


async def load_games_after(conn: AsyncConnection, after_id: str | None, limit: int) -> list[StoredGame]:
    """Up to ``limit`` games with their actions, in id order, after the game ``after_id`` (from the first
    when None): a keyset walk over every stored game, two queries per batch. Read it on
    `Database.snapshot` so that a game and its actions agree."""
    statement = select(games).order_by(games.c.id).limit(limit)
    if after_id is not None:
        statement = statement.where(games.c.id > after_id)
    rows = (await conn.execute(statement)).all()
    if not rows:
        return []
    logs: dict[str, list[tuple[str, int | None]]] = {row.id: [] for row in rows}
    found = await conn.execute(
        select(STORED_ACTIONS.c.game_id, STORED_ACTIONS.c.action, STORED_ACTIONS.c.at_ms)
        .where(STORED_ACTIONS.c.game_id >= rows[0].id, STORED_ACTIONS.c.game_id <= rows[-1].id)
        .order_by(STORED_ACTIONS.c.game_id, STORED_ACTIONS.c.v)
    )
    for game_id, action, at_ms in found:
        if game_id in logs:  # not a game inserted meanwhile
            logs[game_id].append((action, at_ms))
    return [_stored_game(row, logs[row.id]) for row in rows]


def _stored_game(row: Row[Any], log: Sequence[tuple[str, int | None]]) -> StoredGame:
    """A row of ``games`` and its actions, each with its time, in version order."""
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
        actions=tuple(action for action, _ in log),
        race_id=row.race_id,
        action_times=tuple(at_ms for _, at_ms in log),
        hinted=row.hinted,
    )


async def unfinished_game_ids(conn: AsyncConnection, player_id: str) -> list[str]:
    """The ids of a player's games still being played, oldest first."""
    ids = await conn.scalars(
        select(games.c.id)
        .where(games.c.player_id == player_id, games.c.status == "playing")
        .order_by(games.c.started_at, games.c.id)
    )
    return list(ids)


async def live_games(
    conn: AsyncConnection,
    *,
    active_since: dt.datetime,
    after: tuple[dt.datetime, str] | None,
    limit: int,
) -> list[LiveGame]:
    """Unfinished games active at or after ``active_since`` whose room some process holds (someone
    follows the game: ``live_rooms``), most recently active first, then by id descending; ``after`` (an
    ``(active_at, id)`` from the previous page) starts after that game. One walk of
    ``ix_games_status_active_at_id`` with a primary-key probe per game: the cost is the page's."""
    statement = (
        select(
            games.c.id,
            games.c.player_id,
            players.c.name,
            games.c.code,
            games.c.score,
            games.c.moves,
            games.c.started_at,
            games.c.active_at,
            games.c.cells,
            games.c.daily_date,
            players.c.bot,
            games.c.race_id,
        )
        .join(players, players.c.id == games.c.player_id)
        .where(games.c.status == "playing", games.c.active_at >= active_since)
        .where(exists().where(live_rooms.c.game_id == games.c.id))
        .order_by(games.c.active_at.desc(), games.c.id.desc())
        .limit(limit)
    )
    if after is not None:
        at, game_id = after
        statement = statement.where(
            or_(games.c.active_at < at, and_(games.c.active_at == at, games.c.id < game_id))
        )
    rows = (await conn.execute(statement)).all()
    return [
        LiveGame(
            id=row.id,
            player_id=row.player_id,
            player_name=row.name,
            code=row.code,
            score=row.score,
            moves=row.moves,
            started_at=row.started_at,
            active_at=row.active_at,
            cells=row.cells,
            daily_date=row.daily_date,
            player_bot=row.bot,
            race_id=row.race_id,
        )
        for row in rows
    ]


async def game_daily(conn: AsyncConnection, game_id: str) -> GameDaily | None:
    """The daily challenge ``game_id`` plays (its ``day`` None for a game of no daily); None when there
    is no such game. One read by primary key: asked before another player's game is shown
    (`server.services.sealing`)."""
    statement = select(
        games.c.player_id, games.c.daily_date, games.c.cells, games.c.code, games.c.race_id
    ).where(games.c.id == game_id)
    row = (await conn.execute(statement)).first()
    if row is None:
        return None
    return GameDaily(
        player_id=row.player_id, day=row.daily_date, cells=row.cells, code=row.code, race_id=row.race_id
    )


async def daily_standings(
    conn: AsyncConnection, player_id: str, days: Iterable[dt.date]
) -> list[DailyStanding]:
    """What ``player_id`` has played of the daily challenges of ``days``: one standing per day and
    variant with at least one game (an abandoned game counts as none). Reads only the player's games
    of those days, by ``ix_games_player_id_daily_date``."""
    wanted = sorted(set(days))
    if not wanted:
        return []
    statement = (
        select(games.c.daily_date, games.c.cells, games.c.status)
        .where(
            games.c.player_id == player_id,
            games.c.daily_date.in_(wanted),
            games.c.status.in_(("playing", *sorted(_FINAL_STATUSES))),
        )
        .group_by(games.c.daily_date, games.c.cells, games.c.status)
    )
    found: dict[tuple[dt.date, int], set[str]] = {}
    for row in (await conn.execute(statement)).all():
        found.setdefault((row.daily_date, row.cells), set()).add(row.status)
    return [
        DailyStanding(
            day=day, cells=cells, finished=bool(statuses & _FINAL_STATUSES), playing="playing" in statuses
        )
        for (day, cells), statuses in sorted(found.items())
    ]


async def count_games(conn: AsyncConnection) -> int:
    """The number of games stored, whatever their status."""
    count = await conn.scalar(select(func.count()).select_from(games))
    return int(count or 0)


async def set_live_rooms(conn: AsyncConnection, change: LiveRoomsChange) -> None:
    """Record that ``change.holder`` now holds the rooms of ``change.held`` and no longer those of
    ``change.released``. Portable: deletes, then plain inserts (`live_room_rows`)."""
    deleted, inserted = live_room_rows(change)
    if deleted:
        await conn.execute(DELETE_LIVE_ROOM, deleted)
    if inserted:
        await conn.execute(INSERT_LIVE_ROOM, inserted)


def live_room_rows(change: LiveRoomsChange) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The parameters of `DELETE_LIVE_ROOM` (every game the change names) and of `INSERT_LIVE_ROOM`
    (those held), in that order."""
    named = [*change.held, *change.released]
    return (
        [{"l_holder": change.holder, "l_game": game} for game in named],
        [{"game_id": game, "holder": change.holder} for game in change.held],
    )


async def clear_live_rooms(conn: AsyncConnection, holder: str) -> None:
    """``holder`` holds no room any more (its process stops)."""
    await conn.execute(delete(live_rooms).where(live_rooms.c.holder == holder))
