"""protocol/README.md's promises checked against a real server: the table "Who receives what" (section
4, read from the page), the `stale` error's example text (section 6) and the slot accounting of
section 10 ("Slots"), so that none can drift from what the server does."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import protocol
from tests.support import dbutil, serverutil
from tests.support.wire import WINNING_LINE
from tests.support.wsclient import WsClient

README = (Path(protocol.__file__).parent / "README.md").read_text(encoding="utf-8")
#: How long a connection must stay silent for "nothing more comes" (loopback, one small server).
QUIET = 0.4

#: A message as the table names it: its type and whether it carries the request's id.
Seen = tuple[str, bool]


def receivers_table() -> dict[str, tuple[list[Seen], list[Seen], list[Seen]]]:
    """The rows of "Who receives what": event -> (the sender, the player's other connections that have
    the game open, spectators), each the messages in order."""
    start = README.index("**Who receives what.**")
    lines = README[start:].split("\n| event |", 1)[1].splitlines()[2:]
    rows = {}
    for line in lines:
        if not line.startswith("|"):
            break
        event, *cells = (cell.strip() for cell in line.strip("|").split("|"))
        rows[event] = tuple(_messages(cell) for cell in cells)
    return rows  # type: ignore[return-value]


def _messages(cell: str) -> list[Seen]:
    if cell == "nothing":
        return []
    seen = []
    for part in cell.split(", then "):
        kind = re.match(r"`([a-z_]+)`", part)
        assert kind is not None, part
        seen.append((kind.group(1), "with the request's `id`" in part))
    return seen


def move_fields(text: str) -> dict[str, Any]:
    """The fields of a `move` request for the engine's notation ``t1-t8:2``."""
    piles, _, count = text.partition(":")
    source, target = piles.split("-")
    return {"from": source, "to": target, **({"n": int(count)} if count else {})}


def wire_move(text: str, request_id: int, v: int) -> dict[str, Any]:
    return {"type": "move", "id": request_id, **move_fields(text), "v": v}


async def play(client: WsClient, game: str, text: str, v: int) -> dict[str, Any]:
    """Play ``text`` at version ``v``; the reply."""
    return await client.request("move", game=game, v=v, **move_fields(text))


async def until_reply(client: WsClient, request_id: int) -> list[dict[str, Any]]:
    """What ``client`` got up to the reply to its request ``request_id``, that reply included: every
    request gets one, however long a loaded machine takes (the winning move's took more than
    ``QUIET`` once, and the table's sender seemed to get nothing)."""
    messages: list[dict[str, Any]] = []
    while not messages or messages[-1].get("id") != request_id:
        messages.append(client.pushed.get_nowait() if not client.pushed.empty() else await client.recv())
    return messages


async def heard(client: WsClient) -> list[dict[str, Any]]:
    """Everything ``client`` got and has not read yet, until it stays quiet for ``QUIET`` seconds."""
    messages = []
    while not client.pushed.empty():
        messages.append(client.pushed.get_nowait())
    while True:
        try:
            messages.append(await client.recv(QUIET))
        except TimeoutError:
            return messages


def summary(messages: list[dict[str, Any]]) -> list[Seen]:
    return [(message["type"], "id" in message) for message in messages]


@pytest.fixture
async def url(tmp_path: Path) -> AsyncIterator[str]:
    database = dbutil.sqlite_url(tmp_path / "eightoff.db")
    async with serverutil.running_app(database, sqlite_synchronous="NORMAL") as app:
        yield serverutil.ws_url(app)


class Table:
    """The sender, another connection of the player with the game open, a spectator, and a connection
    of the player without the game open, on one game."""

    def __init__(self, sender: WsClient, other: WsClient, spectator: WsClient, elsewhere: WsClient) -> None:
        self.sender, self.other, self.spectator, self.elsewhere = sender, other, spectator, elsewhere
        self.game = ""

    @classmethod
    async def open(cls, url: str) -> Table:
        sender = await WsClient.open(url)
        await sender.hello()
        clients = [await WsClient.open(url) for _ in range(3)]
        await clients[0].hello(token=sender.token)
        await clients[1].hello()
        await clients[2].hello(token=sender.token)
        return cls(sender, *clients)

    async def deal(self) -> None:
        snapshot = await self.sender.request("new_game", code="EO1-C8-AAAAAFA")
        self.game = snapshot["game"]
        assert (await self.other.request("resume", game=self.game))["type"] == "snapshot"
        assert (await self.spectator.request("watch", game=self.game))["type"] == "snapshot"

    async def event(self, request: dict[str, Any]) -> tuple[list[dict[str, Any]], ...]:
        """Send ``request`` from the sender; what each of the four connections then received: the
        sender's up to its reply, then what each gets until it stays quiet (the four at once: the
        server has served the request by then)."""
        await self.sender.send({**request, "game": self.game})
        replied = await until_reply(self.sender, request["id"])
        clients = (self.sender, self.other, self.spectator, self.elsewhere)
        sender, *others = await asyncio.gather(*(heard(client) for client in clients))
        return (replied + sender, *others)

    async def close(self) -> None:
        for client in (self.sender, self.other, self.spectator, self.elsewhere):
            await client.close()


async def test_who_receives_what_is_the_table_of_the_readme(url: str) -> None:
    """Each row of the table, on a real server: an action, a refused one, the winning one, a resign."""
    rows = receivers_table()
    assert set(rows) == {
        "an action (`move`, `tap`, `auto`, `undo`)",
        "the action that wins",
        "`resign`",
        "a refused request",
    }
    table = await Table.open(url)
    await table.deal()
    observed: dict[str, tuple[list[dict[str, Any]], ...]] = {}
    observed["an action (`move`, `tap`, `auto`, `undo`)"] = await table.event(
        wire_move(WINNING_LINE[0], 1, 0)
    )
    for v, text in enumerate(WINNING_LINE[1:-1], start=1):
        ack = await play(table.sender, table.game, text, v)
        assert ack["type"] == "ack", (text, ack)
    for client in (table.other, table.spectator):
        assert summary(await heard(client)) == [("diff", False)] * (len(WINNING_LINE) - 2)
    observed["a refused request"] = await table.event(wire_move(WINNING_LINE[-1], 2, 0))
    observed["the action that wins"] = await table.event(
        wire_move(WINNING_LINE[-1], 3, len(WINNING_LINE) - 1)
    )
    await table.deal()
    observed["`resign`"] = await table.event({"type": "resign", "id": 4})
    await table.close()
    for event, (sender, other, spectator) in rows.items():
        got = observed[event]
        assert summary(got[0]) == sender, event
        assert summary(got[1]) == other, event
        assert summary(got[2]) == spectator, event
        assert got[3] == [], event  # the player's connection without the game open: nothing
    assert observed["the action that wins"][0][1]["won"] is True


def readme_example(code: str) -> dict[str, Any]:
    """The README's example `error` of ``code`` (section 6)."""
    for text in re.findall(r"```json\n(\{\"type\":\"error\".*?)\n```", README):
        message = json.loads(text)
        if message["code"] == code:
            return message  # type: ignore[no-any-return]
    raise AssertionError(f"no example error {code}")


async def test_stale_example_is_what_the_server_sends(url: str) -> None:
    """The example's text, with its game id, is what the server says at the example's versions, and
    its ``v`` is the game's current version (a client needs no ``resume`` to learn it)."""
    example = readme_example("stale")
    numbers = re.fullmatch(r"game \S+ is at v (\d+), not (\d+)", example["message"])
    assert numbers is not None, example
    at, sent = (int(n) for n in numbers.groups())
    client = await WsClient.open(url)
    await client.hello()
    game = (await client.request("new_game", code="EO1-C8-AAAAAFA"))["game"]
    for v, text in enumerate(WINNING_LINE[:at]):
        assert (await play(client, game, text, v))["type"] == "ack"
    reply = await play(client, game, WINNING_LINE[at], sent)
    await client.close()
    example_game = example["message"].split()[1]
    assert reply["code"] == example["code"]
    assert reply["message"] == example["message"].replace(example_game, game)
    assert reply["v"] == example["v"] == at, "the stale error says the game's current version"


@pytest.fixture
async def small_slots(tmp_path: Path) -> AsyncIterator[str]:
    """A server with 2 open-game slots and 2 watch slots per connection."""
    database = dbutil.sqlite_url(tmp_path / "eightoff.db")
    limits = {"max_games_per_connection": 2, "max_watches_per_connection": 2}
    async with serverutil.running_app(database, sqlite_synchronous="NORMAL", **limits) as app:
        yield serverutil.ws_url(app)


async def code_of(client: WsClient, type_: str, **fields: Any) -> str:
    """The reply's type, or the error's code."""
    reply = await client.request(type_, **fields)
    return str(reply["code"] if reply["type"] == "error" else reply["type"])


async def test_open_game_slots_are_counted_as_section_10_says(small_slots: str) -> None:
    """Tried: a new game past the slots, one freed by a resign here, by an unwatch, by a resign on
    another connection; a finished game resumed; an action on a game open here and on one that is not."""
    here = await WsClient.open(small_slots)
    await here.hello()
    there = await WsClient.open(small_slots)
    await there.hello(token=here.token)
    first, second = [(await here.request("new_game"))["game"] for _ in range(2)]
    assert await code_of(here, "new_game") == "rate_limited"
    assert await code_of(here, "move", game=first, **{"from": "t1", "to": "c5"}) in {"ack", "illegal_move"}
    elsewhere = (await there.request("new_game"))["game"]  # the player's, not open here
    assert await code_of(here, "undo", game=elsewhere) == "rate_limited"
    assert await code_of(here, "resign", game=first) == "game_over"  # resign takes no slot: it frees one
    third = (await here.request("new_game"))["game"]
    assert await code_of(here, "resume", game=first) == "snapshot"  # finished: no slot
    assert await code_of(here, "new_game") == "rate_limited"
    assert await code_of(here, "unwatch", game=second) == "ok"
    fourth = (await here.request("new_game"))["game"]
    assert await code_of(there, "resign", game=third) == "game_over"  # ended on another connection
    assert await code_of(here, "resume", game=elsewhere) == "snapshot"
    assert await code_of(here, "new_game") == "rate_limited"  # fourth and elsewhere are open
    assert await code_of(here, "undo", game=fourth) in {"ack", "illegal_move"}  # open here: no new slot
    for client in (here, there):
        await client.close()


async def test_watch_slots_are_counted_as_section_10_says(small_slots: str) -> None:
    """Tried: a third watch, a watch repeated, a watched live game that ends, a finished game that
    keeps its slot until unwatched, one's own game watched beside its open-game slot."""
    owner = await WsClient.open(small_slots)
    await owner.hello()
    live, done = [(await owner.request("new_game"))["game"] for _ in range(2)]
    assert await code_of(owner, "resign", game=done) == "game_over"
    other = (await owner.request("new_game"))["game"]
    watcher = await WsClient.open(small_slots)
    await watcher.hello()
    assert [await code_of(watcher, "watch", game=game) for game in (live, done)] == ["snapshot"] * 2
    assert await code_of(watcher, "watch", game=other) == "rate_limited"
    assert await code_of(watcher, "watch", game=done) == "snapshot"  # again: no second slot
    assert await code_of(owner, "resign", game=live) == "game_over"  # the live one ends: its slot frees
    assert (await watcher.next_push())["type"] == "game_over"
    assert await code_of(watcher, "watch", game=other) == "snapshot"
    fresh = (await owner.request("new_game"))["game"]
    assert await code_of(watcher, "watch", game=fresh) == "rate_limited"  # done still holds its slot
    assert await code_of(watcher, "unwatch", game=done) == "ok"
    assert await code_of(watcher, "watch", game=fresh) == "snapshot"
    assert await code_of(owner, "watch", game=fresh) == "snapshot"  # its own: a watch slot of its own
    for client in (owner, watcher):
        await client.close()
