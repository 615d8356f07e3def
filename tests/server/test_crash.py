"""Durability with real processes: ``kill -9`` mid-stream loses no acknowledged action, and SIGTERM
finishes in-flight actions and closes with 1001. The server runs as ``python -m server serve``.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed

from engine import UNDO, Action, Deal, Game, Move
from tests.support import dbutil
from tests.support.waiting import eventually
from tests.support.wsclient import WsClient

ROOT = Path(__file__).parents[2]


class ServerProcess:
    """``eightoff serve`` in a subprocess on a free port."""

    def __init__(self, database_url: str) -> None:
        env = {**os.environ, "EIGHTOFF_DATABASE_URL": database_url, "EIGHTOFF_PORT": "0"}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "server",
                "serve",
                "--rate-per-second",
                "100000",
                "--rate-burst",
                "100000",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # "eightoff X serving ws://127.0.0.1:PORT/ws"
        assert "serving ws://" in line, f"server did not start: {line!r}"
        self.url = line.split()[-1]

    def kill(self, signum: int) -> int:
        self.process.send_signal(signum)
        return self.process.wait(timeout=30)


@pytest.fixture(params=dbutil.BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with dbutil.fresh_database(request.param, tmp_path, migrate=False) as url:
        yield url


def next_action(game: Game, rng: random.Random) -> Action:
    """A legal action: mostly moves, sometimes an undo."""
    moves = list(game.legal_moves)
    if game.undo_depth and (not moves or rng.random() < 0.25):
        return UNDO
    return rng.choice(moves)


def request_for(action: Action, game_id: str, v: int) -> tuple[str, dict[str, Any]]:
    if isinstance(action, Move):
        fields: dict[str, Any] = {"from": action.source.symbol(), "to": action.target.symbol(), "v": v}
        if action.count > 1:
            fields["n"] = action.count
        return "move", {"game": game_id, **fields}
    return "undo", {"game": game_id, "v": v}


async def play_until_cut(client: WsClient, game_id: str, game: Game, sent: list[Action], seed: int) -> int:
    """Play as fast as acks come back until the connection dies; returns how many actions were acked."""
    rng = random.Random(seed)
    acked = game.v
    try:
        while True:
            action = next_action(game, rng)
            type_, fields = request_for(action, game_id, game.v)
            del sent[game.v :]
            sent.append(action)
            reply = await client.request(type_, **fields)
            if reply["type"] != "ack":
                return acked
            game.play(action)
            acked = reply["v"]
            assert acked == game.v
    except (TimeoutError, ConnectionClosed, OSError):
        return acked


def under_way(game: Game, since: int, play: asyncio.Task[int]) -> Callable[[], bool]:
    """Whether five actions were acked after version ``since``, or the player stopped."""
    return lambda: game.v >= since + 5 or play.done()


def assert_snapshot_is(snapshot: dict[str, Any], game: Game) -> None:
    layout = game.layout()
    assert snapshot["v"] == game.v
    assert snapshot["tableau"] == [[card.symbol() for card in column] for column in layout.columns]
    assert snapshot["cells"] == [card.symbol() if card else None for card in layout.cells]
    assert (snapshot["score"], snapshot["moves"]) == (game.score, game.moves)


async def test_kill_9_loses_no_acknowledged_action(database_url: str) -> None:
    """Five SIGKILLs at random moments; after each restart the game resumes exactly."""
    code = "EO1-C8-AAAAAFA"
    sent: list[Action] = []
    token: str | None = None
    game_id = ""
    rng = random.Random(7)
    last_acked = 0
    for round_ in range(5):
        server = ServerProcess(database_url)
        client = await WsClient.open(server.url)
        if token is None:
            await client.hello()
            token = client.token
            game_id = (await client.request("new_game", code=code))["game"]
        else:
            welcome = await client.hello(token=token)
            assert welcome["games"] == [game_id]
        snapshot = await client.request("resume", game=game_id)
        stored_v = snapshot["v"]
        assert stored_v in (last_acked, last_acked + 1)
        # Every acknowledged action is there; at most the one in flight at the kill is there too.
        game = Game.replay(Deal.from_code(code), sent[:stored_v])
        assert_snapshot_is(snapshot, game)
        play = asyncio.create_task(play_until_cut(client, game_id, game, sent, seed=round_))
        # the stream under way, however slow the machine
        await eventually(under_way(game, stored_v, play), "five actions are acked", timeout=60)
        await asyncio.sleep(rng.uniform(0.0, 0.5))  # the behaviour under test: a kill at a random moment
        assert server.kill(signal.SIGKILL) == -signal.SIGKILL
        acked = await play
        assert acked > stored_v, "no action was acknowledged before the kill"
        await client.close()
        last_acked = acked

    server = ServerProcess(database_url)
    client = await WsClient.open(server.url)
    await client.hello(token=token)
    final = await client.request("resume", game=game_id)
    assert final["v"] in (last_acked, last_acked + 1)
    assert_snapshot_is(final, Game.replay(Deal.from_code(code), sent[: final["v"]]))
    await client.close()
    server.kill(signal.SIGTERM)


async def test_sigterm_commits_in_flight_actions_and_closes_1001(database_url: str) -> None:
    server = ServerProcess(database_url)
    client = await WsClient.open(server.url, "eightoff.v1.json")
    await client.hello()
    game_id = (await client.request("new_game", code="EO1-C8-AAAAAFA"))["game"]
    sent: list[Action] = []
    game = Game.from_code("EO1-C8-AAAAAFA")
    play = asyncio.create_task(play_until_cut(client, game_id, game, sent, seed=1))
    await eventually(under_way(game, 0, play), "the stream is under way (five actions acked)")
    server.process.send_signal(signal.SIGTERM)
    acked = await play
    await asyncio.wait_for(client.ws.wait_closed(), 15)
    assert client.ws.close_code == 1001
    assert await asyncio.to_thread(server.process.wait, 30) == 0

    again = ServerProcess(database_url)
    reader = await WsClient.open(again.url)
    await reader.hello(token=client.token)
    snapshot = await reader.request("resume", game=game_id)
    assert snapshot["v"] == acked  # nothing acknowledged lost, nothing unacknowledged stored
    assert_snapshot_is(snapshot, game)
    await reader.close()
    again.kill(signal.SIGTERM)
