"""The server-message checker refuses what a client could not rely on."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import protocol
from engine import Deal, Game
from protocol import ErrorCode, ProtocolError

PLAYER = protocol.Player("p_1", "Ann")
STARTED = protocol.parse_timestamp("2026-11-30T04:48:59.123Z")
LIVE_GAME = protocol.LiveGame(
    "g_1", player=PLAYER, code="EO1-C8-AAAAAFA", moves=3, score=10, watchers=0, started_at=STARTED
).to_wire()


def _snapshot() -> dict[str, Any]:
    game = Game(Deal(77, 4))
    return protocol.Snapshot.of("g_1", game, player=PLAYER, started_at=STARTED, request_id=1).to_wire()


def _diff() -> dict[str, Any]:
    op = {"cards": ["AH"], "from": "fH", "to": "c1", "top": None}
    return {"type": "diff", "game": "g_1", "v": 3, "ops": [op], "score": 10, "moves": 1, "status": "playing"}


def _refused(message: object) -> str:
    with pytest.raises(ProtocolError) as caught:
        protocol.validate_server_message(message)
    assert caught.value.code is ErrorCode.INTERNAL
    return caught.value.message


def test_accepts_the_fixtures() -> None:
    protocol.validate_server_message(_snapshot())
    protocol.validate_server_message(_diff())


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda m: m.pop("started_at"), "missing field"),
        (lambda m: m.update(extra=1), "unexpected field"),
        (lambda m: m.update(v=-1), "v"),
        (lambda m: m.update(v=True), "v"),
        (lambda m: m.update(id=None), "id"),
        (lambda m: m.update(status="lost"), "status"),
        (lambda m: m.update(started_at="2026-11-30T04:48:59Z"), "started_at"),
        (lambda m: m.update(started_at="2026-11-30T04:48:59.123+00:00"), "started_at"),
        (lambda m: m.update(code="EO1-C8-AAAAAFA"), "cells"),
        (lambda m: m.update(code="eo1-c4-aaaaaaa"), "canonical"),
        (lambda m: m["tableau"].pop(), "tableau"),
        (lambda m: m["tableau"][0].append("AS"), "52 cards"),
        (lambda m: m["tableau"][0].__setitem__(0, "1S"), "card"),
        (lambda m: m["foundations"].update(S="AH"), "not a S card"),
        (lambda m: m["foundations"].update(S="AS"), "52 cards"),
        (lambda m: m["foundations"].pop("C"), "missing field"),
        (lambda m: m["player"].update(name=""), "name"),
        (lambda m: m.update(game="g 1"), "game"),
    ],
)
def test_refuses_a_broken_snapshot(change: Any, why: str) -> None:
    message = _snapshot()
    change(message)
    assert why in _refused(message)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda m: m.update(id=1), "no id"),
        (lambda m: m.update(v=0), "v"),
        (lambda m: m.update(ops=[]), "ops"),
        (lambda m: m["ops"][0].pop("top"), "new top"),
        (lambda m: m["ops"][0].update(top="KH"), "top"),
        (lambda m: m["ops"][0].update(cards=["AS"]), "not a H card"),
        (lambda m: m["ops"][0].update(cards=["AH", "KS"]), "one card"),
        (lambda m: m["ops"][0].update(to="f"), "location"),
        (lambda m: m["ops"][0].update(to="fH"), "both"),
        (lambda m: m["ops"][0].update({"from": "t1"}), "only an op from a foundation"),
        (lambda m: m.update(score=1.5), "score"),
    ],
)
def test_refuses_a_broken_diff(change: Any, why: str) -> None:
    message = _diff()
    change(message)
    assert why in _refused(message)


def test_a_group_op_between_columns_is_fine() -> None:
    message = _diff()
    message["ops"] = [{"cards": ["9S", "8S", "7S"], "from": "t1", "to": "t2"}]
    protocol.validate_server_message(message)


@pytest.mark.parametrize(
    "message",
    [
        None,
        [],
        {},
        {"type": "hello"},
        {"type": "ok", "id": 2**53},
        {"type": "ok", "id": "x" * 65},
        {"type": "error", "code": "oops", "message": "m"},
        {"type": "error", "code": "stale", "message": "m" * 201},
        {"type": "welcome", "player": PLAYER.to_wire(), "server": {"version": "1"}, "games": []},
        {
            "type": "welcome",
            "player": PLAYER.to_wire(),
            "server": {"version": "1", "node": "n"},
            "games": ["a b"],
        },
        {"type": "game_over", "game": "g", "won": 1, "score": 0, "moves": 0, "duration_ms": 0},
        {"type": "live", "games": [{"game": "g"}]},
        {"type": "live", "games": [], "next": ""},
        {"type": "live", "games": [{**LIVE_GAME, "sealed": False}]},  # sent only when true
        {"type": "live", "games": [{**LIVE_GAME, "sealed": 1}]},
        {"type": "leaderboard", "rows": [{"rank": 1}]},
    ],
)
def test_refuses_other_broken_messages(message: object) -> None:
    _refused(message)


def test_refuses_mixed_or_impossible_leaderboard_rows() -> None:
    game_row = protocol.GameRow(
        rank=1, player=PLAYER, game="g", code="EO1-C8-AAAAAFA", cells=8, won=True, moves=1, duration_ms=1,
        score=0, finished_at=STARTED,
    ).to_wire()  # fmt: skip
    player_row = protocol.PlayerRow(rank=2, player=PLAYER, played=1, won=1, best_score=0).to_wire()
    assert "mixed" in _refused({"type": "leaderboard", "rows": [game_row, player_row]})
    impossible = copy.deepcopy(player_row)
    impossible["won"] = 2
    assert "more wins" in _refused({"type": "leaderboard", "rows": [impossible]})
    nan = copy.deepcopy(player_row)
    nan["win_rate"] = float("nan")
    assert "win_rate" in _refused({"type": "leaderboard", "rows": [nan]})
    wrong_variant = copy.deepcopy(game_row)
    wrong_variant["cells"] = 4
    assert "EO1-C8-AAAAAFA has 8" in _refused({"type": "leaderboard", "rows": [wrong_variant]})
    assert "rank order" in _refused({"type": "leaderboard", "rows": [player_row, {**player_row, "rank": 1}]})


def test_refuses_impossible_profiles() -> None:
    game = protocol.ProfileGame(
        "g", code="EO1-C4-AAAAAFA", cells=4, won=True, score=520, moves=90, duration_ms=1, finished_at=STARTED
    )
    fine = protocol.Profile(
        player=PLAYER, played=3, won=1, best_score=520, best=(game,), streak=protocol.Streak(0, 1),
        recent=(game,),
    ).to_wire()  # fmt: skip
    best = game.to_wire()
    protocol.validate_server_message(fine)
    assert "more wins" in _refused({**fine, "won": 4})
    assert "one won game per variant" in _refused({**fine, "best": [best, best]})
    assert "one won game per variant" in _refused({**fine, "best": [{**best, "won": False}]})
    assert "current streak" in _refused({**fine, "streak": {"current": 2, "best": 1}})
    assert "cells" in _refused({**fine, "recent": [{**best, "cells": 8}]})


def test_server_message_types() -> None:
    assert set(protocol.SERVER_MESSAGE_TYPES) == {
        "welcome", "snapshot", "ack", "diff", "game_over", "ok", "hint", "live", "leaderboard", "profile",
        "games", "replay", "race", "race_diff", "race_board",
        "error",
    }  # fmt: skip
