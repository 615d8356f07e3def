"""The operator commands that touch the database (``db upgrade``, ``db current``, ``verify``,
``export``) find it as ``serve`` does: ``--database-url``, else ``EIGHTOFF_DATABASE_URL``, else the
default file in the current folder. Each command is run in-process (``main``); so is
docker-compose.yml's migrate command line, with the service's own variables."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
import yaml

from server.config import DEFAULT_DATABASE_URL
from server.ops.cli import main
from server.storage import head_revision
from tests.support import dbutil, serverutil
from tests.support.wsclient import WsClient

ROOT = Path(__file__).parents[2]
COMMANDS = [["db", "upgrade"], ["db", "current"], ["verify"], ["export", "no-such-game"]]


@pytest.fixture(autouse=True)
def no_eightoff_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each test in an empty folder with no EIGHTOFF_* setting but those it sets (the test suite's
    own EIGHTOFF_TEST_* variables kept)."""
    settings = [name for name in os.environ if name.startswith("EIGHTOFF_")]
    for name in [name for name in settings if not name.startswith("EIGHTOFF_TEST_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def what_it_says(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def reached(argv: list[str], status: int, out: str, err: str) -> None:
    """The command read the database it was pointed at: what each says when it did."""
    if argv[0] == "db":
        assert (status, out) == (0, f"database at {head_revision()}; head is {head_revision()}\n"), err
    elif argv[0] == "verify":
        assert status == 0 and "verified 0 stored games: 0 mismatch(es)" in out, err
    else:
        assert (status, err) == (1, "eightoff export: no game has the id 'no-such-game'\n")


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_the_variable_alone_names_the_database(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EIGHTOFF_DATABASE_URL", dbutil.migrated_sqlite_url(tmp_path, "by-variable.db"))
    reached(argv, *what_it_says(argv, capsys))
    assert not (tmp_path / "eightoff.sqlite3").exists()  # not the default


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_the_flag_wins_over_the_variable(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EIGHTOFF_DATABASE_URL", "mysql://u:secret@h/db")  # refused if it were read
    flag = ["--database-url", dbutil.migrated_sqlite_url(tmp_path, "by-flag.db")]
    reached(argv, *what_it_says([*argv, *flag], capsys))


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_without_flag_or_variable_the_default_database_is_used(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert DEFAULT_DATABASE_URL == "sqlite+aiosqlite:///eightoff.sqlite3"
    dbutil.migrated_sqlite_url(tmp_path, "eightoff.sqlite3")
    reached(argv, *what_it_says(argv, capsys))


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_a_bad_variable_is_refused_naming_it_as_serve_does(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EIGHTOFF_DATABASE_URL", "mysql://u:secret@h/db")
    status, out, err = what_it_says(argv, capsys)
    assert status == 2 and out == ""
    assert err.startswith(
        f"eightoff {argv[0]}: bad setting --database-url (EIGHTOFF_DATABASE_URL): unknown scheme 'mysql'"
    )
    assert "secret" not in err


async def test_export_in_the_tutorials_setup_finds_the_game_it_played(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/how-to.md's ``eightoff export ID > game.eor`` where ``eightoff serve`` ran with no
    setting (the tutorial's server): the default database of the current folder."""
    async with serverutil.running_app(DEFAULT_DATABASE_URL, sqlite_synchronous="NORMAL") as app:
        client = await WsClient.open(serverutil.ws_url(app))
        await client.hello(name="Ann")
        snapshot = await client.request("new_game", code="EO1-C8-AAAAAFA")
        await client.request("resign", game=snapshot["game"])
        await client.close()
    assert (tmp_path / "eightoff.sqlite3").exists()
    status = await asyncio.to_thread(main, ["export", snapshot["game"]])  # as from a shell: no loop
    out, err = capsys.readouterr()
    assert (status, err) == (0, "")
    assert "EO1-C8-AAAAAFA" in out and "Ann" in out


def test_the_compose_migrate_command_migrates_with_its_variables_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docker-compose.yml's migrate service, its command and environment as written, the database
    URL's host and database those of the test PostgreSQL server (the compose host is not here)."""
    migrate = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["migrate"]
    command, environment = migrate["command"], migrate["environment"]
    assert command[:1] == ["eightoff"] and environment["EIGHTOFF_DATABASE_URL"].startswith(
        "postgresql+asyncpg://"
    )
    with dbutil.postgres_database(dbutil.require_postgres_server_url(), migrate=False) as url:
        for name, value in {**environment, "EIGHTOFF_DATABASE_URL": url}.items():
            monkeypatch.setenv(name, str(value))
        status, out, err = what_it_says(command[1:], capsys)
        assert (status, out) == (0, f"database at {head_revision()}; head is {head_revision()}\n"), err
