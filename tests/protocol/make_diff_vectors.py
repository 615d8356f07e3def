"""Write ``protocol/vectors/diffs.json``: snapshots and the updates that follow them, with the board a
rule-free client must hold after each, for clients in any language (the browser client's board model
runs them under node: tests/web/board.test.mjs).

Run ``.venv/bin/python -m tests.protocol.make_diff_vectors`` from the project root to rewrite the
file; the test ``test_diff_vectors.py`` checks that the file is what this writes and that a rule-free
copy (``tests.support.board.ClientBoard``) follows it, so the file changes only when the server messages
or the engine change on purpose.

Each game: ``snapshot`` (a `snapshot` message) and ``steps``, each ``{update, result, after}``: an
``ack`` or ``diff``; ``result`` is ``applied``, ``old`` (its ``v`` is not above the board's: ignore it)
or ``gap`` (a version was missed: the board stays as it was, ask for a fresh snapshot); ``after`` holds
the board's ``tableau``, ``cells``, ``foundations``, ``v``, ``score``, ``moves`` and ``status``.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import protocol
from engine import UNDO, Action, Deal, Foundation, Game, Move
from tests.support.board import ClientBoard
from tests.support.wire import WINNING_LINE

__all__ = ["PATH", "build", "render"]

PATH = Path(__file__).parents[2] / "protocol" / "vectors" / "diffs.json"
PLAYER = protocol.Player("p_1", "Ann")
STARTED = protocol.parse_timestamp("2026-11-30T04:48:59.123Z")
RANDOM_STEPS = 40


def _pick(game: Game, rng: random.Random) -> Action | None:
    """A random action leaning towards the rarer ops: take-backs, groups, undos."""
    moves = sorted(game.legal_moves, key=str)
    roll = rng.random()
    if roll < 0.2 and game.undo_depth:
        return UNDO
    for wanted, share in ((lambda m: isinstance(m.source, Foundation), 0.35), (lambda m: m.count > 1, 0.5)):
        chosen = [move for move in moves if wanted(move)]
        if roll < share and chosen:
            return rng.choice(chosen)
    if roll < 0.7:
        upward = [move for move in moves if isinstance(move.target, Foundation)]
        if upward:
            return rng.choice(upward)
    return rng.choice(moves) if moves else None


def _game(game_id: str, game: Game, actions: list[Action] | None, rng: random.Random) -> dict[str, Any]:
    snapshot = protocol.Snapshot.of(game_id, game, player=PLAYER, started_at=STARTED).to_wire()
    board = ClientBoard(snapshot)
    steps: list[dict[str, Any]] = []
    pending = list(actions) if actions is not None else None
    while pending is None or pending:
        action = pending.pop(0) if pending is not None else _pick(game, rng)
        if action is None or (pending is None and len(steps) >= RANDOM_STEPS):
            break
        transfer = game.play(action)
        update = (
            protocol.Ack.of(game_id, game, transfer, len(steps)).to_wire()
            if rng.random() < 0.5
            else protocol.Diff.of(game_id, game, transfer).to_wire()
        )
        board.apply(update)
        steps.append({"update": update, "result": "applied", "after": copy.deepcopy(board.state())})
    return {"snapshot": snapshot, "steps": steps}


def _with_old_and_gap(entry: dict[str, Any]) -> dict[str, Any]:
    """Append a repeated update (``old``) and one from the future (``gap``): neither changes the board."""
    last = entry["steps"][-1]
    future = dict(last["update"], v=last["update"]["v"] + 2)
    for update, result in ((last["update"], "old"), (future, "gap")):
        entry["steps"].append({"update": update, "result": result, "after": last["after"]})
    return entry


def build() -> list[dict[str, Any]]:
    rng = random.Random(20261130)
    games = [
        _with_old_and_gap(_game(f"g_{cells}", Game(Deal(rng.getrandbits(35), cells)), None, rng))
        for cells in (8, 4, 2)
    ]
    games.append(_game("g_win", Game.from_code("EO1-C8-AAAAAFA"), [Move.parse(t) for t in WINNING_LINE], rng))
    return games


def render(games: list[dict[str, Any]]) -> str:
    """JSON with one line per step, so that a diff shows which step changed."""
    parts = []
    for entry in games:
        steps = ",\n".join("      " + json.dumps(step, separators=(",", ":")) for step in entry["steps"])
        parts.append(
            '    {\n      "snapshot": ' + json.dumps(entry["snapshot"], separators=(",", ":"))
            + ',\n      "steps": [\n' + steps + "\n      ]\n    }"
        )  # fmt: skip
    return '{\n  "games": [\n' + ",\n".join(parts) + "\n  ]\n}\n"


def main() -> None:
    games = build()
    PATH.write_text(render(games), encoding="utf-8")
    print(f"wrote {len(games)} games, {sum(len(g['steps']) for g in games)} steps, to {PATH}")


if __name__ == "__main__":
    main()
