"""GameRoom alone, with a scripted write pipeline and a recording pusher: no socket, no database.

Each test names what the room promises: it holds only committed state, announces to every follower
but the requester, puts resigning behind the fence, and follows other nodes' commits in order."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import functools
import threading
from collections.abc import Iterable
from types import NoneType
from typing import Any

import pytest

import protocol
from engine import Deal, Game, IllegalMoveError, parse_action
from server import room as room_module
from server.bus import BusEvent
from server.committer import Done, Write, WriteConflict, settle_future
from server.errors import ErrorCode, Refusal
from server.room import RESIGN, GameRoom, PlayerRef, RoomServices, Turn
from server.storage import StorageUnavailable, StoredGame
from solver import solve_deal

CODE = "EO1-C8-AAAAAFA"
WINNABLE = "EO1-C8-AAAAAAB"
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
    """Stores writes in a list, answering in a later loop iteration, in submission order, as the
    pipeline does; ``fail_next`` makes the next write fail, ``hold`` keeps the writes submitted while
    it is set waiting until it is set."""

    def __init__(self) -> None:
        self.writes: list[Write] = []
        self.fail_next: Exception | None = None
        self.hold: asyncio.Event | None = None
        self._answering: set[asyncio.Task[None]] = set()

    def submit(self, write: Write, done: Done) -> None:
        error, self.fail_next = self.fail_next, None
        task = asyncio.get_running_loop().create_task(self._answer(write, error, done, self.hold))
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)

    def stored(self, write: Write) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.submit(write, functools.partial(settle_future, future))
        return future

    async def _answer(
        self, write: Write, error: Exception | None, done: Done, hold: asyncio.Event | None
    ) -> None:
        if hold is not None:
            await hold.wait()
        if error is None:
            self.writes.append(write)
        done(error)


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
    assert room.turn.held, "the action in flight holds the room: no reader sees it uncommitted"
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


# ------------------------------------------------------------------------------------------- the fast path


class Answers:
    """Collects what ``try_act`` answers (its ``answer`` callback), and says when it came."""

    def __init__(self) -> None:
        self.got: list[list[protocol.ServerMessage] | Exception] = []
        self.arrived = asyncio.Event()

    def __call__(self, outcome: list[protocol.ServerMessage] | Exception) -> None:
        self.got.append(outcome)
        self.arrived.set()

    async def next(self) -> list[protocol.ServerMessage] | Exception:
        await self.arrived.wait()
        self.arrived.clear()
        return self.got.pop(0)


async def act_at_once(room: GameRoom, owner: Follower, action: str, v: int | None, request_id: str) -> Any:
    """``try_act`` on a free room, its answer awaited (its refusal raised, as ``act`` raises it)."""
    answers = Answers()
    assert room.try_act(owner, lambda game: parse_action(action), v, request_id, answers)
    outcome = await answers.next()
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


async def scripted_game(fast: bool) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """One game played the same way through ``try_act`` or ``act``, with a spectator and the owner's
    other tab following: a move, an undo, a refused stale one, an illegal one, a failed commit, a
    conflict (the stored game taken), and a move after it. Every reply and push, as wire maps."""
    harness = Harness(stored_game(("t2-c6",)))
    room, owner = harness.room, Follower("owner")
    room.started_at = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)  # the same in both runs' snapshots
    await room.watch(Follower("spectator"), None)
    await room.view(Follower("other tab"), None)
    script: list[tuple[str, int | None, Exception | None]] = [
        ("t1-c5", 0, None),
        ("undo", 1, None),
        ("t1-c5", 0, None),  # stale: the game is at v 2
        ("c5-t1", None, None),  # illegal: c5 is empty
        ("t1-c5", 2, StorageUnavailable("down")),
        ("t1-c5", 2, WriteConflict("v 3 is stored")),  # the stored game has one action: v 1
        ("t1-c5", 1, None),
    ]
    replies: list[Any] = []
    for index, (action, v, failure) in enumerate(script):
        harness.committer.fail_next = failure
        try:
            if fast:
                got = await act_at_once(room, owner, action, v, f"r{index}")
            else:
                got = await room.act(owner, lambda game, action=action: parse_action(action), v, f"r{index}")
            replies.append([message.to_wire() for message in got])
        except (Refusal, IllegalMoveError, StorageUnavailable) as refused:
            replies.append((type(refused).__name__, getattr(refused, "code", None)))
        assert not room.is_busy(), "the turn is released once the action is answered"
    writes = [[(row.v, row.action) for row in write.actions] for write in harness.committer.writes]
    pushed = [(sorted(map(repr, audience)), message) for audience, message in harness.pushed]
    return replies, pushed, harness.published, writes


async def test_the_fast_and_the_slow_path_answer_and_push_the_same() -> None:
    fast, slow = await scripted_game(fast=True), await scripted_game(fast=False)
    assert fast == slow
    replies, pushed, _, writes = fast
    assert [reply[0]["type"] if isinstance(reply, list) else reply for reply in replies] == [
        "ack",
        "ack",
        ("Refusal", ErrorCode.STALE),
        ("IllegalMoveError", None),
        ("StorageUnavailable", None),
        ("Refusal", ErrorCode.STALE),
        "ack",
    ]
    assert [(message["type"], message["v"]) for _, message in pushed] == [
        ("diff", 1),
        ("diff", 2),
        ("snapshot", 1),  # the stored game, after the conflict
        ("diff", 2),
    ]
    assert writes == [[(1, "t1-c5")], [(2, "undo")], [(2, "t1-c5")]]


async def test_a_fast_action_waits_behind_an_operation_holding_or_waiting_for_the_turn() -> None:
    """``try_act`` never takes the turn while another operation holds it, nor while one waits for it
    (even in the moment the turn is handed over): the action goes the slow way, in arrival order."""
    harness = Harness()
    room, owner, spectator = harness.room, Follower("owner"), Follower("spectator")
    async with room.turn:  # a watch, resign or reload in progress
        assert not room.try_act(owner, lambda game: T1_C5, 0, "r1", Answers())
        watching = asyncio.create_task(room.watch(spectator, None))
        await asyncio.sleep(0.01)
    assert room.is_busy(), "handed to the waiting watch, not free"
    assert not room.try_act(owner, lambda game: T1_C5, 0, "r1", Answers()), "no jumping the queue"
    acting = asyncio.create_task(room.act(owner, lambda game: T1_C5, 0, "r1"))
    snapshot = await watching
    assert snapshot is not None and snapshot.v == 0, "the watch came first"
    (ack,) = await acting
    assert ack.v == 1 and harness.kinds_for(spectator) == [("diff", 1)]
    assert harness.committer.writes[0].actions[0].v == 1 and not room.is_busy()


async def test_an_action_in_flight_holds_the_turn_and_the_next_ones_follow_in_order() -> None:
    """A fast action, then a watch and a second action arriving while its commit is held: the watch
    sees v 1, the second action is v 2 and the spectator gets its diff."""
    harness = Harness()
    room, owner, spectator = harness.room, Follower("owner"), Follower("spectator")
    harness.committer.hold = asyncio.Event()
    first = Answers()
    assert room.try_act(owner, lambda game: T1_C5, 0, "r1", first)
    watching = asyncio.create_task(room.watch(spectator, None))
    assert not room.try_act(owner, lambda game: T2_C6, 1, "r2", Answers())
    second = asyncio.create_task(room.act(owner, lambda game: T2_C6, 1, "r2"))
    await asyncio.sleep(0.01)
    assert room.is_busy() and not watching.done() and first.got == []
    harness.committer.hold.set()
    (ack,) = await first.next()  # type: ignore[misc]
    snapshot = await watching
    (second_ack,) = await second
    assert (ack.v, snapshot.v if snapshot else None, second_ack.v) == (1, 1, 2)
    assert [row.v for write in harness.committer.writes for row in write.actions] == [1, 2]
    assert harness.kinds_for(spectator) == [("diff", 2)]


async def test_a_long_games_failed_action_is_taken_back_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past ``REPLAY_INLINE_ACTIONS`` a failed action is taken back by a replay in a worker thread (a
    database outage fails every action in flight; replaying each long game inline would stall the
    loop): the turn stays held until the replay is in, then the game is as before the action, the
    requester gets the failure, and the next action works."""
    monkeypatch.setattr(room_module, "REPLAY_INLINE_ACTIONS", 1)
    harness = Harness()
    room, owner = harness.room, Follower("owner")
    (ack,) = await act_at_once(room, owner, "t1-c5", 0, "r1")
    assert ack.v == 1
    replays: list[int] = []
    real_replay = Game.replay

    def replay(deal: Any, actions: Any) -> Game:
        replays.append(threading.get_ident())
        return real_replay(deal, actions)

    monkeypatch.setattr(Game, "replay", staticmethod(replay))
    harness.committer.fail_next = StorageUnavailable("down")
    answers = Answers()
    assert room.try_act(owner, lambda game: parse_action("undo"), 1, "r2", answers)
    while not replays:
        assert room.is_busy()
        await asyncio.sleep(0.001)
    assert isinstance(await answers.next(), StorageUnavailable)
    assert replays != [threading.get_ident()]  # not on the event loop's thread
    assert room.game.v == 1 and [a.symbol() for a in room.game.log] == ["t1-c5"] and not room.is_busy()
    (ack,) = await act_at_once(room, owner, "undo", 1, "r3")
    assert ack.v == 2 and room.game.v == 2


async def test_a_failed_fast_commit_undoes_the_action_before_the_next_one() -> None:
    harness = Harness()
    room, owner, spectator = harness.room, Follower("owner"), Follower("spectator")
    await room.watch(spectator, None)
    harness.committer.fail_next = StorageUnavailable("down")
    with pytest.raises(StorageUnavailable):
        await act_at_once(room, owner, "t1-c5", 0, "r1")
    assert room.game.v == 0 and room.game.log == () and not room.is_busy()
    assert harness.pushed == [] and harness.published == []
    (ack,) = await act_at_once(room, owner, "t1-c5", 0, "r2")
    assert ack.v == 1 and harness.kinds_for(spectator) == [("diff", 1)]


async def test_a_pipeline_refusing_the_write_at_once_is_answered_on_the_next_iteration() -> None:
    """The pipeline is stopping: ``submit`` raises; the action is undone and answered, but never from
    inside ``try_act`` (the caller's call), which would let a failing answer be answered twice: from
    the next loop iteration, as after a commit. The room stays busy until then."""
    harness = Harness()
    room, owner = harness.room, Follower("owner")

    def stopping(write: Write, done: Done) -> None:
        raise StorageUnavailable("the server is stopping")

    harness.committer.submit = stopping  # type: ignore[method-assign]
    answers = Answers()
    assert room.try_act(owner, lambda game: T1_C5, 0, "r1", answers)
    assert answers.got == [] and room.is_busy()
    await asyncio.sleep(0)
    assert [type(outcome) for outcome in answers.got] == [StorageUnavailable]
    assert room.game.v == 0 and not room.is_busy()


async def test_a_fast_conflict_holds_the_turn_until_the_stored_game_is_taken() -> None:
    harness = Harness(stored_game(("t2-c6",)))
    room, owner, spectator = harness.room, Follower("owner"), Follower("spectator")
    await room.watch(spectator, None)
    reading = asyncio.Event()
    real_load = harness.load

    async def slow_load(game_id: str) -> StoredGame | None:
        await reading.wait()
        return await real_load(game_id)

    room.services = dataclasses.replace(harness.services, load=slow_load)
    harness.committer.fail_next = WriteConflict("v 1 is stored")
    answers = Answers()
    assert room.try_act(owner, lambda game: T1_C5, 0, "r1", answers)
    viewing = asyncio.create_task(room.view(Follower("other tab"), None))
    await asyncio.sleep(0.01)
    assert answers.got == [] and room.is_busy() and not viewing.done(), "the reload holds the turn"
    reading.set()
    refusal = await answers.next()
    assert isinstance(refusal, Refusal) and refusal.code is ErrorCode.STALE
    assert room.game.log == (T2_C6,), "the stored action, not ours"
    assert harness.kinds_for(spectator) == [("snapshot", 1)], "spectators get the stored game"
    snapshot = await viewing
    assert snapshot is not None and snapshot.v == 1
    assert room.reloading is None and not room.is_busy()


async def test_the_fast_path_refuses_at_once_with_nothing_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stale, illegal, and a game at its most actions: raised by ``try_act``, the turn free again."""
    harness = Harness()
    room, owner = harness.room, Follower("owner")
    never = Answers()
    with pytest.raises(Refusal) as stale:
        room.try_act(owner, lambda game: T1_C5, 3, "r1", never)
    assert stale.value.code is ErrorCode.STALE
    with pytest.raises(IllegalMoveError):
        room.try_act(owner, lambda game: parse_action("undo"), None, "r2", never)
    monkeypatch.setattr("server.room.MAX_GAME_ACTIONS", 1)
    await act_at_once(room, owner, "t1-c5", 0, "r3")
    with pytest.raises(Refusal) as longest:
        room.try_act(owner, lambda game: T2_C6, 1, "r4", never)
    assert longest.value.code is ErrorCode.ILLEGAL_MOVE and "resign" in longest.value.message
    assert never.got == [] and not room.is_busy()
    assert [row.v for write in harness.committer.writes for row in write.actions] == [1]


async def test_a_winning_fast_action_answers_its_ack_then_game_over_and_ends_the_room() -> None:
    harness = Harness()
    room, owner, spectator = harness.room, Follower("owner"), Follower("spectator")
    solution = list(solve_deal(Deal.from_code(WINNABLE)).moves)
    room.game = Game.replay(Deal.from_code(WINNABLE), solution[:-1])  # one action short of the win
    await room.watch(spectator, None)
    ack, over = await act_at_once(room, owner, solution[-1].symbol(), len(solution) - 1, "r")
    assert (ack.to_wire()["type"], ack.status.value) == ("ack", "won")
    assert over.to_wire()["type"] == "game_over" and over.won and over.request_id is None
    assert harness.kinds_for(spectator) == [("diff", len(solution)), ("game_over", None)]
    (write,) = harness.committer.writes
    assert write.result is not None and write.result.won
    assert harness.ended == [room] and not room.is_open() and not room.is_busy()


async def test_a_cancelled_waiter_gives_up_its_place_in_the_turn() -> None:
    """Cancelled while waiting (dropped before or after the holder leaves) or just after the turn was
    handed to it: either way the turn goes on to the next waiter, or is free."""
    turn = Turn()
    order: list[str] = []

    async def take(name: str) -> None:
        async with turn:
            order.append(name)

    await turn.enter()
    first, second, third = (asyncio.create_task(take(name)) for name in ("first", "second", "third"))
    await asyncio.sleep(0)
    first.cancel()
    turn.leave()  # first's future is cancelled but it has not run yet: handed to second
    second.cancel()  # handed the turn, cancelled before it resumed: it passes the turn on
    outcomes = await asyncio.gather(first, second, third, return_exceptions=True)
    assert [type(outcome) for outcome in outcomes] == [
        asyncio.CancelledError,
        asyncio.CancelledError,
        NoneType,
    ]
    assert order == ["third"] and not turn.is_busy() and turn.try_enter()
