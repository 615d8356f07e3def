"""GameRoom alone, with a scripted write pipeline and a recording pusher: no socket, no database.

Each test names what the room promises: it holds only committed state, announces to every follower
but the requester, puts resigning behind the fence, and follows other nodes' commits in order."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterable
from typing import Any

import pytest

import protocol
from engine import Game, IllegalMoveError, parse_action
from server.bus import BusEvent
from server.committer import Write, WriteConflict
from server.errors import ErrorCode, Refusal
from server.room import RESIGN, GameRoom, PlayerRef, RoomServices
from server.storage import StorageUnavailable, StoredGame

CODE = "EO1-C8-AAAAAFA"
T1_C5 = parse_action("t1-c5")
T2_C6 = parse_action("t2-c6")


class Follower:
    """A connection as a room sees it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.subprotocol: Any = None
        self.transport: Any = None
        self.last_seen = 0.0

    def __repr__(self) -> str:
        return self.name


class ScriptedCommitter:
    """Stores writes in a list; ``fail_next`` makes the next submit raise, ``hold`` keeps it waiting."""

    def __init__(self) -> None:
        self.writes: list[Write] = []
        self.fail_next: Exception | None = None
        self.hold: asyncio.Event | None = None

    async def submit(self, write: Write) -> None:
        if self.hold is not None:
            await self.hold.wait()
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        self.writes.append(write)


class Harness:
    def __init__(self, stored: StoredGame | None = None) -> None:
        self.committer = ScriptedCommitter()
        self.pushed: list[tuple[set[Any], dict[str, Any]]] = []
        self.published: list[BusEvent] = []
        self.ended: list[GameRoom] = []
        self.stored = stored
        self.services = RoomServices(
            node="node-t",
            committer=self.committer,
            push=self.push,
            publish=self.published.append,
            load=self.load,
            ended=self.ended.append,
        )
        self.room = GameRoom(
            "g1", Game.from_code(CODE), PlayerRef("p1", "Ann"), dt.datetime.now(dt.UTC), self.services
        )

    def push(self, audience: Iterable[Any], message: protocol.ServerMessage) -> None:
        self.pushed.append((set(audience), message.to_wire()))  # rendered, as the node's pusher does

    async def load(self, game_id: str) -> StoredGame | None:
        return self.stored

    def kinds_for(self, follower: Follower) -> list[tuple[str, int | None]]:
        return [(m["type"], m.get("v")) for who, m in self.pushed if follower in who]


def stored_game(actions: tuple[str, ...], status: str = "playing") -> StoredGame:
    now = dt.datetime.now(dt.UTC)
    return StoredGame(
        "g1",
        "p1",
        CODE,
        8,
        None,
        status,
        0,
        0,
        0,
        now,
        now if status != "playing" else None,
        0,
        False,
        actions,
    )


async def act_held_with_a_spectator() -> tuple[Harness, Follower, Follower, asyncio.Task[Any]]:
    """A room with a spectator, and the owner's t1-c5 at v 0 in flight: its write held, not committed."""
    harness = Harness()
    owner, spectator = Follower("owner"), Follower("spectator")
    await harness.room.watch(spectator, None)
    harness.committer.hold = asyncio.Event()
    acting = asyncio.create_task(harness.room.act(owner, lambda game: T1_C5, 0, "r1"))
    await asyncio.sleep(0.01)
    return harness, owner, spectator, acting


async def test_an_action_is_visible_only_once_committed() -> None:
    harness, _, spectator, acting = await act_held_with_a_spectator()
    room = harness.room
    assert room.lock.locked(), "the action in flight holds the room: no reader sees it uncommitted"
    viewing = asyncio.create_task(room.view(Follower("other tab"), "r2"))
    await asyncio.sleep(0.01)
    assert not viewing.done(), "a snapshot waits for the commit in flight"
    harness.committer.hold.set()
    replies = await acting
    assert [type(r) for r in replies] == [protocol.Ack] and replies[0].v == 1
    snapshot = await viewing
    assert snapshot is not None and snapshot.v == 1
    assert harness.kinds_for(spectator) == [("diff", 1)]
    (write,) = harness.committer.writes
    assert [(row.game_id, row.v, row.action) for row in write.actions] == [("g1", 1, "t1-c5")]
    assert harness.published == [BusEvent("node-t", "g1", 1, "t1-c5", None)]


async def test_a_failed_commit_leaves_the_room_as_it_was_and_tells_nobody() -> None:
    harness = Harness()
    room, owner, spectator = harness.room, Follower("owner"), Follower("spectator")
    await room.watch(spectator, None)
    harness.committer.fail_next = StorageUnavailable("down")
    with pytest.raises(StorageUnavailable):
        await room.act(owner, lambda game: T1_C5, 0, "r1")
    assert room.game.v == 0 and room.game.top_card(parse_action("t1-c5").target) is None
    assert harness.pushed == [] and harness.published == []
    (ack,) = await room.act(owner, lambda game: T1_C5, 0, "r2")
    assert isinstance(ack, protocol.Ack) and ack.v == 1


async def test_the_requester_gets_its_reply_and_no_push_even_when_it_also_watches() -> None:
    harness = Harness()
    room, owner, other_tab = harness.room, Follower("owner"), Follower("other tab")
    await room.view(owner, None)
    await room.watch(owner, None)
    await room.view(other_tab, None)
    await room.act(owner, lambda game: T1_C5, None, None)
    assert harness.kinds_for(owner) == []
    assert harness.kinds_for(other_tab) == [("diff", 1)]
    over = await room.resign(owner, "r")
    assert over.to_wire()["type"] == "game_over" and over.request_id == "r"
    assert harness.kinds_for(owner) == []
    assert harness.kinds_for(other_tab) == [("diff", 1), ("game_over", None)]


async def test_resigning_is_a_row_at_the_next_version_with_the_result() -> None:
    harness = Harness()
    room, owner = harness.room, Follower("owner")
    await room.view(owner, None)
    await room.act(owner, lambda game: T1_C5, 0, None)
    await room.resign(owner, None)
    write = harness.committer.writes[-1]
    assert [(row.v, row.action) for row in write.actions] == [(2, RESIGN)]
    assert write.result is not None and write.result.status == "resigned" and write.result.moves == 1
    assert harness.ended == [room] and not room.is_open() and not room.is_followed()
    assert room.game.v == 1, "resigning does not change the game's version"
    with pytest.raises(Refusal) as refused:
        await room.act(owner, lambda game: T2_C6, 1, None)
    assert refused.value.code is ErrorCode.ILLEGAL_MOVE
    assert await room.view(owner, None) is None, "an ended room sends its callers back to the registry"


async def test_a_conflict_takes_the_game_as_stored_and_refuses_as_stale() -> None:
    harness = Harness(stored_game(("t2-c6",)))
    room, owner = harness.room, Follower("owner")
    harness.committer.fail_next = WriteConflict("v 1 is stored")
    with pytest.raises(Refusal) as refused:
        await room.act(owner, lambda game: T1_C5, 0, None)
    assert refused.value.code is ErrorCode.STALE
    assert room.game.log == (T2_C6,), "the stored action, not ours"
    assert harness.pushed == []


async def test_the_rules_and_the_version_refuse_before_anything_is_stored() -> None:
    harness = Harness()
    room, owner = harness.room, Follower("owner")
    with pytest.raises(Refusal) as stale:
        await room.act(owner, lambda game: T1_C5, 3, None)
    assert stale.value.code is ErrorCode.STALE
    with pytest.raises(IllegalMoveError):
        await room.act(owner, lambda game: parse_action("undo"), None, None)
    assert harness.committer.writes == []


async def test_other_nodes_commits_are_applied_in_order_old_ones_skipped_a_gap_reloaded() -> None:
    harness = Harness(stored_game(("t1-c5", "c5-t1", "t2-c6")))
    room, spectator = harness.room, Follower("spectator")
    await room.watch(spectator, None)
    await room.apply_remote(BusEvent("node-x", "g1", 1, "t1-c5"))
    await room.apply_remote(BusEvent("node-x", "g1", 1, "t1-c5"))  # seen already: skipped
    assert room.game.v == 1 and harness.kinds_for(spectator) == [("diff", 1)]
    await room.apply_remote(BusEvent("node-x", "g1", 3, "t2-c6"))  # v 2 was missed: reload
    assert room.game.v == 3 and room.game.log[-1] == T2_C6
    await room.apply_remote(BusEvent("node-x", "g1", 3, None, 0))  # resigned there
    assert not room.is_open() and harness.kinds_for(spectator)[-1] == ("game_over", None)
    assert harness.published == [], "a followed commit is not published again"


async def test_a_cancelled_action_follows_its_commit_kept_when_stored_rolled_back_when_not() -> None:
    harness, owner, spectator, acting = await act_held_with_a_spectator()
    room = harness.room
    acting.cancel()  # the client left while its write was queued: the write still commits
    await asyncio.sleep(0.01)
    assert not acting.done(), "the room waits for the outcome of a write it submitted"
    harness.committer.hold.set()
    with pytest.raises(asyncio.CancelledError):
        await acting
    assert [row.v for write in harness.committer.writes for row in write.actions] == [1]
    assert room.game.v == 1 and room.game.log == (T1_C5,), "the room matches the database"
    assert harness.kinds_for(spectator) == [("diff", 1)], "the committed action is announced"

    harness.committer.hold = asyncio.Event()
    harness.committer.fail_next = StorageUnavailable("down")
    acting = asyncio.create_task(room.act(owner, lambda game: T2_C6, 1, "r2"))
    await asyncio.sleep(0.01)
    acting.cancel()
    harness.committer.hold.set()
    with pytest.raises(asyncio.CancelledError):
        await acting
    assert room.game.v == 1 and room.game.log == (T1_C5,), "the failed write is rolled back"
    assert harness.kinds_for(spectator) == [("diff", 1)]


async def test_a_cancelled_resignation_that_commits_ends_the_room() -> None:
    harness = Harness()
    room, owner, spectator = harness.room, Follower("owner"), Follower("spectator")
    await room.watch(spectator, None)
    harness.committer.hold = asyncio.Event()
    resigning = asyncio.create_task(room.resign(owner, "r1"))
    await asyncio.sleep(0.01)
    resigning.cancel()
    harness.committer.hold.set()
    with pytest.raises(asyncio.CancelledError):
        await resigning
    assert not room.is_open() and harness.ended == [room]
    assert harness.kinds_for(spectator) == [("game_over", None)]


async def test_a_reload_sends_the_followers_a_fresh_snapshot_of_the_stored_game() -> None:
    harness = Harness(stored_game(("t1-c5", "c5-t1", "t2-c6")))
    room, viewer, spectator = harness.room, Follower("other tab"), Follower("spectator")
    await room.view(viewer, None)
    await room.watch(spectator, None)
    await room.apply_remote(BusEvent("node-x", "g1", 3, "t2-c6"))  # v 1 and 2 were missed
    assert harness.kinds_for(spectator) == [("snapshot", 3)] == harness.kinds_for(viewer)
    (_, pushed), *_ = harness.pushed
    assert pushed.get("id") is None and pushed["game"] == "g1", "a push, not a reply"

    harness.stored = stored_game(("t1-c5", "c5-t1", "t2-c6", "t1-c5"))
    harness.committer.fail_next = WriteConflict("v 4 is stored")
    owner = Follower("owner")
    with pytest.raises(Refusal):
        await room.act(owner, lambda game: T1_C5, 3, None)
    assert harness.kinds_for(spectator) == [("snapshot", 3), ("snapshot", 4)]
    assert harness.kinds_for(owner) == [], "the requester has its stale refusal"
