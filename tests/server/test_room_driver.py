"""RoomDriver with a write sink that answers when the test says so, and fake services: what runs when.

No socket, no database, and no sleep as synchronisation: a commit's outcome is given by the test
(`HeldSink.answer`), a load waits on an `asyncio.Event`, a reply is awaited as a future. Where only
"the loop ran one turn" can be waited for, ``await asyncio.sleep(0)`` says so."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import datetime as dt
import logging
import threading
from typing import Any

import pytest

import protocol
from engine import Deal, Game, parse_action
from server.play.bus import BusEvent, Event
from server.play.commands import Act, RemoteCommit, Request, Resign, Tick, Unfollow, View, Watch
from server.play.driver import NoRaces, RoomDriver, RoomServices
from server.play.effects import Observe, SeatProgress, Wake
from server.play.game_room import REPLAY_INLINE_ACTIONS, GameRoom, PlayerRef
from server.storage import StorageUnavailable, StoredGame
from server.storage.commit_backends import Write, WriteConflict, actions_of
from server.storage.committer import Done
from tests.support.rooms import Person

CODE = "EO1-C8-AAAAAFA"
OWNER = PlayerRef("p1", "Ann")
NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


class HeldSink:
    """A write pipeline that keeps every write until the test answers it (`answer`), in submission
    order; with ``refuse`` set, ``submit`` raises it (a pipeline that is stopping)."""

    def __init__(self) -> None:
        self.held: collections.deque[tuple[Write, Done]] = collections.deque()
        self.stored: list[Write] = []
        self.refuse: Exception | None = None

    def submit(self, write: Write, done: Done) -> None:
        if self.refuse is not None:
            raise self.refuse
        self.held.append((write, done))

    def answer(self, error: Exception | None = None) -> None:
        """The outcome of the oldest held write: stored (None) or ``error``."""
        write, done = self.held.popleft()
        if error is None:
            self.stored.append(write)
        done(error)

    def rows(self) -> list[tuple[int, str]]:
        return [(row.v, row.action) for write in self.stored for row in actions_of(write)]


class Node:
    """One room, its driver and fake services that record what they were asked, in one log."""

    def __init__(self, game: Game | None = None) -> None:
        self.sink = HeldSink()
        self.log: list[tuple[str, Any]] = []  # ("reply" | "push" | "publish" | "left" | "idle", what)
        self.stored: StoredGame | None = None  # what `load` reads
        self.reading: asyncio.Event | None = None  # set: `load` waits for it
        self.services = RoomServices(
            committer=self.sink,
            push=self.push,
            publish=lambda event: self.log.append(
                ("publish", event.v if isinstance(event, BusEvent) else event)
            ),
            load=self.load,
            left=lambda driver: self.log.append(("left", driver.id)),
            idle=lambda driver: self.log.append(("idle", driver.id)),
        )
        room = GameRoom("g1", game or Game.from_code(CODE), OWNER, NOW, publishes=True, clock=lambda: NOW)
        self.driver = RoomDriver(room, self.services)
        self.owner, self.tab, self.spectator = Person("owner"), Person("tab"), Person("spectator")
        self._awaited: dict[str, asyncio.Future[Any]] = {}

    def replied(self, who: Person) -> asyncio.Future[Any]:
        """A future of ``who``'s next reply (an explicit signal to await)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._awaited[who.name] = future
        return future

    def _logged_reply(self, who: Person, outcome: Any) -> None:
        self.log.append(("reply", (who.name, shown(outcome))))
        future = self._awaited.pop(who.name, None)
        if future is not None:
            future.set_result(shown(outcome))

    def push(self, audience: Any, message: protocol.ServerMessage) -> None:
        wire = message.to_wire()
        self.log.append(("push", (sorted(map(repr, audience)), wire["type"], wire.get("v"))))

    async def load(self, game_id: str) -> StoredGame | None:
        if self.reading is not None:
            await self.reading.wait()
        return self.stored

    def answer_to(self, who: Person) -> Any:
        """A ``reply_to`` that logs its outcome under ``who``'s name."""

        def reply_to(outcome: Any) -> None:
            self._logged_reply(who, outcome)

        return reply_to

    def act(self, action: str, v: int | None, who: Person | None = None) -> Act:
        who = who or self.owner
        return Act(who, lambda game: parse_action(action), v, None, self.answer_to(who))

    def view(self, who: Person) -> View:
        return View(who, None, self.answer_to(who))

    def watch(self, who: Person) -> Watch:
        return Watch(who, None, self.answer_to(who))

    def kinds(self, kind: str) -> list[Any]:
        return [what for logged, what in self.log if logged == kind]


def shown(outcome: Any) -> Any:
    """A reply as compared: its messages' (type, v), or the refusal's class."""
    if isinstance(outcome, list):
        return [(message.to_wire()["type"], message.to_wire().get("v")) for message in outcome]
    return type(outcome).__name__


def stored_game(*actions: str) -> StoredGame:
    return StoredGame("g1", OWNER.id, CODE, 8, None, "playing", 0, 0, 0, NOW, None, 0, False, actions)


# ------------------------------------------------------------------------------ a free room


async def test_a_free_room_handles_an_act_synchronously() -> None:
    """An action on a free room: its write submitted before ``send`` returns, no task created, and the
    replies sent from inside the commit's callback."""
    node = Node()
    tasks = asyncio.all_tasks()
    node.driver.send(node.act("t1-c5", 0))
    assert [actions_of(write)[0].v for write, _ in node.sink.held] == [1], "submitted inside send()"
    assert asyncio.all_tasks() == tasks, "no task of its own"
    assert node.driver.is_busy() and node.log == []
    node.sink.answer()
    assert node.log == [("publish", 1), ("reply", ("owner", [("ack", 1)]))], "answered inside done()"
    assert asyncio.all_tasks() == tasks and not node.driver.is_busy()


async def test_requests_queue_while_awaiting_and_drain_in_order_after_the_outcome() -> None:
    """While an action's commit is held, a view, a second action and a watch queue (nothing else is
    submitted); the outcome goes first, then the queue drains in arrival order until the second
    action awaits its own commit."""
    node = Node()
    driver, sink = node.driver, node.sink
    driver.send(node.act("t1-c5", 0))
    driver.send(node.view(node.tab))
    driver.send(node.act("t2-c6", 1))
    driver.send(node.watch(node.spectator))
    assert len(sink.held) == 1 and node.kinds("reply") == [], "queued behind the awaited commit"
    sink.answer()
    assert node.kinds("reply") == [("owner", [("ack", 1)]), ("tab", [("snapshot", 1)])]
    assert len(sink.held) == 1, "the second action awaits its commit; the watch waits behind it"
    sink.answer()
    assert node.kinds("reply")[2:] == [("owner", [("ack", 2)]), ("spectator", [("snapshot", 2)])]
    assert node.kinds("push") == [(["tab"], "diff", 2)], "the spectator joined after v 2"
    assert sink.rows() == [(1, "t1-c5"), (2, "t2-c6")] and not driver.is_busy()


async def test_an_outcome_goes_before_queued_requests() -> None:
    """A conflict's load finishes while a view is queued: the stored game is taken (and the requester
    told stale) before the view, which sees the stored game."""
    node = Node()
    node.stored, node.reading = stored_game("t2-c6"), asyncio.Event()
    node.driver.send(node.watch(node.spectator))
    node.driver.send(node.act("t1-c5", 0))
    node.sink.answer(WriteConflict("v 1 is stored"))
    viewing = node.replied(node.tab)
    node.driver.send(node.view(node.tab))
    assert node.driver.is_busy() and not viewing.done(), "the reload holds the room"
    node.reading.set()
    assert await viewing == [("snapshot", 1)]
    assert node.log[1:] == [
        ("push", (["spectator"], "snapshot", 1)),
        ("reply", ("owner", "Refusal")),
        ("reply", ("tab", [("snapshot", 1)])),
    ]
    assert node.driver.room.game.log == (parse_action("t2-c6"),) and not node.driver.is_busy()


async def test_a_reply_that_sends_the_next_request_only_queues_it() -> None:
    """A connection answered sends its next request from inside the reply: it is queued, and handled
    only after the rest of the effects of the first (the spectator's diff of v 1 comes first)."""
    node = Node()
    driver = node.driver
    driver.send(node.watch(node.spectator))
    inside: list[tuple[int, int]] = []

    def reply_then_send(outcome: Any) -> None:
        node.log.append(("reply", ("owner", shown(outcome))))
        driver.send(node.act("t2-c6", 1))
        inside.append((len(node.sink.held), len(node.kinds("push"))))

    driver.send(Act(node.owner, lambda game: parse_action("t1-c5"), 0, None, reply_then_send))
    node.sink.answer()
    assert inside == [(0, 0)], "inside the reply: neither handled nor the diff pushed yet"
    assert node.kinds("push") == [(["spectator"], "diff", 1)]
    assert [actions_of(write)[0].v for write, _ in node.sink.held] == [2], "handled after the diff"
    node.sink.answer()
    assert node.kinds("push") == [(["spectator"], "diff", 1), (["spectator"], "diff", 2)]


async def test_a_pipeline_refusing_at_once_is_answered_on_the_next_loop_iteration() -> None:
    """The pipeline is stopping (``submit`` raises): the action is taken back and answered, never from
    inside ``send`` (the caller's call) but from the next loop iteration, as a commit's outcome; the
    room is busy until then."""
    node = Node()
    node.sink.refuse = StorageUnavailable("the server is stopping")
    node.driver.send(node.act("t1-c5", 0))
    assert node.log == [] and node.driver.is_busy()
    await asyncio.sleep(0)  # one turn of the loop: the call_soon'd outcome runs
    assert node.log == [("reply", ("owner", "StorageUnavailable"))]
    assert node.driver.room.game.v == 0 and not node.driver.is_busy()


async def test_an_effect_that_raises_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    """The bus and the requester's reply fail: the spectator still gets its diff, the room goes on, and
    each failure is logged."""
    node = Node()

    def broken_publish(event: Event) -> None:
        raise RuntimeError("bus down")

    def broken_reply(outcome: Any) -> None:
        raise RuntimeError("connection gone")

    node.driver.services = node.services = RoomServices(
        committer=node.sink,
        push=node.push,
        publish=broken_publish,
        load=node.load,
        left=node.services.left,
        idle=node.services.idle,
    )
    node.driver.send(node.watch(node.spectator))
    node.driver.send(Act(node.owner, lambda game: parse_action("t1-c5"), 0, None, broken_reply))
    with caplog.at_level(logging.ERROR, logger="server.play.driver"):
        node.sink.answer()
    assert node.kinds("push") == [(["spectator"], "diff", 1)]
    assert [str(record.exc_info[1]) for record in caplog.records if record.exc_info] == [
        "bus down",
        "connection gone",
    ]
    node.driver.send(node.act("t2-c6", 1))
    node.sink.answer()
    assert node.driver.room.game.v == 2 and not node.driver.is_busy()


async def test_a_room_that_fails_on_a_request_answers_it_with_the_failure() -> None:
    """A bug in handling (here in resolving the action) reaches the requester, and the room goes on."""
    node = Node()

    def resolve(game: Game) -> Any:
        raise RuntimeError("bug")

    node.driver.send(Act(node.owner, resolve, 0, None, node.answer_to(node.owner)))
    assert node.log == [("reply", ("owner", "RuntimeError"))] and not node.driver.is_busy()


async def test_idle_is_called_when_the_room_is_unfollowed_and_nothing_is_queued() -> None:
    node = Node()
    driver = node.driver
    driver.send(node.view(node.owner))
    driver.send(node.watch(node.spectator))
    driver.send(Unfollow(node.spectator))
    assert node.kinds("idle") == [], "the owner still follows"
    driver.send(node.act("t1-c5", 0))
    driver.send(Unfollow(node.owner))  # the connection closed while its commit is in flight
    assert node.kinds("idle") == [], "not idle while it awaits an outcome"
    node.sink.answer()
    assert node.kinds("idle") == ["g1"] and node.log[-1] == ("idle", "g1"), "once, after the drain"
    assert node.sink.rows() == [(1, "t1-c5")] and driver.room.game.v == 1, "the action was kept"


async def test_an_action_whose_connection_closed_follows_its_commit() -> None:
    """The requester unfollows while its action's commit is held: stored, the action is kept and the
    spectator gets its diff; failed, it is taken back and nobody is told."""
    node = Node()
    driver = node.driver
    driver.send(node.watch(node.spectator))
    driver.send(node.act("t1-c5", 0))
    driver.send(Unfollow(node.owner))
    node.sink.answer()
    assert driver.room.game.log == (parse_action("t1-c5"),) and node.kinds("push") == [
        (["spectator"], "diff", 1)
    ]
    driver.send(node.act("t2-c6", 1))
    driver.send(Unfollow(node.owner))
    node.sink.answer(StorageUnavailable("down"))
    assert driver.room.game.v == 1 and node.kinds("push") == [(["spectator"], "diff", 1)]
    assert not driver.is_busy() and node.kinds("idle") == []


async def test_an_awaited_reply_is_written_before_the_rooms_next_push() -> None:
    """A watch asked while an action's commit is held, and another node's commit of v 2 queued
    behind it: once the action is stored, the watch's caller gets the snapshot (v 1) and writes it
    before the room, drained on at the next turn of the loop, pushes the diff of v 2 to the new
    spectator (the order a connection relies on: its reply, then the pushes that follow it)."""
    node = Node()
    driver = node.driver
    driver.send(node.act("t1-c5", 0))
    watching = driver.ask(lambda reply_to: Watch(node.spectator, None, reply_to))

    async def caller() -> None:  # as dispatch does: the reply is written as soon as the future is done
        node.log.append(("written", shown(await watching)))

    written = asyncio.create_task(caller())
    driver.send(RemoteCommit(BusEvent("node-x", "g1", 2, "t2-c6")))
    node.sink.answer()
    assert node.kinds("push") == [], "the rest waits for the caller"
    await written
    await asyncio.sleep(0)
    assert node.log[-3:] == [
        ("reply", ("owner", [("ack", 1)])),
        ("written", [("snapshot", 1)]),
        ("push", (["owner", "spectator"], "diff", 2)),
    ]
    assert not driver.is_busy() and driver.room.game.v == 2


async def test_ask_cancelled_withdraws_nothing() -> None:
    """A resignation asked while an action's commit is held, its future cancelled (its caller left):
    the room still takes it in turn, the resignation is stored, the room ends and leaves; a watch
    asked and cancelled meanwhile holds up nobody behind it."""
    node = Node()
    driver = node.driver
    driver.send(node.watch(node.spectator))
    driver.send(node.act("t1-c5", 0))
    resigning = driver.ask(lambda reply_to: Resign(node.owner, "r", reply_to))
    watching = driver.ask(lambda reply_to: Watch(node.tab, None, reply_to))
    viewing = driver.ask(lambda reply_to: View(node.tab, None, reply_to))
    resigning.cancel()
    watching.cancel()
    node.sink.answer()
    assert [actions_of(write)[0].action for write, _ in node.sink.held] == ["resign"], "not withdrawn"
    node.sink.answer()
    assert node.kinds("left") == ["g1"] and not driver.is_open()
    assert node.kinds("push")[-1] == (["spectator"], "game_over", None)
    assert await viewing is None, "the room ended before the view's turn: find the game again"


async def test_a_long_games_failed_action_is_taken_back_in_a_worker_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past `REPLAY_INLINE_ACTIONS`, the `Rebuild` replays off the event loop's thread; the room is
    busy until it is in, then the requester gets the failure and the game is as before."""
    moves = [parse_action(action) for action in ["t1-c5", "c5-t1"] * (REPLAY_INLINE_ACTIONS // 2 + 1)]
    node = Node(Game.replay(Deal.from_code(CODE), moves))
    threads: list[int] = []
    real_replay = Game.replay

    def replay(deal: Deal, actions: Any) -> Game:
        threads.append(threading.get_ident())
        return real_replay(deal, actions)

    monkeypatch.setattr(Game, "replay", staticmethod(replay))
    answered = node.replied(node.owner)
    node.driver.send(node.act("t1-c5", len(moves)))
    node.sink.answer(StorageUnavailable("down"))
    assert node.driver.is_busy() and not answered.done()
    assert await answered == "StorageUnavailable"
    assert threads and threading.get_ident() not in threads, "not on the event loop's thread"
    assert node.driver.room.game.log == tuple(moves) and not node.driver.is_busy()


async def test_a_room_whose_stored_game_cannot_be_read_leaves() -> None:
    """A gap in other nodes' commits, and the read fails: the room leaves the node (its callers find
    the game again)."""
    node = Node()

    async def failing_load(game_id: str) -> StoredGame | None:
        raise StorageUnavailable("down")

    left = asyncio.get_running_loop().create_future()
    node.driver.services = RoomServices(
        committer=node.sink,
        push=node.push,
        publish=node.services.publish,
        load=failing_load,
        left=left.set_result,
        idle=node.services.idle,
    )
    node.driver.send(node.watch(node.spectator))
    node.driver.send(RemoteCommit(BusEvent("node-x", "g1", 3, "t2-c6")))
    assert await left is node.driver


async def test_requests_of_many_kinds_answer_in_arrival_order_while_a_load_runs() -> None:
    """A gap reloads the game (a task); requests sent meanwhile wait, then answer in order."""
    node = Node()
    node.stored, node.reading = stored_game("t1-c5", "c5-t1"), asyncio.Event()
    node.driver.send(RemoteCommit(BusEvent("node-x", "g1", 2, "c5-t1")))
    requests: list[Request] = [node.view(node.tab), node.act("t2-c6", 2), node.watch(node.spectator)]
    for request in requests:
        node.driver.send(request)
    assert node.kinds("reply") == []
    last = node.replied(node.tab)
    node.reading.set()
    assert await last == [("snapshot", 2)]
    assert node.kinds("reply") == [("tab", [("snapshot", 2)])], "the action awaits its commit"
    node.sink.answer()
    assert node.kinds("reply")[1:] == [("owner", [("ack", 3)]), ("spectator", [("snapshot", 3)])]


# ------------------------------------------------------------------------------ a race room's effects


class _Ticking:
    """A room that asks to be woken once and counts its ticks (the shape of a race room)."""

    id, owner, awaiting = "r1", OWNER, None

    def __init__(self) -> None:
        self.spectators: set[Any] = set()
        self.ticks = asyncio.Event()

    def handle(self, command: Any) -> list[Any]:
        if isinstance(command, Tick):
            assert command.at == NOW  # the time its Wake asked for
            self.ticks.set()
            return [Observe("r1", _progress())]
        return [Wake(0.01, NOW)]

    def is_open(self) -> bool:
        return True

    def is_followed(self) -> bool:
        return True


def _progress() -> SeatProgress:
    return SeatProgress.of("g1", Game.from_code(CODE), NOW)


async def test_wake_sends_the_room_a_tick_and_observe_tells_the_race() -> None:
    """A Wake is a timer that sends a Tick (no task of its own); an Observe goes to the node's races."""
    node = Node()
    told: list[tuple[str, int]] = []

    class Races(NoRaces):
        def observe(self, race_id: str, progress: SeatProgress) -> None:
            told.append((race_id, progress.v))

    services = dataclasses.replace(node.services, races=Races())
    room = _Ticking()
    driver: RoomDriver[Any] = RoomDriver(room, services)
    driver.send(Unfollow(node.owner))  # any request: the room answers it with a Wake
    assert not room.ticks.is_set()
    await asyncio.wait_for(room.ticks.wait(), 5)
    assert told == [("r1", 0)]
