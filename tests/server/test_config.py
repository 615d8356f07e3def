"""Settings refuse every unusable value when they are made, naming the flag and the variable; the
values at each bound are accepted. (The command's exit status and message: tests/server/test_cli.py.)"""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import Any

import pytest

from server.config import SettingError, Settings, add_arguments, settings_from_args


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("port", 65536, "65536 is not a TCP port: use 1-65535, or 0 for any free port"),
        ("port", 99999, "99999 is not a TCP port"),
        ("port", -1, "-1 is not a TCP port"),
        ("node", "", "'' is not a name of 1..64 characters"),
        ("node", "  ", "is not a name of 1..64 characters"),
        ("node", "n" * 65, "is not a name of 1..64 characters"),
        ("database_url", "mysql+aiomysql://u:secret@h/db", "unknown scheme 'mysql+aiomysql'"),
        ("database_url", "sqlite+pysqlite:///x.db", "unknown scheme 'sqlite+pysqlite'"),
        ("database_url", "not a url", "not a database URL"),
        ("database_url", "", "not a database URL"),
        ("sqlite_synchronous", "SOMETIMES", "'SOMETIMES' is not one of EXTRA, FULL, NORMAL, OFF"),
        ("sqlite_synchronous", "", "is not one of"),
        ("redis_url", "http://127.0.0.1:6379", "unknown scheme 'http'"),
        ("redis_url", "127.0.0.1:6379", "unknown scheme"),
        ("commit_batch", 0, "0 is not a number of at least 1"),
        ("max_frame_bytes", 0, "not a number of at least 1"),
        ("rate_per_second", 0.0, "0.0 is not a positive number"),
        ("rate_per_second", math.nan, "nan is not a positive number"),
        ("rate_per_second", math.inf, "inf is not a positive number"),
        ("rate_burst", 0, "not a number of at least 1"),
        ("max_games_per_connection", 0, "not a number of at least 1"),
        ("max_watches_per_connection", -1, "not a number of at least 0"),
        ("max_write_buffer_bytes", 0, "not a number of at least 1"),
        ("idle_timeout", 0.0, "not a positive number"),
        ("idle_timeout", -1.0, "not a positive number"),
        ("shutdown_grace", -0.5, "-0.5 is not a number of at least 0"),
        ("workers", 0, "0 is not a number of at least 1"),
        ("workers", -2, "-2 is not a number of at least 1"),
        ("shutdown_grace", math.nan, "nan is not a number of at least 0"),
        ("quick_match_band", -1.0, "-1.0 is not a number of at least 0"),
        ("quick_match_widening", math.inf, "inf is not a number of at least 0"),
        ("quick_match_enough", 1, "1 is not in 2..8"),
        ("quick_match_enough", 9, "9 is not in 2..8"),
        ("quick_match_max_players", 1, "1 is not in 2..8"),
        ("quick_match_wait", 0.0, "not a positive number"),
    ],
)
def test_an_unusable_value_is_refused_naming_its_flag_and_variable(name: str, value: Any, why: str) -> None:
    with pytest.raises(SettingError) as refused:
        Settings(**{name: value})
    flag, variable = "--" + name.replace("_", "-"), "EIGHTOFF_" + name.upper()
    assert str(refused.value).startswith(f"{flag} ({variable}): ") and why in str(refused.value)
    assert "secret" not in str(refused.value)  # a URL's password is never echoed


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("port", 0),
        ("port", 1),
        ("port", 65535),
        ("node", "n" * 64),
        ("database_url", "sqlite:///x.db"),
        ("database_url", "postgresql://u@h/db"),
        ("database_url", "postgresql+asyncpg://u:pw@h:5432/db"),
        ("sqlite_synchronous", "normal"),
        ("sqlite_synchronous", "EXTRA"),
        ("redis_url", "rediss://h:6380/0"),
        ("redis_url", "unix:///run/redis.sock"),
        ("redis_url", None),
        ("max_watches_per_connection", 0),
        ("idle_timeout", None),
        ("shutdown_grace", 0.0),
        ("rate_per_second", 0.001),
        ("workers", 1),
        ("quick_match_band", 0.0),
        ("quick_match_widening", 0.0),
        ("quick_match_enough", 2),
        ("quick_match_max_players", 8),
    ],
)
def test_the_values_at_each_bound_are_accepted(name: str, value: Any) -> None:
    assert getattr(Settings(**{name: value}), name) == value


def test_a_variable_that_is_not_of_its_type_names_the_setting() -> None:
    with pytest.raises(
        SettingError, match=r"^--rate-burst \(EIGHTOFF_RATE_BURST\): '4k' is not a valid int$"
    ):
        settings_from_args(argparse.Namespace(), environ={"EIGHTOFF_RATE_BURST": "4k"})
    with pytest.raises(SettingError, match=r"^--port \(EIGHTOFF_PORT\): 70000 is not a TCP port"):
        settings_from_args(argparse.Namespace(), environ={"EIGHTOFF_PORT": "70000"})
    assert (
        settings_from_args(argparse.Namespace(), environ={"EIGHTOFF_IDLE_TIMEOUT": "off"}).idle_timeout
        is None
    )


@pytest.mark.parametrize(
    "name", [s.name for s in dataclasses.fields(Settings) if "None" in str(s.type) and s.default is not None]
)
def test_off_on_the_command_line_turns_an_optional_limit_off(name: str) -> None:
    """``--flag off`` is None, not "flag absent" (which silently kept the default): every optional
    setting whose default is on, tried on the command line and in the environment."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    flag = "--" + name.replace("_", "-")
    assert getattr(settings_from_args(parser.parse_args([flag, "off"]), environ={}), name) is None
    variable = {f"EIGHTOFF_{name.upper()}": "off"}
    assert getattr(settings_from_args(parser.parse_args([]), environ=variable), name) is None
    # the flag wins over the variable, and an absent flag leaves the default
    assert getattr(settings_from_args(parser.parse_args([]), environ={}), name) == getattr(Settings(), name)


def test_quick_match_settings_make_the_match_rules() -> None:
    """Bad input tried: more players that start a race than a race may seat."""
    rules = Settings(quick_match_band=50, quick_match_enough=3, quick_match_max_players=6).match_rules()
    assert (rules.band, rules.widening, rules.enough, rules.max_players, rules.wait) == (50, 10, 3, 6, 30)
    with pytest.raises(
        SettingError, match=r"^--quick-match-enough \(EIGHTOFF_QUICK_MATCH_ENOUGH\): 5 is more"
    ):
        Settings(quick_match_enough=5, quick_match_max_players=4)


def test_workers_name_themselves_after_the_node() -> None:
    settings = Settings(node="eu-1", workers=3)
    assert [settings.worker_node(i) for i in (1, 2, 3)] == ["eu-1-w1", "eu-1-w2", "eu-1-w3"]
    assert Settings(node="n" * 61, workers=9).worker_node(9) == "n" * 61 + "-w9"  # 64 characters


def test_a_node_name_that_leaves_no_room_for_the_worker_suffix_is_refused() -> None:
    Settings(node="n" * 64)  # one process: its name as given
    with pytest.raises(SettingError) as refused:
        Settings(node="n" * 61, workers=10)
    assert str(refused.value).startswith("--node (EIGHTOFF_NODE): ")
    assert "leaves no room for the worker suffix -w10" in str(refused.value)


def test_each_worker_gets_its_share_of_the_connection_caps() -> None:
    """Issue 20, item 9: the caps counted per process are divided among the workers, rounded down,
    so the node as a whole keeps the figures set; nothing else changes."""
    settings = Settings(
        workers=3,
        max_connections=10_000,
        max_connections_per_address=256,
        new_connections_per_address_per_second=20.0,
        page_requests_per_address_per_second=200.0,
        guests_per_address_per_minute=30,
        reads_per_address_per_second=20.0,
    )
    share = settings.worker_share()
    assert (share.workers, share.max_connections, share.max_connections_per_address) == (1, 3333, 85)
    assert share.new_connections_per_address_per_second == pytest.approx(20 / 3)
    assert share.page_requests_per_address_per_second == pytest.approx(200 / 3)
    assert share.guests_per_address_per_minute == 10
    assert share.reads_per_address_per_second == pytest.approx(20 / 3)
    divided = {
        "workers",
        "max_connections",
        "max_connections_per_address",
        "new_connections_per_address_per_second",
        "page_requests_per_address_per_second",
        "guests_per_address_per_minute",
        "reads_per_address_per_second",
    }
    for field in dataclasses.fields(Settings):
        if field.name not in divided:
            assert getattr(share, field.name) == getattr(settings, field.name), field.name


def test_a_cap_below_the_workers_leaves_each_worker_one_and_no_cap_stays_none() -> None:
    tight = Settings(
        workers=4, max_connections=2, max_connections_per_address=3, guests_per_address_per_minute=1
    )
    share = tight.worker_share()
    assert (
        share.max_connections,
        share.max_connections_per_address,
        share.guests_per_address_per_minute,
    ) == (1, 1, 1)
    open_ = Settings(
        workers=2,
        max_connections_per_address=None,
        new_connections_per_address_per_second=None,
        page_requests_per_address_per_second=None,
        guests_per_address_per_minute=None,
        reads_per_address_per_second=None,
    ).worker_share()
    assert open_.max_connections_per_address is None
    assert open_.new_connections_per_address_per_second is None
    assert open_.page_requests_per_address_per_second is None
    assert open_.guests_per_address_per_minute is None
    assert open_.reads_per_address_per_second is None
    assert Settings().worker_share() == Settings()  # one process: its own caps
