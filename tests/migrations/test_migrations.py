"""The migrations: they run up and down and up again, and they agree with server.storage.tables."""

from __future__ import annotations

import asyncio
import importlib.util
import io
import itertools
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, insert, inspect, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from server.storage import (
    Database,
    current_revision,
    downgrade_to_base,
    head_revision,
    repository,
    upgrade_to_head,
)
from server.storage.db import _alembic_config, migrations_directory
from server.storage.tables import (
    Base,
    action_journal,
    actions,
    board_bests,
    game_fences,
    games,
    player_stats,
    players,
    rank_buckets,
)

TABLES = {"players", "games", "actions"}
FILE_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}-\d{4}_[a-z0-9_]+\.py$")


def run_on(url: str, work: Any) -> Any:
    """Run ``work(sync_connection)`` on a connection of its own, outside any test event loop."""

    async def main() -> Any:
        engine = create_async_engine(url, poolclass=NullPool)
        try:
            async with engine.connect() as conn:
                return await conn.run_sync(work)
        finally:
            await engine.dispose()

    return asyncio.run(main())


def table_names(connection: Connection) -> set[str]:
    return set(inspect(connection).get_table_names())


def schema_differences(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, Base.metadata))


def test_upgrade_downgrade_upgrade(empty_database_url: str) -> None:
    url = empty_database_url
    assert current_revision(url) is None

    upgrade_to_head(url)
    assert current_revision(url) == head_revision()
    assert run_on(url, table_names) >= TABLES

    downgrade_to_base(url)
    assert current_revision(url) is None
    assert run_on(url, table_names) <= {"alembic_version"}

    upgrade_to_head(url)
    assert current_revision(url) == head_revision()
    assert run_on(url, table_names) >= TABLES


def test_upgrade_to_head_twice_is_harmless(empty_database_url: str) -> None:
    upgrade_to_head(empty_database_url)
    upgrade_to_head(empty_database_url)
    assert current_revision(empty_database_url) == head_revision()


def test_models_and_migrations_agree(empty_database_url: str) -> None:
    upgrade_to_head(empty_database_url)
    assert run_on(empty_database_url, schema_differences) == []


def test_migrations_run_from_any_working_directory(
    empty_database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    upgrade_to_head(empty_database_url)
    assert current_revision(empty_database_url) == head_revision()


def test_current_revision_of_a_missing_sqlite_file_is_none(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "e.db"
    assert current_revision(f"sqlite+aiosqlite:///{path}") is None
    assert not path.parent.exists()


def test_one_head_and_a_linear_history() -> None:
    scripts = ScriptDirectory.from_config(_alembic_config())
    assert scripts.get_heads() == [head_revision()]
    revisions = list(scripts.walk_revisions())
    assert revisions[-1].down_revision is None
    for newer, older in itertools.pairwise(revisions):
        assert newer.down_revision == older.revision


def test_every_revision_s_message_is_one_line() -> None:
    """Alembic logs a revision's message (its docstring's first paragraph) as it runs it: a message
    of two lines puts a bare line on ``eightoff serve``'s stderr, whose failures are one line."""
    scripts = ScriptDirectory.from_config(_alembic_config())
    for revision in scripts.walk_revisions():
        assert revision.doc and "\n" not in revision.doc.strip(), (revision.revision, revision.doc)


def test_revision_files_are_dated_and_have_a_downgrade() -> None:
    files = sorted((migrations_directory() / "versions").glob("*.py"))
    revision_files = [path for path in files if path.name != "__init__.py"]
    assert revision_files
    for path in revision_files:
        assert FILE_NAME.match(path.name), path.name
        spec = importlib.util.spec_from_file_location(f"revision_{path.stem.replace('-', '_')}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        assert callable(module.upgrade) and callable(module.downgrade), path.name
        assert "NotImplementedError" not in path.read_text(), f"{path.name}: downgrade() not written"


@pytest.mark.parametrize("url", ["sqlite+aiosqlite:///e.db", "postgresql+asyncpg://u@h/db"])
def test_offline_sql(url: str) -> None:
    config = _alembic_config(url)
    config.output_buffer = io.StringIO()
    command.upgrade(config, "head", sql=True)
    sql = config.output_buffer.getvalue()
    for table in TABLES:
        assert f"CREATE TABLE {table}" in sql
    assert "CREATE INDEX ix_games_code_won_moves_duration_ms_finished_at" in sql


def test_config_keeps_percent_signs_in_urls() -> None:
    # A password with '%' (percent-encoded in the URL) must survive configparser interpolation.
    url = "postgresql+asyncpg://u:p%25ss%40x@h:5432/db"
    assert _alembic_config(url).get_main_option("sqlalchemy.url") == url


# Revision 5c2f8e0d7a13: the actions table clustered on its key (SQLite) --------------------------------

BEFORE_CLUSTERED_ACTIONS = "3b8e61d4a0c7"
CLUSTERED_ACTIONS = "5c2f8e0d7a13"
STARTED = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
ACTION_ROWS = [("live", 1, "t1-c5"), ("live", 2, "undo"), ("live", 3, "t2-f"), ("over", 1, "resign")]


def seed_games_and_actions(connection: Connection) -> None:
    """A player, a game being played and a finished one, and their actions (made before it ended)."""
    connection.execute(insert(players).values(id="p", name="p", token_hash="h", created_at=STARTED))
    for game in ("live", "over"):
        connection.execute(
            insert(games).values(
                id=game, player_id="p", code="EO1-C8-AAAAAFA", cells=8, status="playing", started_at=STARTED
            )
        )
    connection.execute(insert(actions), [{"game_id": g, "v": v, "action": a} for g, v, a in ACTION_ROWS])
    connection.execute(update(games).where(games.c.id == "over").values(status="resigned"))
    connection.commit()


def action_rows(connection: Connection) -> list[tuple[str, int, str]]:
    # the columns of every revision tested (a later one adds at_ms)
    rows = connection.execute(
        select(actions.c.game_id, actions.c.v, actions.c.action).order_by(actions.c.game_id, actions.c.v)
    )
    return [(row.game_id, row.v, row.action) for row in rows]


def actions_table_sql(connection: Connection) -> str:
    return str(connection.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = 'actions'").scalar())


def insert_refused(url: str, game: str, v: int) -> bool:
    """Whether the database refuses an action row (on a connection of its own, never committed)."""

    def work(connection: Connection) -> bool:
        if connection.dialect.name == "sqlite":
            connection.exec_driver_sql("PRAGMA foreign_keys=ON")  # as every server connection has it
        try:
            connection.execute(insert(actions).values(game_id=game, v=v, action="t1-c5"))
        except IntegrityError:
            return True
        return False

    return bool(run_on(url, work))


def assert_actions_fenced(url: str) -> None:
    assert insert_refused(url, "live", 3)  # the (game, v) fence
    assert insert_refused(url, "over", 2)  # a game no longer playing
    assert insert_refused(url, "nowhere", 1)  # no such game
    assert not insert_refused(url, "live", 4)


def test_clustering_the_actions_keeps_their_rows_and_constraints(empty_database_url: str) -> None:
    url = empty_database_url
    command.upgrade(_alembic_config(url), BEFORE_CLUSTERED_ACTIONS)
    run_on(url, seed_games_and_actions)
    sqlite = url.startswith("sqlite")

    command.upgrade(_alembic_config(url), CLUSTERED_ACTIONS)
    assert run_on(url, action_rows) == ACTION_ROWS
    assert_actions_fenced(url)
    if sqlite:
        assert "WITHOUT ROWID" in run_on(url, actions_table_sql)

    command.downgrade(_alembic_config(url), BEFORE_CLUSTERED_ACTIONS)
    assert run_on(url, action_rows) == ACTION_ROWS
    assert_actions_fenced(url)
    if sqlite:
        assert "WITHOUT ROWID" not in run_on(url, actions_table_sql)


# Revision 8f3a6c1d2e90: the action journal and the games' fences (SQLite) -----------------------------------

BEFORE_JOURNAL = "5d2b8e4f1a63"


def fences(connection: Connection) -> dict[str, int]:
    return dict(connection.execute(select(game_fences.c.game_id, game_fences.c.v)).all())


def journal_rows(connection: Connection) -> list[tuple[str, int, str]]:
    journal = action_journal.c
    rows = connection.execute(select(journal.game_id, journal.v, journal.action).order_by(journal.seq))
    return [(row.game_id, row.v, row.action) for row in rows]


def append_refused(url: str, game: str, v: int) -> bool:
    """Whether the server's append (`repository.insert_actions`) of one action is refused; committed
    when it is not."""

    async def work() -> bool:
        database = Database.create(url)
        try:
            async with database.transaction() as conn:
                await repository.insert_actions(conn, [(game, v, "t1-c5")])
        except IntegrityError:
            return True
        finally:
            await database.dispose()
        return False

    return asyncio.run(work())


def test_the_journal_fences_the_games_being_played_and_the_downgrade_keeps_every_action(
    empty_database_url: str,
) -> None:
    """The upgrade gives each game being played its fence at its last stored version (on SQLite);
    appends then go to the journal, fenced; the downgrade moves them into ``actions`` and the
    finished-game trigger fences again."""
    url = empty_database_url
    command.upgrade(_alembic_config(url), BEFORE_JOURNAL)
    run_on(url, seed_games_and_actions)
    sqlite = url.startswith("sqlite")

    upgrade_to_head(url)
    assert run_on(url, fences) == ({"live": 3} if sqlite else {})
    assert append_refused(url, "live", 3)
    assert append_refused(url, "over", 2)
    assert append_refused(url, "nowhere", 1)
    assert not append_refused(url, "live", 4)
    assert run_on(url, journal_rows) == ([("live", 4, "t1-c5")] if sqlite else [])

    command.downgrade(_alembic_config(url), BEFORE_JOURNAL)
    assert run_on(url, action_rows) == sorted([*ACTION_ROWS, ("live", 4, "t1-c5")])
    assert insert_refused(url, "live", 4)
    assert insert_refused(url, "over", 2)
    assert not insert_refused(url, "live", 5)


# Revision 7b936593044a: players.bot, and the bots' boards ---------------------------------------------------

BEFORE_BOTS = "604bb49ebbb6"
#: (scope, player) of the summary rows: a person's on the people's boards, a bot's on the bots' boards.
PERSON_BESTS = [("V/8/m/a", "p")]
BOT_BESTS = [("B/V/8/m/a", "b"), ("B/D/EO1-C8-AAAAAFA/m/w2026-11-30", "b")]
PERSON_STATS = [("a", "p")]
BOT_STATS = [("B/a", "b"), ("B/d2026-11-30", "b")]


def seed_a_person(connection: Connection) -> None:
    connection.execute(insert(players).values(id="p", name="Ann", token_hash="hp", created_at=STARTED))
    connection.commit()


def seed_a_bot_and_the_boards(connection: Connection) -> None:
    """A bot (made once the column exists) and summary rows on both sides."""
    connection.execute(
        insert(players).values(id="b", name="solver", token_hash="hb", created_at=STARTED, bot=True)
    )
    connection.execute(
        insert(board_bests),
        [
            {"scope": scope, "player_id": player, "sort_key": 7, "finished_at": STARTED, "game_id": "g"}
            for scope, player in PERSON_BESTS + BOT_BESTS
        ],
    )
    connection.execute(
        insert(player_stats),
        [
            {
                "scope": scope,
                "player_id": player,
                "played": 1,
                "won": 1,
                "best_score": 5,
                "wins_key": 1,
                "score_key": -5,
            }
            for scope, player in PERSON_STATS + BOT_STATS
        ],
    )
    connection.commit()


def bots(connection: Connection) -> dict[str, bool]:
    return {row.id: row.bot for row in connection.execute(select(players.c.id, players.c.bot))}


def player_columns(connection: Connection) -> set[str]:
    return {column["name"] for column in inspect(connection).get_columns("players")}


def summary_scopes(connection: Connection) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    bests = connection.execute(select(board_bests.c.scope, board_bests.c.player_id))
    stats = connection.execute(select(player_stats.c.scope, player_stats.c.player_id))
    return {(row.scope, row.player_id) for row in bests}, {(row.scope, row.player_id) for row in stats}


def test_players_bot_starts_false_and_the_downgrade_makes_bots_people(empty_database_url: str) -> None:
    url = empty_database_url
    command.upgrade(_alembic_config(url), BEFORE_BOTS)
    run_on(url, seed_a_person)

    upgrade_to_head(url)
    assert run_on(url, bots) == {"p": False}  # everyone stored before bots is a person
    run_on(url, seed_a_bot_and_the_boards)
    assert run_on(url, bots) == {"p": False, "b": True}

    command.downgrade(_alembic_config(url), BEFORE_BOTS)
    assert "bot" not in run_on(url, player_columns)
    # The bot's rows moved to the people's boards (the older schema knows only people); no row lost.
    people_bests = {("V/8/m/a", "b"), ("D/EO1-C8-AAAAAFA/m/w2026-11-30", "b")}
    assert run_on(url, summary_scopes) == (
        set(PERSON_BESTS) | people_bests,
        set(PERSON_STATS) | {("a", "b"), ("d2026-11-30", "b")},
    )

    upgrade_to_head(url)
    assert run_on(url, bots) == {"p": False, "b": False}


# Revision 4e7c2a9b5d18: rank_buckets, counts of the boards' rows by key bucket, kept by triggers ---------

BEFORE_RANK_BUCKETS = "8f3a6c1d2e90"
RANK_BUCKETS = "4e7c2a9b5d18"
#: (scope, player, sort_key): keys on both sides of a bucket's edge, in each order and for bots.
BESTS = [
    ("V/8/m/a", "p", 7 << 41 | 5),
    ("V/8/m/a", "q", 7 << 41 | 9),
    ("V/8/m/a", "r", 8 << 41),
    ("B/V/8/t/a", "b", (1 << 34) - 1),
    ("B/V/8/t/a", "c", 1 << 34),
    ("Y/2026-11-30/8/s", "p", -8),
    ("Y/2026-11-30/8/s", "q", -7),
    ("D/EO1-C8-AAAAAFA/m/d2026-11-30", "p", 7 << 41),  # not counted: a deal board's day
]
#: (scope, player, wins_key, score_key)
STATS = [("a", "p", 5 << 32 | 9, -16), ("a", "q", 5 << 32 | 12, -9), ("a", "r", (2**31 - 1) << 32 | 3, 0)]


def seed_boards(connection: Connection) -> None:
    connection.execute(
        insert(board_bests),
        [
            {"scope": s, "player_id": p, "sort_key": k, "finished_at": STARTED, "game_id": "g"}
            for s, p, k in BESTS
        ],
    )
    connection.execute(
        insert(player_stats),
        [
            {
                "scope": s,
                "player_id": p,
                "played": 1,
                "won": 0,
                "best_score": 0,
                "wins_key": w,
                "score_key": k,
            }
            for s, p, w, k in STATS
        ],
    )
    connection.commit()


def counts(connection: Connection) -> dict[tuple[str, str, int], int]:
    return {
        (row.scope, row.board, row.lo): row.n for row in connection.execute(select(rank_buckets)) if row.n
    }


def improve_and_add(connection: Connection) -> None:
    """r's best moves to the bucket of p and q; a new row; a game played in the same wins bucket; rows
    of a scope not counted."""
    connection.execute(update(board_bests).where(board_bests.c.player_id == "r").values(sort_key=7 << 41 | 1))
    connection.execute(
        insert(board_bests).values(
            scope="V/8/m/a", player_id="s", sort_key=9 << 41, finished_at=STARTED, game_id="h"
        )
    )
    connection.execute(
        update(player_stats).where(player_stats.c.player_id == "p").values(wins_key=5 << 32 | 10)
    )
    deal_day = "D/EO1-C8-AAAAAFA/m/d2026-11-30"
    connection.execute(update(board_bests).where(board_bests.c.scope == deal_day).values(sort_key=1 << 41))
    connection.execute(
        insert(board_bests).values(
            scope=deal_day, player_id="s", sort_key=9 << 41, finished_at=STARTED, game_id="h"
        )
    )
    connection.commit()


BACKFILLED = {
    ("V/8/m/a", "g", 7 << 41): 2,
    ("V/8/m/a", "g", 8 << 41): 1,
    ("B/V/8/t/a", "g", 0): 1,
    ("B/V/8/t/a", "g", 1 << 34): 1,
    ("Y/2026-11-30/8/s", "g", -8): 2,
    ("a", "w", 5 << 32): 2,
    ("a", "w", (2**31 - 1) << 32 | 3): 1,
    ("a", "s", -16): 2,  # -16 and -9
    ("a", "s", 0): 1,
}


def test_rank_buckets_are_backfilled_kept_by_triggers_and_dropped(empty_database_url: str) -> None:
    url = empty_database_url
    command.upgrade(_alembic_config(url), BEFORE_RANK_BUCKETS)
    run_on(url, seed_boards)

    command.upgrade(_alembic_config(url), RANK_BUCKETS)
    assert run_on(url, counts) == BACKFILLED
    run_on(url, improve_and_add)
    after = dict(BACKFILLED)
    after["V/8/m/a", "g", 7 << 41] = 3
    del after["V/8/m/a", "g", 8 << 41]  # r left it (its count is 0)
    after["V/8/m/a", "g", 9 << 41] = 1
    assert run_on(url, counts) == after

    command.downgrade(_alembic_config(url), BEFORE_RANK_BUCKETS)
    assert "rank_buckets" not in run_on(url, table_names)
    run_on(url, seed_more)  # no trigger left
    command.upgrade(_alembic_config(url), RANK_BUCKETS)
    rebuilt = dict(after)
    rebuilt["V/8/m/a", "g", 9 << 41] = 2
    assert run_on(url, counts) == rebuilt


# Revision c30328233f01: a wins bucket per key for players of fewer than 32 games ---------------------

NO_WINS = (2**31 - 1) << 32


def wins_counts(connection: Connection) -> dict[int, int]:
    """The players board's wins buckets of scope ``a`` that count a row."""
    return {lo: n for (_, board, lo), n in counts(connection).items() if board == "w"}


def add_stats(player: str, wins_key: int) -> Any:
    def add(connection: Connection) -> None:
        values = {"played": 1, "won": 0, "best_score": 0, "wins_key": wins_key, "score_key": 0}
        connection.execute(insert(player_stats).values(scope="a", player_id=player, **values))
        connection.commit()

    return add


def play_many_games(connection: Connection) -> None:
    """p from 9 games to 39: from its key's bucket to its win count's bucket of many games."""
    connection.execute(
        update(player_stats).where(player_stats.c.player_id == "p").values(wins_key=5 << 32 | 39)
    )
    connection.commit()


def test_wins_buckets_of_few_games_are_a_key_each_and_the_downgrade_merges_them(
    empty_database_url: str,
) -> None:
    url = empty_database_url
    command.upgrade(_alembic_config(url), RANK_BUCKETS)
    run_on(url, seed_boards)

    upgrade_to_head(url)
    assert run_on(url, wins_counts) == {5 << 32 | 9: 1, 5 << 32 | 12: 1, NO_WINS | 3: 1}
    assert {key: n for key, n in run_on(url, counts).items() if key[1] != "w"} == {
        key: n for key, n in BACKFILLED.items() if key[1] != "w"
    }
    run_on(url, add_stats("s", 5 << 32 | 40))  # the triggers: a row of many games, a row moving there
    run_on(url, play_many_games)
    assert run_on(url, wins_counts) == {5 << 32 | 12: 1, 5 << 32 | 32: 2, NO_WINS | 3: 1}

    command.downgrade(_alembic_config(url), RANK_BUCKETS)
    assert run_on(url, wins_counts) == {5 << 32: 3, NO_WINS | 3: 1}
    run_on(url, add_stats("t", 5 << 32 | 3))  # counted by the older triggers, by its win count
    assert run_on(url, wins_counts) == {5 << 32: 4, NO_WINS | 3: 1}
    upgrade_to_head(url)
    assert run_on(url, wins_counts) == {
        5 << 32 | 3: 1,
        5 << 32 | 12: 1,
        5 << 32 | 32: 2,
        NO_WINS | 3: 1,
    }


def player_stats_insert_body(connection: Connection) -> str:
    """The statements ``player_stats``' insert trigger runs (SQLite: the trigger; PostgreSQL: its
    function)."""
    if connection.dialect.name == "sqlite":
        query = "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'tr_player_stats_counted'"
    else:
        query = "SELECT pg_get_functiondef('rank_buckets_player_stats_counted'::regproc)"
    return str(connection.exec_driver_sql(query).scalar_one())


def test_a_players_row_takes_its_score_bucket_before_its_wins_bucket_on_insert_as_its_moves_do(
    empty_database_url: str,
) -> None:
    """One lock order on the buckets: PostgreSQL fires the update triggers by name (score, then
    wins), so an insert that counted its wins bucket first could wait on a move in the same scope
    that waits on it, and one of the two finishes would be aborted as a deadlock."""
    upgrade_to_head(empty_database_url)
    body = run_on(empty_database_url, player_stats_insert_body)
    assert body.index("'s'") < body.index("'w'"), body
    assert "tr_player_stats_s_moved" < "tr_player_stats_w_moved"


def seed_more(connection: Connection) -> None:
    """A row written by the older schema: no trigger may fire (the table is gone)."""
    connection.execute(
        insert(board_bests).values(
            scope="V/8/m/a", player_id="t", sort_key=9 << 41 | 3, finished_at=STARTED, game_id="i"
        )
    )
    connection.commit()


# Revision 4c7e2a9d1f38: the server's time of every action -----------------------------------------------

BEFORE_ACTION_TIMES = "7b3f1c8e2a65"
ACTION_TIMES = "4c7e2a9d1f38"


def action_times(connection: Connection) -> list[tuple[str, int, int | None]]:
    return [
        (row.game_id, row.v, row.at_ms)
        for row in connection.execute(select(actions.c.game_id, actions.c.v, actions.c.at_ms).order_by("v"))
    ]


def test_actions_stored_before_times_read_as_unknown_and_the_downgrade_keeps_every_action(
    empty_database_url: str,
) -> None:
    url = empty_database_url
    command.upgrade(_alembic_config(url), BEFORE_ACTION_TIMES)
    run_on(url, seed_games_and_actions)
    before = run_on(url, action_rows)
    command.upgrade(_alembic_config(url), ACTION_TIMES)
    assert run_on(url, action_rows) == before
    assert [at for _, _, at in run_on(url, action_times)] == [None] * len(before), "unknown, not 0"

    def timed(connection: Connection) -> None:
        connection.execute(insert(actions).values(game_id="live", v=4, action="t1-c5", at_ms=2**41 + 1))
        connection.commit()

    run_on(url, timed)
    assert ("live", 4, 2**41 + 1) in run_on(url, action_times), "a 64-bit time"
    command.downgrade(_alembic_config(url), BEFORE_ACTION_TIMES)
    assert run_on(url, action_rows) == sorted([*before, ("live", 4, "t1-c5")])
