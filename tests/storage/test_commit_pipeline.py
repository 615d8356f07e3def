"""The group-commit pipeline (`server.storage.committer.Committer`) with the backend of each database (SQLite:
action appends through the writer thread's own connection, other writes through the async engine;
PostgreSQL: everything through the async engine), on a real migrated database: writes grouped in few
commits, a conflict (the (game, v) fence, a finished game, a missing game, a game finished twice)
failing only its own write, database failures and bugs failing their batch and the pipeline going on,
callbacks called in batch order (one raising stops none of the others), and a stop that commits what
was queued before it and refuses what comes after."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import sqlite3
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from sqlalchemy import select

from server.metrics import Metrics
from server.storage import (
    ActionRecord,
    Database,
    GameFigures,
    GameResult,
    GameStart,
    PlayerRecord,
    StorageUnavailable,
    commit_backends,
    repository,
)
from server.storage.commit_backends import CommitBackend, SqlAlchemyBackend, SqliteBackend
from server.storage.committer import (
    AddGame,
    AddPlayer,
    AppendActions,
    ArrivalRate,
    Committer,
    Write,
    WriteConflict,
)
from server.storage.db import sqlite_file
from server.storage.tables import games

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
CODE = "EO1-C8-AAAAAFA"
GAMES = [f"game-{index}" for index in range(20)]


class RecordingBackend:
    """The real backend, counting the writes of each batch it is asked to commit; ``fail_next`` makes
    the next commit raise instead (a bug, or a failure the real database cannot be made to have)."""

    def __init__(self, inner: CommitBackend) -> None:
        self.inner = inner
        self.batches: list[int] = []
        self.fail_next: Exception | None = None
        self.closed = False

    def commit(self, writes: Sequence[Write]) -> None:
        self.batches.append(len(writes))
        if self.fail_next is not None:
            failure, self.fail_next = self.fail_next, None
            raise failure
        self.inner.commit(writes)

    def tidy(self) -> None:
        self.inner.tidy()

    def close(self) -> None:
        self.closed = True
        self.inner.close()


@pytest.fixture
async def seeded(database: Database) -> Database:
    """The database with one player and the games of ``GAMES``, being played."""
    async with database.transaction() as conn:
        await repository.insert_player(conn, PlayerRecord("player", "player", "0" * 64, NOW))
        for game in GAMES:
            await repository.insert_game(conn, GameStart(game, "player", CODE, 8, None, NOW))
    return database


@pytest.fixture
async def backend(seeded: Database, database_url: str) -> RecordingBackend:
    engine = SqlAlchemyBackend(seeded, asyncio.get_running_loop())
    path = sqlite_file(database_url)
    return RecordingBackend(engine if path is None else SqliteBackend(path, engine, synchronous="OFF"))


@pytest.fixture
async def committer(backend: RecordingBackend) -> AsyncIterator[Committer]:
    pipeline = Committer(backend, Metrics(), max_batch=1024)
    pipeline.start()
    yield pipeline
    await pipeline.stop()


def appended(game: str, v: int, action: str = "t1-c5") -> Write:
    return AppendActions([ActionRecord(game, v, action)])


async def stored_rows(database: Database) -> list[tuple[str, int, str]]:
    async with database.connection() as conn:
        stored = repository.STORED_ACTIONS
        rows = await conn.execute(select(stored).order_by(stored.c.game_id, stored.c.v))
        return [(row.game_id, row.v, row.action) for row in rows]


def finished(game: str) -> GameResult:
    return GameResult(game, "resigned", 0, 1, 0, NOW, 1000, won=False)


async def test_concurrent_writes_are_grouped_into_few_commits(
    committer: Committer, backend: RecordingBackend, seeded: Database
) -> None:
    await asyncio.gather(*(committer.stored(appended(game, v)) for v in (1, 2, 3) for game in GAMES))
    assert len(await stored_rows(seeded)) == 3 * len(GAMES)
    assert sum(backend.batches) == 3 * len(GAMES)
    assert len(backend.batches) < 3 * len(GAMES), "writes queued together must share commits"


async def test_a_batch_of_every_kind_of_write_commits_atomically(
    committer: Committer, backend: RecordingBackend, seeded: Database
) -> None:
    """A new player, a game of theirs, an action carrying the game's figures, and an action ending its game
    with the result, submitted together: one commit on either backend."""
    figures = GameFigures(score=7, moves=1, undos=0, at=NOW)
    new_player = PlayerRecord("newcomer", "newcomer", "1" * 64, NOW)
    await asyncio.gather(
        committer.stored(AddPlayer(new_player)),
        committer.stored(AddGame(GameStart("new", "newcomer", CODE, 8, None, NOW))),
        committer.stored(AppendActions([ActionRecord(GAMES[0], 1, "t1-c5", figures=figures)])),
        committer.stored(AppendActions([ActionRecord(GAMES[1], 1, "resign")], finished(GAMES[1]))),
    )
    assert backend.batches == [4]
    async with seeded.connection() as conn:
        rows = {row.id: row for row in await conn.execute(select(games))}
    assert rows["new"].status == "playing"
    assert (rows[GAMES[0]].score, rows[GAMES[0]].moves) == (7, 1)
    assert rows[GAMES[1]].status == "resigned"


@pytest.mark.parametrize("with_other_writes", [False, True], ids=["actions-only", "mixed"])
async def test_a_conflict_fails_only_its_own_write(
    committer: Committer, backend: RecordingBackend, seeded: Database, with_other_writes: bool
) -> None:
    """Refused writes tried: a version already stored (the fence), an action of a game that does not
    exist, an action of a finished game, finishing a finished game. On SQLite a batch of appends only
    takes the plain driver, a batch with a new game the async engine: both isolate the conflict."""
    await committer.stored(appended(GAMES[0], 1))
    await committer.stored(AppendActions([ActionRecord(GAMES[3], 1, "resign")], finished(GAMES[3])))
    writes = [
        appended(GAMES[1], 1),
        appended(GAMES[0], 1, "undo"),  # v 1 of GAMES[0] is stored
        AppendActions([ActionRecord(GAMES[2], 1, "t1-c5"), ActionRecord(GAMES[2], 2, "undo")]),
        appended("no-such-game", 1),
        appended(GAMES[3], 2),  # GAMES[3] is finished
        AppendActions((), finished(GAMES[3])),  # finished already
    ]
    if with_other_writes:
        writes.append(AddPlayer(PlayerRecord("newcomer", "newcomer", "1" * 64, NOW)))
    outcomes = await asyncio.gather(*(committer.stored(write) for write in writes), return_exceptions=True)
    assert outcomes[0] is None and outcomes[2] is None
    assert all(isinstance(outcome, WriteConflict) for outcome in outcomes[1:2] + outcomes[3:6]), outcomes
    if with_other_writes:
        assert outcomes[6] is None
    assert await stored_rows(seeded) == [
        (GAMES[0], 1, "t1-c5"),
        (GAMES[1], 1, "t1-c5"),
        (GAMES[2], 1, "t1-c5"),
        (GAMES[2], 2, "undo"),
        (GAMES[3], 1, "resign"),
    ]


async def test_a_database_failure_stores_nothing_and_the_next_write_works(
    committer: Committer, seeded: Database, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database fails under the real backend: on SQLite the plain driver's append, on PostgreSQL the
    insert through the async engine."""
    failures = iter([1])
    real_append = commit_backends._append
    real_insert = repository.insert_actions

    def append_failing_once(*args: Any) -> None:
        for _ in failures:
            raise sqlite3.OperationalError("disk I/O error")
        real_append(*args)

    async def insert_failing_once(*args: Any) -> None:
        for _ in failures:
            raise OSError("connection lost")
        await real_insert(*args)

    if sqlite_file(database_url) is not None:
        monkeypatch.setattr(commit_backends, "_append", append_failing_once)
    else:
        monkeypatch.setattr(repository, "insert_actions", insert_failing_once)
    with pytest.raises(StorageUnavailable):
        await committer.stored(appended(GAMES[0], 1))
    assert await stored_rows(seeded) == []
    await committer.stored(appended(GAMES[0], 1))  # the thread is alive (and reconnected)
    assert await stored_rows(seeded) == [(GAMES[0], 1, "t1-c5")]


async def test_a_bug_in_a_commit_answers_unavailable_and_the_pipeline_goes_on(
    committer: Committer, backend: RecordingBackend, seeded: Database
) -> None:
    backend.fail_next = ZeroDivisionError("a bug")
    with pytest.raises(StorageUnavailable, match="retry"):
        await committer.stored(appended(GAMES[0], 1))
    await committer.stored(appended(GAMES[0], 1))
    assert await stored_rows(seeded) == [(GAMES[0], 1, "t1-c5")]


async def test_stop_commits_what_was_queued_then_refuses_writes(
    backend: RecordingBackend, seeded: Database
) -> None:
    pipeline = Committer(backend, Metrics())
    pipeline.start()
    queued = [pipeline.stored(appended(game, 1)) for game in GAMES]
    await pipeline.stop()
    await asyncio.gather(*queued)
    assert len(await stored_rows(seeded)) == len(GAMES)
    assert backend.closed
    with pytest.raises(StorageUnavailable, match="stopping"):
        await pipeline.stored(appended(GAMES[0], 2))


async def test_a_cancelled_waiter_does_not_stop_the_others(committer: Committer, seeded: Database) -> None:
    """A request whose connection closed stops waiting; its write is still committed (it was queued),
    and the rest of its batch is answered."""
    cancelled = committer.stored(appended(GAMES[0], 1))
    others = [committer.stored(appended(game, 1)) for game in GAMES[1:]]
    cancelled.cancel()
    await asyncio.gather(*others)
    assert len(await stored_rows(seeded)) == len(GAMES)


async def test_batches_hold_at_most_max_batch_writes(backend: RecordingBackend, seeded: Database) -> None:
    """Writes handed over together beyond ``max_batch`` are carried over to the next commits."""
    pipeline = Committer(backend, Metrics(), max_batch=8)
    pipeline.start()
    try:
        await asyncio.gather(*(pipeline.stored(appended(game, v)) for v in (1, 2) for game in GAMES))
    finally:
        await pipeline.stop()
    assert len(await stored_rows(seeded)) == 2 * len(GAMES)
    assert sum(backend.batches) == 2 * len(GAMES)
    assert max(backend.batches) == 8


async def test_callbacks_come_in_batch_order_and_one_raising_does_not_stop_the_others(
    committer: Committer, backend: RecordingBackend, seeded: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """``submit``'s callbacks are called on the event loop, once each, in submission order, after the
    commit, never from ``submit`` itself; a callback that raises is logged and the rest of its batch is
    answered all the same (a conflict included)."""
    loop_thread = asyncio.get_running_loop()
    outcomes: list[tuple[int, type[Exception] | None]] = []
    answered = asyncio.Event()
    writes = [appended(game, 1) for game in GAMES[:6]] + [appended(GAMES[0], 1, "undo")]  # the last: conflict

    def done(index: int, error: Exception | None) -> None:
        assert asyncio.get_running_loop() is loop_thread
        outcomes.append((index, None if error is None else type(error)))
        if index == 2:
            raise ZeroDivisionError("a bug in one callback")
        if len(outcomes) == len(writes):
            answered.set()

    for index, write in enumerate(writes):
        committer.submit(write, functools.partial(done, index))
    assert outcomes == [], "never called back from submit"
    await answered.wait()
    assert outcomes == [(index, None) for index in range(6)] + [(6, WriteConflict)]
    assert "callback" in caplog.text and "ZeroDivisionError" in caplog.text
    assert len(await stored_rows(seeded)) == 6
    await committer.stored(appended(GAMES[1], 2))  # the pipeline goes on


async def test_submit_refuses_at_once_when_stopping(backend: RecordingBackend) -> None:
    pipeline = Committer(backend, Metrics())
    pipeline.start()
    await pipeline.stop()
    called: list[Exception | None] = []
    with pytest.raises(StorageUnavailable, match="stopping"):
        pipeline.submit(appended(GAMES[0], 1), called.append)
    assert called == [], "refused at once, never called back"


class CountingBackend:
    """Commits nothing, at once: the batches the writer forms, with no flush to hide them."""

    def __init__(self) -> None:
        self.batches: list[int] = []

    def commit(self, writes: Sequence[Write]) -> None:
        self.batches.append(len(writes))

    def tidy(self) -> None:
        pass

    def close(self) -> None:
        pass


async def test_a_linger_gathers_writes_that_keep_coming_into_fewer_commits() -> None:
    """Writes paced at 500 a second (the shape of equal load below saturation) each commit alone
    without a linger, since every commit is over before the next write comes; with a linger of 20 ms
    the writer waits for the writes it can expect (pacing here is the behaviour under test)."""
    backend = CountingBackend()
    metrics = Metrics()
    pipeline = Committer(backend, metrics, linger=0.02)
    pipeline.start()
    try:
        waits = []
        for v in range(1, 121):
            waits.append(pipeline.stored(appended("game-0", v)))
            await asyncio.sleep(0.002)
        await asyncio.gather(*waits)
    finally:
        await pipeline.stop()
    assert sum(backend.batches) == 120
    assert len(backend.batches) <= 40, f"{len(backend.batches)} commits for 120 paced writes"
    assert metrics.commit_lingers._value.get() >= 1


async def test_a_lone_write_does_not_wait_for_writes_that_are_not_coming() -> None:
    """Writes 0.3 s apart (a lone player) give no reason to expect another within the linger: each
    commits at once, alone, and no commit lingered."""
    backend = CountingBackend()
    metrics = Metrics()
    pipeline = Committer(backend, metrics, linger=0.05)
    pipeline.start()
    try:
        for v in (1, 2, 3):
            await pipeline.stored(appended("game-0", v))
            await asyncio.sleep(0.3)
    finally:
        await pipeline.stop()
    assert backend.batches == [1, 1, 1]
    assert metrics.commit_lingers._value.get() == 0


def test_the_arrival_rate_follows_the_load_and_forgets_a_pause() -> None:
    rate = ArrivalRate(window=0.2)
    for tick in range(100):  # 10 writes every 10 ms: 1,000 a second
        rate.add(10, 100.0 + tick * 0.01)
    assert 800 <= rate.per_second(101.0) <= 1100
    assert rate.per_second(102.0) == 0.0, "a second of silence: no writes are expected"
