"""Leaderboards over the API: games played through a real server (WebSocket) land on the boards, the
HTTP API answers the same rows, daily codes are the same for everyone on a day and differ across
days, and every stored game replays through the engine to its stored result (``eightoff verify``)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import pytest
from sqlalchemy import update

from engine import Deal, Game, Layout, Move
from server import dispatch as requests
from server.app import App
from server.ops import cli
from server.storage import Database, repository
from server.storage.tables import action_journal, actions, games
from solver import solve_deal, winnable_daily_deal
from tests.support.wire import move_fields
from tests.support.wsclient import WsClient, player

WINNABLE = "EO1-C8-AAAAAAB"


def http_get(app: App, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{app.port}{path}", timeout=10) as response:
            assert response.headers["Content-Type"] == "application/json"
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        assert error.headers["Content-Type"] == "application/json"
        return error.code, json.loads(error.read())


async def win(client: WsClient, solution: list[Move], *, detours: int = 0) -> str:
    """Win WINNABLE; each detour first moves the card of cell 1 to cell 5 and back (two more moves)."""
    game: str = (await client.request("new_game", code=WINNABLE))["game"]
    for _ in range(detours):
        for source, target in (("c1", "c5"), ("c5", "c1")):
            assert (await client.request("move", game=game, **{"from": source, "to": target}))[
                "type"
            ] == "ack"
    for move in solution:
        reply = await client.request("move", game=game, **move_fields(move))
        assert reply["type"] == "ack", reply
    assert reply["status"] == "won"
    over = await client.recv()
    assert over["type"] == "game_over" and over["won"]
    return game


async def resign_after_one_move(client: WsClient, **new_game: Any) -> tuple[str, str]:
    snapshot = await client.request("new_game", **new_game)
    game = snapshot["game"]
    legal = next(iter(Game.from_code(snapshot["code"]).legal_moves))
    assert (await client.request("move", game=game, **move_fields(legal)))["type"] == "ack"
    assert (await client.request("resign", game=game))["type"] == "game_over"
    return game, snapshot["code"]


async def test_played_games_make_the_boards(app: App, url: str) -> None:
    solution = list(solve_deal(Deal.from_code(WINNABLE)).moves)
    assert solution
    ann, bob, cy = await player(url, name="Ann"), await player(url, name="Bob"), await player(url, name="Cy")
    ann_game = await win(ann, solution)
    bob_game = await win(bob, solution, detours=1)
    cy_game, _ = await resign_after_one_move(cy, code=WINNABLE)
    ann_daily, daily_code = await resign_after_one_move(ann, daily=True)
    assert daily_code == winnable_daily_deal(dt.datetime.now(dt.UTC).date()).code()
    ids = {client.player["id"]: name for client, name in ((ann, "Ann"), (bob, "Bob"), (cy, "Cy"))}  # type: ignore[index]
    ann_id, bob_id, cy_id = ids

    deal = await ann.request("leaderboard", board="deal", code=WINNABLE)
    assert [(row["rank"], row["player"]["name"], row["game"]) for row in deal["rows"]] == [
        (1, "Ann", ann_game),
        (2, "Bob", bob_game),
        (3, "Cy", cy_game),
    ]
    assert [row["moves"] for row in deal["rows"]] == [len(solution), len(solution) + 2, 1]
    assert [row["won"] for row in deal["rows"]] == [True, True, False]
    variant = await bob.request("leaderboard", board="variant", cells=8, period="day")
    # Ann's best C8 game is her win, not her resigned daily game; each player once.
    assert [row["game"] for row in variant["rows"]] == [ann_game, bob_game, cy_game]
    daily = await cy.request("leaderboard", board="daily")
    assert [(row["game"], row["code"]) for row in daily["rows"]] == [(ann_daily, daily_code)]
    players = await cy.request("leaderboard", board="players", period="week")
    assert [(row["rank"], row["player"]["id"], row["played"], row["won"]) for row in players["rows"]] == [
        (1, bob_id, 1, 1),
        (2, ann_id, 2, 1),
        (3, cy_id, 1, 0),
    ]
    around = await cy.request("leaderboard", board="players", around=cy_id, limit=2)
    assert [row["player"]["id"] for row in around["rows"]] == [ann_id, cy_id]
    paged = await cy.request("leaderboard", board="deal", code=WINNABLE, limit=2)
    rest = await cy.request("leaderboard", board="deal", code=WINNABLE, limit=2, after=paged["next"])
    assert [row["rank"] for row in paged["rows"] + rest["rows"]] == [1, 2, 3] and "next" not in rest

    # The same boards over HTTP: the same rows and cursors.
    for fields in (
        {"board": "deal", "code": WINNABLE},
        {"board": "variant", "cells": 8, "period": "day"},
        {"board": "daily"},
        {"board": "players", "period": "week"},
        {"board": "deal", "code": WINNABLE, "limit": 2},
    ):
        websocket = await ann.request("leaderboard", **fields)
        status, body = await asyncio.to_thread(
            http_get, app, "/api/leaderboard?" + urllib.parse.urlencode(fields)
        )
        assert status == 200
        assert body == {key: value for key, value in websocket.items() if key not in ("type", "id")}, fields

    # Profiles: one's own over WebSocket, anyone's over both.
    own = await ann.request("profile")
    assert own["player"] == {"id": ann_id, "name": "Ann"}
    assert (own["played"], own["won"], own["win_rate"]) == (2, 1, 0.5)
    assert [game["game"] for game in own["best"]] == [ann_game]
    assert own["best"][0]["moves"] == len(solution)
    assert [game["game"] for game in own["recent"]] == [ann_daily, ann_game]
    assert own["streak"] == {"current": 0, "best": 0}  # the daily was resigned, not won
    status, body = await asyncio.to_thread(http_get, app, f"/api/players/{bob_id}")
    assert status == 200 and body == {
        key: value
        for key, value in (await ann.request("profile", player=bob_id)).items()
        if key not in ("type", "id")
    }
    for client in (ann, bob, cy):
        await client.close()

    # Every stored game replays through the engine to its stored result.
    async with app.database.connection() as conn:
        stored = await repository.load_games_after(conn, None, 100)
    assert {game.id for game in stored} == {ann_game, bob_game, cy_game, ann_daily}
    from server.ops.verify import check_stored_game

    assert [check_stored_game(game) for game in stored] == [None] * 4


async def test_bad_parameters_are_refused_naming_them(app: App, url: str) -> None:
    client = await player(url, name="Ann")
    for fields, named in (
        ({"board": "variant", "cells": 3}, "cells"),
        ({"board": "variant", "period": "month"}, "period"),
        ({"board": "variant", "limit": 101}, "limit"),
        ({"board": "players", "order": "moves"}, "order"),
        ({"board": "variant", "after": "garbage!"}, "after"),
        ({"board": "deal"}, "code"),
    ):
        reply = await client.request("leaderboard", **fields)
        assert reply["type"] == "error" and reply["code"] == "bad_request" and named in reply["message"], (
            fields
        )
        query = urllib.parse.urlencode(fields)
        status, body = await asyncio.to_thread(http_get, app, f"/api/leaderboard?{query}")
        assert status == 400 and body["code"] == "bad_request" and named in body["message"], fields
        assert body["message"] == reply["message"]
    missing = await client.request("profile", player="nobody")
    assert missing["code"] == "not_found"
    assert await asyncio.to_thread(http_get, app, "/api/players/nobody") == (
        404,
        {"code": "not_found", "message": "no player nobody"},
    )
    status, body = await asyncio.to_thread(http_get, app, "/api/players/a%20b")
    assert status == 400 and "player" in body["message"]
    status, body = await asyncio.to_thread(http_get, app, "/api/leaderboard?board=variant&board=deal")
    assert status == 400 and body["message"] == "board: given more than once"
    await client.close()


async def test_daily_codes_are_the_same_for_everyone_and_change_each_day(
    app: App, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = await player(url, name="Ann"), await player(url, name="Bob")
    today = dt.datetime.now(dt.UTC)
    tomorrow = today + dt.timedelta(days=1)
    codes: dict[dt.date, set[str]] = {}
    for moment in (today, tomorrow):
        monkeypatch.setattr(requests, "utc_now", lambda moment=moment: moment)
        for client in (first, second):
            for cells in (8, 4):
                snapshot = await client.request("new_game", daily=True, cells=cells)
                codes.setdefault(moment.date(), set()).add(snapshot["code"])
                assert (await client.request("resign", game=snapshot["game"]))["type"] == "game_over"
    assert codes[today.date()] == {
        winnable_daily_deal(today.date(), 8).code(),
        winnable_daily_deal(today.date(), 4).code(),
    }
    assert codes[tomorrow.date()] == {
        winnable_daily_deal(tomorrow.date(), 8).code(),
        winnable_daily_deal(tomorrow.date(), 4).code(),
    }
    assert not codes[today.date()] & codes[tomorrow.date()]
    # Each day's board holds that day's games, by both players.
    for moment in (today, tomorrow):
        board = await first.request("leaderboard", board="daily", date=moment.date().isoformat())
        assert {row["code"] for row in board["rows"]} == {winnable_daily_deal(moment.date()).code()}
        assert len(board["rows"]) == 2
    await first.close()
    await second.close()


async def play_unfinished(client: WsClient, code: str, moves: int) -> str:
    """A game left unfinished after ``moves`` legal moves and one undo (its row keeps its start figures)."""
    game_id: str = (await client.request("new_game", code=code))["game"]
    game = Game.from_code(code)
    for _ in range(moves):
        move = next(iter(game.legal_moves))
        assert (await client.request("move", game=game_id, **move_fields(move)))["type"] == "ack"
        game.play(move)
    assert (await client.request("undo", game=game_id))["type"] == "ack"
    return game_id


def refused_opening_move(code: str) -> Move:
    """A column-to-column move that ``code``'s deal refuses at once: a log stored for another layout."""
    legal = Game.from_code(code).legal_moves
    candidates = (Move.parse(f"t{a}-t{b}") for a in range(1, 9) for b in range(1, 9) if a != b)
    return next(move for move in candidates if move not in legal)


async def test_verify_command_replays_every_game(
    app: App, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    solution = list(solve_deal(Deal.from_code(WINNABLE)).moves)
    assert solution
    client = await player(url, name="Ann")
    won = await win(client, solution)
    resigned, _ = await resign_after_one_move(client, code="EO1-C4-AAAAAAC")  # has a legal move
    playing = await play_unfinished(client, "EO1-C8-AAAAAFA", moves=3)
    await client.close()
    database_url = app.settings.database_url

    # The unfinished game's moves, score and undos are not final: only its status and replay count.
    assert await asyncio.to_thread(cli.main, ["verify", "--database-url", database_url, "--batch", "2"]) == 0
    captured = capsys.readouterr()
    assert "verified 3 stored games: 0 mismatch(es)" in captured.out
    assert "verify [" in captured.err and "3/3 games" in captured.err  # the progress bar

    async with app.database.transaction() as conn:
        await conn.execute(update(games).where(games.c.id == won).values(moves=len(solution) - 1))
        await conn.execute(update(games).where(games.c.id == resigned).values(status="won", won=True))
    assert await asyncio.to_thread(cli.main, ["verify", "--database-url", database_url]) == 1
    out = capsys.readouterr().out
    assert f"MISMATCH {won}: moves stored {len(solution) - 1}, replayed {len(solution)}" in out
    # the resigned game's log ends with its resign row, so it replays as resigned
    assert f"MISMATCH {resigned}: status stored 'won', replayed 'resigned'" in out
    assert playing not in out
    assert "verified 3 stored games: 2 mismatch(es)" in out


async def test_verify_names_an_unfinished_game_whose_actions_no_longer_replay(
    app: App, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """As a C2 game stored under the old layout: its first action is illegal from its deal."""
    client = await player(url, name="Ann")
    healthy = await play_unfinished(client, "EO1-C8-AAAAAFA", moves=2)
    broken = await play_unfinished(client, "EO1-C8-AAAAAFB", moves=2)
    await client.close()
    stale = refused_opening_move("EO1-C8-AAAAAFB")
    async with app.database.transaction() as conn:
        for table in (actions, action_journal):  # on SQLite, wherever it is stored yet
            await conn.execute(
                update(table).where(table.c.game_id == broken, table.c.v == 1).values(action=stale.symbol())
            )

    assert await asyncio.to_thread(cli.main, ["verify", "--database-url", app.settings.database_url]) == 1
    out = capsys.readouterr().out
    assert f"MISMATCH {broken}: action v=1 {stale.symbol()!r} does not replay" in out
    assert healthy not in out
    assert "verified 2 stored games: 1 mismatch(es)" in out


async def test_verify_reports_an_action_log_that_does_not_replay(database: Database) -> None:
    from server.ops.verify import verify_games
    from server.storage import GameResult, GameStart, PlayerRecord
    from tests.leaderboard.leaderboard_support import T0

    async with database.transaction() as conn:
        await repository.insert_player(conn, PlayerRecord("p1", "Ann", "a" * 64, T0))
        await repository.insert_game(conn, GameStart("g1", "p1", "EO1-C8-AAAAAFA", 8, None, T0))
        await repository.insert_actions(conn, [("g1", 1, "t1-c5"), ("g1", 2, "t1-t1")])
        await repository.finish_game(
            conn, GameResult("g1", "resigned", 0, 2, 0, T0 + dt.timedelta(seconds=5), 5000, False)
        )
    seen: list[tuple[int, int]] = []
    checked, mismatches = await verify_games(
        database, progress=lambda done, total: seen.append((done, total))
    )
    assert checked == 1 and seen == [(1, 1)]
    assert [(m.game_id, m.problem.split(":")[0]) for m in mismatches] == [
        ("g1", "action v=2 't1-t1' does not replay")
    ]


async def test_verify_reads_a_game_and_its_actions_in_one_snapshot(
    database: Database, database_url: str
) -> None:
    """A game resigned by another connection between verify's read of ``games`` and its read of
    ``actions`` is seen before or after, never half: not "stored playing, replayed resigned". The
    concurrent commit runs exactly between the two statements (a hook on the actions query)."""
    from sqlalchemy import event
    from sqlalchemy.util import await_

    from engine import parse_action
    from server.ops.verify import verify_games
    from server.play.replay import RESIGN
    from server.storage import GameResult, GameStart, PlayerRecord
    from tests.leaderboard.leaderboard_support import T0

    async with database.transaction() as conn:
        await repository.insert_player(conn, PlayerRecord("p1", "Ann", "a" * 64, T0))
        await repository.insert_game(conn, GameStart("g1", "p1", "EO1-C8-AAAAAFA", 8, None, T0))
        await repository.insert_actions(conn, [("g1", 1, "t1-c5")])
    replayed = Game(Deal.from_code("EO1-C8-AAAAAFA"))
    replayed.play(parse_action("t1-c5"))
    replayed.resign()
    other = Database.create(database_url, sqlite_synchronous="OFF")

    async def resign_elsewhere() -> None:
        async with other.transaction() as conn:
            await repository.insert_actions(conn, [("g1", 2, RESIGN)])
            result = GameResult(
                "g1", "resigned", replayed.score, replayed.moves, replayed.undos, T0, 5000, False
            )
            assert await repository.finish_game(conn, result)

    resigned: list[bool] = []

    def between_the_reads(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "FROM actions" in statement and not resigned:
            resigned.append(True)
            await_(resign_elsewhere())

    event.listen(database.engine.sync_engine, "before_cursor_execute", between_the_reads)
    try:
        checked, mismatches = await verify_games(database)
    finally:
        event.remove(database.engine.sync_engine, "before_cursor_execute", between_the_reads)
    assert resigned and checked == 1 and mismatches == []
    assert await verify_games(database) == (1, [])  # and the resigned game, read afterwards, replays
    await other.dispose()


def test_verify_checks_a_stored_log_as_the_server_loads_it() -> None:
    """`check_stored_game` replays as the server does (`server.play.replay.replay_stored`): a resign row
    after a won game is refused for the engine's reason, and a bad code is named."""
    from server.ops.verify import check_stored_game
    from server.play.replay import RESIGN
    from server.storage import StoredGame
    from tests.leaderboard.leaderboard_support import T0

    moves = list(solve_deal(Deal.from_code(WINNABLE)).moves)
    played = Game.replay(Deal.from_code(WINNABLE), moves)
    solution = [move.symbol() for move in moves]
    won = StoredGame(
        "g1",
        "p1",
        WINNABLE,
        8,
        None,
        "won",
        played.score,
        played.moves,
        0,
        T0,
        T0,
        1000,
        True,
        tuple(solution),
    )
    assert check_stored_game(won) is None
    resigned_after_winning = dataclasses.replace(won, actions=(*solution, RESIGN))
    assert check_stored_game(resigned_after_winning) == (
        f"action v={len(solution) + 1} 'resign' does not replay: resign is illegal: the game is won"
    )
    bad_code = dataclasses.replace(won, code="EO1-C8-!")
    assert (check_stored_game(bad_code) or "").startswith("code 'EO1-C8-!' is not a game code")


def c2_opening_before_the_fix(deal: Deal) -> Layout:
    """The C2 opening as the engine dealt it before the fix: cards 51 and 52 on top of columns 3 and 4."""
    opening = deal.layout()
    columns = list(opening.columns)
    for index in (2, 3):
        columns[index] = (*columns[index][1:], columns[index][0])
    return Layout(tuple(columns), opening.cells, opening.foundations)


async def test_verify_names_a_c2_game_stored_under_the_old_layout(database: Database) -> None:
    """A C2 game recorded when cards 51 and 52 were dealt on top of columns 3 and 4 no longer replays."""
    from server.ops.verify import verify_games
    from server.storage import GameResult, GameStart, PlayerRecord
    from tests.leaderboard.leaderboard_support import T0

    deal, move = Deal.from_code("EO1-C2-AAAAAAC"), Move.parse("t4-t2")
    assert Game.from_layout(c2_opening_before_the_fix(deal), deal).is_legal(move)  # 9H on TH, once exposed
    assert not Game(deal).is_legal(move)  # now 9H is column 4's covered first card
    async with database.transaction() as conn:
        await repository.insert_player(conn, PlayerRecord("p1", "Ann", "a" * 64, T0))
        await repository.insert_game(conn, GameStart("g1", "p1", deal.code(), 2, None, T0))
        await repository.insert_actions(conn, [("g1", 1, "t4-t2")])
        await repository.finish_game(
            conn, GameResult("g1", "resigned", 0, 1, 0, T0 + dt.timedelta(seconds=5), 5000, False)
        )
    checked, mismatches = await verify_games(database)
    assert checked == 1
    assert [(m.game_id, m.problem.split(":")[0]) for m in mismatches] == [
        ("g1", "action v=1 't4-t2' does not replay")
    ]
