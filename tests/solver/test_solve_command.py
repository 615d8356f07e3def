"""``eightoff solve`` and ``eightoff winnable``: real processes; the shipped tables of winnable deals."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from engine import Deal, Game, Move, parse_pile
from server.services.winnable import winnable_deals


def run_solve(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server", "solve", *argv], capture_output=True, text=True, timeout=120
    )


def test_solve_json_prints_actions_that_win_the_deal() -> None:
    done = run_solve("EO1-C8-AAAAAFA", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["code"] == "EO1-C8-AAAAAFA" and document["verdict"] == "win"
    assert document["nodes"] >= 0 and document["seconds"] >= 0
    game = Game(Deal.from_code("EO1-C8-AAAAAFA"))
    for action in document["actions"]:
        assert set(action) == {"type", "from", "to", "n"} and action["type"] == "move"
        game.play(Move(parse_pile(action["from"]), parse_pile(action["to"]), action["n"]))
    assert game.is_won()


def test_solve_text_prints_one_action_a_line_then_the_verdict() -> None:
    done = run_solve("eo1-c2-aaaaaab")
    assert done.returncode == 0, done.stderr
    *actions, summary = done.stdout.splitlines()
    assert summary.startswith("EO1-C2-AAAAAAB: ") and "positions searched in" in summary
    verdict = summary.split(": ", 1)[1].split()[0]
    assert verdict in ("win", "lost") and (verdict == "win") == bool(actions)


def test_solve_small_budget_says_unknown() -> None:
    done = run_solve("EO1-C4-DP2HO3G", "--max-nodes", "5", "--json")
    assert json.loads(done.stdout)["verdict"] == "unknown"


def test_solve_bad_code_exits_2() -> None:
    for bad in ("EO1-C3-AAAAAAA", "nonsense", "EO1-C8-AAAAAA1"):
        done = run_solve(bad)
        assert done.returncode == 2 and "eightoff solve:" in done.stderr and not done.stdout


def test_winnable_prints_the_head_of_the_shipped_table() -> None:
    """`eightoff winnable` is how server/services/winnable/C4.txt was made: its first deals come out again."""
    done = subprocess.run(
        [sys.executable, "-m", "server", "winnable", "--cells", "4", "--count", "3", "--workers", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    header, tally, *codes = done.stdout.splitlines()
    assert header.startswith("# 3 deals proven winnable in C4") and tally.startswith("# tried ")
    assert [Deal.from_code(code) for code in codes] == list(winnable_deals(4)[:3])


@pytest.mark.parametrize("cells", [8, 4, 2])
def test_shipped_tables_hold_distinct_codes_of_their_variant(cells: int) -> None:
    deals = winnable_deals(cells)
    assert len(deals) >= 200 and len(set(deals)) == len(deals)
    assert {deal.cells for deal in deals} == {cells}
