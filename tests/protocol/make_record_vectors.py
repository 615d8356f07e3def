"""Write ``protocol/vectors/records.json``: game records (protocol/README.md section 14) for readers and
writers in any language.

Run ``.venv/bin/python -m tests.protocol.make_record_vectors`` from the project root to rewrite the file;
``test_game_records.py`` checks that the file is what this writes and that every entry reads, writes and
replays as it says.

``valid``: each ``text`` reads as a record whose canonical text (what a writer writes) is ``canonical``
and whose replay ends with ``replay`` (``status``, ``score``, ``moves``, ``undos``, ``v``). ``invalid``:
each ``text`` is refused, ``error`` saying how: ``invalid`` (not a record) or ``mismatch`` (a record
whose actions are illegal or do not end as it says).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path
from typing import Any

import protocol
from engine import Deal, Game, Move, parse_action
from protocol import GameRecord, RecordResult
from tests.support.wire import WINNING_LINE

__all__ = ["PATH", "build", "render"]

PATH = Path(__file__).parents[2] / "protocol" / "vectors" / "records.json"
STARTED = dt.datetime(2026, 11, 30, 4, 48, 59, 123000, tzinfo=dt.UTC)


def _record(code: str, texts: list[str], result: RecordResult, **facts: Any) -> GameRecord:
    """A record of ``texts`` played from ``code``, with the figures its replay ends with."""
    deal = Deal.from_code(code)
    actions = tuple(parse_action(text) for text in texts)
    game = Game.replay(deal, actions)
    figures = {"score": game.score, "moves": game.moves, "undos": game.undos}
    return GameRecord(deal=deal, actions=actions, result=result, **{**figures, **facts})


def _replay(record: GameRecord) -> dict[str, Any]:
    game = protocol.replay_record(record)
    return {
        "status": game.status.value,
        "score": game.score,
        "moves": game.moves,
        "undos": game.undos,
        "v": game.v,
    }


def _resigned_line() -> list[str]:
    """A few C4 moves (the first legal one, by notation, at each step) and two undos."""
    game = Game.from_code("EO1-C4-AAAAAFA")
    texts: list[str] = []
    for _ in range(6):
        moves = sorted(game.legal_moves, key=str)
        if not moves:
            break
        game.play(moves[0])
        texts.append(moves[0].symbol())
    return [*texts, "undo", "undo"]


def valid_records() -> list[tuple[str, GameRecord]]:
    won = _record(
        "EO1-C8-AAAAAFA",
        list(WINNING_LINE),
        RecordResult.WON,
        game="7Kq2XwbT9m-Ls4fR",
        player="Ann",
        player_id="3fQ9Lk2vBn8sZ1wD",
        started_at=STARTED,
        finished_at=STARTED + dt.timedelta(milliseconds=754012),
        duration_ms=754012,
    )
    resigned = _record(
        "EO1-C4-AAAAAFA",
        _resigned_line(),
        RecordResult.RESIGNED,
        player='Zoë "Z" \\ 🂡',
        daily=dt.date(2026, 11, 30),
        started_at=STARTED,
        finished_at=STARTED + dt.timedelta(seconds=61),
        duration_ms=61000,
    )
    playing = GameRecord(
        deal=Deal.from_code("EO1-C8-AAAAAFA"),
        actions=tuple(parse_action(text) for text in ["t8-t6", "undo", "t8-t6"]),
        result=RecordResult.PLAYING,
    )
    untouched = GameRecord(deal=Deal.from_code("EO1-C2-AAAAAAA"), actions=(), result=RecordResult.ABANDONED)
    return [
        ("a won game with every tag", won),
        ("a resigned daily game with undos, quotes and a backslash in the name", resigned),
        ("a game in progress, the required tags only", playing),
        ("an abandoned game without a single action", untouched),
    ]


def _loose(record: GameRecord) -> str:
    """The text of ``record`` as a person might write it: CRLF, no move numbers, a tag of another
    program, blanks around tokens."""
    head, _, _ = record.text().partition("\n\n")
    body = "  ".join(action.symbol() for action in record.actions)
    return (head + '\n[Site "somewhere"]\n\n  ' + body + "\n\n" + record.result.value + "\n").replace(
        "\n", "\r\n"
    )


def invalid_texts(won: GameRecord) -> list[tuple[str, str, str]]:
    text = won.text()
    head, _, body = text.partition("\n\n")
    first = Move.parse(WINNING_LINE[0])
    illegal = GameRecord(
        deal=won.deal, actions=(Move(first.source, first.target, 2),), result=RecordResult.PLAYING
    )
    return [
        ("no Format tag", text.replace('[Format "EOR1"]\n', ""), "invalid"),
        ("another format", text.replace('"EOR1"', '"EOR9"'), "invalid"),
        ("other rules", text.replace('[Rules "1"]', '[Rules "2"]'), "invalid"),
        ("a tag without quotes", text.replace('[Player "Ann"]', "[Player Ann]"), "invalid"),
        ("a tag given twice", text.replace('[Player "Ann"]', '[Player "Ann"]\n[Player "Bo"]'), "invalid"),
        ("a code in lower case", text.replace("EO1-C8-AAAAAFA", "eo1-c8-aaaaafa"), "invalid"),
        ("a timestamp without milliseconds", text.replace("04:48:59.123Z", "04:48:59Z"), "invalid"),
        ("a score that is not a count", text.replace('[Score "935"]', '[Score "-5"]'), "invalid"),
        ("an action that is not notation", text.replace("1. t8-t6", "1. t9-t6"), "invalid"),
        ("a wrong move number", text.replace("2. t4-t2", "3. t4-t2"), "invalid"),
        ("no result token", head + "\n\n" + body.rsplit(" ", 1)[0] + "\n", "invalid"),
        ("the result token differs from the tag", text.replace(" won\n", " resigned\n"), "invalid"),
        ("an illegal action", illegal.text(), "mismatch"),
        (
            "a won game whose last action is missing",
            text.replace(f" {len(WINNING_LINE)}. t", " X").split(" X")[0] + " won\n",
            "mismatch",
        ),
        ("a wrong score", text.replace('[Score "935"]', '[Score "940"]'), "mismatch"),
        ("a wrong undo count", text.replace('[Undos "0"]', '[Undos "1"]'), "mismatch"),
        ("a won game said to be resigned", text.replace("won", "resigned"), "mismatch"),
    ]


def build() -> dict[str, Any]:
    records = valid_records()
    valid = [
        {"name": name, "text": record.text(), "canonical": record.text(), "replay": _replay(record)}
        for name, record in records
    ]
    won = records[0][1]
    loose = dataclasses.replace(won, extra=(("Site", "somewhere"),))
    valid.append(
        {
            "name": "the won game written loosely: CRLF, no move numbers, another program's tag",
            "text": _loose(won),
            "canonical": loose.text(),
            "replay": _replay(loose),
        }
    )
    invalid = [{"name": name, "text": text, "error": error} for name, text, error in invalid_texts(won)]
    return {"valid": valid, "invalid": invalid}


def render(vectors: dict[str, Any]) -> str:
    """JSON with one line per entry."""
    parts = []
    for kind in ("valid", "invalid"):
        lines = ",\n".join("    " + json.dumps(entry, ensure_ascii=False) for entry in vectors[kind])
        parts.append(f'  "{kind}": [\n{lines}\n  ]')
    return "{\n" + ",\n".join(parts) + "\n}\n"


def main() -> None:
    vectors = build()
    PATH.write_text(render(vectors), encoding="utf-8")
    print(f"wrote {len(vectors['valid'])} valid and {len(vectors['invalid'])} invalid records to {PATH}")


if __name__ == "__main__":
    main()
