"""server.storage.records: frozen, slotted values."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from server.storage import GameResult, GameStart, PlayerRecord, StoredGame

T0 = datetime(2026, 11, 30, tzinfo=UTC)


def stored(actions: tuple[str, ...]) -> StoredGame:
    return StoredGame(
        id="g1",
        player_id="p1",
        code="EO1-C8-AAAAAFA",
        cells=8,
        daily_date=None,
        status="playing",
        score=0,
        moves=0,
        undos=0,
        started_at=T0,
        finished_at=None,
        duration_ms=None,
        won=False,
        actions=actions,
    )


@pytest.mark.parametrize(
    "record",
    [
        PlayerRecord("p1", "Ada", "ab" * 32, T0),
        GameStart("g1", "p1", "EO1-C8-AAAAAFA", 8, None, T0),
        GameResult("g1", "won", 1, 2, 3, T0, 4, True),
        stored(()),
    ],
    ids=lambda record: type(record).__name__,
)
def test_records_are_frozen_and_slotted(record: object) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.id = "other"  # type: ignore[attr-defined]
    assert not hasattr(record, "__dict__")


def test_stored_game_version_is_the_number_of_actions() -> None:
    assert stored(()).version == 0
    assert stored(("t1-c1", "undo")).version == 2
