"""Game records: one game as portable text, like PGN for chess (protocol/README.md section 14).

A record is tag pairs, a blank line, then the actions in the engine's notation, numbered by the version
each makes, and a result token::

    [Format "EOR1"]
    [Rules "1"]
    [Code "EO1-C8-AAAAAFA"]
    [Result "won"]

    1. t8-t6 2. t4-t2 3. undo ... won

Pure: ``GameRecord.parse(text)`` / ``record.text()`` are the symmetric pair, and ``replay_record``
checks a record against the rules by replaying it through the engine. Reading files and databases is
the caller's business (``eightoff replay`` and ``eightoff export``).

RecordError (ValueError)
├── InvalidRecordError     text that is not a record (the message says the line)
└── RecordMismatchError    a record whose actions do not replay to what it says
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

from engine import Action, Deal, EngineError, Game, InvalidNotationError, Status, parse_action
from protocol.timestamps import format_timestamp, parse_timestamp

__all__ = [
    "KNOWN_TAGS",
    "MAX_RECORD_CHARS",
    "RECORD_FORMAT",
    "RULES_VERSION",
    "GameRecord",
    "InvalidRecordError",
    "RecordError",
    "RecordMismatchError",
    "RecordResult",
    "replay_record",
]

#: The record format this module reads and writes; a change a reader of EOR1 could misread makes EOR2.
RECORD_FORMAT = "EOR1"
#: The rules the actions follow: those of docs/rules.md for protocol version 1. A change of what is
#: legal or how it scores would make rules 2 (the deal codes have their own version, ``EO1``).
RULES_VERSION = "1"

#: A record longer than this is refused before it is read (a game holds at most 2,000 actions).
MAX_RECORD_CHARS = 64_000
_LINE_WIDTH = 79
_TAG = re.compile(r'\[([A-Za-z][A-Za-z0-9_]{0,31}) "((?:[^"\\\x00-\x1f\x7f]|\\["\\])*)"\]')
_NUMBER = re.compile(r"([1-9][0-9]{0,5})\.")
_T = TypeVar("_T")


class RecordError(ValueError):
    """Root of the errors about a record."""


class InvalidRecordError(RecordError):
    """Text that is not a game record."""


class RecordMismatchError(RecordError):
    """A well-formed record whose actions are illegal, or do not end as the record says."""


class RecordResult(Enum):
    """How the recorded game stands: its ``Result`` tag and the last token of the movetext."""

    WON = "won"
    RESIGNED = "resigned"
    ABANDONED = "abandoned"  # never finished, given up by the server after a week without play
    PLAYING = "*"  # still in progress when the record was made


#: The tags this module knows, in the order ``text()`` writes them; ``extra`` tags follow.
KNOWN_TAGS = (
    "Format",
    "Rules",
    "Code",
    "Game",
    "Player",
    "PlayerId",
    "Daily",
    "Started",
    "Finished",
    "Duration",
    "Result",
    "Score",
    "Moves",
    "Undos",
)
_REQUIRED = ("Format", "Rules", "Code", "Result")


@dataclass(frozen=True, slots=True)
class GameRecord:
    """One game: its deal, every action in order (undos included), the result and what is known of
    who played it and when. Optional facts are None when unknown; ``extra`` keeps tags of other
    programs, in order, so that a record passes through unchanged."""

    deal: Deal
    actions: tuple[Action, ...]
    result: RecordResult
    game: str | None = None
    player: str | None = None
    player_id: str | None = None
    daily: dt.date | None = None
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    duration_ms: int | None = None
    score: int | None = None
    moves: int | None = None
    undos: int | None = None
    extra: tuple[tuple[str, str], ...] = ()

    # ------------------------------------------------------------------ writing

    def tags(self) -> list[tuple[str, str]]:
        """The tag pairs of the record, in the order they are written."""
        values: dict[str, object] = {
            "Format": RECORD_FORMAT,
            "Rules": RULES_VERSION,
            "Code": self.deal.code(),
            "Game": self.game,
            "Player": self.player,
            "PlayerId": self.player_id,
            "Daily": self.daily.isoformat() if self.daily else None,
            "Started": format_timestamp(self.started_at) if self.started_at else None,
            "Finished": format_timestamp(self.finished_at) if self.finished_at else None,
            "Duration": self.duration_ms,
            "Result": self.result.value,
            "Score": self.score,
            "Moves": self.moves,
            "Undos": self.undos,
        }
        pairs = [(name, str(value)) for name, value in values.items() if value is not None]
        pairs += self.extra
        for name, value in pairs:
            if _TAG.fullmatch(f'[{name} "{_escape(value)}"]') is None or len(value.splitlines()) > 1:
                raise InvalidRecordError(
                    f"cannot write the tag {name} {value[:40]!r}: no line breaks or controls"
                )
        return pairs

    def text(self) -> str:
        """The record as text: tag pairs, a blank line, the movetext wrapped at 79 columns."""
        head = "".join(f'[{name} "{_escape(value)}"]\n' for name, value in self.tags())
        tokens = [f"{v}. {action.symbol()}" for v, action in enumerate(self.actions, start=1)]
        tokens.append(self.result.value)
        lines: list[str] = []
        for token in tokens:
            if lines and len(lines[-1]) + 1 + len(token) <= _LINE_WIDTH:
                lines[-1] += " " + token
            else:
                lines.append(token)
        return head + "\n" + "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.text()

    # ------------------------------------------------------------------ reading

    @classmethod
    def parse(cls, text: str) -> GameRecord:
        """Read a record as ``text()`` writes it; blanks between tokens and line ends are free, move
        numbers may be left out (when present they must be right), and unknown tags are kept.

        Raises:
            InvalidRecordError: not a record; the message names the line and what is wrong.
        """
        if not isinstance(text, str):
            raise InvalidRecordError(f"a record is text, not {type(text).__name__}")
        if len(text) > MAX_RECORD_CHARS:
            raise InvalidRecordError(f"a record has at most {MAX_RECORD_CHARS:,} characters")
        lines = text.removeprefix("\ufeff").splitlines()
        tags: dict[str, str] = {}
        extra: list[tuple[str, str]] = []
        index = 0
        while index < len(lines) and not lines[index].strip():
            index += 1  # blank lines before the tags
        while index < len(lines) and lines[index].strip():
            name, value = _tag(lines[index].strip(), index + 1)
            if name in tags or any(name == other for other, _ in extra):
                raise InvalidRecordError(f"line {index + 1}: the tag {name} is given twice")
            if name in KNOWN_TAGS:
                tags[name] = value
            else:
                extra.append((name, value))
            index += 1
        for name in _REQUIRED:
            if name not in tags:
                raise InvalidRecordError(f"the tag {name} is missing")
        if tags["Format"] != RECORD_FORMAT:
            raise InvalidRecordError(f"format {tags['Format']!r} is not {RECORD_FORMAT}")
        if tags["Rules"] != RULES_VERSION:
            raise InvalidRecordError(f"rules {tags['Rules']!r} are not rules {RULES_VERSION}")
        actions, result = _movetext(lines, index)
        record = _record(tags, actions, tuple(extra))
        if record.result is not result:
            raise InvalidRecordError(f"the Result tag says {tags['Result']}, the movetext {result.value}")
        return record


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _tag(line: str, number: int) -> tuple[str, str]:
    match = _TAG.fullmatch(line)
    if match is None:
        raise InvalidRecordError(f'line {number}: not a tag pair like [Code "EO1-C8-AAAAAFA"]: {line[:60]!r}')
    return match.group(1), re.sub(r"\\([\"\\])", r"\1", match.group(2))


def _movetext(lines: list[str], start: int) -> tuple[tuple[Action, ...], RecordResult]:
    """The actions and the result token after the tags (from line ``start``, a blank one)."""
    tokens = [(number + 1, token) for number in range(start, len(lines)) for token in lines[number].split()]
    if not tokens:
        raise InvalidRecordError(
            "the movetext is missing: it ends with the result (won, resigned, abandoned or *)"
        )
    *body, (last_line, last) = tokens
    try:
        result = RecordResult(last)
    except ValueError:
        raise InvalidRecordError(
            f"line {last_line}: the movetext must end with won, resigned, abandoned or *, not {last[:20]!r}"
        ) from None
    actions: list[Action] = []
    numbered = 0  # the line of the move number just read, whose action must follow; 0: none
    for line, token in body:
        number = _NUMBER.fullmatch(token)
        if number is not None:
            if int(number.group(1)) != len(actions) + 1 or numbered:
                raise InvalidRecordError(
                    f"line {line}: {token} is not the number of action {len(actions) + 1}"
                )
            numbered = line
            continue
        try:
            actions.append(parse_action(token))
        except InvalidNotationError as exc:
            raise InvalidRecordError(f"line {line}: action {len(actions) + 1}: {exc}") from None
        numbered = 0
    if numbered:
        raise InvalidRecordError(f"line {numbered}: a move number without its action")
    return tuple(actions), result


def _record(
    tags: dict[str, str], actions: tuple[Action, ...], extra: tuple[tuple[str, str], ...]
) -> GameRecord:
    """The record of the known tags' typed values (the required ones are present)."""
    try:
        deal = Deal.from_code(tags["Code"])
    except EngineError as exc:
        raise InvalidRecordError(f"Code: {exc}") from None
    if deal.code() != tags["Code"]:
        raise InvalidRecordError(f"Code: write the canonical {deal.code()}, not {tags['Code']!r}")
    try:
        result = RecordResult(tags["Result"])
    except ValueError:
        raise InvalidRecordError(
            f"Result: won, resigned, abandoned or *, not {tags['Result'][:20]!r}"
        ) from None
    return GameRecord(
        deal=deal,
        actions=actions,
        result=result,
        game=tags.get("Game"),
        player=tags.get("Player"),
        player_id=tags.get("PlayerId"),
        daily=_read("Daily", tags, dt.date.fromisoformat),
        started_at=_read("Started", tags, parse_timestamp),
        finished_at=_read("Finished", tags, parse_timestamp),
        duration_ms=_read("Duration", tags, _count),
        score=_read("Score", tags, _count),
        moves=_read("Moves", tags, _count),
        undos=_read("Undos", tags, _count),
        extra=extra,
    )


def _read(name: str, tags: dict[str, str], parse: Callable[[str], _T]) -> _T | None:
    """The value of tag ``name`` read by ``parse``, or None when the record does not give it."""
    if name not in tags:
        return None
    try:
        return parse(tags[name])
    except ValueError as exc:
        raise InvalidRecordError(f"{name}: {exc}") from None


def _count(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or (text != "0" and text.startswith("0")) or len(text) > 15:
        raise ValueError(f"not a count: {text[:20]!r}")
    return int(text)


# ---------------------------------------------------------------------- checking


def replay_record(record: GameRecord) -> Game:
    """Replay ``record`` through the engine from its deal; the game it ends in.

    A resigned record is resigned after its actions. The result and every figure the record gives
    (score, moves, undos) must be what the replay ends with.

    Raises:
        RecordMismatchError: an action is illegal where it stands, or the game does not end as recorded.
    """
    game = Game(record.deal)
    for v, action in enumerate(record.actions, start=1):
        try:
            game.play(action)
        except EngineError as exc:
            raise RecordMismatchError(f"action {v} ({action}): {exc}") from None
    if record.result is RecordResult.RESIGNED:
        if game.status is not Status.PLAYING:
            raise RecordMismatchError(f"the record says resigned but the game is {game.status.value}")
        game.resign()
    if (record.result is RecordResult.WON) != (game.status is Status.WON):
        raise RecordMismatchError(
            f"the record says {record.result.value} but the game is {game.status.value}"
        )
    for name, recorded, replayed in (
        ("score", record.score, game.score),
        ("moves", record.moves, game.moves),
        ("undos", record.undos, game.undos),
    ):
        if recorded is not None and recorded != replayed:
            raise RecordMismatchError(f"the record says {name} {recorded}, the replay {replayed}")
    return game
