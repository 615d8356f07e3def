"""Diffs are exact: a rule-free client applying every diff stays equal to a fresh snapshot.

Random games (random legal moves, group moves, take-backs from foundations, taps, double taps and
undos) in all three cell variants, plus one game played to a win. Every update also travels through
both codecs and the server-message checker, as a client would receive it.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

import protocol
from engine import UNDO, Action, Deal, Foundation, Game, IllegalMoveError, Move, Status
from protocol import AutoRequest, MoveRequest, Subprotocol, TapRequest
from tests.support.board import ClientBoard, snapshot_state
from tests.support.wire import WINNING_LINE

PLAYER = protocol.Player("p_1", "Ann")
STARTED = protocol.parse_timestamp("2026-11-30T04:48:59.123Z")


class Mirror:
    """A game on the server side and a client's copy of it, compared after every action."""

    def __init__(self, game: Game, rng: random.Random) -> None:
        self.game = game
        self.rng = rng
        first = protocol.Snapshot.of("g_1", game, player=PLAYER, started_at=STARTED, request_id=1).to_wire()
        protocol.validate_server_message(first)
        self.client = ClientBoard(first)
        self.seen: Counter[str] = Counter()

    def _receive(self, message: dict[str, object]) -> dict[str, Any]:
        """The message as a client gets it: encoded, sent, decoded and checked."""
        subprotocol = self.rng.choice(list(Subprotocol))
        return protocol.decode_server_message(protocol.encode(message, subprotocol), subprotocol)

    def play(self, action: Action) -> None:
        transfer = self.game.play(action)
        self.seen["undo" if action is UNDO else "move"] += 1
        if isinstance(transfer.source, Foundation):
            self.seen["from foundation"] += 1
        if len(transfer.cards) > 1:
            self.seen["group"] += 1
        if self.rng.random() < 0.5:
            update = self._receive(protocol.Diff.of("g_1", self.game, transfer).to_wire())
        else:
            update = self._receive(
                protocol.Ack.of("g_1", self.game, transfer, self.rng.choice([None, 7, "r-1"])).to_wire()
            )
        self.client.apply(update)
        fresh = protocol.Snapshot.of("g_1", self.game, player=PLAYER, started_at=STARTED).to_wire()
        protocol.validate_server_message(fresh)
        assert self.client.state() == snapshot_state(fresh)


def _random_action(mirror: Mirror) -> Action | None:
    game, rng = mirror.game, mirror.rng
    roll = rng.random()
    if roll < 0.2 and game.undo_depth:
        return UNDO
    moves = list(game.legal_moves)
    takebacks = [move for move in moves if isinstance(move.source, Foundation)]
    groups = [move for move in moves if move.count > 1]
    to_foundation = [move for move in moves if isinstance(move.target, Foundation)]
    if roll < 0.3 and takebacks:
        return rng.choice(takebacks)
    if roll < 0.45 and groups:
        return rng.choice(groups)
    if roll < 0.6 and to_foundation:
        return rng.choice(to_foundation)
    if roll < 0.75:
        # A tap or double tap, resolved as the server resolves them.
        source = rng.choice([f"t{i}" for i in range(1, 9)] + [f"c{i}" for i in range(1, game.cell_count + 1)])
        wire: dict[str, object] = {"type": rng.choice(["tap", "auto"]), "game": "g_1", "from": source}
        request = protocol.parse_client_message(wire)
        assert isinstance(request, TapRequest | AutoRequest)
        try:
            return request.action(game)
        except IllegalMoveError:
            pass
    if not moves:
        return UNDO if game.undo_depth else None
    return rng.choice(moves)


@pytest.mark.parametrize("cells", [8, 4, 2])
@pytest.mark.parametrize("seed", range(6))
def test_diffs_keep_a_rule_free_copy_exact(cells: int, seed: int) -> None:
    rng = random.Random(seed * 10 + cells)
    mirror = Mirror(Game(Deal(rng.getrandbits(35), cells)), rng)
    for _ in range(150):
        action = _random_action(mirror)
        if action is None:
            break
        mirror.play(action)


def test_random_games_reach_every_kind_of_op() -> None:
    """The replay above is only worth something if it meets undos, groups and take-backs."""
    totals: Counter[str] = Counter()
    for seed in range(4):
        rng = random.Random(seed)
        mirror = Mirror(Game(Deal(rng.getrandbits(35), 8)), rng)
        for _ in range(150):
            action = _random_action(mirror)
            if action is None:
                break
            mirror.play(action)
        totals += mirror.seen
    assert totals["undo"] and totals["group"] and totals["from foundation"], totals


def test_a_won_game_mirrors_to_the_end_and_reports_game_over() -> None:
    mirror = Mirror(Game.from_code("EO1-C8-AAAAAFA"), random.Random(1))
    for text in WINNING_LINE:
        mirror.play(Move.parse(text))
    assert mirror.game.status is Status.WON
    assert mirror.client.status == "won"
    assert all(top is not None and top[0] == "K" for top in mirror.client.foundations.values())
    assert mirror.client.tableau == [[]] * 8
    over = protocol.GameOver(
        game="g_1", won=True, score=mirror.game.score, moves=mirror.game.moves, duration_ms=61_000
    )
    protocol.validate_server_message(over.to_wire())


def test_move_request_to_own_foundation_resolves_with_the_position() -> None:
    game = Game.from_code("EO1-C8-AAAAAFA")
    for text in WINNING_LINE[:74]:
        game.play(Move.parse(text))
    # Next in the line is "t1-fH": t1 shows the ace of hearts.
    request = protocol.parse_client_message({"type": "move", "game": "g_1", "from": "t1", "to": "f"})
    assert isinstance(request, MoveRequest)
    assert request.action(game) == Move.parse("t1-fH")
