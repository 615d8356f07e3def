"""RaceRoom alone, as a state machine: commands in, effect lists out, on a clock the test moves.

No event loop, socket or database: each test hands the room a command, renders the effects it
returns (a `Push` message is built then, as the driver builds it) and hands back the outcome of a
`Commit`. The table at the end states the effects of every command, in order; the places of a race
are stated by their own table (`server.play.race.places`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
from collections.abc import Callable
from typing import Any

import pytest

from engine import Deal, Game, Status
from protocol import RatingShift
from server.errors import Refusal
from server.play.bus import RaceEvent
from server.play.commands import Committed, RaceLoaded, RatingsLoaded, Tick, Unfollow
from server.play.effects import Commit, Effect, Hold, Publish, Push, Reply, SeatProgress, Wake
from server.play.game_room import PlayerRef
from server.play.race.commands import (
    RaceChanged,
    RaceCommand,
    RaceJoin,
    RaceLeave,
    RaceReady,
    RaceRematch,
    RaceStart,
    RaceWatch,
    Rematch,
    SeatChanged,
)
from server.play.race.places import Figures, places
from server.play.race.room import TRIES, RaceRoom
from server.play.race.value import LOBBY_TIMEOUT, Race, Seat
from server.storage import StorageUnavailable
from server.storage.commit_backends import StoreRace, WriteConflict
from server.storage.records import RaceRecord, RaceSeatRecord
from tests.support.rooms import Person

DEAL = Deal.from_code("EO1-C8-AAAAAAB")
T0 = dt.datetime(2026, 12, 2, 5, 0, tzinfo=dt.UTC)
ANN, BO, CY = PlayerRef("p-ann", "Ann"), PlayerRef("p-bo", "Bo"), PlayerRef("p-cy", "Cy")


class Answer:
    """A request's ``reply_to``: the room hands it back in a `Reply` and never calls it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, outcome: Any) -> None:
        raise AssertionError("only the driver calls a reply_to")


class Harness:
    """A race of 3 seats made by Ann, its followers by name, a clock the test moves."""

    def __init__(self) -> None:
        self.now = T0
        ids = itertools.count(1)
        race = Race(
            id="r1",
            code="K7M2QX9P",
            creator=ANN,
            cells=8,
            seats=3,
            time_limit_s=60,
            public=False,
            deal=DEAL,
            created_at=T0,
            seated={1: Seat(ANN)},
        )
        self.room = RaceRoom(
            race, countdown_s=5, board_delay_s=30, clock=lambda: self.now, make_id=lambda: f"g{next(ids)}"
        )
        self.room.handle(Tick())  # as the registry does with a race it holds: its timers armed
        self.people = {name: Person(name) for name in ("ann", "ann2", "bo", "cy", "spec")}
        self.players = {"ann": ANN, "ann2": ANN, "bo": BO, "cy": CY, "spec": PlayerRef("p-spec", "Spec")}
        self.effects: list[Effect] = []
        self.pushed: list[tuple[frozenset[str], dict[str, Any]]] = []
        self.replies: list[tuple[str, Any]] = []

    def handle(self, command: RaceCommand | Committed | Unfollow) -> list[str]:
        self.effects = self.room.handle(command)
        return [self._render(effect) for effect in self.effects]

    def _render(self, effect: Effect) -> str:
        if isinstance(effect, Reply):
            assert isinstance(effect.reply_to, Answer)
            self.replies.append((effect.reply_to.name, effect.outcome))
            outcome = effect.outcome
            if isinstance(outcome, Refusal):
                return f"Reply({effect.reply_to.name}: {outcome.code.value})"
            if outcome is None:
                return f"Reply({effect.reply_to.name}: None)"
            if isinstance(outcome, Exception):
                return f"Reply({effect.reply_to.name}: {type(outcome).__name__})"
            return f"Reply({effect.reply_to.name}: {', '.join(m.to_wire()['type'] for m in outcome)})"
        if isinstance(effect, Push):
            message = effect.message().to_wire()
            audience = frozenset(map(repr, effect.audience))
            self.pushed.append((audience, message))
            return f"Push({message['type']} -> {', '.join(sorted(audience))})"
        if isinstance(effect, Wake):
            return f"Wake({effect.delay:g})"
        return type(effect).__name__

    # ---------------------------------------------------------------- requests by name

    def watch(self, name: str) -> list[str]:
        return self.handle(RaceWatch(self.people[name], self.players[name], None, Answer(name)))

    def join(self, name: str) -> list[str]:
        return self.handle(RaceJoin(self.people[name], self.players[name], None, Answer(name)))

    def ready(self, name: str, ready: bool = True) -> list[str]:
        return self.handle(RaceReady(self.people[name], self.players[name], ready, None, Answer(name)))

    def start(self, name: str = "ann") -> list[str]:
        return self.handle(RaceStart(self.people[name], self.players[name], None, Answer(name)))

    def leave(self, name: str) -> list[str]:
        return self.handle(RaceLeave(self.people[name], self.players[name], None, Answer(name)))

    def committed(self, error: Exception | None = None) -> list[str]:
        return self.handle(Committed(error))

    def tick(self, seconds: float) -> list[str]:
        self.now += dt.timedelta(seconds=seconds)
        return self.handle(Tick())

    def play(self, seat: int, game: Game) -> list[str]:
        """The seat's game committed ``game`` as it stands now."""
        game_id = self.room.race.seated[seat].game
        assert game_id is not None
        progress = SeatProgress(game_id, game.v, game.layout(), game.score, game.moves, game.status, self.now)
        return self.handle(SeatChanged(progress))

    # ---------------------------------------------------------------- set-ups

    def lobby(self) -> Harness:
        """Ann (two connections) and Bo seated, Bo ready, a spectator watching."""
        self.watch("ann")
        self.watch("ann2")
        self.join("bo")
        self.committed()
        self.ready("bo")
        self.committed()
        self.watch("spec")
        return self

    def running(self) -> Harness:
        self.lobby().ready("ann")
        self.committed()
        self.start()
        self.committed()
        self.tick(5)
        self.committed()
        return self

    def last_refusal(self) -> str:
        outcome = self.replies[-1][1]
        assert isinstance(outcome, Refusal), outcome
        return outcome.message


def one_move(game: Game | None = None) -> Game:
    game = game or Game(DEAL)
    game.play(next(iter(game.legal_moves)))
    return game


# -------------------------------------------------------------------- lifecycle


def test_a_race_runs_from_the_lobby_to_the_reveal() -> None:
    """Joins are stored, the countdown is stored and woken for, and the reveal stores each seat's
    game and names it to everyone at once; the deal is secret until then."""
    harness = Harness().lobby()
    assert harness.room.snapshot(None).deal is None
    harness.ready("ann")
    harness.committed()
    assert harness.start() == ["Commit"]
    assert harness.committed() == [
        "Reply(ann: ok)",
        "Push(race_diff -> ann, ann2, bo, spec)",
        "Wake(5)",
    ]
    assert harness.tick(4) == [] and harness.room.race.phase == "countdown"  # its Wake is out already
    effects = harness.tick(1)
    assert effects == ["Commit"]
    (commit,) = harness.effects
    assert isinstance(commit, Commit) and isinstance(commit.write, StoreRace)
    games = commit.write.race.games
    assert [(game.player_id, game.code, game.race_id) for game in games] == [
        ("p-ann", DEAL.code(), "r1"),
        ("p-bo", DEAL.code(), "r1"),
    ]
    assert harness.committed() == ["Push(race_diff -> ann, ann2, bo, spec)", "Wake(60)"]
    diff = harness.pushed[-1][1]
    assert diff["state"] == "running" and diff["deal"] == DEAL.code()
    assert [row["game"] for row in diff["rows"]] == ["g1", "g2"]


def test_the_standings_stream_counts_every_change_once() -> None:
    """Every diff is v + 1 of the last; a joiner's snapshot is at the diff's v (it gets no diff)."""
    harness = Harness()
    harness.watch("ann")
    assert harness.room.v == 0
    harness.join("bo")
    assert harness.committed() == ["Reply(bo: race)", "Push(race_diff -> ann)"]
    snapshot = harness.replies[-1][1][0]
    assert snapshot.v == 1 and harness.pushed[-1][1]["v"] == 1
    assert harness.ready("bo") == ["Commit"]  # stored, so that every node's copy knows it
    assert harness.committed() == ["Reply(bo: ok)", "Push(race_diff -> ann, bo)"]
    assert harness.pushed[-1][1]["v"] == 2 and harness.pushed[-1][1]["rows"][0]["ready"] is True


def test_a_winner_ends_the_race_and_the_boards_open() -> None:
    harness = Harness().running()
    won = Game(DEAL)
    won.status = Status.WON  # what the seat's game room says of a winning commit
    effects = harness.play(2, won)
    (commit,) = harness.effects
    assert effects == ["Commit"] and isinstance(commit, Commit) and isinstance(commit.write, StoreRace)
    assert commit.write.race.race.state == "finished" and harness.room.race.phase == "running"  # until stored
    # the finishing write rated the race: its changes are read before the result goes out, and
    # requests wait meanwhile (the driver holds them while the room awaits)
    assert harness.committed() == ["LoadRatings"] and harness.room.awaiting is not None
    assert harness.room.race.phase == "finished"
    assert harness.handle(RatingsLoaded({BO.id: (1000, 1021), ANN.id: (1000, 990)})) == [
        "Push(race_diff -> ann, ann2, bo, spec)",
        "Push(race_board -> ann, ann2, bo, spec)",
        "Push(race_board -> ann, ann2, bo, spec)",
        "Leave",
    ]
    # every seat's final board, Ann's too though she never moved: the deal as dealt
    boards = {
        message["seat"]: message["board"] for _, message in harness.pushed if message["type"] == "race_board"
    }
    assert sorted(boards) == [1, 2] and boards[1]["v"] == 0 and boards[1]["game"] == "g1"
    rows = {row.seat: row for row in harness.room.snapshot(None).rows}
    assert (rows[2].place, rows[2].status, rows[1].place) == (1, "won", 2)
    final = next(message for _, message in reversed(harness.pushed) if message["type"] == "race_diff")
    shifts = {row["seat"]: row.get("rating") for row in final["rows"]}
    assert shifts == {1: {"before": 1000, "after": 990}, 2: {"before": 1000, "after": 1021}}
    assert not harness.room.is_open()


def test_a_result_whose_ratings_could_not_be_read_goes_out_without_them() -> None:
    """Reading the rating changes failed (or the race rated nobody): the result carries no rating."""
    harness = Harness().running()
    won = Game(DEAL)
    won.status = Status.WON
    harness.play(1, won)
    assert harness.committed() == ["LoadRatings"]
    effects = harness.handle(RatingsLoaded({}, error=OSError("the database went away")))
    assert effects[0] == "Push(race_diff -> ann, ann2, bo, spec)" and effects[-1] == "Leave"
    assert all(row.rating is None for row in harness.room.snapshot(None).rows)
    assert all("rating" not in row.to_wire() for row in harness.room.snapshot(None).rows)


def test_the_time_limit_ends_the_race_on_the_standings() -> None:
    harness = Harness().running()
    harness.tick(1)
    harness.play(1, one_move())
    assert harness.tick(59) == ["Push(race_board -> spec)", "Commit"]  # the board due, then the end
    harness.committed()
    rows = {row.seat: row for row in harness.room.snapshot(None).rows}
    assert (rows[1].cards_home, rows[2].cards_home) == (0, 0)
    assert (rows[1].place, rows[2].place) == (2, 1)  # no card home either: fewer moves first
    assert (rows[1].time_ms, rows[1].moves, harness.room.race.phase) == (1000, 1, "finished")


def test_a_spectator_gets_the_boards_late_and_a_seat_none() -> None:
    """The board of a seat's commit is kept board_delay seconds, then pushed to the spectator
    only: neither of Ann's connections nor Bo gets it."""
    harness = Harness().running()
    assert harness.play(1, one_move()) == ["Wake(30)", "Push(race_diff -> ann, ann2, bo, spec)"]
    assert harness.tick(29) == []
    assert harness.tick(1) == ["Push(race_board -> spec)"]
    board = harness.pushed[-1][1]
    assert board["seat"] == 1 and board["board"]["v"] == 1 and board["board"]["game"] == "g1"


def test_a_seat_reconnecting_keeps_its_seat_and_no_boards() -> None:
    harness = Harness().running()
    harness.play(2, one_move())
    harness.tick(30)
    harness.handle(Unfollow(harness.people["ann"]))
    assert harness.join("ann") == ["Reply(ann: race)"]  # its seat again: no board with it
    assert harness.watch("spec") == ["Reply(spec: race, race_board)"]


def test_a_failed_commit_leaves_the_race_as_it_was() -> None:
    """Nothing stored: the requester is told why, and the race is back in its lobby; a timed
    change (the reveal) is tried again a second later."""
    harness = Harness().lobby()
    harness.ready("ann")
    harness.committed()
    harness.start()
    assert harness.committed(StorageUnavailable("down")) == ["Reply(ann: StorageUnavailable)"]
    assert harness.room.race.phase == "lobby" and harness.room.race.starts_at is None
    harness.start()
    harness.committed()
    harness.tick(5)
    assert harness.committed(StorageUnavailable("down")) == ["Wake(1)"]
    assert harness.room.race.phase == "countdown" and all(
        s.game is None for s in harness.room.race.seated.values()
    )
    assert harness.tick(1) == ["Commit"]
    harness.committed()
    won = Game(DEAL)
    won.status = Status.WON
    assert harness.play(1, won) == ["Commit"]
    assert harness.committed(StorageUnavailable("down")) == ["Wake(1)"]  # the end, tried again
    assert harness.room.race.phase == "running" and harness.room.race.seated[1].status == "won"
    assert harness.tick(1) == ["Commit"]
    assert harness.committed() == ["LoadRatings"] and harness.room.race.phase == "finished"


def elsewhere(harness: Harness, *, revision: int = 1, **changes: Any) -> RaceRecord:
    """The race as another node's copy stored it, ``revision`` writes after this copy's."""
    stored = harness.room.race.record()
    return dataclasses.replace(stored, revision=stored.revision + revision, **changes)


CY_SEAT = RaceSeatRecord(3, CY.id, CY.name, False, None, "waiting", 0, 0, 0, 0, None)


def test_a_request_that_lost_the_fence_is_handled_again_on_the_race_as_stored() -> None:
    """Another node seated Cy first: Ann's ready lost the fence. The copy reads the race (its ready
    taken back meanwhile), its followers get the difference as a diff, and the ready is handled again
    against it and stored; it is not refused as it was (the room let go, the player told stale)."""
    harness = Harness().lobby()
    stored = elsewhere(harness, seated=(*harness.room.race.record().seated, CY_SEAT))
    assert harness.ready("ann") == ["Commit"]
    assert harness.committed(WriteConflict("revision 3 is stored")) == ["LoadRace"]
    assert harness.room.race.seated[1].ready is False and harness.room.race.revision == stored.revision - 1
    # the lobby's Wake is out already: none is armed again
    assert harness.handle(RaceLoaded(stored)) == ["Push(race_diff -> ann, ann2, bo, spec)", "Commit"]
    diff = harness.pushed[-1][1]
    assert [row["player"]["id"] for row in diff["rows"]] == [CY.id]  # what changed elsewhere
    assert harness.committed() == ["Reply(ann: ok)", "Push(race_diff -> ann, ann2, bo, spec)"]
    assert harness.room.race.revision == stored.revision + 1 and harness.room.race.seated[1].ready is True
    assert len(harness.room.race.seated) == 3 and harness.room.is_open()


def test_a_request_that_loses_the_fence_every_time_is_stale_after_its_tries() -> None:
    """Other copies win the fence again and again (seats on several nodes all ready at once): the
    request is handled again after each loss, up to `TRIES` writes, then told stale."""
    harness = Harness().lobby()
    harness.ready("ann")
    for attempt in range(1, TRIES):
        assert harness.committed(WriteConflict(f"lost {attempt}")) == ["LoadRace"]
        assert harness.handle(RaceLoaded(elsewhere(harness)))[-1] == "Commit"
    assert harness.committed(WriteConflict("lost again")) == ["LoadRace"]
    assert harness.handle(RaceLoaded(elsewhere(harness))) == [
        "Push(race_diff -> ann, ann2, bo, spec)",
        "Reply(ann: stale)",
    ]
    assert "changed elsewhere" in harness.last_refusal() and harness.room.awaiting is None


def test_a_race_unread_after_a_lost_fence_answers_stale_or_tries_again() -> None:
    """The race could not be read: the request is told stale, a timed change tries again in a second."""
    harness = Harness().lobby()
    harness.ready("ann")
    harness.committed(WriteConflict("revision 3 is stored"))
    assert harness.handle(RaceLoaded(None, OSError("the database went away"))) == ["Reply(ann: stale)"]
    assert harness.tick(LOBBY_TIMEOUT) == ["Commit"]  # the lobby's time: cancelled
    harness.committed(WriteConflict("revision 3 is stored"))
    assert harness.handle(RaceLoaded(None, OSError("the database went away"))) == ["Wake(1)"]


def test_a_timed_change_that_lost_takes_the_stored_state() -> None:
    """Both copies saw Bo win and both wrote the end: this one lost. It takes the result as stored
    (places and figures of the copy that won, rated there once) and ends as if it had stored it."""
    harness = Harness().running()
    won = Game(DEAL)
    won.status = Status.WON
    assert harness.play(2, won) == ["Commit"]
    stored_seats = tuple(
        dataclasses.replace(
            seat, status="won" if seat.seat == 2 else "playing", place=1 if seat.seat == 2 else 2
        )
        for seat in harness.room.race.record().seated
    )
    stored = harness.room.race.record()
    assert harness.committed(WriteConflict("revision 5 is stored")) == ["LoadRace"]
    assert harness.room.race.phase == "running"  # taken back until the race is read
    finished = dataclasses.replace(stored, revision=stored.revision, seated=stored_seats, state="finished")
    assert harness.handle(RaceLoaded(finished)) == ["LoadRatings"]
    effects = harness.handle(RatingsLoaded({BO.id: (1000, 1021), ANN.id: (1000, 990)}))
    assert effects[0] == "Push(race_diff -> ann, ann2, bo, spec)" and effects[-1] == "Leave"
    assert "Commit" not in effects  # nothing stored again: the other copy did it
    rows = {row.seat: row for row in harness.room.snapshot(None).rows}
    assert (rows[1].place, rows[2].place, rows[2].status) == (2, 1, "won")
    assert rows[2].rating == RatingShift(1000, 1021) and not harness.room.is_open()


def test_another_nodes_change_is_read_and_told_as_a_diff() -> None:
    """A `RaceChanged` of a later revision has the copy read the race; an older or equal one, nothing."""
    harness = Harness().lobby()
    revision = harness.room.race.revision
    assert harness.handle(RaceChanged(revision)) == []
    assert harness.handle(RaceChanged(revision + 1)) == ["LoadRace"]
    stored = elsewhere(harness, seated=(*harness.room.race.record().seated, CY_SEAT))
    assert harness.handle(RaceLoaded(stored)) == ["Push(race_diff -> ann, ann2, bo, spec)"]
    assert harness.pushed[-1][1]["v"] == harness.room.v and harness.room.race.revision == revision + 1
    assert harness.room.race.seated[3].player == CY


def test_a_copy_that_reads_the_reveal_takes_its_games_and_keeps_what_it_saw() -> None:
    """A copy in its countdown reads the race revealed elsewhere: the deal and the games come in one
    diff, the time limit is armed, the seats' games held; a seat's figures this copy saw of its game
    are kept over the stored ones (the race is not written per action)."""
    harness = Harness()
    harness.room.publishes = True
    harness.running()
    harness.play(1, one_move())
    running = harness.room.race.record()
    copy = Harness()
    copy.room.publishes = True
    copy.lobby().ready("ann")
    copy.committed()
    copy.start()
    copy.committed()
    copy.handle(RaceChanged(running.revision))
    assert copy.handle(RaceLoaded(running)) == ["Push(race_diff -> ann, ann2, bo, spec)", "Wake(65)", "Hold"]
    diff = copy.pushed[-1][1]
    assert diff["state"] == "running" and diff["deal"] == DEAL.code()
    assert [row["game"] for row in diff["rows"]] == ["g1", "g2"]
    hold = copy.effects[-1]
    assert isinstance(hold, Hold) and hold.games == ("g1", "g2")
    copy.play(1, one_move())
    again = dataclasses.replace(running, revision=running.revision + 1)
    copy.handle(RaceChanged(again.revision))
    copy.handle(RaceLoaded(again))
    assert copy.room.race.seated[1].moves == 1  # kept: the stored row says 0


def test_a_stored_change_is_published_when_other_nodes_hold_copies() -> None:
    harness = Harness()
    harness.room.publishes = True
    harness.watch("ann")
    harness.join("bo")
    assert harness.committed() == ["Publish", "Reply(bo: race)", "Push(race_diff -> ann)"]
    (publish,) = [effect for effect in harness.effects if isinstance(effect, Publish)]
    assert publish.event == RaceEvent("node-1", "r1", harness.room.race.revision)


def test_a_resignation_at_the_version_already_seen_reaches_the_race() -> None:
    """A resignation keeps its game's version: the same version, resigned, is news to the race."""
    harness = Harness().running()
    game = one_move()
    harness.play(1, game)
    game.resign()
    assert harness.play(1, game)[-1] == "Push(race_diff -> ann, ann2, bo, spec)"
    assert harness.room.race.seated[1].status == "resigned"


def test_a_lobby_never_started_is_cancelled_after_an_hour() -> None:
    harness = Harness().lobby()
    assert harness.tick(LOBBY_TIMEOUT - 1) == []  # its Wake, armed when the race was held, is out
    assert harness.tick(1) == ["Commit"]
    assert harness.committed() == ["Push(race_diff -> ann, ann2, bo, spec)", "Leave"]
    assert harness.pushed[-1][1]["state"] == "cancelled" and not harness.room.is_open()


def test_leaving_the_lobby_frees_the_seat_and_passes_the_creator_on() -> None:
    harness = Harness().lobby()
    harness.leave("ann")
    harness.committed()
    diff = harness.pushed[-1][1]
    assert diff["gone"] == [1] and diff["creator"] == "p-bo"
    harness.leave("bo")
    assert harness.committed()[-1] == "Leave" and harness.room.race.phase == "cancelled"


@pytest.mark.parametrize(
    ("doing", "refusal"),
    [
        (lambda h: h.lobby().start(), "your seat 1 is not ready"),
        (lambda h: h.lobby().ready("bo", False) and h.committed() and h.ready("ann") and h.committed()
         and h.start(), "needs 2 seats ready: seat(s) 2 not ready"),
        (lambda h: h.lobby().ready("ann") and h.committed() and h.start("bo"), "only the race's creator"),
        (lambda h: h.start(), "needs 2 seats"),
        (lambda h: h.lobby().join("cy") and h.committed() and h.join("spec"), "is full"),
        (lambda h: h.running().join("cy"), "has started"),
        (lambda h: h.running().ready("ann"), "ready is for the lobby"),
        (lambda h: h.lobby().ready("cy"), "no seat"),
        (lambda h: h.running().leave("bo") and h.committed() and h.leave("bo"), "no seat"),
        (lambda h: h.running().start(), "running already"),
    ],
    ids=["not ready", "one ready", "not creator", "alone", "full", "started", "ready late", "ready unseated",
         "leave twice", "start twice"],
)  # fmt: skip
def test_bad_requests_are_refused_and_change_nothing(doing: Callable[[Harness], Any], refusal: str) -> None:
    """Bad input tried: each request the race's rules refuse; the race's v does not move."""
    harness = Harness()
    doing(harness)
    assert refusal in harness.last_refusal()
    assert harness.effects and isinstance(harness.effects[0], Reply) and len(harness.effects) == 1


def test_a_stale_or_foreign_commit_is_ignored() -> None:
    """A seat's older version, a game of no seat, and any commit before the reveal change nothing."""
    harness = Harness().running()
    game = one_move()
    harness.play(1, game)
    assert harness.play(1, game) == []  # the same v again
    foreign = SeatProgress("g-other", 1, game.layout(), 0, 1, Status.PLAYING, harness.now)
    assert harness.handle(SeatChanged(foreign)) == []
    lobby = Harness().lobby()
    assert lobby.handle(SeatChanged(foreign)) == []


def test_a_resignation_after_a_move_is_news() -> None:
    """A resignation keeps its game's v (it moves no card): the race takes it all the same, or a seat
    that resigned after a move would stay playing until the time limit."""
    harness = Harness().running()
    game = one_move()
    harness.play(1, game)
    game.resign()
    assert harness.play(1, game) == ["Push(race_diff -> ann, ann2, bo, spec)"]
    assert harness.room.race.seated[1].status == "resigned"
    assert harness.play(1, game) == []  # the same again: no news


# -------------------------------------------------------------------- places


@pytest.mark.parametrize(
    ("seats", "expected"),
    [
        ({1: Figures("won", 52, 120, 90_000), 2: Figures("playing", 50, 100, 80_000)}, {1: 1, 2: 2}),
        ({1: Figures("playing", 10, 40, 1), 2: Figures("playing", 12, 90, 2)}, {1: 2, 2: 1}),
        ({1: Figures("playing", 10, 40, 5), 2: Figures("playing", 10, 39, 9)}, {1: 2, 2: 1}),
        ({1: Figures("playing", 10, 40, 5), 2: Figures("playing", 10, 40, 4)}, {1: 2, 2: 1}),
        ({1: Figures("playing", 0, 0, 0), 2: Figures("playing", 0, 0, 0), 3: Figures("playing", 1, 9, 9)},
         {3: 1, 1: 2, 2: 2}),
        ({1: Figures("resigned", 40, 10, 1), 2: Figures("playing", 1, 90, 9)}, {1: 1, 2: 2}),
        ({1: Figures("left", 5, 1, 1), 2: Figures("resigned", 4, 1, 1), 3: Figures("playing", 0, 0, 0)},
         {1: 1, 2: 2, 3: 3}),
        ({1: Figures("resigned", 7, 20, 3000), 2: Figures("left", 7, 20, 3000),
          3: Figures("playing", 7, 20, 3000)}, {1: 1, 2: 1, 3: 1}),
        ({1: Figures("won", 52, 200, 99_000), 2: Figures("resigned", 51, 10, 1)}, {1: 1, 2: 2}),
    ],
    ids=["winner first", "more cards home", "fewer moves", "earlier", "a tie shares a place",
         "a resignation ranks by its figures", "left, resigned and playing by figures alone",
         "resigned, left and gone away alike tie", "a win above any figures"],
)  # fmt: skip
def test_places(seats: dict[int, Figures], expected: dict[int, int]) -> None:
    assert places(seats) == expected


def test_a_start_frees_the_seats_not_ready() -> None:
    """Bad input tried: a player joins and never readies, holding a seat. The creator's start begins
    the countdown with the seats that are ready and frees the others (the diff says them gone); the
    player freed follows on as a spectator and gets no game at the reveal."""
    harness = Harness().lobby()
    harness.join("cy")
    harness.committed()
    harness.ready("ann")
    harness.committed()
    assert harness.start() == ["Commit"]
    assert harness.committed() == ["Reply(ann: ok)", "Push(race_diff -> ann, ann2, bo, cy, spec)", "Wake(5)"]
    diff = harness.pushed[-1][1]
    assert (diff["state"], diff["gone"]) == ("countdown", [3])
    harness.tick(5)
    harness.committed()
    assert [seat.player for seat in harness.room.race.seated.values()] == [ANN, BO]
    assert harness.people["cy"] in harness.room.spectators


def test_a_lobby_lasts_ten_minutes() -> None:
    """Players who never ready hold a lobby at most ten minutes: then it is cancelled."""
    assert LOBBY_TIMEOUT == 600
    harness = Harness().lobby()
    assert harness.tick(599) == []
    assert harness.tick(1) == ["Commit"]


def test_giving_up_is_ranked_the_same_however_it_happens() -> None:
    """Three seats move once at the same second; then Ann resigns, Bo leaves and Cy goes away (its
    connection closes). A resignation keeps the time of the last move, as a leave and a silence do:
    at the time limit the three share the first place, whatever the gesture."""
    harness = Harness()
    harness.watch("ann")
    harness.join("bo")
    harness.committed()
    harness.join("cy")
    harness.committed()
    for name in ("ann", "bo", "cy"):
        harness.ready(name)
        harness.committed()
    harness.start()
    harness.committed()
    harness.tick(5)
    harness.committed()
    harness.tick(1)
    games = {seat: one_move() for seat in (1, 2, 3)}
    for seat, game in games.items():
        harness.play(seat, game)
    harness.tick(9)
    games[1].resign()
    harness.play(1, games[1])
    harness.leave("bo")
    harness.committed()
    harness.handle(Unfollow(harness.people["cy"]))
    harness.tick(50)  # the time limit
    harness.committed()
    harness.handle(RatingsLoaded({}))
    rows = {row.seat: row for row in harness.room.snapshot(None).rows}
    assert [(rows[n].status, rows[n].time_ms, rows[n].place) for n in (1, 2, 3)] == [
        ("resigned", 1000, 1),
        ("left", 1000, 1),
        ("playing", 1000, 1),
    ]


def test_a_wake_that_fires_early_is_armed_again_for_what_is_left() -> None:
    """A timer may fire a little before its time (uvloop's did, by up to 0.8 ms, 1 in 200): the
    countdown's Tick 1 ms early arms a Wake for the rest, and that one reveals the deal: a room that
    took its Wake for still out would stay in its countdown for ever."""
    harness = Harness().lobby()
    harness.ready("ann")
    harness.committed()
    harness.start()
    harness.committed()
    (wake,) = [effect for effect in harness.effects if isinstance(effect, Wake)]
    harness.now = wake.at - dt.timedelta(milliseconds=1)
    assert harness.handle(Tick(wake.at)) == ["Wake(0.001)"] and harness.room.race.phase == "countdown"
    harness.now = wake.at
    assert harness.handle(Tick(wake.at)) == ["Commit"]


# -------------------------------------------------------------------- rematch


def _finished() -> Harness:
    harness = Harness().running()
    won = Game(DEAL)
    won.status = Status.WON
    harness.play(2, won)
    harness.committed()
    harness.handle(RatingsLoaded({}))
    assert harness.room.race.phase == "finished"
    return harness


def _ask_rematch(harness: Harness, name: str) -> list[Effect]:
    made = dataclasses.replace(harness.room.race.record(), id="r2", code="H4RX7KMB", state="lobby", seated=())
    command = RaceRematch(harness.people[name], harness.players[name], made, None, Answer(name))
    harness.effects = harness.room.handle(command)
    return harness.effects


def test_a_rematch_is_stored_with_its_link_then_named_to_every_follower() -> None:
    """The first ask: one Commit of the finished race (its revision + 1, naming the rematch) with the
    new race in it; once stored, the asker's reply first (the registry takes the race up), then the
    diff that names it to every follower. A later ask is answered at once: join the one made."""
    harness = _finished()
    revision, v = harness.room.race.revision, harness.room.v
    (commit,) = _ask_rematch(harness, "bo")
    assert isinstance(commit, Commit) and isinstance(commit.write, StoreRace)
    assert commit.write.race.race.rematch_id == "r2" and commit.write.race.race.revision == revision + 1
    assert commit.write.race.rematch is not None and commit.write.race.rematch.id == "r2"
    reply, push = harness.room.handle(Committed(None))
    assert isinstance(reply, Reply) and reply.outcome == Rematch("r2", "H4RX7KMB", made=True)
    assert isinstance(push, Push) and len(push.audience) == 4  # ann, ann2, bo, spec
    diff = push.message().to_wire()
    assert (diff["v"], diff["rows"], diff["rematch"]) == (v + 1, [], {"race": "r2", "code": "H4RX7KMB"})
    assert harness.room.snapshot(None).to_wire()["rematch"] == {"race": "r2", "code": "H4RX7KMB"}
    (again,) = _ask_rematch(harness, "ann")
    assert isinstance(again, Reply) and again.outcome == Rematch("r2", "H4RX7KMB", made=False)


def test_a_finished_race_kept_for_its_followers_pushes_no_held_board() -> None:
    """A board held for the spectators when the race ended is not released later: a finished race
    kept in memory (for its rematch) has nothing due: a racer's board released then would reach every
    follower after the end's boards."""
    harness = Harness().running()
    harness.play(1, one_move())  # held for the spectators: due in 30 s
    won = Game(DEAL)
    won.status = Status.WON
    harness.play(2, won)
    harness.committed()
    harness.handle(RatingsLoaded({}))
    harness.room.kept = True  # as the registry keeps it
    assert harness.tick(31) == [] and harness.room.is_open()


def test_a_rematch_not_stored_leaves_the_race_as_it_was() -> None:
    """The database failed: the asker gets the failure, nothing is named, the revision is back. A lost
    fence (another node linked one first): the race is read again, and the ask, handled again on it,
    is answered the rematch stored there, to join; the followers get a diff that names it."""
    harness = _finished()
    revision = harness.room.race.revision
    _ask_rematch(harness, "bo")
    (failed,) = harness.room.handle(Committed(StorageUnavailable("down")))
    assert isinstance(failed, Reply) and isinstance(failed.outcome, StorageUnavailable)
    assert (harness.room.race.rematch, harness.room.race.revision) == (None, revision)
    stored = dataclasses.replace(
        harness.room.race.record(), revision=revision + 1, rematch_id="r9", rematch_code="Q2W3E4R5"
    )
    _ask_rematch(harness, "bo")
    assert [type(e).__name__ for e in harness.room.handle(Committed(WriteConflict("revision")))] == [
        "LoadRace"
    ]
    effects = harness.room.handle(RaceLoaded(stored))
    (reply,) = [effect for effect in effects if isinstance(effect, Reply)]
    assert reply.outcome == Rematch("r9", "Q2W3E4R5", made=False)
    assert harness.room.race.rematch is not None and harness.room.race.rematch.race == "r9"


@pytest.mark.parametrize(
    ("doing", "refusal"),
    [
        (lambda h: _ask_rematch(h.running(), "bo"), "running: a rematch follows a finished race"),
        (lambda h: _ask_rematch(h.lobby(), "bo"), "lobby: a rematch follows a finished race"),
        (lambda h: _ask_rematch(_finished_into(h), "spec"), "no seat"),
    ],
    ids=["running", "lobby", "spectator"],
)  # fmt: skip
def test_a_rematch_refused(doing: Callable[[Harness], Any], refusal: str) -> None:
    """Bad input tried: a rematch of a race under way or in its lobby, and asked by a spectator."""
    harness = Harness()
    doing(harness)
    (reply,) = harness.effects
    assert isinstance(reply, Reply) and isinstance(reply.outcome, Refusal)
    assert refusal in reply.outcome.message and harness.room.race.rematch is None


def _finished_into(harness: Harness) -> Harness:
    harness.running()
    won = Game(DEAL)
    won.status = Status.WON
    harness.play(2, won)
    harness.committed()
    harness.handle(RatingsLoaded({}))
    return harness


def test_a_race_leave_with_no_seat_to_give_up_stops_following() -> None:
    """A spectator's race_leave: ok and it follows no more; again: refused (it follows nothing). Once
    the race is over anyone's race_leave is ok (nothing to give up)."""
    harness = Harness().running()
    assert harness.leave("spec") == ["Reply(spec: ok)"]
    assert harness.people["spec"] not in harness.room.followers
    harness.leave("spec")
    assert "do not follow it" in harness.last_refusal()
    finished = _finished()
    assert finished.leave("bo") == ["Reply(bo: ok)"] and finished.leave("bo") == ["Reply(bo: ok)"]
    assert finished.people["bo"] not in finished.room.followers


def test_an_end_that_lost_to_another_change_is_written_again() -> None:
    """Bo won as this copy saw it, but its end lost the fence to Ann's leave on another node: the race
    as stored still runs, so the copy keeps Bo's win and ends the race again at once."""
    harness = Harness().running()
    running = harness.room.race.record()
    left = tuple(
        dataclasses.replace(seat, status="left") if seat.seat == 1 else seat for seat in running.seated
    )
    stored = dataclasses.replace(running, revision=running.revision + 1, seated=left)
    won = Game(DEAL)
    won.status = Status.WON
    assert harness.play(2, won) == ["Commit"]
    assert harness.committed(WriteConflict("revision 5 is stored")) == ["LoadRace"]
    assert harness.handle(RaceLoaded(stored)) == ["Push(race_diff -> ann, ann2, bo, spec)", "Wake(0)"]
    assert harness.room.race.seated[2].status == "won" and harness.room.race.seated[1].status == "left"
    assert harness.handle(Tick(harness.now)) == ["Commit"]
    (commit,) = harness.effects
    assert isinstance(commit, Commit) and isinstance(commit.write, StoreRace)
    assert (commit.write.race.race.state, commit.write.race.race.revision) == (
        "finished",
        stored.revision + 1,
    )
