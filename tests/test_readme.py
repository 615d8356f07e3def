"""The README's two commands stay true: CI runs the test command word for word, and the start command
names a real CLI invocation with the embedded defaults."""

from __future__ import annotations

import re
from pathlib import Path

from server.config import DEFAULT_DATABASE_URL, Settings
from server.ops.cli import build_parser

ROOT = Path(__file__).parents[1]


def readme_commands() -> list[str]:
    head = (ROOT / "README.md").read_text().split("\n## ", 2)[1]  # the section right after the title
    return re.findall(r"```sh\n(.+?)\n```", head)


def test_readme_starts_with_the_two_commands() -> None:
    start, test = readme_commands()
    assert start.endswith("eightoff serve") and "pip install" in start
    assert "pytest" in test and ".[test]" in test


def test_ci_runs_the_readme_test_command_word_for_word() -> None:
    _, test = readme_commands()
    assert test in (ROOT / ".ci" / "run").read_text().splitlines()


def test_the_start_command_serves_the_documented_default() -> None:
    start, _ = readme_commands()
    argv = start.split(".venv/bin/eightoff ", 1)[1].split()
    args = build_parser().parse_args(argv)
    assert args.command == "serve"
    defaults = Settings()
    assert (defaults.host, defaults.port) == ("127.0.0.1", 8765)
    assert defaults.database_url == DEFAULT_DATABASE_URL and DEFAULT_DATABASE_URL.startswith("sqlite")
    assert "ws://127.0.0.1:8765/ws" in (ROOT / "README.md").read_text()
