"""A rule-free copy of a board kept up to date from a snapshot and its diffs, as a client or spectator
keeps it.

The board knows only how to apply a snapshot's ops: that is all a client needs to mirror a game
(protocol/README.md), so the tests hold the server messages to that promise with nothing else.
"""

from __future__ import annotations

from typing import Any


class ClientBoard:
    """A copy of a snapshot's table, kept up to date by diffs, without any rule of the game."""

    def __init__(self, snapshot: dict[str, Any]) -> None:
        self.tableau: list[list[str]] = [list(column) for column in snapshot["tableau"]]
        self.cells: list[str | None] = list(snapshot["cells"])
        self.foundations: dict[str, str | None] = dict(snapshot["foundations"])
        self.v: int = snapshot["v"]
        self.score: int = snapshot["score"]
        self.moves: int = snapshot["moves"]
        self.status: str = snapshot["status"]

    def apply(self, update: dict[str, Any]) -> None:
        """Apply an ``ack`` or ``diff``; fails loudly if it does not fit the board."""
        assert update["v"] == self.v + 1, f"gap: at v={self.v}, got v={update['v']}"
        for op in update["ops"]:
            self._take(op["from"], op["cards"], op.get("top"))
            self._put(op["to"], op["cards"])
        self.v, self.score, self.moves, self.status = (
            update["v"],
            update["score"],
            update["moves"],
            update["status"],
        )

    def _take(self, location: str, cards: list[str], top: str | None) -> None:
        kind, rest = location[0], location[1:]
        if kind == "t":
            column = self.tableau[int(rest) - 1]
            assert column[len(column) - len(cards) :] == cards, f"{cards} are not on top of {location}"
            del column[len(column) - len(cards) :]
        elif kind == "c":
            assert self.cells[int(rest) - 1] == cards[0], f"{cards[0]} is not in {location}"
            self.cells[int(rest) - 1] = None
        else:
            assert self.foundations[rest] == cards[0], f"{cards[0]} is not on top of {location}"
            self.foundations[rest] = top

    def _put(self, location: str, cards: list[str]) -> None:
        kind, rest = location[0], location[1:]
        if kind == "t":
            self.tableau[int(rest) - 1].extend(cards)
        elif kind == "c":
            assert self.cells[int(rest) - 1] is None, f"{location} is occupied"
            self.cells[int(rest) - 1] = cards[0]
        else:
            self.foundations[rest] = cards[-1]

    def end(self, game_over: dict[str, Any]) -> None:
        """Step 4 of protocol/README.md section 7: a resign sends no diff, so the status comes from here."""
        self.status = "won" if game_over["won"] else "resigned"
        self.score, self.moves = game_over["score"], game_over["moves"]

    def matches(self, snapshot: dict[str, Any]) -> bool:
        """Whether a fresh snapshot shows the board this copy holds."""
        return snapshot_state(snapshot) == self.state()

    def state(self) -> dict[str, Any]:
        """The fields a fresh snapshot must agree with."""
        return {
            "tableau": self.tableau,
            "cells": self.cells,
            "foundations": self.foundations,
            "v": self.v,
            "score": self.score,
            "moves": self.moves,
            "status": self.status,
        }


def snapshot_state(snapshot: dict[str, Any]) -> dict[str, Any]:
    return {
        key: snapshot[key] for key in ("tableau", "cells", "foundations", "v", "score", "moves", "status")
    }
