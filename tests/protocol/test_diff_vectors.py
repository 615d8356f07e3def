"""protocol/vectors/diffs.json: the file is what its generator writes, a rule-free copy follows every
step to the board the step says, and the vectors meet every kind of op a client must handle."""

from __future__ import annotations

import json
from typing import Any

import pytest

import protocol
from tests.protocol.make_diff_vectors import PATH, build, render
from tests.support.board import ClientBoard, snapshot_state

GAMES: list[dict[str, Any]] = json.loads(PATH.read_text(encoding="utf-8"))["games"]


def test_diff_vectors_file_is_what_the_generator_writes() -> None:
    assert PATH.read_text(encoding="utf-8") == render(build())


@pytest.mark.parametrize("entry", GAMES, ids=lambda entry: entry["snapshot"]["game"])
def test_diff_vectors_replay_on_a_rule_free_copy(entry: dict[str, Any]) -> None:
    protocol.validate_server_message(entry["snapshot"])
    board = ClientBoard(entry["snapshot"])
    for step in entry["steps"]:
        protocol.validate_server_message(step["update"])
        if step["result"] == "applied":
            board.apply(step["update"])
        else:
            assert (step["update"]["v"] <= board.v) == (step["result"] == "old")
        assert board.state() == step["after"]


def test_diff_vectors_cover_every_kind_of_update() -> None:
    ops = [op for entry in GAMES for step in entry["steps"] for op in step["update"]["ops"]]
    updates = [step["update"] for entry in GAMES for step in entry["steps"]]
    assert {entry["snapshot"]["code"][4:6] for entry in GAMES} == {"C8", "C4", "C2"}
    assert any(op["from"][0] == "f" and op["top"] is not None for op in ops)  # a take-back
    assert any(op["from"][0] == "f" and op["top"] is None for op in ops)  # an ace taken back
    assert any(len(op["cards"]) > 1 for op in ops)  # a group
    assert {update["type"] for update in updates} == {"ack", "diff"}
    assert {step["result"] for entry in GAMES for step in entry["steps"]} == {"applied", "old", "gap"}
    final = GAMES[-1]["steps"][-1]["after"]
    assert final == snapshot_state({**final, "status": "won"})
