"""Settings: the server's configuration, and the only reader of ``os.environ``.

Every option is a command-line flag of ``eightoff serve`` and an ``EIGHTOFF_*`` environment variable
(the flag wins). ``None`` switches a limit off. A `Settings` checks every value when it is made and
raises `SettingError` naming the flag and the variable, so a bad setting stops the server before it
touches anything. Checks that need the storage's knowledge import it when they run: ``eightoff deal``
loads this module and has no use for SQLAlchemy.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any
from urllib.parse import urlsplit

from protocol.limits import MAX_PAGE_SIZE
from server.origins import OriginPolicy, TrustedProxies
from server.play.race.matchmaking import MatchRules
from server.play.race.ratings import ESTABLISHED_NETWORKS, MEETINGS_PER_DAY, FarmGuard

__all__ = [
    "DEFAULT_DATABASE_URL",
    "SettingError",
    "Settings",
    "Unavailable",
    "add_arguments",
    "needs",
    "setting_names",
    "settings_from_args",
]

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///eightoff.sqlite3"
_REDIS_SCHEMES = ("redis", "rediss", "unix")

#: A check returns what is wrong with a value, or None when it is fine.
Check = Callable[[Any], str | None]


class SettingError(ValueError):
    """A setting's value is unusable; the message names its flag and its environment variable."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"{setting_names(name)}: {problem}")
        self.name = name


class Unavailable(Exception):
    """What a setting points at is not there (a database, Redis, an address to listen on): a failure
    of the environment, not of the setting's form. The message is one line naming the setting."""


def setting_names(*names: str) -> str:
    """How an operator sets ``names``: ``--port (EIGHTOFF_PORT)``."""
    return ", ".join(f"--{name.replace('_', '-')} ({_env_name(name)})" for name in names)


@contextmanager
def needs(*settings: str, what: str) -> Iterator[None]:
    """Turn the environment's refusal (an OS, database, migration or Redis error) into `Unavailable`:
    ``what`` failed, naming the ``settings`` that point at it."""
    from alembic.util.exc import CommandError
    from redis.exceptions import RedisError
    from sqlalchemy.exc import SQLAlchemyError

    try:
        yield
    except (OSError, SQLAlchemyError, CommandError, RedisError) as exc:
        cause = getattr(exc, "orig", None) or exc  # SQLAlchemy wraps the driver's error
        lines = str(cause).strip().splitlines()
        reason = lines[0] if lines else type(cause).__name__
        raise Unavailable(f"{setting_names(*settings)}: {what}: {reason}") from exc


def _at_least(low: float) -> Check:
    def check(value: float | None) -> str | None:
        if value is None or (math.isfinite(value) and value >= low):
            return None
        return f"{value!r} is not a number of at least {low:g}"

    return check


def _positive(value: float | None) -> str | None:
    if value is None or (math.isfinite(value) and value > 0):
        return None
    return f"{value!r} is not a positive number"


def _between(low: int, high: int) -> Check:
    def check(value: int) -> str | None:
        return None if low <= value <= high else f"{value!r} is not in {low}..{high}"

    return check


def _parses(parse: Callable[[str], object]) -> Check:
    """A check by a parser that raises ValueError with the reason."""

    def check(value: str) -> str | None:
        try:
            parse(value)
        except ValueError as exc:
            return str(exc)
        return None

    return check


def _one_of(*choices: str) -> Check:
    def check(value: str) -> str | None:
        return None if value in choices else f"{value!r} is not one of {', '.join(choices)}"

    return check


def _port(value: int) -> str | None:
    if 0 <= value <= 65535:
        return None
    return f"{value} is not a TCP port: use 1-65535, or 0 for any free port"


def _node(value: str) -> str | None:
    """A node's name goes to clients in ``welcome``, where the spec allows 1..64 characters."""
    if value.strip() and len(value) <= 64:
        return None
    return f"{value!r} is not a name of 1..64 characters"


def _sqlite_synchronous(value: str) -> str | None:
    from server.storage.db import SQLITE_SYNCHRONOUS

    if value.upper() in SQLITE_SYNCHRONOUS:
        return None
    return f"{value!r} is not one of {', '.join(sorted(SQLITE_SYNCHRONOUS))}"


def _database_url(value: str) -> str | None:
    """The URL's scheme must name a database and driver the storage supports (the value itself is not
    repeated: it may hold a password)."""
    from sqlalchemy.exc import ArgumentError

    from server.storage.db import SUPPORTED_DRIVERS, async_url

    try:
        driver = async_url(value).drivername
    except ArgumentError:
        return "not a database URL: use sqlite+aiosqlite:///FILE or postgresql+asyncpg://USER@HOST/DB"
    if driver in SUPPORTED_DRIVERS:
        return None
    return f"unknown scheme {driver!r}: use sqlite+aiosqlite:///FILE or postgresql+asyncpg://USER@HOST/DB"


def _redis_url(value: str | None) -> str | None:
    if value is None or urlsplit(value).scheme in _REDIS_SCHEMES:
        return None
    return f"unknown scheme {urlsplit(value).scheme!r}: use redis://HOST:PORT/DB, rediss://… or unix://…"


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Everything an operator can set; the defaults run one process on SQLite."""

    # Network
    host: str = field(default="127.0.0.1", metadata={"help": "interface to listen on"})
    port: int = field(default=8765, metadata={"help": "TCP port (0 picks a free one)", "check": _port})
    node: str = field(
        default="node-1",
        metadata={
            "help": "this node's name, sent in welcome (with --workers N > 1, worker i is NODE-wI)",
            "check": _node,
        },
    )
    workers: int = field(
        default=1,
        metadata={
            "help": "server processes sharing the port (SO_REUSEPORT), the database and a bus relayed "
            "by a supervisor (Redis with --redis-url); 1: this process serves alone. A worker that dies "
            "stops them all (exit 1): never a silent half-capacity node (docs/scaling.md)",
            "check": _at_least(1),
        },
    )
    # Storage
    database_url: str = field(
        default=DEFAULT_DATABASE_URL,
        metadata={
            "help": "SQLAlchemy async URL: sqlite+aiosqlite:///FILE or postgresql+asyncpg://…",
            "check": _database_url,
        },
    )
    sqlite_synchronous: str = field(
        default="FULL",
        metadata={
            "help": "SQLite synchronous pragma: FULL survives power loss, NORMAL a crash",
            "check": _sqlite_synchronous,
        },
    )
    redis_url: str | None = field(
        default=None,
        metadata={
            "help": "redis://… fans diffs out across nodes sharing one database; unset: one node",
            "check": _redis_url,
        },
    )
    commit_batch: int = field(
        default=1024, metadata={"help": "most writes grouped into one commit", "check": _at_least(1)}
    )
    commit_linger: float = field(
        default=0.001,
        metadata={
            "help": "seconds the writer waits for more writes when its batch is small and writes are "
            "arriving (fewer flushes below saturation; 0: never waits)",
            "check": _at_least(0.0),
        },
    )
    database_timeout: float = field(
        default=5.0,
        metadata={
            "help": "seconds a database round trip may take (connecting included) before unavailable",
            "check": _positive,
        },
    )
    live_window_minutes: float = field(
        default=10.0,
        metadata={
            "help": "live lists followed unfinished games with an action in this many minutes",
            "check": _positive,
        },
    )
    # Limits
    max_frame_bytes: int = field(
        default=4096, metadata={"help": "largest incoming frame; bigger closes 1009", "check": _at_least(1)}
    )
    rate_per_second: float = field(
        default=200.0, metadata={"help": "token bucket refill per connection", "check": _positive}
    )
    rate_burst: int = field(
        default=400, metadata={"help": "token bucket size per connection", "check": _at_least(1)}
    )
    max_games_per_connection: int = field(
        default=16, metadata={"help": "games a connection may hold open", "check": _at_least(1)}
    )
    max_watches_per_connection: int = field(
        default=32, metadata={"help": "games a connection may watch", "check": _at_least(0)}
    )
    max_write_buffer_bytes: int = field(
        default=256 * 1024,
        metadata={"help": "a connection whose unsent data exceeds this is dropped", "check": _at_least(1)},
    )
    idle_timeout: float | None = field(
        default=300.0, metadata={"help": "seconds before a silent client is closed", "check": _positive}
    )
    # Abuse limits (docs/reliability.md)
    max_connections: int = field(
        default=10_000,
        metadata={
            "help": "open connections in all (lowered to fit the open-files limit); over: HTTP 503",
            "check": _at_least(1),
        },
    )
    max_connections_per_address: int | None = field(
        default=256,
        metadata={"help": "open connections from one source address; over: HTTP 503", "check": _at_least(1)},
    )
    new_connections_per_address_per_second: float | None = field(
        default=20.0,
        metadata={
            "help": "new connections one source address may open a second (twice that at once); an "
            "address closed for flooding waits two bursts' time; over: HTTP 503",
            "check": _positive,
        },
    )
    page_requests_per_address_per_second: float | None = field(
        default=200.0,
        metadata={
            "help": "requests for the browser client's files and pages (and /api/time: answers from "
            "memory) one source address may make a second, twice that at once, without their "
            "connections counting toward --new-connections-per-address-per-second (a page load is a "
            "connection per file); past it, or off, they count",
            "check": _positive,
        },
    )
    address_frame_share: float | None = field(
        default=5.0,
        metadata={
            "help": "frames all connections from one source address may send together, in connections' "
            "worth of --rate-per-second and --rate-burst (5: 1000 a second, 2000 at once), or off; "
            "over: rate_limited, then 1008",
            "check": _positive,
        },
    )
    trusted_proxies: str = field(
        default="",
        metadata={
            "help": "addresses or networks of proxies whose X-Forwarded-For names the client (its last "
            "entry), comma-separated; the per-address limits then count the client",
            "check": _parses(TrustedProxies.parse),
        },
    )
    ipv6_prefix: int = field(
        default=64,
        metadata={
            "help": "the per-address limits count an IPv6 client by its network of this many bits (one "
            "subscriber holds a /64 at least; 128: each address alone); IPv4 clients by their address",
            "check": _between(1, 128),
        },
    )
    origins: str = field(
        default="self,none",
        metadata={
            "help": "allowed WebSocket Origin values, comma-separated: self (this server's own origin), "
            "none (no Origin: bots), * (any) or scheme://host[:port]; others get HTTP 403",
            "check": _parses(OriginPolicy.parse),
        },
    )
    guests_per_address_per_minute: int | None = field(
        default=30,
        metadata={"help": "guest players one source address may create a minute", "check": _at_least(1)},
    )
    reads_per_address_per_second: float | None = field(
        default=20.0,
        metadata={
            "help": "requests the database answers (leaderboard, profile, games, replay of a game "
            "not in memory, and every race request) that the players of one source address may make "
            "a second, twice that at once; over: rate_limited",
            "check": _positive,
        },
    )
    new_games_per_player_per_minute: int | None = field(
        default=120,
        metadata={
            "help": "games one player may start a minute (a quarter of it at once), per process",
            "check": _at_least(4),
        },
    )
    new_games_per_address_per_minute: int | None = field(
        default=240,
        metadata={
            "help": "games the players of one source address may start a minute (a quarter of it at once), "
            "per process",
            "check": _at_least(4),
        },
    )
    max_unfinished_games_per_player: int | None = field(
        default=100,
        metadata={
            "help": "unfinished games a player keeps; a new one abandons the least recently played",
            "check": _at_least(1),
        },
    )
    welcome_games: int = field(
        default=20,
        metadata={
            "help": "unfinished games listed in welcome, most recent first (games pages the rest)",
            "check": _between(1, MAX_PAGE_SIZE),
        },
    )
    abandon_after: float | None = field(
        default=7 * 24 * 3600.0,
        metadata={
            "help": "seconds without play after which an unfinished game is abandoned",
            "check": _positive,
        },
    )
    quick_match_band: float = field(
        default=100.0,
        metadata={
            "help": "quick match: rating points either side of a player's own when it starts waiting",
            "check": _at_least(0),
        },
    )
    quick_match_widening: float = field(
        default=10.0,
        metadata={
            "help": "quick match: rating points the band widens by each second of waiting",
            "check": _at_least(0),
        },
    )
    quick_match_enough: int = field(
        default=4,
        metadata={
            "help": "quick match: players in the band who start a race at once (at most the max players)",
            "check": _between(2, 8),
        },
    )
    quick_match_max_players: int = field(
        default=8,
        metadata={"help": "quick match: seats of a race it forms, at most", "check": _between(2, 8)},
    )
    quick_match_wait: float = field(
        default=30.0,
        metadata={
            "help": "quick match: seconds after which a player races whoever waits in its variant",
            "check": _positive,
        },
    )
    race_countdown: float = field(
        default=5.0,
        metadata={"help": "seconds from race_start to the reveal of a race's deal", "check": _at_least(0)},
    )
    race_board_delay: float = field(
        default=30.0,
        metadata={
            "help": "seconds a race's spectators (who hold no seat) see its boards late",
            "check": _at_least(0),
        },
    )
    races_per_player_per_hour: int | None = field(
        default=30,
        metadata={"help": "races one player may create an hour", "check": _at_least(1)},
    )
    races_per_address_per_hour: int | None = field(
        default=60,
        metadata={
            "help": "races the players of one source address may create an hour together (a lobby "
            "flood from many guests of one address)",
            "check": _at_least(1),
        },
    )
    rated_networks: str = field(
        default="distinct",
        metadata={
            "help": "who of a race is rated: 'distinct', only seats whose network (the per-address "
            "limits' address: an IPv6 client's --ipv6-prefix network) no other seat of the race "
            "shares, or 'any' (a LAN of friends behind one address); docs/ratings.md, Farming",
            "check": _one_of("distinct", "any"),
        },
    )
    rated_meetings_per_day: int | None = field(
        default=MEETINGS_PER_DAY,
        metadata={
            "help": "rated races a day in which two networks may both have a rated seat (more of "
            "their races rate the rest of the seats only), or off",
            "check": _at_least(1),
        },
    )
    established_networks: int | None = field(
        default=ESTABLISHED_NETWORKS,
        metadata={
            "help": "networks other than its own a player must have finished races against before "
            "its races rate (a race rates when two of its rated seats are established), or off",
            "check": _at_least(1),
        },
    )
    race_joins_per_player_per_minute: int | None = field(
        default=30,
        metadata={
            "help": "race_join and race_leave requests one player may make a minute",
            "check": _at_least(1),
        },
    )
    shutdown_grace: float = field(
        default=10.0,
        metadata={"help": "seconds to finish in-flight actions on SIGTERM", "check": _at_least(0)},
    )

    def __post_init__(self) -> None:
        for setting in fields(self):
            check: Check | None = setting.metadata.get("check")
            problem = check(getattr(self, setting.name)) if check else None
            if problem is not None:
                raise SettingError(setting.name, problem)
        if self.quick_match_enough > self.quick_match_max_players:
            raise SettingError(
                "quick_match_enough", f"{self.quick_match_enough} is more than --quick-match-max-players"
            )
        if self.workers > 1 and _node(self.worker_node(self.workers)) is not None:
            raise SettingError("node", f"{self.node!r} leaves no room for the worker suffix -w{self.workers}")

    def worker_share(self) -> Settings:
        """The settings of one of ``workers`` workers (``workers`` 1): the connection caps counted
        per process (in all, per address, new ones and page requests per address, new guests and
        database reads per address) divided among them, rounded down (never below 1), so that the
        node as a whole keeps the figures set."""
        n = self.workers

        def divided(cap: int | None) -> int | None:
            return None if cap is None else max(1, cap // n)

        def shared(rate: float | None) -> float | None:
            return None if rate is None else rate / n

        return dataclasses.replace(
            self,
            workers=1,
            max_connections=max(1, self.max_connections // n),
            max_connections_per_address=divided(self.max_connections_per_address),
            new_connections_per_address_per_second=shared(self.new_connections_per_address_per_second),
            page_requests_per_address_per_second=shared(self.page_requests_per_address_per_second),
            guests_per_address_per_minute=divided(self.guests_per_address_per_minute),
            reads_per_address_per_second=shared(self.reads_per_address_per_second),
        )

    def match_rules(self) -> MatchRules:
        """The quick match parameters (`server.play.race.matchmaking`)."""
        return MatchRules(
            band=self.quick_match_band,
            widening=self.quick_match_widening,
            enough=self.quick_match_enough,
            max_players=self.quick_match_max_players,
            wait=self.quick_match_wait,
        )

    def farm_guard(self) -> FarmGuard:
        """Who of a finished race is rated (`server.play.race.ratings`)."""
        return FarmGuard(
            distinct_networks=self.rated_networks == "distinct",
            meetings_per_day=self.rated_meetings_per_day,
            established_networks=self.established_networks,
        )

    def worker_node(self, index: int) -> str:
        """The node name of worker ``index`` (1-based) of ``--workers N``: each tells clients apart."""
        return f"{self.node}-w{index}"


def _env_name(name: str) -> str:
    return f"EIGHTOFF_{name.upper()}"


def _convert(kind: Any, text: str) -> Any:
    kind_text = str(kind)
    if text.lower() in ("", "none", "off") and "None" in kind_text:
        return None
    if kind_text.startswith("int"):
        return int(text)
    if kind_text.startswith("float"):
        return float(text)
    return text


def _parser_for(kind: Any) -> Callable[[str], Any]:
    """An argparse ``type`` named after the setting's type, so errors read "invalid int value"."""

    def parse(text: str) -> Any:
        return _convert(kind, text)

    parse.__name__ = str(kind).split(" ")[0]
    return parse


def add_arguments(parser: argparse.ArgumentParser, only: tuple[str, ...] | None = None) -> None:
    """Add one ``--flag`` per setting (or per setting named in ``only``, for a command that needs a
    few); each help text names its environment variable and default. An absent flag is absent from
    the namespace, so `settings_from_args` falls back to the variable, then the default."""
    for setting in fields(Settings):
        if only is not None and setting.name not in only:
            continue
        flag = "--" + setting.name.replace("_", "-")
        parser.add_argument(
            flag,
            dest=setting.name,
            default=argparse.SUPPRESS,  # absent flags are absent: a flag given as "off" is None
            type=_parser_for(setting.type),
            metavar=setting.name.upper(),
            help=f"{setting.metadata['help']} (env {_env_name(setting.name)}; default {setting.default})",
        )


def settings_from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from parsed flags, then ``EIGHTOFF_*`` variables, then defaults.

    Raises:
        SettingError: a variable that is not of its setting's type, or any value `Settings` refuses.
    """
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for setting in fields(Settings):
        if hasattr(args, setting.name):
            values[setting.name] = getattr(args, setting.name)
        elif _env_name(setting.name) in environ:
            text = environ[_env_name(setting.name)]
            try:
                values[setting.name] = _convert(setting.type, text)
            except ValueError:
                raise SettingError(setting.name, f"{text!r} is not a valid {setting.type}") from None
    return dataclasses.replace(Settings(), **values)
