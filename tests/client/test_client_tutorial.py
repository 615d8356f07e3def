"""docs/tutorial-first-bot.md stays true: its one Python block, run as written against ``eightoff
serve`` started as the tutorial starts it (on a free port, in an empty folder), wins a deal."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
TUTORIAL = ROOT / "docs" / "tutorial-first-bot.md"
EIGHTOFF = Path(sys.executable).parent / "eightoff"  # the script `pip install -e .` puts beside python


def the_program() -> str:
    blocks: list[str] = re.findall(r"```python\n(.+?)```", TUTORIAL.read_text(), re.S)
    assert len(blocks) == 1, "the complete program is one code block"
    return blocks[0]


def test_the_tutorial_names_the_commands_it_runs() -> None:
    text = TUTORIAL.read_text()
    assert (
        "```sh\npython3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/eightoff serve\n```"
        in text
    )
    assert "```sh\n.venv/bin/python first_bot.py\n```" in text
    assert 'URL = sys.argv[1] if len(sys.argv) > 1 else "ws://127.0.0.1:8765/ws"' in the_program()


def test_the_tutorials_bot_wins_a_deal_against_eightoff_serve(tmp_path: Path) -> None:
    (tmp_path / "first_bot.py").write_text(the_program())
    env = {key: value for key, value in os.environ.items() if not key.startswith("EIGHTOFF_")}
    server = subprocess.Popen(
        [str(EIGHTOFF), "serve", "--port", "0"],  # the tutorial's command; port 0: a free one
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        banner = server.stdout.readline()
        found = re.search(r"serving (ws://\S+)", banner)
        assert found, banner
        bot = subprocess.run(
            [sys.executable, "first_bot.py", found[1]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
    assert bot.returncode == 0, bot.stderr
    lines = bot.stdout.splitlines()
    assert re.fullmatch(r"game \S+, deal EO1-C8-[A-Z2-7]{7}, player FirstBot", lines[0]), lines[0]
    assert re.fullmatch(r"won in \d+ moves, score \d+, [\d.]+ s", lines[-1]), lines[-1]
    assert (tmp_path / "eightoff.sqlite3").exists()  # the default database, as the tutorial says
