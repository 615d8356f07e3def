"""The services without a listening socket (`server.app.Services`), on a real migrated database of each
backend: the room registry, the group-commit pipeline and a session's release on close.

Rooms are driven as the request layer drives them: commands sent to their `RoomDriver` (``ask``
awaits the reply), sessions following through their own methods (``view``, ``watch``)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

import protocol
from engine import Cell, Column, Deal, parse_action
from server.app import Services
from server.config import Settings
from server.errors import ErrorCode, Refusal, refusal_for
from server.play.bus import BusEvent
from server.play.commands import Act, HintPosition, Request, Resign, View, Watch
from server.play.driver import RoomDriver
from server.play.game_room import FinishedGame, PlayerRef
from server.play.registry import GameRoomDriver
from server.play.replay import RESIGN
from server.play.session import Session
from server.storage import ActionRecord, GameFigures, PlayerRecord, repository, upgrade_to_head
from server.storage.committer import AddPlayer, AppendActions, WriteConflict

CODE = "EO1-C8-AAAAAFA"
OWNER = PlayerRef("p-owner", "Ann")


@pytest.fixture
async def services(database_url: str) -> AsyncIterator[Services]:
    await asyncio.to_thread(upgrade_to_head, database_url)
    started = await Services.start(Settings(database_url=database_url, sqlite_synchronous="NORMAL"))
    now = dt.datetime.now(dt.UTC)
    await started.committer.stored(AddPlayer(PlayerRecord(OWNER.id, OWNER.name, "3" * 64, now)))
    try:
        yield started
    finally:
        await started.stop()


def session() -> Session:
    return Session(subprotocol=None)  # type: ignore[arg-type]


async def new_room(services: Services) -> GameRoomDriver:
    return await services.registry.create(OWNER, Deal.from_code(CODE))


async def ask(room: GameRoomDriver, make: Callable[[Callable[[Any], None]], Request]) -> Any:
    """``make(reply_to)`` sent to ``room``; its reply (a refusal comes back as the exception)."""
    return await room.ask(make)


async def act(room: GameRoomDriver, who: Session, action: str, v: int | None) -> Any:
    return await ask(room, lambda reply_to: Act(who, lambda game: parse_action(action), v, None, reply_to))


async def resign(room: GameRoomDriver, who: Session) -> Any:
    return await ask(room, lambda reply_to: Resign(who, None, reply_to))


async def view(room: GameRoomDriver, who: Session) -> Any:
    """``who`` follows ``room`` as its owner's connection, as ``resume`` does: its snapshot (None: the
    room closed first)."""
    who.view(room)
    return await ask(room, lambda reply_to: View(who, None, reply_to))


async def watch(room: GameRoomDriver, who: Session) -> Any:
    who.watch(room)
    return await ask(room, lambda reply_to: Watch(who, None, reply_to))


# ------------------------------------------------------------------------------------------- registry


async def test_a_room_leaves_memory_when_nobody_follows_it_and_comes_back_from_the_database(
    services: Services,
) -> None:
    registry = services.registry
    room = await new_room(services)
    viewer = session()
    viewer.view(room)
    (ack,) = await act(room, viewer, "t1-c5", 0)
    assert isinstance(ack, protocol.Ack) and ack.v == 1
    assert registry.room(room.id) is room
    viewer.release()
    assert registry.room(room.id) is None and registry.rooms() == []
    found = await registry.find(room.id)
    assert isinstance(found, RoomDriver) and found is not room
    assert found.room.game.log == room.room.game.log and found.owner == OWNER


async def test_concurrent_finds_of_one_game_share_one_load(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    room = await new_room(services)
    services.registry.forget_if_idle(room)
    loads = 0
    real_load = repository.load_game

    async def counting_load(*args: Any) -> Any:
        nonlocal loads
        loads += 1
        return await real_load(*args)

    monkeypatch.setattr(repository, "load_game", counting_load)
    found = await asyncio.gather(*(services.registry.find(room.id) for _ in range(10)))
    assert loads == 1 and len({id(each) for each in found}) == 1


async def test_a_game_loaded_with_another_nodes_commit_on_the_way_stays_for_its_finder(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another node commits the game's next action while this node loads it: the loaded room takes
    the commit (an early event), and is still held for the find that loaded it, unfollowed as it is
    until its caller acts (its idle room was let go at once before, and the action refused stale)."""
    registry = services.registry
    room = await new_room(services)
    registry.forget_if_idle(room)
    now = dt.datetime.now(dt.UTC)
    await services.committer.stored(
        AppendActions((ActionRecord(room.id, 1, "t1-c5", figures=GameFigures(0, 1, 0, now)),))
    )
    real_load = repository.load_game

    async def load_then_hear_of_a_commit(*args: Any) -> Any:
        stored = await real_load(*args)
        registry.remote._on_event(BusEvent("node-other", room.id, 2, "c5-t1"))  # committed elsewhere
        await services.committer.stored(AppendActions((ActionRecord(room.id, 2, "c5-t1"),)))
        return stored

    monkeypatch.setattr(repository, "load_game", load_then_hear_of_a_commit)
    found = await registry.find(room.id)
    assert isinstance(found, RoomDriver) and found.is_open() and registry.room(room.id) is found
    assert found.room.game.v == 2, "the other node's commit was applied"
    owner = player_session(OWNER)
    assert (await act(found, owner, "t1-c5", 2))[0].v == 3


async def test_a_finished_game_is_found_as_its_final_position_from_the_cache(services: Services) -> None:
    registry = services.registry
    room = await new_room(services)
    (over,) = await resign(room, session())
    assert isinstance(over, protocol.GameOver)
    assert registry.room(room.id) is None
    found = await registry.find(room.id)
    assert isinstance(found, FinishedGame) and found.game.status.value == "resigned"
    assert found is room.room.ended, "the position the room ended with, no replay"


async def test_an_unknown_game_is_not_found(services: Services) -> None:
    with pytest.raises(Refusal) as refused:
        await services.registry.find("no-such-game")
    assert refused.value.code is ErrorCode.NOT_FOUND


# ------------------------------------------------------------------------------------------- pipeline


async def test_writes_submitted_together_share_commits_and_a_conflict_fails_only_itself(
    services: Services,
) -> None:
    rooms = [await new_room(services) for _ in range(8)]
    now = dt.datetime.now(dt.UTC)
    figures = GameFigures(0, 1, 0, now)
    writes = [AppendActions([ActionRecord(room.id, 1, "t1-c5", figures=figures)]) for room in rooms]
    writes.append(AppendActions([ActionRecord(rooms[0].id, 1, "c5-t1")]))  # v 1 of rooms[0] twice
    outcomes = await asyncio.gather(*(services.committer.stored(w) for w in writes), return_exceptions=True)
    assert outcomes[:-1] == [None] * 8
    assert isinstance(outcomes[-1], WriteConflict)
    async with services.database.connection() as conn:
        stored = [await repository.load_game(conn, room.id) for room in rooms]
    assert [game.actions for game in stored if game] == [("t1-c5",)] * 8
    assert {game.moves for game in stored if game} == {1}, "the game rows took the figures"


async def test_the_database_refuses_an_action_after_the_resign_row(services: Services) -> None:
    room = await new_room(services)
    await resign(room, session())
    with pytest.raises(WriteConflict):
        await services.committer.stored(AppendActions([ActionRecord(room.id, 2, "t1-c5")]))
    async with services.database.connection() as conn:
        stored = await repository.load_game(conn, room.id)
    assert stored is not None and stored.actions == (RESIGN,) and stored.status == "resigned"


# ------------------------------------------------------------------------------------------- session


async def test_a_session_releases_everything_it_followed_in_one_place(services: Services) -> None:
    registry = services.registry
    played, watched, shared = [await new_room(services) for _ in range(3)]
    mine, other = session(), session()
    for room in (played, shared):
        assert await view(room, mine) is not None
    for room in (watched, shared):
        assert await watch(room, mine) is not None
    assert await watch(shared, other) is not None

    mine.release()
    assert not any(room.room.viewers or mine in room.room.spectators for room in (played, watched, shared))
    assert registry.room(played.id) is None and registry.room(watched.id) is None
    assert registry.room(shared.id) is shared, "another session still watches it"
    assert mine.viewing == {} and mine.watching == {}


async def test_an_ended_room_no_longer_counts_against_the_session(services: Services) -> None:
    room = await new_room(services)
    mine = session()
    await view(room, mine)
    assert mine.open_count(mine.viewing) == 1
    await resign(room, mine)
    assert mine.open_count(mine.viewing) == 0 and mine.viewing == {}


# ------------------------------------------------------------------------------------------- rooms in use


def player_session(player: PlayerRef) -> Session:
    mine = session()
    mine.identify(player)
    return mine


async def test_a_watch_waiting_on_a_load_follows_the_room_the_registry_keeps(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stranger's move loads the game and is refused; the room must not be dropped under a watch
    that waited on the same load, or the spectator follows a room nobody acts on any more."""
    registry, handler = services.registry, services.handler
    room = await new_room(services)
    registry.forget_if_idle(room)
    stranger, spectator = player_session(PlayerRef("p-eve", "Eve")), player_session(PlayerRef("p-sam", "Sam"))
    owner = player_session(OWNER)
    both_found = asyncio.Event()  # both requests are in `find`: the second waits on the first's load
    finds = 0
    real_find, real_load = registry.find, repository.load_game

    async def counting_find(game_id: str) -> Any:
        nonlocal finds
        finds += 1
        if finds == 2:
            both_found.set()
        return await real_find(game_id)

    async def slow_load(*args: Any) -> Any:
        await both_found.wait()
        return await real_load(*args)

    monkeypatch.setattr(registry, "find", counting_find)
    monkeypatch.setattr(repository, "load_game", slow_load)
    pushed: list[tuple[set[Any], protocol.ServerMessage]] = []
    registry.services = dataclasses.replace(
        registry.services, push=lambda audience, message: pushed.append((set(audience), message))
    )
    move = protocol.MoveRequest(room.id, Column(1), Cell(5))
    moving = asyncio.create_task(handler.handle(stranger, move))
    watching = asyncio.create_task(handler.handle(spectator, protocol.WatchRequest(room.id)))
    with pytest.raises(Refusal) as refused:
        await moving
    assert refused.value.code is ErrorCode.FORBIDDEN
    (snapshot,) = await watching
    assert isinstance(snapshot, protocol.Snapshot) and snapshot.v == 0
    followed = spectator.watching[room.id]
    assert registry.room(room.id) is followed and spectator in followed.room.spectators
    await handler.handle(owner, protocol.MoveRequest(room.id, Column(1), Cell(5), v=0))
    assert registry.room(room.id) is followed and followed.room.game.v == 1, "the spectator's room is played"
    assert [(message.to_wire()["type"], message.to_wire()["v"]) for _, message in pushed] == [("diff", 1)]
    assert pushed[0][0] == {spectator}


async def test_a_room_is_not_dropped_while_an_operation_waits_for_its_turn(services: Services) -> None:
    """A hint's mark is being stored (the room awaits its commit) and a watch is queued behind it: the
    room is not let go while it awaits, nor from inside the hint's reply (the moment the awaited
    outcome is in, before the watch's turn)."""
    registry = services.registry
    room = await new_room(services)
    hinter, spectator = player_session(OWNER), session()
    kept_inside_the_reply: list[bool] = []

    def hinted(outcome: Any) -> None:
        registry.forget_if_idle(room)
        kept_inside_the_reply.append(registry.room(room.id) is room)

    room.send(HintPosition(hinter, hinted))
    spectator.watch(room)
    watching = room.ask(lambda reply_to: Watch(spectator, None, reply_to))  # queued behind the commit
    assert room.is_busy()
    registry.forget_if_idle(room)
    assert registry.room(room.id) is room, "not dropped while it awaits an outcome"
    assert await watching is not None
    assert kept_inside_the_reply == [True], "nor when the outcome is in, the watch still queued"
    assert registry.room(room.id) is room and spectator in room.room.spectators


async def test_a_dropped_room_sends_its_late_callers_back_to_the_registry(services: Services) -> None:
    registry = services.registry
    room = await new_room(services)
    registry.forget_if_idle(room)
    assert registry.room(room.id) is None
    assert await watch(room, session()) is None and await view(room, session()) is None


# ------------------------------------------------------------------------------------------- one path


class Responses:
    """A connection's ``respond``: collects each outcome and says when one came."""

    def __init__(self) -> None:
        self.got: list[Any] = []
        self.arrived = asyncio.Event()

    def __call__(self, outcome: Any) -> None:
        self.got.append(outcome)
        self.arrived.set()

    async def one(self) -> Any:
        await self.arrived.wait()
        (outcome,) = self.got
        return outcome


async def served(services: Services, who: Session, request: Any) -> tuple[Any, bool]:
    """``request`` through ``serve``, as a connection sends it: its outcome (replies or refusal), and
    whether it took the task path (a failure is answered as the connection maps it)."""
    handler = services.handler
    responses = Responses()
    earlier = set(handler._tasks)  # an earlier request's task may not have been discarded yet
    handler.serve(who, request, responses)
    tasked = bool(handler._tasks - earlier)
    outcome = await responses.one()
    if isinstance(outcome, BaseException):  # what the connection tells the client of it
        outcome = refusal_for(outcome, request.TYPE)
    return outcome, tasked


def as_compared(outcome: Any, game_id: str) -> Any:
    """An outcome with its game's id left out, to compare two games' outcomes."""
    if isinstance(outcome, Refusal):
        return ("refused", outcome.code, outcome.message.replace(game_id, "G"))
    return [{**message.to_wire(), "game": "G"} for message in outcome]


async def handled(services: Services, who: Session, request: Any, game_id: str) -> Any:
    try:
        return as_compared(await services.handler.handle(who, request), game_id)
    except Refusal as refusal:
        return as_compared(refusal, game_id)


async def test_an_action_on_a_free_room_in_memory_is_served_without_a_task_as_handle_serves_it(
    services: Services,
) -> None:
    """The same requests, on two rooms at the same position: through ``serve`` (the fast path) and
    through ``handle`` (the task path), the same replies and refusals: an ack, a stale v, an illegal
    move, a stranger's move, an unknown game, and one over the open games limit."""
    owner, stranger = player_session(OWNER), player_session(PlayerRef("p-eve", "Eve"))
    fast_room, slow_room = await new_room(services), await new_room(services)

    def requests(game: str) -> list[Any]:
        return [
            protocol.MoveRequest(game, Column(1), Cell(5), v=0, request_id=1),
            protocol.UndoRequest(game, v=0, request_id=2),  # stale
            protocol.MoveRequest(game, Cell(6), Column(1), request_id=3),  # c6 is empty
            protocol.UndoRequest(game, v=1, request_id=4),
        ]

    fast, slow = [], []
    for fast_request, slow_request in zip(requests(fast_room.id), requests(slow_room.id), strict=True):
        outcome, tasked = await served(services, owner, fast_request)
        assert not tasked, f"{fast_request} took the task path"
        fast.append(as_compared(outcome, fast_room.id))
        slow.append(await handled(services, owner, slow_request, slow_room.id))
    assert fast == slow
    assert [o[1] if isinstance(o, tuple) else o[0]["type"] for o in fast] == [
        "ack",
        ErrorCode.STALE,
        ErrorCode.ILLEGAL_MOVE,
        "ack",
    ]
    refused, tasked = await served(services, stranger, protocol.MoveRequest(fast_room.id, Column(1), Cell(5)))
    assert not tasked and isinstance(refused, Refusal) and refused.code is ErrorCode.FORBIDDEN
    refused, tasked = await served(services, owner, protocol.MoveRequest("no-such-game", Column(1), Cell(5)))
    assert tasked and isinstance(refused, Refusal) and refused.code is ErrorCode.NOT_FOUND
    crowded = player_session(OWNER)
    for _ in range(services.settings.max_games_per_connection):
        crowded.view(await new_room(services))
    refused, tasked = await served(services, crowded, protocol.MoveRequest(fast_room.id, Column(1), Cell(5)))
    assert not tasked and isinstance(refused, Refusal) and refused.code is ErrorCode.RATE_LIMITED
    assert owner.viewing == {fast_room.id: fast_room, slow_room.id: slow_room}


async def test_a_room_is_kept_while_a_fast_action_is_in_flight_and_let_go_after_its_answer(
    services: Services,
) -> None:
    """The player's connection closes while its action's commit is in flight: the room is not dropped
    under it (the commit's outcome is still the room's), and once answered, nobody following it, it
    goes; the action was stored."""
    registry, handler = services.registry, services.handler
    room = await new_room(services)
    owner = player_session(OWNER)
    responses = Responses()
    handler.serve(owner, protocol.MoveRequest(room.id, Column(1), Cell(5), v=0), responses)
    assert not handler._tasks and room.is_busy()
    owner.release()  # the connection closed
    assert registry.room(room.id) is room, "not dropped while its action is in flight"
    (ack,) = await responses.one()
    assert ack.v == 1
    assert registry.room(room.id) is None, "let go once answered: nobody follows it"
    found = await registry.find(room.id)
    assert isinstance(found, RoomDriver) and found.room.game.v == 1


async def scripted_game(services: Services, *, loaded: bool) -> tuple[list[Any], list[Any], list[bool]]:
    """One game played through ``serve``: a move, then a spectator watches, an undo, a stale undo, an
    illegal move and a stranger's move. ``loaded``: the room is let go first, so the move finds it in
    the database and loads it. Every outcome and push (the game's id and start left out, audiences by
    role), and whether each request took a task."""
    registry = services.registry
    pushed: list[tuple[set[Any], protocol.ServerMessage]] = []
    registry.services = dataclasses.replace(
        registry.services, push=lambda audience, message: pushed.append((set(audience), message))
    )
    room = await new_room(services)
    if loaded:
        registry.forget_if_idle(room)
        assert registry.room(room.id) is None
    owner, spectator = player_session(OWNER), player_session(PlayerRef("p-sam", "Sam"))
    stranger = player_session(PlayerRef("p-eve", "Eve"))
    game = room.id
    script: list[tuple[Session, Any]] = [
        (owner, protocol.MoveRequest(game, Column(1), Cell(5), v=0, request_id=1)),
        (spectator, protocol.WatchRequest(game, request_id=2)),
        (owner, protocol.UndoRequest(game, v=1, request_id=3)),
        (owner, protocol.UndoRequest(game, v=0, request_id=4)),  # stale
        (owner, protocol.MoveRequest(game, Cell(6), Column(1), request_id=5)),  # c6 is empty
        (stranger, protocol.MoveRequest(game, Column(1), Cell(5), request_id=6)),
    ]
    outcomes, tasked = [], []
    for who, request in script:
        outcome, took_a_task = await served(services, who, request)
        compared = as_compared(outcome, game)
        if isinstance(compared, list):  # two games, started apart
            compared = [
                {**message, "started_at": "T"} if "started_at" in message else message for message in compared
            ]
        outcomes.append(compared)
        tasked.append(took_a_task)
    roles = {id(owner): "owner", id(spectator): "spectator", id(stranger): "stranger"}
    pushes = [
        (sorted(roles[id(who)] for who in audience), {**message.to_wire(), "game": "G"})
        for audience, message in pushed
    ]
    return outcomes, pushes, tasked


async def test_an_action_on_a_room_in_memory_and_on_one_loaded_from_the_database_answer_and_push_the_same(
    services: Services,
) -> None:
    """The same script on a room in memory and on one the first move loads from the database: the
    same replies, refusals and pushes: an action takes one path, and only a room not in memory is
    found first."""
    in_memory, memory_pushes, memory_tasked = await scripted_game(services, loaded=False)
    from_database, database_pushes, database_tasked = await scripted_game(services, loaded=True)
    assert in_memory == from_database
    assert memory_pushes == database_pushes
    assert [o[1] if isinstance(o, tuple) else o[0]["type"] for o in in_memory] == [
        "ack",
        "snapshot",
        "ack",
        ErrorCode.STALE,
        ErrorCode.ILLEGAL_MOVE,
        ErrorCode.FORBIDDEN,
    ]
    assert [(audience, message["type"], message["v"]) for audience, message in memory_pushes] == [
        (["spectator"], "diff", 2)
    ]
    assert memory_tasked[0] is False and database_tasked[0] is True, "only the load took a task"
    assert memory_tasked == [False, True, False, False, False, False], "but the watch, served by a task"
    assert database_tasked[1:] == memory_tasked[1:]
