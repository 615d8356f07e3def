"""`eightoff export GAME_ID` and `eightoff replay FILE` (protocol/README.md section 14) on games a real
server stored: the export is the game as played (deal, player, times, actions, result) and replays as
it says; a changed record, a file that is no record and an unknown id are refused, each with one line
and its exit status."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from protocol import GameRecord, RecordResult, parse_timestamp, replay_record
from server.ops.cli import main
from tests.support import dbutil, serverutil
from tests.support.wsclient import WsClient

ROOT = Path(__file__).parents[2]


def winning_line() -> list[str]:
    """A winning line of EO1-C8-AAAAAFA: the actions of the won game of the record vectors."""
    vectors = json.loads((ROOT / "protocol" / "vectors" / "records.json").read_text(encoding="utf-8"))
    won = GameRecord.parse(vectors["valid"][0]["text"])
    assert won.result is RecordResult.WON and won.deal.code() == "EO1-C8-AAAAAFA"
    return [action.symbol() for action in won.actions]


def fields(text: str) -> dict[str, str | int]:
    piles, _, count = text.partition(":")
    source, target = piles.split("-")
    return {"from": source, "to": target, **({"n": int(count)} if count else {})}


async def play_games(database_url: str) -> tuple[dict[str, str], dict[str, object]]:
    """A won game and a resigned one (with an undo), played by Ann; their ids and the won snapshot."""
    async with serverutil.running_app(database_url, sqlite_synchronous="NORMAL") as app:
        client = await WsClient.open(serverutil.ws_url(app))
        await client.hello(name="Ann")
        snapshot = await client.request("new_game", code="EO1-C8-AAAAAFA")
        for v, text in enumerate(winning_line()):
            assert (await client.request("move", game=snapshot["game"], v=v, **fields(text)))["type"] == "ack"
        resigned = await client.request("new_game", code="EO1-C4-AAAAAFA")
        for request in (
            {"type": "move", **fields("t4-t2")},
            {"type": "undo"},
            {"type": "move", **fields("t4-t2")},
        ):
            kind = str(request.pop("type"))
            assert (await client.request(kind, game=resigned["game"], **request))["type"] == "ack"
        assert (await client.request("resign", game=resigned["game"]))["type"] == "game_over"
        await client.close()
    return {"won": snapshot["game"], "resigned": resigned["game"]}, snapshot


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str], dict[str, object]]:
    url = dbutil.sqlite_url(tmp_path_factory.mktemp("records") / "eightoff.db")
    ids, snapshot = asyncio.run(play_games(url))
    return url, ids, snapshot


def export(url: str, game_id: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(["export", game_id, "--database-url", url])
    out, err = capsys.readouterr()
    return status, out, err


def test_export_writes_the_won_game_as_played(
    stored: tuple[str, dict[str, str], dict[str, object]], capsys: pytest.CaptureFixture[str]
) -> None:
    url, ids, snapshot = stored
    status, text, err = export(url, ids["won"], capsys)
    assert (status, err) == (0, "")
    record = GameRecord.parse(text)
    assert record.text() == text
    assert (record.deal.code(), record.game, record.player, record.result) == (
        "EO1-C8-AAAAAFA",
        ids["won"],
        "Ann",
        RecordResult.WON,
    )
    assert record.player_id == snapshot["player"]["id"]  # type: ignore[index]
    assert record.started_at == parse_timestamp(str(snapshot["started_at"]))
    assert record.finished_at is not None and record.finished_at >= record.started_at
    assert [action.symbol() for action in record.actions] == winning_line()
    game = replay_record(record)
    assert (game.score, game.moves, game.undos) == (record.score, record.moves, record.undos) == (935, 240, 0)


def test_export_writes_a_resign_as_the_result_not_an_action(
    stored: tuple[str, dict[str, str], dict[str, object]], capsys: pytest.CaptureFixture[str]
) -> None:
    url, ids, _ = stored
    status, text, _ = export(url, ids["resigned"], capsys)
    record = GameRecord.parse(text)
    assert status == 0 and record.result is RecordResult.RESIGNED
    assert [action.symbol() for action in record.actions] == ["t4-t2", "undo", "t4-t2"]
    assert (record.moves, record.undos) == (1, 1)
    assert replay_record(record).status.value == "resigned"


def test_export_refuses_an_unknown_game_id(
    stored: tuple[str, dict[str, str], dict[str, object]], capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = export(stored[0], "noSuchGame", capsys)
    assert (status, out) == (1, "")
    assert err == "eightoff export: no game has the id 'noSuchGame'\n"


def test_replay_checks_a_record_and_prints_how_it_ends(
    stored: tuple[str, dict[str, str], dict[str, object]], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url, ids, _ = stored
    _, text, _ = export(url, ids["won"], capsys)
    path = tmp_path / "won.eor"
    path.write_text(text, encoding="utf-8")
    assert main(["replay", str(path)]) == 0
    out = capsys.readouterr().out
    assert (
        out
        == "EO1-C8-AAAAAFA won: score 935, 240 moves, 0 undos, 240 actions; the record replays as it says\n"
    )
    # A record changed by hand: a better score than its actions make.
    path.write_text(text.replace('[Score "935"]', '[Score "995"]'), encoding="utf-8")
    assert main(["replay", str(path)]) == 1
    assert capsys.readouterr().err == (
        f"eightoff replay: {path}: does not replay as recorded: the record says score 995, the replay 935\n"
    )
    # Not a record at all, and no file.
    path.write_text("GIF89a", encoding="utf-8")
    assert main(["replay", str(path)]) == 2
    assert "not a game record: line 1: not a tag pair like" in capsys.readouterr().err
    assert main(["replay", str(tmp_path / "missing.eor")]) == 2
    assert "not a game record: [Errno 2]" in capsys.readouterr().err


def test_replay_reads_standard_input_in_a_real_process(
    stored: tuple[str, dict[str, str], dict[str, object]], capsys: pytest.CaptureFixture[str]
) -> None:
    url, ids, _ = stored
    _, text, _ = export(url, ids["resigned"], capsys)
    done = subprocess.run(
        [sys.executable, "-m", "server", "replay", "-"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("EO1-C4-AAAAAFA resigned: score 0, 1 moves, 1 undos, 3 actions")
