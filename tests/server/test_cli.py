"""The ``eightoff`` command as an operator meets it, each case in a real process: a bad setting or an
unavailable database, Redis or port stops ``serve`` with one line naming the setting and no traceback
(exit 2 for a bad setting, 1 for the environment); ``--version``; ``deal`` into a pipe whose reader
has gone; the start-up banner.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from server import __version__

ROOT = Path(__file__).parents[2]
EIGHTOFF = [sys.executable, "-m", "server"]
#: A loopback port nothing listens on (a privileged one: no test or service binds it).
CLOSED_PORT = 1
_LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z]+ ")


def run_eightoff(
    *argv: str, env: dict[str, str] | None = None, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("EIGHTOFF_")}
    return subprocess.run(
        [*EIGHTOFF, *argv],
        cwd=cwd,
        env={**environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def the_one_line(stderr: str) -> str:
    """The message of a failed start: stderr holds it alone besides log lines (the migration's)."""
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line and not _LOG_LINE.match(line)]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'eightoff.db'}"


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port that another socket is listening on."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield int(listener.getsockname()[1])


@pytest.mark.parametrize(
    ("argv", "env", "named", "why"),
    [
        (["--port", "99999"], {}, "--port (EIGHTOFF_PORT)", "99999 is not a TCP port"),
        ([], {"EIGHTOFF_PORT": "eighty"}, "--port (EIGHTOFF_PORT)", "'eighty' is not a valid int"),
        (["--sqlite-synchronous", "SOMETIMES"], {}, "--sqlite-synchronous", "'SOMETIMES' is not one of"),
        ([], {"EIGHTOFF_DATABASE_URL": "mysql://u:secret@h/db"}, "--database-url", "unknown scheme 'mysql'"),
        (["--redis-url", "http://127.0.0.1:6379"], {}, "--redis-url", "unknown scheme 'http'"),
        (["--workers", "0"], {}, "--workers (EIGHTOFF_WORKERS)", "0 is not a number of at least 1"),
        ([], {"EIGHTOFF_WORKERS": "two"}, "--workers (EIGHTOFF_WORKERS)", "'two' is not a valid int"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it_and_exit_2(
    argv: list[str], env: dict[str, str], named: str, why: str, sqlite_url: str, tmp_path: Path
) -> None:
    """Every check in-process: tests/server/test_config.py; here, each source of a value once."""
    result = run_eightoff("serve", *argv, env={"EIGHTOFF_DATABASE_URL": sqlite_url, **env}, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    line = the_one_line(result.stderr)
    assert line.startswith(f"eightoff serve: bad setting {named}") and why in line, line
    assert "secret" not in line  # a URL's password is never echoed
    assert result.stdout == "" and not (tmp_path / "eightoff.db").exists()  # stopped before any work


def test_port_zero_picks_a_free_port_and_the_banner_gives_both_urls(sqlite_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EIGHTOFF_")}
    server = subprocess.Popen(
        [*EIGHTOFF, "serve", "--port", "0", "--database-url", sqlite_url],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        first, second = server.stdout.readline(), server.stdout.readline()
        found = re.fullmatch(
            rf"eightoff {re.escape(__version__)} serving ws://127\.0\.0\.1:(\d+)/ws\n", first
        )
        assert found, first
        port = int(found[1])
        assert port != 0
        assert second == f"browser client: http://127.0.0.1:{port}/\n"
        with urllib.request.urlopen(second.split()[-1], timeout=10) as response:
            assert response.status == 200 and b"<html" in response.read().lower()
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_port_in_use_is_one_line_and_exit_1(
    workers: str, busy_port: int, sqlite_url: str, tmp_path: Path
) -> None:
    result = run_eightoff(
        "serve", "--workers", workers, "--port", str(busy_port), "--database-url", sqlite_url, cwd=tmp_path
    )
    assert result.returncode == 1, result.stderr
    line = the_one_line(result.stderr)
    assert line.startswith("eightoff serve: --host (EIGHTOFF_HOST), --port (EIGHTOFF_PORT):")
    assert f"cannot listen on 127.0.0.1 port {busy_port}" in line and "address already in use" in line


@pytest.mark.parametrize(
    ("url", "why"),
    [
        (f"postgresql+asyncpg://eightoff:secret@127.0.0.1:{CLOSED_PORT}/eightoff", "Connect call failed"),
        ("sqlite+aiosqlite:///{tmp}/a-file/eightoff.db", "a-file"),  # a file where a directory must be
    ],
)
def test_an_unreachable_database_is_one_line_and_exit_1(url: str, why: str, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    url = url.replace("{tmp}", str(tmp_path))
    result = run_eightoff("serve", "--port", "0", "--database-url", url, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    line = the_one_line(result.stderr)
    assert line.startswith("eightoff serve: --database-url (EIGHTOFF_DATABASE_URL): cannot open")
    assert why in line and "secret" not in line, line


@pytest.mark.parametrize("workers", ["1", "2"])
def test_an_unreachable_redis_is_one_line_and_exit_1(workers: str, sqlite_url: str, tmp_path: Path) -> None:
    """With workers, each worker meets the refusal; the supervisor says it once and stops them all."""
    redis_url = f"redis://127.0.0.1:{CLOSED_PORT}/0"
    result = run_eightoff(
        "serve",
        *("--workers", workers, "--port", "0", "--database-url", sqlite_url, "--redis-url", redis_url),
        cwd=tmp_path,
    )
    assert result.returncode == 1, result.stderr
    line = the_one_line(result.stderr)
    assert line.startswith("eightoff serve: --redis-url (EIGHTOFF_REDIS_URL): cannot reach Redis:")


@pytest.mark.parametrize("command", ["verify", "db"])
def test_db_and_verify_name_an_unreachable_database_and_exit_1(command: str, tmp_path: Path) -> None:
    url = f"postgresql+asyncpg://eightoff@127.0.0.1:{CLOSED_PORT}/eightoff"
    argv = [command, "current"] if command == "db" else [command]
    result = run_eightoff(*argv, "--database-url", url, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert the_one_line(result.stderr).startswith(
        f"eightoff {command}: --database-url (EIGHTOFF_DATABASE_URL)"
    )


def test_version() -> None:
    result = run_eightoff("--version")
    assert (result.returncode, result.stdout, result.stderr) == (0, f"eightoff {__version__}\n", "")


def test_deal_into_a_pipe_whose_reader_has_gone_ends_quietly() -> None:
    """The reader of the pipe is closed before ``deal`` writes: no traceback, the status of SIGPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        process = subprocess.Popen(
            [*EIGHTOFF, "deal", "EO1-C8-AAAAAFA"],
            cwd=ROOT,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        os.close(write_end)
    _, stderr = process.communicate(timeout=60)
    assert stderr == ""
    assert process.returncode == 128 + signal.SIGPIPE


def test_deal_piped_into_head_prints_the_first_line_quietly() -> None:
    command = f"{shlex.join(EIGHTOFF)} deal EO1-C8-AAAAAFA | head -1"
    result = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (result.stdout, result.stderr) == ("EO1-C8-AAAAAFA\n", "")


@pytest.mark.parametrize("batch", ["0", "-3", "x", ""])
def test_verify_refuses_a_batch_that_is_not_a_positive_integer(
    batch: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from server.ops.cli import build_parser

    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["verify", "--batch", batch])
    assert exited.value.code == 2
    assert f"argument --batch: {batch!r} is not a positive integer" in capsys.readouterr().err
