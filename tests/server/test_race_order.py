"""The order of what a race seat's commit sends, across its game's room and its race's room.

A seat's game and its race are two rooms on two drivers; the game's commit tells the race
(`Observe`), and the race answers within the same turn of the loop unless it waits for a write of its
own. The table below is that order, message by message, as the connections receive it: Ann plays seat
1 from two tabs (``ann`` acts, ``ann2`` views), Bo holds seat 2, ``spec`` watches the race. The
writes are completed by the test, one at a time, so the order is the rooms' and not a timer's.
docs/races.md (The order of what a race sends) states the same table.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from engine import Deal, Game, parse_action
from protocol import ServerMessage
from server.play.commands import Act, Resign, View
from server.play.driver import NoRaces, RoomDriver, RoomServices
from server.play.effects import SeatProgress
from server.play.game_room import GameRoom, PlayerRef
from server.play.race.commands import RaceWatch, SeatChanged
from server.play.race.room import RaceRoom
from server.play.race.value import Phase, Race, Seat, SeatStatus
from server.storage import StoredGame
from server.storage.commit_backends import Write
from server.storage.committer import Done
from solver import solve_deal
from tests.support.rooms import Person

WINNABLE = "EO1-C8-AAAAAAB"
T0 = dt.datetime(2026, 12, 2, 5, 0, tzinfo=dt.UTC)
ANN, BO, SPEC = PlayerRef("p-ann", "Ann"), PlayerRef("p-bo", "Bo"), PlayerRef("p-spec", "Spec")


@functools.cache
def winning_line() -> tuple[str, ...]:
    return tuple(move.symbol() for move in solve_deal(Deal.from_code(WINNABLE)).moves)


class Writes:
    """The node's write pipeline, completed by the test in submission order."""

    def __init__(self) -> None:
        self.pending: list[tuple[Write, Done]] = []

    def submit(self, write: Write, done: Done) -> None:
        self.pending.append((write, done))

    def complete_all(self) -> None:
        while self.pending:
            _, done = self.pending.pop(0)
            done(None)


class Node:
    """Seat 1's game room and the race room, each on its driver, with the connections above."""

    def __init__(self, game: Game) -> None:
        self.log: list[str] = []
        self.writes = Writes()
        self.people = {name: Person(name) for name in ("ann", "ann2", "bo", "spec")}
        race = Race(
            id="r1",
            code="K7M2QX9P",
            creator=ANN,
            cells=8,
            seats=2,
            time_limit_s=600,
            public=False,
            deal=Deal.from_code(WINNABLE),
            created_at=T0,
            phase=Phase.RUNNING,
            seated={
                1: Seat(ANN, ready=True, game="g1", status=SeatStatus.PLAYING),
                2: Seat(BO, ready=True, game="g2", status=SeatStatus.PLAYING),
            },
            starts_at=T0,
            ends_at=T0 + dt.timedelta(seconds=600),
            revision=4,
        )
        self.race = RoomDriver(RaceRoom(race, clock=lambda: T0), self._services(_Rated()))
        room = GameRoom("g1", game, ANN, T0, clock=lambda: T0, race="r1", closes_at=race.ends_at)
        self.game = RoomDriver(room, self._services(_Races(self.race)))

    def _services(self, races: NoRaces) -> RoomServices:
        return RoomServices(
            committer=self.writes,
            push=self._pushed,
            publish=lambda event: None,
            load=_no_load,
            left=lambda driver: None,
            idle=lambda driver: None,
            races=races,
        )

    def _pushed(self, audience: Any, message: ServerMessage) -> None:
        self.log.append(f"{message.to_wire()['type']} -> {', '.join(sorted(map(repr, audience)))}")

    def reply_to(self, name: str) -> Callable[[Any], None]:
        def told(outcome: Any) -> None:
            messages = outcome if isinstance(outcome, list) else [outcome]
            for message in messages:
                kind = message.to_wire()["type"] if hasattr(message, "to_wire") else type(message).__name__
                self.log.append(f"{kind} -> {name} (reply)")

        return told

    async def follow(self) -> None:
        """Ann's two tabs view her game; Ann, Bo and the spectator follow the race."""
        for name in ("ann", "ann2"):
            self.game.send(View(self.people[name], None, self.reply_to(name)))
        for name, player in (("ann", ANN), ("bo", BO), ("spec", SPEC)):
            self.race.send(RaceWatch(self.people[name], player, None, self.reply_to(name)))
        self.log.clear()

    def act(self, action: str) -> None:
        self.game.send(
            Act(self.people["ann"], lambda game: parse_action(action), None, None, self.reply_to("ann"))
        )

    def resign(self) -> None:
        self.game.send(Resign(self.people["ann"], None, self.reply_to("ann")))

    async def settle(self) -> None:
        """Every write completed, and every read the rooms asked for (a race's ratings) answered."""
        for _ in range(10):
            self.writes.complete_all()
            await asyncio.sleep(0)


class _Races(NoRaces):
    """The node's races as the game's room meets them: a seat's commit goes to the race's room."""

    def __init__(self, race: RoomDriver[RaceRoom]) -> None:
        self._race = race

    def observe(self, race_id: str, progress: SeatProgress) -> None:
        self._race.send(SeatChanged(progress))


class _Rated(NoRaces):
    """The node's races as a race's room meets them: its end rated nobody."""

    async def load_ratings(self, race_id: str) -> dict[str, tuple[int, int]]:
        return {}


async def _no_load(game_id: str) -> StoredGame | None:
    raise AssertionError("no room here loads a game")


async def a_move(node: Node) -> None:
    node.act(winning_line()[0])


async def a_winning_move(node: Node) -> None:
    node.act(winning_line()[-1])


async def a_resignation(node: Node) -> None:
    node.resign()


def _fresh() -> Game:
    return Game(Deal.from_code(WINNABLE))


def _one_short() -> Game:
    line = winning_line()
    return Game.replay(Deal.from_code(WINNABLE), [parse_action(move) for move in line[:-1]])


ORDER: list[tuple[Callable[[Node], Awaitable[None]], Callable[[], Game], list[str]]] = [
    (
        a_move,
        _fresh,
        # the seat's ack, its game's diff to its other tab, then the standings to every follower
        ["ack -> ann (reply)", "diff -> ann2", "race_diff -> ann, bo, spec"],
    ),
    (
        a_winning_move,
        _one_short,
        # the game's own order first (ack, game_over, diff, game_over); the race's end is a write of
        # its own, so its diff and every seat's board, open to everyone now, come once that is stored
        # (Bo never moved: his board is the deal)
        [
            "ack -> ann (reply)",
            "game_over -> ann (reply)",
            "diff -> ann2",
            "game_over -> ann2",
            "race_diff -> ann, bo, spec",
            "race_board -> ann, bo, spec",
            "race_board -> ann, bo, spec",
        ],
    ),
    (
        a_resignation,
        _fresh,
        # a resignation moves no card (no diff); Bo plays on, so the race is not decided
        ["game_over -> ann (reply)", "race_diff -> ann, bo, spec", "game_over -> ann2"],
    ),
]


@pytest.mark.parametrize(("doing", "game", "expected"), ORDER, ids=[row[0].__name__ for row in ORDER])
async def test_the_order_of_what_a_seats_commit_sends(
    doing: Callable[[Node], Awaitable[None]], game: Callable[[], Game], expected: list[str]
) -> None:
    node = Node(game())
    await node.follow()
    await doing(node)
    await node.settle()
    assert node.log == expected
