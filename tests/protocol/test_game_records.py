"""Game records (protocol/records.py, README section 14): the vectors file is what its generator
writes and every entry reads, writes and replays as it says; text and record are a symmetric pair
on random games; bad text is refused with the line and the reason."""

from __future__ import annotations

import datetime as dt
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import protocol
from engine import UNDO, Action, Deal, Game
from protocol import (
    RECORD_FORMAT,
    RULES_VERSION,
    GameRecord,
    InvalidRecordError,
    RecordError,
    RecordMismatchError,
    RecordResult,
    replay_record,
)
from protocol.records import KNOWN_TAGS, MAX_RECORD_CHARS
from tests.protocol.make_record_vectors import PATH, build, render

VECTORS: dict[str, list[dict[str, Any]]] = json.loads(PATH.read_text(encoding="utf-8"))


def test_record_vectors_file_is_what_the_generator_writes() -> None:
    assert PATH.read_text(encoding="utf-8") == render(build())


@pytest.mark.parametrize("case", VECTORS["valid"], ids=[case["name"] for case in VECTORS["valid"]])
def test_record_vectors_valid_read_write_and_replay(case: dict[str, Any]) -> None:
    record = GameRecord.parse(case["text"])
    assert record.text() == case["canonical"]
    assert GameRecord.parse(case["canonical"]) == record
    game = replay_record(record)
    replay = {"status": game.status.value, "score": game.score, "moves": game.moves, "undos": game.undos}
    assert {**replay, "v": game.v} == case["replay"]
    assert game.v == len(record.actions)


@pytest.mark.parametrize("case", VECTORS["invalid"], ids=[case["name"] for case in VECTORS["invalid"]])
def test_record_vectors_invalid_are_refused_as_they_say(case: dict[str, Any]) -> None:
    if case["error"] == "invalid":
        with pytest.raises(InvalidRecordError):
            GameRecord.parse(case["text"])
    else:
        assert case["error"] == "mismatch"
        record = GameRecord.parse(case["text"])  # well formed ...
        with pytest.raises(RecordMismatchError):
            replay_record(record)  # ... but not what its actions do


def test_record_vectors_cover_every_result_and_variant() -> None:
    records = [GameRecord.parse(case["text"]) for case in VECTORS["valid"]]
    assert {record.result for record in records} == set(RecordResult)
    assert {record.deal.cells for record in records} == {8, 4, 2}
    assert any(record.extra for record in records)
    assert any(action is UNDO for record in records for action in record.actions)


def random_actions(deal: Deal, seed: int, length: int) -> tuple[Action, ...]:
    """A random legal line of play from ``deal`` (undos included)."""
    rng = random.Random(seed)
    game = Game(deal)
    for _ in range(length):
        moves = sorted(game.legal_moves, key=str)
        if game.undo_depth and (not moves or rng.random() < 0.2):
            game.play(UNDO)
        elif moves:
            game.play(rng.choice(moves))
    return game.log


NAMES = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=32
)
MOMENTS = st.datetimes(
    min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2999, 1, 1), timezones=st.just(dt.UTC)
).map(lambda moment: moment.replace(microsecond=moment.microsecond // 1000 * 1000))


@given(
    number=st.integers(0, 2**35 - 1),
    cells=st.sampled_from([8, 4, 2]),
    seed=st.integers(0, 2**32),
    length=st.integers(0, 120),
    player=st.none() | NAMES,
    started=st.none() | MOMENTS,
    extra=st.lists(
        st.tuples(st.from_regex(r"X[a-z0-9_]{0,8}", fullmatch=True), NAMES),
        max_size=2,
        unique_by=lambda t: t[0],
    ),
)
def test_record_text_and_parse_are_a_symmetric_pair(
    number: int,
    cells: int,
    seed: int,
    length: int,
    player: str | None,
    started: dt.datetime | None,
    extra: list[tuple[str, str]],
) -> None:
    deal = Deal(number, cells)
    actions = random_actions(deal, seed, length)
    game = Game.replay(deal, actions)
    record = GameRecord(
        deal=deal,
        actions=actions,
        result=RecordResult.PLAYING if not game.is_won() else RecordResult.WON,
        player=player,
        started_at=started,
        score=game.score,
        moves=game.moves,
        undos=game.undos,
        extra=tuple(extra),
    )
    text = record.text()
    assert GameRecord.parse(text) == record
    assert all(len(line) <= 79 for line in text.split("\n\n", 1)[1].splitlines())
    assert replay_record(record) == game


HEAD = '[Format "EOR1"]\n[Rules "1"]\n[Code "EO1-C8-AAAAAFA"]\n[Result "*"]\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the tag Format is missing"),
        ('[Format "EOR1"]\n[Rules "1"]\n[Code "EO1-C8-AAAAAFA"]\n[Result "*"]\n', "the movetext is missing"),
        (
            '[Format "EOR1"]\n[Rules "1"]\n[Code "EO1-C8-AAAAAFA"]\n[Result "*"]\n\n1. t8-t6 2.\n*\n',
            "line 6: a move number without its action",
        ),
        (
            '[Format "EOR1"]\n[Rules "1"]\n[Code "EO1-C8-AAAAAFA"]\n[Result "*"]\n\n1. t8-t6\n2. t8:t6 *\n',
            "line 7: action 2",
        ),
        ('[Format "EOR1"]\n[Rules "1"]\n[Code "EO1-C9-AAAAAFA"]\n[Result "*"]\n\n*\n', "Code:"),
        (
            '[Format "EOR1"]\n[Rules "1"]\n[Code "EO1-C8-AAAAAFA"]\n[Result "lost"]\n\n*\n',
            "Result: won, resigned, abandoned or *",
        ),
        (
            '[Format "EOR1"]\n[Rules "1"]\n[Code "EO1-C8-AAAAAFA"]\n[Result "*"]\n[Moves "007"]\n\n*\n',
            "Moves: not a count",
        ),
        (
            HEAD + '[Daily "2026-02-30"]\n\n*\n',
            "Daily:",
        ),
        (
            '[Format "EOR1"]\n[Rules "1"]\n[Code "EO1-C8-AAAAAFA"]\n[Player "a\tb"]\n',
            "line 4: not a tag pair",
        ),
        ("x" * 70_000, "at most 64,000 characters"),
    ],
)
def test_record_parse_refuses_bad_text_saying_where_and_why(text: str, message: str) -> None:
    with pytest.raises(InvalidRecordError, match=re.escape(message)) as refusal:
        GameRecord.parse(text)
    assert isinstance(refusal.value, RecordError) and isinstance(refusal.value, ValueError)


def test_record_replay_names_the_illegal_action() -> None:
    text = '[Format "EOR1"]\n[Rules "1"]\n[Code "EO1-C8-AAAAAFA"]\n[Result "*"]\n\n1. t8-t6 2. t8-t6 *\n'
    with pytest.raises(RecordMismatchError, match=r"action 2 \(t8-t6\): t8-t6 is illegal: wrong"):
        replay_record(GameRecord.parse(text))


def test_record_resigned_replays_to_a_resigned_game() -> None:
    text = '[Format "EOR1"]\n[Rules "1"]\n[Code "EO1-C8-AAAAAFA"]\n[Result "resigned"]\n\n1. t8-t6 resigned\n'
    game = replay_record(GameRecord.parse(text))
    assert (game.status.value, game.v, game.moves) == ("resigned", 1, 1)


@pytest.mark.parametrize(("name", "value"), [("Player", "two\nlines"), ("Xtag", "a\x00b"), ("9bad", "x")])
def test_record_text_refuses_a_tag_it_could_not_read_back(name: str, value: str) -> None:
    record = GameRecord(deal=Deal(0, 8), actions=(), result=RecordResult.PLAYING, extra=((name, value),))
    with pytest.raises(InvalidRecordError, match="cannot write the tag"):
        record.text()


# --------------------------------------------------------------------------- the README says the same

README = (Path(protocol.__file__).parent / "README.md").read_text(encoding="utf-8")
SECTION = README[README.index("\n## 14. Game records") :]


def test_readme_example_is_the_start_of_the_won_record_vector() -> None:
    example = re.search(r"```text\n(.*?)\n```", SECTION, re.DOTALL)
    assert example is not None
    won = VECTORS["valid"][0]
    assert won["text"].startswith(example.group(1) + "\n")
    assert "the whole record is the first entry of `vectors/records.json`" in SECTION


def test_readme_tags_table_is_the_tags_of_the_code() -> None:
    rows = re.findall(r"^   \| (`.*?`) \| (required|optional) \|", SECTION, re.MULTILINE)
    named = {name: kind for cell, kind in rows for name in re.findall(r"`([A-Za-z]+)`", cell)}
    assert list(named) == list(KNOWN_TAGS)
    assert {name for name, kind in named.items() if kind == "required"} == {
        "Format",
        "Rules",
        "Code",
        "Result",
    }
    assert f"`{RECORD_FORMAT}`, this format" in SECTION and f"`{RULES_VERSION}`: the rules" in SECTION
    results = re.search(r"\| `Result` \| required \| (.*) \|", SECTION)
    assert results is not None
    assert {token for token in re.findall(r"`([a-z*]+)`", results.group(1))} == {
        r.value for r in RecordResult
    }
    assert f"at most {MAX_RECORD_CHARS:,} characters" in SECTION


def test_readme_describes_records_json_as_it_is() -> None:
    vectors = " ".join(README[README.index("\n## 13. Test vectors") : README.index("\n## 14.")].split())
    keys = {key for kind in VECTORS.values() for case in kind for key in case}
    keys |= {key for case in VECTORS["valid"] for key in case["replay"]} | set(VECTORS)
    keys |= {case["error"] for case in VECTORS["invalid"]}
    for key in keys:
        assert f"`{key}`" in vectors, key
