"""server.storage.tables: names, relationships and the UTC datetime type."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import Dialect
from sqlalchemy.engine import make_url

from server.storage.tables import ActionRow, Base, GameRow, PlayerRow, UTCDateTime, actions, games

SQLITE: Dialect = make_url("sqlite+aiosqlite://").get_dialect()()
POSTGRESQL: Dialect = make_url("postgresql+asyncpg://").get_dialect()()


def test_constraint_names_follow_the_naming_convention() -> None:
    names = {
        table.name: sorted(str(c.name) for c in table.constraints) for table in Base.metadata.sorted_tables
    }
    assert names == {
        "players": ["pk_players", "uq_players_token_hash"],
        "games": [
            "ck_games_cells",
            "ck_games_status",
            "fk_games_player_id_players",
            "fk_games_race_id_races",
            "pk_games",
        ],
        "actions": ["ck_actions_v_positive", "fk_actions_game_id_games", "pk_actions"],
        "board_bests": ["pk_board_bests"],
        "player_stats": ["pk_player_stats"],
        "ratings": [
            "ck_ratings_cells",
            "ck_ratings_races_positive",
            "fk_ratings_player_id_players",
            "pk_ratings",
        ],
        "race_rating_changes": [
            "ck_race_rating_changes_cells",
            "ck_race_rating_changes_place_positive",
            "fk_race_rating_changes_player_id_players",
            "pk_race_rating_changes",
        ],
        "races": [
            "ck_races_cells",
            "ck_races_seats",
            "ck_races_state",
            "fk_races_creator_id_players",
            "pk_races",
            "uq_races_code",
        ],
        "race_seats": [
            "ck_race_seats_status",
            "fk_race_seats_game_id_games",
            "fk_race_seats_player_id_players",
            "fk_race_seats_race_id_races",
            "pk_race_seats",
        ],
        "live_rooms": ["pk_live_rooms"],
        "quick_waits": ["ck_quick_waits_cells", "pk_quick_waits", "uq_quick_waits_player_id"],
        "events": [
            "ck_events_cells",
            "ck_events_deals",
            "ck_events_max_players_positive",
            "ck_events_state",
            "pk_events",
        ],
        "event_entries": [
            "ck_event_entries_number_positive",
            "fk_event_entries_event_id_events",
            "fk_event_entries_player_id_players",
            "pk_event_entries",
            "uq_event_entries_event_id_number",
        ],
        "event_games": [
            "ck_event_games_deal_positive",
            "fk_event_games_event_id_events",
            "fk_event_games_game_id_games",
            "fk_event_games_player_id_players",
            "pk_event_games",
            "uq_event_games_game_id",
        ],
        "action_journal": ["pk_action_journal"],
        "game_fences": ["pk_game_fences"],
        "rank_buckets": ["pk_rank_buckets"],
    }


def test_games_indexes() -> None:
    indexes = {index.name: [c.name for c in index.columns] for index in games.indexes}
    assert indexes == {
        "ix_games_player_id_status": ["player_id", "status"],
        "ix_games_player_id_finished_at": ["player_id", "finished_at"],
        "ix_games_finished_at": ["finished_at"],
        "ix_games_status_active_at_id": ["status", "active_at", "id"],
        "ix_games_player_id_daily_date": ["player_id", "daily_date"],
    }


def test_actions_primary_key_is_the_fence() -> None:
    assert [c.name for c in actions.primary_key.columns] == ["game_id", "v"]


def test_relationships_raise_on_lazy_load() -> None:
    for row in (PlayerRow, GameRow, ActionRow):
        for relationship in row.__mapper__.relationships:
            assert relationship.lazy == "raise", f"{row.__name__}.{relationship.key}"


@pytest.mark.parametrize("dialect", [SQLITE, POSTGRESQL], ids=["sqlite", "postgresql"])
def test_utc_datetime_refuses_naive(dialect: Dialect) -> None:
    with pytest.raises(ValueError, match="naive datetime"):
        UTCDateTime().process_bind_param(datetime(2026, 1, 1), dialect)


def test_utc_datetime_stores_utc_wall_time_on_sqlite() -> None:
    tokyo = datetime(2026, 1, 1, 9, 0, tzinfo=timezone(timedelta(hours=9)))
    stored = UTCDateTime().process_bind_param(tokyo, SQLITE)
    assert stored == datetime(2026, 1, 1, 0, 0)
    assert UTCDateTime().process_result_value(stored, SQLITE) == datetime(2026, 1, 1, tzinfo=UTC)


def test_utc_datetime_keeps_the_offset_for_postgresql() -> None:
    tokyo = datetime(2026, 1, 1, 9, 0, tzinfo=timezone(timedelta(hours=9)))
    stored = UTCDateTime().process_bind_param(tokyo, POSTGRESQL)
    assert stored == tokyo and stored is not None and stored.tzinfo is UTC
    back = UTCDateTime().process_result_value(tokyo, POSTGRESQL)
    assert back is not None and back.tzinfo is UTC and back == tokyo
