"""The library's board against protocol/vectors/diffs.json, offline: every step's result and the copy
after it, as a client written from the spec must do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from eightoff_client import Board, Change, Snapshot

VECTORS = json.loads((Path(__file__).parents[2] / "protocol" / "vectors" / "diffs.json").read_text())


@pytest.mark.parametrize("entry", VECTORS["games"], ids=lambda entry: entry["snapshot"]["code"])
def test_the_board_replays_the_diff_vectors(entry: dict[str, Any]) -> None:
    board = Board.from_snapshot(cast(Snapshot, entry["snapshot"]))
    for step in entry["steps"]:
        assert board.apply(cast(Change, step["update"])) == step["result"]
        after = step["after"]
        seen = {
            "tableau": board.tableau,
            "cells": board.cells,
            "foundations": board.foundations,
            "v": board.v,
            "score": board.score,
            "moves": board.moves,
            "status": board.status,
        }
        assert seen == {key: after[key] for key in seen}


def test_the_board_copies_the_snapshot_and_reads_piles() -> None:
    snapshot = cast(Snapshot, VECTORS["games"][0]["snapshot"])
    board = Board.from_snapshot(snapshot)
    board.tableau[0].append("XX")
    assert snapshot["tableau"][0][-1] != "XX"  # the message stays as it came
    assert board.pile("t1")[-1] == "XX" and board.pile("fS") == (
        [snapshot["foundations"]["S"]] if snapshot["foundations"]["S"] else []
    )
