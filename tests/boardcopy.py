"""A rule-free copy of a board kept up to date from diffs, as a spectator client would keep it."""

from __future__ import annotations

from typing import Any


class BoardCopy:
    """Applies ``ops`` to a snapshot's piles knowing nothing of the rules."""

    def __init__(self, snapshot: dict[str, Any]) -> None:
        self.v = snapshot["v"]
        self.piles: dict[str, list[str]] = {}
        for index, column in enumerate(snapshot["tableau"], start=1):
            self.piles[f"t{index}"] = list(column)
        for index, card in enumerate(snapshot["cells"], start=1):
            self.piles[f"c{index}"] = [card] if card else []
        self.foundations: dict[str, str | None] = dict(snapshot["foundations"])
        self.score = snapshot["score"]
        self.moves = snapshot["moves"]
        self.status = snapshot["status"]

    def apply(self, diff: dict[str, Any]) -> None:
        assert diff["v"] == self.v + 1, f"gap in v: have {self.v}, got {diff['v']}"
        for op in diff["ops"]:
            cards, source, target = op["cards"], op["from"], op["to"]
            if source.startswith("f"):
                self.foundations[source[1]] = op["top"]
            else:
                assert self.piles[source][-len(cards) :] == cards
                del self.piles[source][-len(cards) :]
            if target.startswith("f"):
                self.foundations[target[1]] = cards[-1]
            else:
                self.piles[target].extend(cards)
        self.v = diff["v"]
        self.score, self.moves, self.status = diff["score"], diff["moves"], diff["status"]

    def end(self, game_over: dict[str, Any]) -> None:
        """Step 4 of protocol/README.md section 7: a resign sends no diff, so the status comes from here."""
        self.status = "won" if game_over["won"] else "resigned"
        self.score, self.moves = game_over["score"], game_over["moves"]

    def matches(self, snapshot: dict[str, Any]) -> bool:
        return BoardCopy(snapshot).state() == self.state()

    def state(self) -> tuple[object, ...]:
        return (self.v, self.piles, self.foundations, self.score, self.moves, self.status)
