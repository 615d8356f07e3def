"""A copy of one game's board, taken from a ``snapshot`` and kept exact by applying the ``ops`` of each
``ack`` and ``diff`` (protocol/README.md section 7). It knows no rule of Eight Off: it only moves the
cards the server says moved, so it is right for every variant and every future rule change."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from eightoff_client.messages import Change, GameOver, Op, Player, Snapshot, Status

__all__ = ["Applied", "Board"]

#: What `Board.apply` did: ``applied``; ``old``, a version already seen (ignored); ``gap``, a version
#: was missed (the board is unchanged: ask for a fresh snapshot with ``resume`` or ``watch``).
Applied = Literal["applied", "old", "gap"]


@dataclass
class Board:
    """One game as the server last described it; ``tableau`` columns and ``cells`` are ``t1``/``c1``
    first, each column bottom card first (its last card is the exposed one)."""

    game: str
    code: str
    player: Player
    started_at: str
    v: int
    tableau: list[list[str]]
    cells: list[str | None]
    foundations: dict[str, str | None]
    score: int
    moves: int
    status: Status
    result: GameOver | None = field(default=None)

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> Board:
        """A board of its own (the message's lists are copied, never shared)."""
        return cls(
            game=snapshot["game"],
            code=snapshot["code"],
            player=Player(**snapshot["player"]),
            started_at=snapshot["started_at"],
            v=snapshot["v"],
            tableau=[list(column) for column in snapshot["tableau"]],
            cells=list(snapshot["cells"]),
            foundations={suit: snapshot["foundations"][suit] for suit in ("S", "H", "D", "C")},
            score=snapshot["score"],
            moves=snapshot["moves"],
            status=snapshot["status"],
        )

    def apply(self, change: Change) -> Applied:
        """Apply an ``ack`` or ``diff`` of this game, when it is the next version."""
        if change["v"] <= self.v:
            return "old"
        if change["v"] != self.v + 1:
            return "gap"
        for op in change["ops"]:
            self._apply_op(op)
        self.v = change["v"]
        self.score, self.moves, self.status = change["score"], change["moves"], change["status"]
        return "applied"

    def end(self, game_over: GameOver) -> None:
        """The game ended: a resign sends no diff, so ``game_over`` is what says so (section 7, step 4)."""
        self.status = "won" if game_over["won"] else "resigned"
        self.score, self.moves = game_over["score"], game_over["moves"]
        self.result = game_over

    def pile(self, location: str) -> list[str]:
        """The cards of ``t1``..``t8``, ``c1``..``c8`` (one or none) or ``fS``.. (the top card only, since
        a snapshot shows no more of a foundation), bottom first."""
        kind, number = location[0], location[1:]
        if kind == "t":
            return list(self.tableau[int(number) - 1])
        if kind == "c":
            card = self.cells[int(number) - 1]
            return [card] if card else []
        top = self.foundations[number]
        return [top] if top else []

    def _apply_op(self, op: Op) -> None:
        cards, source, target = op["cards"], op["from"], op["to"]
        if source[0] == "t":
            del self.tableau[int(source[1:]) - 1][-len(cards) :]
        elif source[0] == "c":
            self.cells[int(source[1:]) - 1] = None
        else:
            self.foundations[source[1:]] = op.get("top")
        if target[0] == "t":
            self.tableau[int(target[1:]) - 1].extend(cards)
        elif target[0] == "c":
            self.cells[int(target[1:]) - 1] = cards[-1]
        else:
            self.foundations[target[1:]] = cards[-1]
