"""Settings: the server's configuration, and the only reader of ``os.environ``.

Every option is a command-line flag of ``eightoff serve`` and an ``EIGHTOFF_*`` environment variable
(the flag wins). ``None`` switches a limit off.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["DEFAULT_DATABASE_URL", "Settings", "add_arguments", "settings_from_args"]

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///eightoff.sqlite3"


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Everything an operator can set; the defaults run one process on SQLite."""

    # Network
    host: str = field(default="127.0.0.1", metadata={"help": "interface to listen on"})
    port: int = field(default=8765, metadata={"help": "TCP port (0 picks a free one)"})
    node: str = field(default="node-1", metadata={"help": "this node's name, sent in welcome"})
    # Storage
    database_url: str = field(
        default=DEFAULT_DATABASE_URL,
        metadata={"help": "SQLAlchemy async URL: sqlite+aiosqlite:///FILE or postgresql+asyncpg://…"},
    )
    sqlite_synchronous: str = field(
        default="FULL",
        metadata={"help": "SQLite synchronous pragma: FULL survives power loss, NORMAL a crash"},
    )
    redis_url: str | None = field(
        default=None,
        metadata={"help": "redis://… fans diffs out across nodes sharing one database; unset: one node"},
    )
    commit_batch: int = field(default=1024, metadata={"help": "most writes grouped into one commit"})
    database_timeout: float = field(
        default=5.0,
        metadata={"help": "seconds a database round trip may take (connecting included) before unavailable"},
    )
    live_window_minutes: float = field(
        default=10.0, metadata={"help": "live lists unfinished games with an action in this many minutes"}
    )
    # Limits
    max_frame_bytes: int = field(
        default=4096, metadata={"help": "largest incoming frame; bigger closes 1009"}
    )
    rate_per_second: float = field(default=200.0, metadata={"help": "token bucket refill per connection"})
    rate_burst: int = field(default=400, metadata={"help": "token bucket size per connection"})
    max_games_per_connection: int = field(default=16, metadata={"help": "games a connection may hold open"})
    max_watches_per_connection: int = field(default=32, metadata={"help": "games a connection may watch"})
    max_write_buffer_bytes: int = field(
        default=256 * 1024, metadata={"help": "a connection whose unsent data exceeds this is dropped"}
    )
    idle_timeout: float | None = field(
        default=300.0, metadata={"help": "seconds before a silent client is closed"}
    )
    shutdown_grace: float = field(
        default=10.0, metadata={"help": "seconds to finish in-flight actions on SIGTERM"}
    )


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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one ``--flag`` per setting; each help text names its environment variable and default."""
    for setting in fields(Settings):
        flag = "--" + setting.name.replace("_", "-")
        parser.add_argument(
            flag,
            dest=setting.name,
            default=None,
            type=_parser_for(setting.type),
            metavar=setting.name.upper(),
            help=f"{setting.metadata['help']} (env {_env_name(setting.name)}; default {setting.default})",
        )


def settings_from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from parsed flags, then ``EIGHTOFF_*`` variables, then defaults."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for setting in fields(Settings):
        flag_value = getattr(args, setting.name, None)
        if flag_value is not None:
            values[setting.name] = flag_value
        elif _env_name(setting.name) in environ:
            text = environ[_env_name(setting.name)]
            try:
                values[setting.name] = _convert(setting.type, text)
            except ValueError:
                name = _env_name(setting.name)
                raise ValueError(f"{name}={text!r} is not a valid {setting.type}") from None
    return dataclasses.replace(Settings(), **values)
