"""GameRoom alone, as a state machine: commands in, effect lists out, checked synchronously.

No event loop, socket, database or sleep: each test hands the room a command, reads the effects it
returns (rendered at once, as the driver runs them) and hands back the outcome a `Commit`, `Load` or
`Rebuild` would have had. The room never calls a ``reply_to``: the driver does (`test_room_driver.py`).

The first half keeps the promises the room made before it was a state machine (only committed state
is visible, resigning is behind the fence, other nodes' commits followed in order...); the table at
the end states the order of the effects of every command."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable
from typing import Any

import pytest

import protocol
from engine import Cell, Column, Deal, Game, IllegalMoveError, Move, Status, parse_action
from server.clock import epoch_ms
from server.errors import ErrorCode, Refusal
from server.play import game_room as game_room_module
from server.play.bus import BusEvent, Event
from server.play.commands import (
    Act,
    Command,
    Committed,
    HintPosition,
    Loaded,
    Rebuilt,
    RemoteCommit,
    Resign,
    Unfollow,
    View,
    Watch,
)
from server.play.effects import (
    Commit,
    Effect,
    HintSpot,
    Leave,
    Load,
    Observe,
    Publish,
    Push,
    Rebuild,
    Reply,
)
from server.play.game_room import REPLAY_INLINE_ACTIONS, GameRoom, PlayerRef
from server.play.replay import RESIGN
from server.storage import StorageUnavailable
from server.storage.commit_backends import AppendActions, MarkHinted, Write, WriteConflict, actions_of
from solver import solve_deal
from tests.support.rooms import Person

CODE = "EO1-C8-AAAAAFA"
WINNABLE = "EO1-C8-AAAAAAB"
OWNER = PlayerRef("p1", "Ann")
NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)  # the room's clock, fixed
STARTED = NOW - dt.timedelta(minutes=5)
T1_C5 = Move(Column(1), Cell(5))
T2_C6 = parse_action("t2-c6")


class Answer:
    """A request's ``reply_to``, named after its requester: the room hands it back in a `Reply` and
    must never call it itself."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, outcome: Any) -> None:
        raise AssertionError(f"the room called {self.name}'s reply_to: only the driver may")


def replayed(*actions: str) -> Game:
    return Game.replay(Deal.from_code(CODE), [parse_action(action) for action in actions])


def long_game() -> Game:
    """A game past `REPLAY_INLINE_ACTIONS`: t1-c5 and back again, over and over."""
    moves = ["t1-c5", "c5-t1"] * (REPLAY_INLINE_ACTIONS // 2 + 1)
    return replayed(*moves)


@functools.cache
def winning_line() -> tuple[str, ...]:
    return tuple(move.symbol() for move in solve_deal(Deal.from_code(WINNABLE)).moves)


def one_short_of_the_win() -> Game:
    line = winning_line()
    return Game.replay(Deal.from_code(WINNABLE), [parse_action(move) for move in line[:-1]])


def render_reply(outcome: Any) -> str:
    if outcome is None:
        return "None"
    if isinstance(outcome, HintSpot):
        return "HintSpot"
    if isinstance(outcome, Refusal):
        return f"Refusal {outcome.code.value}"
    if isinstance(outcome, Exception):
        return type(outcome).__name__
    return ", ".join(message.to_wire()["type"] for message in outcome)


class Harness:
    """One room, its three usual followers (the owner who acts, the owner's other tab, a spectator),
    and what its effects did: each effect rendered as it comes (``Push`` messages are built then, as
    the driver builds them), the writes stored, the events published."""

    def __init__(self, game: Game | None = None, *, publishes: bool = True) -> None:
        self.room = GameRoom(
            "g1",
            game or Game.from_code(CODE),
            OWNER,
            STARTED,
            node="node-t",
            publishes=publishes,
            clock=lambda: NOW,
        )
        self.owner, self.tab, self.spectator = Person("owner"), Person("tab"), Person("spectator")
        self.effects: list[Effect] = []  # of the last command
        self.replies: list[tuple[str, Any]] = []  # (requester, outcome), every command
        self.pushed: list[tuple[frozenset[str], dict[str, Any]]] = []
        self.published: list[Event] = []
        self.submitted: list[Write] = []  # every Commit's write, stored or not
        self.stored: list[Write] = []  # those whose outcome was Committed(None)
        self.kinds_handled: set[type[Any]] = set()
        self.kinds_returned: set[type[Any]] = set()

    # ---------------------------------------------------------------- commands

    def handle(self, command: Command) -> list[str]:
        """``command`` handed to the room; its effects, each rendered as a string, in order."""
        self.effects = self.room.handle(command)
        self.kinds_handled.add(type(command))
        self.kinds_returned.update(type(effect) for effect in self.effects)
        return [self._render(effect) for effect in self.effects]

    def _render(self, effect: Effect) -> str:
        if isinstance(effect, Reply):
            assert isinstance(effect.reply_to, Answer)
            self.replies.append((effect.reply_to.name, effect.outcome))
            return f"Reply({effect.reply_to.name}: {render_reply(effect.outcome)})"
        if isinstance(effect, Push):
            message = effect.message().to_wire()
            audience = frozenset(map(repr, effect.audience))
            assert len(audience) == len(effect.audience), "nobody is pushed to twice"
            self.pushed.append((audience, message))
            return f"Push({message['type']} -> {', '.join(sorted(audience))})"
        if isinstance(effect, Publish):
            self.published.append(effect.event)
        if isinstance(effect, Commit):
            self.submitted.append(effect.write)
        return type(effect).__name__

    def act(
        self, action: str, v: int | None, request_id: str | None = None, by: Person | None = None
    ) -> list[str]:
        who = by or self.owner
        return self.handle(Act(who, lambda game: parse_action(action), v, request_id, Answer(who.name)))

    def resign(self, request_id: str | None = None) -> list[str]:
        return self.handle(Resign(self.owner, request_id, Answer(self.owner.name)))

    def view(self, who: Person, request_id: str | None = None) -> list[str]:
        return self.handle(View(who, request_id, Answer(who.name)))

    def watch(self, who: Person, request_id: str | None = None) -> list[str]:
        return self.handle(Watch(who, request_id, Answer(who.name)))

    def hint(self) -> list[str]:
        return self.handle(HintPosition(self.owner, Answer(self.owner.name)))

    def remote(self, v: int, action: str | None, finished_at_ms: int | None = None) -> list[str]:
        return self.handle(RemoteCommit(BusEvent("node-x", "g1", v, action, finished_at_ms)))

    def followed(self) -> Harness:
        """The owner views, so does its other tab, and a spectator watches."""
        self.view(self.owner)
        self.view(self.tab)
        self.watch(self.spectator)
        self.replies.clear()
        self.pushed.clear()
        return self

    # ---------------------------------------------------------------- outcomes

    def commit(self, error: Exception | None = None) -> list[str]:
        """The outcome of the room's last `Commit`: stored (None) or ``error``."""
        (commit,) = [effect for effect in self.effects if isinstance(effect, Commit)]
        if error is None:
            self.stored.append(commit.write)
        return self.handle(Committed(error))

    def loaded(self, game: Game | None, error: Exception | None = None) -> list[str]:
        assert any(isinstance(effect, Load) for effect in self.effects), "the room asked for no Load"
        return self.handle(Loaded(game, NOW if game is not None and game.is_over() else None, error))

    def rebuilt(self) -> list[str]:
        """What the driver's worker thread does with the room's `Rebuild`."""
        (rebuild,) = [effect for effect in self.effects if isinstance(effect, Rebuild)]
        return self.handle(Rebuilt(Game.replay(rebuild.deal, rebuild.log)))

    # ---------------------------------------------------------------- reading

    def pushed_to(self, who: Person) -> list[tuple[str, int | None]]:
        return [
            (message["type"], message.get("v")) for audience, message in self.pushed if who.name in audience
        ]

    def last_reply(self) -> Any:
        return self.replies[-1][1]

    def stored_rows(self) -> list[tuple[int, str]]:
        return [(row.v, row.action) for write in self.stored for row in actions_of(write)]


# ------------------------------------------------------------------------------ the room's promises


def test_a_race_seats_game_tells_its_race_of_each_commit_after_its_followers() -> None:
    """A race seat's game: after the ack and the diff, an Observe with the committed figures; an
    action at or after the race's time limit is refused with nothing stored."""
    harness = Harness().followed()
    harness.room.race, harness.room.closes_at = "r1", NOW + dt.timedelta(seconds=1)
    assert harness.act("t1-c5", 0) == ["Commit"]
    assert harness.commit() == ["Publish", "Reply(owner: ack)", "Push(diff -> spectator, tab)", "Observe"]
    observe = harness.effects[-1]
    assert isinstance(observe, Observe) and observe.race == "r1"
    assert (observe.progress.game, observe.progress.v, observe.progress.moves) == ("g1", 1, 1)
    assert observe.progress.at == NOW and observe.progress.layout == harness.room.game.layout()
    harness.room.closes_at = NOW
    assert harness.act("c5-t1", 1) == ["Reply(owner: Refusal illegal_move)"]
    assert "race is over" in str(harness.replies[-1][1]) and harness.room.game.v == 1


def test_a_race_seats_game_tells_its_race_of_a_resignation_or_a_reload_from_another_node() -> None:
    """Another node's commits reach the race through this room: a move (as before), a resignation
    (it ended the room with no Observe: a seat resigned on another node never reached the race),
    and a game read again after a gap."""
    harness = Harness().followed()
    harness.room.race = "r1"
    assert harness.remote(1, "t1-c5") == ["Push(diff -> owner, spectator, tab)", "Observe"]
    effects = harness.remote(1, None, int(NOW.timestamp() * 1000))
    assert effects == ["Observe", "Push(game_over -> owner, spectator, tab)", "Leave"]
    observe = harness.effects[0]
    assert isinstance(observe, Observe) and observe.race == "r1"
    assert (observe.progress.v, observe.progress.status) == (1, Status.RESIGNED)
    gap = Harness().followed()
    gap.room.race = "r1"
    assert gap.remote(3, "t1-c5") == ["Load"]
    stored = Game.from_code(CODE)
    for action in ("t1-c5", "c5-t1", "t1-c5"):
        stored.play(parse_action(action))
    assert gap.loaded(stored) == ["Observe", "Push(snapshot -> owner, spectator, tab)"]
    observe = gap.effects[0]
    assert isinstance(observe, Observe) and observe.progress.v == 3


def test_an_action_is_visible_only_once_committed() -> None:
    """The action is applied in place but the room awaits its commit: the driver hands it no request
    meanwhile, and once committed a new follower sees it, the spectator gets its diff, the write is
    the row at v 1 and the change is published."""
    harness = Harness()
    harness.watch(harness.spectator)
    assert harness.act("t1-c5", 0, "r1") == ["Commit"], "nothing is told before the commit's outcome"
    assert harness.room.awaiting is not None, "no reader is handed a request until the outcome"
    assert harness.pushed == [] and harness.published == []
    assert harness.commit() == ["Publish", "Reply(owner: ack)", "Push(diff -> spectator)"]
    (ack,) = harness.last_reply()
    assert isinstance(ack, protocol.Ack) and ack.v == 1 and ack.request_id == "r1"
    assert harness.room.awaiting is None
    assert harness.view(Person("other tab"), "r2") == ["Reply(other tab: snapshot)"]
    (snapshot,) = harness.last_reply()
    assert snapshot.v == 1 and snapshot.request_id == "r2"
    assert harness.pushed_to(harness.spectator) == [("diff", 1)]
    (write,) = harness.stored
    assert [(row.game_id, row.v, row.action) for row in write.actions] == [("g1", 1, "t1-c5")]
    assert harness.published == [BusEvent("node-t", "g1", 1, "t1-c5", None)]


def test_a_failed_commit_leaves_the_room_as_it_was_and_tells_nobody() -> None:
    harness = Harness()
    harness.watch(harness.spectator)
    harness.act("t1-c5", 0, "r1")
    assert harness.commit(StorageUnavailable("down")) == ["Reply(owner: StorageUnavailable)"]
    room = harness.room
    assert room.game.v == 0 and room.game.log == () and room.game.top_card(T1_C5.target) is None
    assert room.awaiting is None and harness.pushed == [] and harness.published == []
    harness.act("t1-c5", 0, "r2")
    assert harness.commit() == ["Publish", "Reply(owner: ack)", "Push(diff -> spectator)"]
    assert harness.last_reply()[0].v == 1 and harness.pushed_to(harness.spectator) == [("diff", 1)]


def test_a_failed_commit_undoes_the_action_before_the_next_one() -> None:
    """A short game's failed action is taken back inline, in the outcome's handling: the next request
    finds the game as before it (no `Rebuild` for a game this short)."""
    harness = Harness()
    harness.act("t1-c5", 0, "r1")
    assert harness.commit(StorageUnavailable("down")) == ["Reply(owner: StorageUnavailable)"]
    assert harness.room.game.v == 0 and harness.room.game.log == ()
    assert harness.act("t1-c5", 0, "r2") == ["Commit"], "the same action again, at the same version"
    harness.commit()
    assert harness.stored_rows() == [(1, "t1-c5")]


def test_the_requester_gets_its_reply_and_no_push_even_when_it_also_watches() -> None:
    harness = Harness()
    owner, other_tab = harness.owner, harness.tab
    harness.view(owner)
    harness.watch(owner)
    harness.view(other_tab)
    harness.act("t1-c5", None)
    assert harness.commit() == ["Publish", "Reply(owner: ack)", "Push(diff -> tab)"]
    assert harness.pushed_to(owner) == [] and harness.pushed_to(other_tab) == [("diff", 1)]
    harness.resign("r")
    assert harness.commit() == ["Publish", "Reply(owner: game_over)", "Push(game_over -> tab)", "Leave"]
    (over,) = harness.last_reply()
    assert isinstance(over, protocol.GameOver) and over.request_id == "r"
    assert harness.pushed_to(owner) == []
    assert harness.pushed_to(other_tab) == [("diff", 1), ("game_over", None)]


def test_resigning_is_a_row_at_the_next_version_with_the_result() -> None:
    harness = Harness()
    room = harness.room
    harness.view(harness.owner)
    harness.act("t1-c5", 0)
    harness.commit()
    assert harness.resign() == ["Commit"]
    assert room.is_open() and room.game.status.value == "playing", "resigned only once stored"
    assert harness.commit() == ["Publish", "Reply(owner: game_over)", "Leave"]
    write = harness.stored[-1]
    assert isinstance(write, AppendActions)
    assert [(row.v, row.action) for row in write.actions] == [(2, RESIGN)]
    result = write.result
    assert result is not None and result.status == "resigned" and result.moves == 1 and not result.won
    assert result.finished_at == NOW and result.duration_ms == 5 * 60 * 1000, "the room's clock"
    assert harness.published[-1] == BusEvent("node-t", "g1", 1, None, int(NOW.timestamp() * 1000))
    assert not room.is_open() and not room.is_followed()
    assert room.ended is not None and room.ended.game.status.value == "resigned"
    assert room.game.v == 1, "resigning does not change the game's version"
    assert harness.act("t2-c6", 1) == ["Reply(owner: Refusal illegal_move)"]
    assert harness.view(harness.owner) == ["Reply(owner: None)"], "an ended room sends callers back"


def test_a_game_followed_by_its_player_alone_pushes_and_publishes_nothing() -> None:
    """Most games: one connection, one node. The ack is the only effect of a committed action (no
    `Push` built for nobody, no `Publish` when no other node follows)."""
    harness = Harness(publishes=False)
    harness.view(harness.owner)
    harness.act("t1-c5", 0)
    assert harness.commit() == ["Reply(owner: ack)"]
    harness.resign()
    assert harness.commit() == ["Reply(owner: game_over)", "Leave"]


def test_a_conflict_takes_the_game_as_stored_and_refuses_as_stale() -> None:
    harness = Harness()
    harness.act("t1-c5", 0)
    assert harness.commit(WriteConflict("v 1 is stored")) == ["Load"]
    assert harness.room.awaiting is not None, "the reload holds the room until the stored game is in"
    assert harness.loaded(replayed("t2-c6")) == ["Reply(owner: Refusal stale)"]
    assert harness.room.game.log == (T2_C6,), "the stored action, not ours"
    assert harness.room.awaiting is None and harness.pushed == [] and harness.stored == []


def test_a_conflict_holds_the_room_until_the_stored_game_is_taken() -> None:
    """The spectators get the stored game as a snapshot, the requester its stale refusal (after the
    snapshot, and no snapshot of its own); the room awaits until then."""
    harness = Harness()
    harness.watch(harness.spectator)
    harness.act("t1-c5", 0, "r1")
    harness.commit(WriteConflict("v 1 is stored"))
    assert harness.room.awaiting is not None
    assert harness.loaded(replayed("t2-c6")) == ["Push(snapshot -> spectator)", "Reply(owner: Refusal stale)"]
    assert harness.pushed_to(harness.spectator) == [("snapshot", 1)]
    assert harness.room.awaiting is None
    assert harness.view(harness.tab) == ["Reply(tab: snapshot)"] and harness.last_reply()[0].v == 1


def test_a_stale_refusal_says_the_games_current_version() -> None:
    """A request at another version, and an action that lost a write conflict, are refused stale with
    the game's version as the room holds it (the stored game's, after the conflict)."""
    harness = Harness()
    harness.act("t1-c5", 0)
    harness.commit(None)
    assert harness.act("c5-t1", 0) == ["Reply(owner: Refusal stale)"]
    refused = harness.last_reply()
    assert isinstance(refused, Refusal) and refused.v == 1
    harness.act("c5-t1", 1)
    harness.commit(WriteConflict("v 2 is stored"))
    harness.loaded(replayed("t1-c5", "c5-t1", "t2-c6"))
    refused = harness.last_reply()
    assert isinstance(refused, Refusal) and refused.code is ErrorCode.STALE and refused.v == 3


def test_the_rules_and_the_version_refuse_before_anything_is_stored() -> None:
    harness = Harness()
    assert harness.act("t1-c5", 3) == ["Reply(owner: Refusal stale)"]
    assert harness.act("undo", None) == ["Reply(owner: IllegalMoveError)"]
    assert isinstance(harness.last_reply(), IllegalMoveError)
    assert harness.submitted == [] and harness.room.awaiting is None and harness.room.game.v == 0


def test_the_action_bound_refuses_at_once_with_nothing_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stale, illegal, and a game at its most actions (`MAX_GAME_ACTIONS`): refused in the handling of
    the request, no `Commit`, the room free again."""
    monkeypatch.setattr(game_room_module, "MAX_GAME_ACTIONS", 1)
    harness = Harness()
    assert harness.act("t1-c5", 3, "r1") == ["Reply(owner: Refusal stale)"]
    assert harness.act("undo", None, "r2") == ["Reply(owner: IllegalMoveError)"]
    harness.act("t1-c5", 0, "r3")
    harness.commit()
    assert harness.act("t2-c6", 1, "r4") == ["Reply(owner: Refusal illegal_move)"]
    refusal = harness.last_reply()
    assert isinstance(refusal, Refusal) and "resign" in refusal.message
    assert harness.room.awaiting is None and [row.v for row in actions_of(harness.submitted[0])] == [1]
    assert len(harness.submitted) == 1


def test_other_nodes_commits_are_applied_in_order_old_ones_skipped_a_gap_reloaded() -> None:
    harness = Harness()
    room, spectator = harness.room, harness.spectator
    harness.watch(spectator)
    assert harness.remote(1, "t1-c5") == ["Push(diff -> spectator)"]
    assert harness.remote(1, "t1-c5") == [], "seen already: skipped"
    assert room.game.v == 1 and harness.pushed_to(spectator) == [("diff", 1)]
    assert harness.remote(3, "t2-c6") == ["Load"], "v 2 was missed"
    assert harness.loaded(replayed("t1-c5", "c5-t1", "t2-c6")) == ["Push(snapshot -> spectator)"]
    assert room.game.v == 3 and room.game.log[-1] == T2_C6
    assert harness.remote(3, None, 0) == ["Push(game_over -> spectator)", "Leave"], "resigned there"
    assert not room.is_open() and harness.pushed_to(spectator)[-1] == ("game_over", None)
    assert harness.published == [] and harness.submitted == [], "a followed commit is not published again"


def test_an_action_whose_requester_left_follows_its_commit_kept_when_stored_rolled_back_when_not() -> None:
    """The requester's connection closed while its commit was in flight (it unfollows; the driver
    queues the `Unfollow` behind the outcome): the outcome alone decides. Stored, the action is kept
    and announced; failed, it is taken back. No task is cancelled: an action has none
    (`test_room_driver.py` checks the same through the driver)."""
    harness = Harness()
    room, spectator = harness.room, harness.spectator
    harness.watch(spectator)
    harness.act("t1-c5", 0, "r1")
    assert harness.commit() == ["Publish", "Reply(owner: ack)", "Push(diff -> spectator)"]
    assert harness.handle(Unfollow(harness.owner)) == []
    assert room.game.log == (T1_C5,) and harness.stored_rows() == [(1, "t1-c5")], "as the database"
    harness.act("t2-c6", 1, "r2")
    assert harness.commit(StorageUnavailable("down")) == ["Reply(owner: StorageUnavailable)"]
    assert harness.handle(Unfollow(harness.owner)) == []
    assert room.game.v == 1 and room.game.log == (T1_C5,), "the failed write is rolled back"
    assert harness.pushed_to(spectator) == [("diff", 1)]


def test_a_resignation_whose_requester_left_that_commits_ends_the_room() -> None:
    harness = Harness()
    harness.watch(harness.spectator)
    harness.resign("r1")
    assert harness.commit() == ["Publish", "Reply(owner: game_over)", "Push(game_over -> spectator)", "Leave"]
    assert not harness.room.is_open() and harness.pushed_to(harness.spectator) == [("game_over", None)]


def test_a_reload_sends_the_followers_a_fresh_snapshot_of_the_stored_game() -> None:
    harness = Harness()
    viewer, spectator = harness.tab, harness.spectator
    harness.view(viewer)
    harness.watch(spectator)
    harness.remote(3, "t2-c6")  # v 1 and 2 were missed
    assert harness.loaded(replayed("t1-c5", "c5-t1", "t2-c6")) == ["Push(snapshot -> spectator, tab)"]
    assert harness.pushed_to(spectator) == [("snapshot", 3)] == harness.pushed_to(viewer)
    (_, pushed), *_ = harness.pushed
    assert pushed.get("id") is None and pushed["game"] == "g1", "a push, not a reply"

    owner = harness.owner
    harness.act("t1-c5", 3)
    harness.commit(WriteConflict("v 4 is stored"))
    assert harness.loaded(replayed("t1-c5", "c5-t1", "t2-c6", "t1-c5")) == [
        "Push(snapshot -> spectator, tab)",
        "Reply(owner: Refusal stale)",
    ]
    assert harness.pushed_to(spectator) == [("snapshot", 3), ("snapshot", 4)]
    assert harness.pushed_to(owner) == [], "the requester has its stale refusal"


def test_requests_go_in_order_after_an_awaited_outcome() -> None:
    """An action in flight, then a watch and a second action (held back by the driver while the room
    awaits: `test_room_driver.py`): handed in after the outcome, in order, the watch sees v 1, the
    second action is v 2, and the spectator gets the second diff only."""
    harness = Harness()
    harness.act("t1-c5", 0, "r1")
    assert harness.room.awaiting is not None
    harness.commit()
    assert harness.watch(harness.spectator) == ["Reply(spectator: snapshot)"]
    assert harness.last_reply()[0].v == 1
    harness.act("t2-c6", 1, "r2")
    assert harness.commit() == ["Publish", "Reply(owner: ack)", "Push(diff -> spectator)"]
    assert harness.last_reply()[0].v == 2
    assert harness.stored_rows() == [(1, "t1-c5"), (2, "t2-c6")]
    assert harness.pushed_to(harness.spectator) == [("diff", 2)]


def test_a_long_games_failed_action_is_taken_back_by_a_rebuild_not_inline() -> None:
    """Past `REPLAY_INLINE_ACTIONS` a failed action is taken back by a `Rebuild` (run off the event
    loop by the driver): the room answers nothing and awaits until it is in, then the game is as
    before the action, the requester gets the failure, and the next action works."""
    harness = Harness(long_game())
    room = harness.room
    before = room.game.log
    harness.act("t1-c5", len(before), "r1")
    assert harness.commit(StorageUnavailable("down")) == ["Rebuild"]
    (rebuild,) = harness.effects
    assert isinstance(rebuild, Rebuild) and tuple(rebuild.log) == before
    assert room.awaiting is not None and harness.replies == [], "no answer before the game is rebuilt"
    assert harness.rebuilt() == ["Reply(owner: StorageUnavailable)"]
    assert room.awaiting is None and room.game.log == before and room.game.v == len(before)
    harness.act("undo", len(before), "r2")
    assert harness.commit() == ["Publish", "Reply(owner: ack)"]
    assert room.game.v == len(before) + 1


def test_a_short_games_failed_action_is_taken_back_inline() -> None:
    harness = Harness(replayed(*["t1-c5", "c5-t1"] * (REPLAY_INLINE_ACTIONS // 2 - 1)))
    harness.act("t1-c5", harness.room.game.v)
    assert harness.commit(StorageUnavailable("down")) == ["Reply(owner: StorageUnavailable)"]
    assert harness.room.awaiting is None and harness.room.game.v == REPLAY_INLINE_ACTIONS - 2


def test_a_winning_action_answers_its_ack_then_game_over_and_the_room_leaves() -> None:
    harness = Harness(one_short_of_the_win())
    harness.watch(harness.spectator)
    line = winning_line()
    harness.act(line[-1], len(line) - 1, "r")
    assert harness.commit() == [
        "Publish",
        "Reply(owner: ack, game_over)",
        "Push(diff -> spectator)",
        "Push(game_over -> spectator)",
        "Leave",
    ]
    ack, over = harness.last_reply()
    assert (ack.to_wire()["type"], ack.status.value, ack.request_id) == ("ack", "won", "r")
    assert isinstance(over, protocol.GameOver) and over.won and over.request_id is None
    assert harness.pushed_to(harness.spectator) == [("diff", len(line)), ("game_over", None)]
    (write,) = harness.stored
    assert isinstance(write, AppendActions)
    assert write.result is not None and write.result.won and write.result.finished_at == NOW
    assert not harness.room.is_open() and harness.room.awaiting is None


def test_every_row_carries_the_time_the_room_accepted_it_and_a_finish_is_its_last_rows() -> None:
    """One clock read per action: the row's ``at_ms``, and, for the action that ends the game, the
    result's ``finished_at`` too (a record's last time is never after its finish)."""
    moments = iter(NOW + dt.timedelta(seconds=second, microseconds=999) for second in range(1, 10))
    harness = Harness(one_short_of_the_win())
    times: list[dt.datetime] = []

    def clock() -> dt.datetime:
        times.append(next(moments))
        return times[-1]

    harness.room.clock = clock
    harness.act("undo", None)
    harness.commit()
    line = winning_line()
    harness.act(line[-2], None)
    harness.commit()
    harness.act(line[-1], None)
    harness.commit()
    rows = [row for write in harness.stored for row in actions_of(write)]
    assert len(times) == len(rows) == 3, "one read of the clock per action"
    assert [row.at_ms for row in rows] == [epoch_ms(moment) for moment in times]
    assert epoch_ms(times[0]) == epoch_ms(NOW) + 1000, "rounded down to the millisecond"
    result = harness.stored[-1].result  # type: ignore[union-attr]
    assert result is not None and result.won and result.finished_at == times[-1]


def test_a_resignation_row_carries_its_finish_time() -> None:
    harness = Harness()
    harness.resign()
    harness.commit()
    (write,) = harness.stored
    assert isinstance(write, AppendActions) and write.result is not None
    assert [row.at_ms for row in write.actions] == [epoch_ms(NOW)] == [epoch_ms(write.result.finished_at)]


def test_the_hint_mark_is_stored_once() -> None:
    harness = Harness()
    assert harness.hint() == ["Commit"]
    assert harness.submitted == [MarkHinted("g1")]
    assert harness.commit() == ["Reply(owner: HintSpot)"]
    assert harness.last_reply() == HintSpot(0, harness.room.game.layout())
    assert harness.hint() == ["Reply(owner: HintSpot)"], "marked already: nothing stored again"
    assert len(harness.submitted) == 1
    harness.act("t1-c5", 0)
    harness.commit()
    assert harness.hint() == ["Reply(owner: HintSpot)"] and harness.last_reply().v == 1


def test_a_failed_hint_mark_is_stored_again_next_time() -> None:
    harness = Harness()
    harness.hint()
    assert harness.commit(StorageUnavailable("down")) == ["Reply(owner: StorageUnavailable)"]
    assert harness.hint() == ["Commit"]


def test_one_game_answers_and_pushes_as_it_always_did() -> None:
    """One game played through every outcome an action can have, with a spectator and the owner's
    other tab following: a move, an undo, a stale one, an illegal one, a failed commit, a conflict
    (the stored game taken), a move after it. (It compared the fast and the slow path before: there is
    one path now; `test_services.py` compares a room in memory with one loaded from the database.)"""
    harness = Harness()
    harness.watch(harness.spectator)
    harness.view(harness.tab)
    harness.replies.clear()
    script: list[tuple[str, int | None, Exception | None]] = [
        ("t1-c5", 0, None),
        ("undo", 1, None),
        ("t1-c5", 0, None),  # stale: the game is at v 2
        ("c5-t1", None, None),  # illegal: c5 is empty
        ("t1-c5", 2, StorageUnavailable("down")),
        ("t1-c5", 2, WriteConflict("v 3 is stored")),  # the stored game has one action: v 1
        ("t1-c5", 1, None),
    ]
    for index, (action, v, failure) in enumerate(script):
        if harness.act(action, v, f"r{index}") == ["Commit"] and harness.commit(failure) == ["Load"]:
            harness.loaded(replayed("t2-c6"))
        assert harness.room.awaiting is None, "free again once the action is answered"
    assert [render_reply(outcome) for _, outcome in harness.replies] == [
        "ack",
        "ack",
        "Refusal stale",
        "IllegalMoveError",
        "StorageUnavailable",
        "Refusal stale",
        "ack",
    ]
    assert [(message["type"], message["v"]) for _, message in harness.pushed] == [
        ("diff", 1),
        ("diff", 2),
        ("snapshot", 1),  # the stored game, after the conflict
        ("diff", 2),
    ]
    assert {audience for audience, _ in harness.pushed} == {frozenset({"spectator", "tab"})}
    assert [[(row.v, row.action) for row in actions_of(write)] for write in harness.stored] == [
        [(1, "t1-c5")],
        [(2, "undo")],
        [(2, "t1-c5")],
    ]


# ------------------------------------------------------------------------------ the order of effects


def act_ok(h: Harness) -> list[str]:
    return h.act("t1-c5", 0, "r")


def act_committed(h: Harness) -> list[str]:
    h.act("t1-c5", 0, "r")
    return h.commit()


def act_winning(h: Harness) -> list[str]:
    h.room.game = one_short_of_the_win()
    h.act(winning_line()[-1], h.room.game.v, "r")
    return h.commit()


def act_refused(h: Harness) -> list[str]:
    return h.act("undo", None, "r")


def act_stale(h: Harness) -> list[str]:
    return h.act("t1-c5", 7, "r")


def act_by_spectator(h: Harness) -> list[str]:
    """The room takes the requester as its owner's connection (requests check the owner first)."""
    return h.act("t1-c5", 0, "r", by=h.spectator)


def commit_failed_short(h: Harness) -> list[str]:
    h.act("t1-c5", 0, "r")
    return h.commit(StorageUnavailable("down"))


def commit_failed_long(h: Harness) -> list[str]:
    h.room.game = long_game()
    h.act("t1-c5", h.room.game.v, "r")
    return h.commit(StorageUnavailable("down"))


def commit_failed_long_rebuilt(h: Harness) -> list[str]:
    commit_failed_long(h)
    return h.rebuilt()


def commit_conflict(h: Harness) -> list[str]:
    h.act("t1-c5", 0, "r")
    return h.commit(WriteConflict("v 1 is stored"))


def conflict_loaded(h: Harness) -> list[str]:
    commit_conflict(h)
    return h.loaded(replayed("t2-c6"))


def conflict_loaded_finished(h: Harness) -> list[str]:
    commit_conflict(h)
    finished = replayed("t2-c6")
    finished.resign()
    return h.loaded(finished)


def conflict_loaded_error(h: Harness) -> list[str]:
    commit_conflict(h)
    effects = h.loaded(None, StorageUnavailable("down"))
    assert h.room.game.v == 0, "the refused action is taken back all the same"
    assert h.room.ended is None, "not ended: closed by the registry (``replaced``) when it runs Leave"
    return effects


def resign_ok(h: Harness) -> list[str]:
    return h.resign("r")


def resign_committed(h: Harness) -> list[str]:
    h.resign("r")
    return h.commit()


def resign_conflict(h: Harness) -> list[str]:
    h.resign("r")
    return h.commit(WriteConflict("v 1 is stored"))


def resign_conflict_loaded(h: Harness) -> list[str]:
    resign_conflict(h)
    return h.loaded(replayed("t2-c6"))


def remote_action(h: Harness) -> list[str]:
    return h.remote(1, "t1-c5")


def remote_old(h: Harness) -> list[str]:
    h.remote(1, "t1-c5")
    return h.remote(1, "t1-c5")


def remote_winning(h: Harness) -> list[str]:
    h.room.game = one_short_of_the_win()
    return h.remote(len(winning_line()), winning_line()[-1], 0)


def remote_resign(h: Harness) -> list[str]:
    return h.remote(0, None, 0)


def remote_gap(h: Harness) -> list[str]:
    return h.remote(2, "c5-t1")


def remote_gap_loaded(h: Harness) -> list[str]:
    remote_gap(h)
    return h.loaded(replayed("t1-c5", "c5-t1"))


def remote_gap_loaded_error(h: Harness) -> list[str]:
    remote_gap(h)
    effects = h.loaded(None, StorageUnavailable("down"))
    assert h.room.ended is None and h.room.game.v == 0
    return effects


def view(h: Harness) -> list[str]:
    return h.view(Person("new tab"), "r")


def watch(h: Harness) -> list[str]:
    return h.watch(Person("new spectator"), "r")


def unfollow(h: Harness) -> list[str]:
    effects = h.handle(Unfollow(h.spectator))
    assert h.spectator not in h.room.spectators
    return effects


def hint_first(h: Harness) -> list[str]:
    return h.hint()


def hint_marked(h: Harness) -> list[str]:
    h.hint()
    return h.commit()


def hint_conflict_loaded(h: Harness) -> list[str]:
    h.hint()
    h.commit(WriteConflict("finished elsewhere"))
    return h.loaded(replayed())


def hint_again(h: Harness) -> list[str]:
    hint_marked(h)
    return h.hint()


def hint_in_a_race(h: Harness) -> list[str]:
    """A race seat's game: a race is rated, and a hint would let the server's solver win it."""
    h.room.race = "r1"
    return h.hint()


def on_ended(request: Callable[[Harness], list[str]]) -> Callable[[Harness], list[str]]:
    """``request`` on a room whose game ended (resigned here)."""

    def ended(h: Harness) -> list[str]:
        h.resign()
        h.commit()
        return request(h)

    return ended


def on_replaced(request: Callable[[Harness], list[str]]) -> Callable[[Harness], list[str]]:
    """``request`` on a room the registry let go (``replaced``)."""

    def replaced(h: Harness) -> list[str]:
        h.room.replaced = True
        return request(h)

    return replaced


EVERYONE_ELSE = "spectator, tab"
EVERYONE = "owner, spectator, tab"

ORDER: list[tuple[Callable[[Harness], list[str]], list[str]]] = [
    (act_ok, ["Commit"]),
    (act_committed, ["Publish", "Reply(owner: ack)", f"Push(diff -> {EVERYONE_ELSE})"]),
    (
        act_winning,
        [
            "Publish",
            "Reply(owner: ack, game_over)",
            f"Push(diff -> {EVERYONE_ELSE})",
            f"Push(game_over -> {EVERYONE_ELSE})",
            "Leave",
        ],
    ),
    (act_refused, ["Reply(owner: IllegalMoveError)"]),
    (act_stale, ["Reply(owner: Refusal stale)"]),
    (act_by_spectator, ["Commit"]),
    (commit_failed_short, ["Reply(owner: StorageUnavailable)"]),
    (commit_failed_long, ["Rebuild"]),
    (commit_failed_long_rebuilt, ["Reply(owner: StorageUnavailable)"]),
    (commit_conflict, ["Load"]),
    (conflict_loaded, [f"Push(snapshot -> {EVERYONE_ELSE})", "Reply(owner: Refusal stale)"]),
    (
        conflict_loaded_finished,
        # the requester too: the game is over, and its refusal says only that its action was not taken
        [f"Push(game_over -> {EVERYONE})", "Leave", "Reply(owner: Refusal stale)"],
    ),
    (conflict_loaded_error, ["Leave", "Reply(owner: Refusal stale)"]),
    (resign_ok, ["Commit"]),
    (
        resign_committed,
        ["Publish", "Reply(owner: game_over)", f"Push(game_over -> {EVERYONE_ELSE})", "Leave"],
    ),
    (resign_conflict, ["Load"]),
    (resign_conflict_loaded, [f"Push(snapshot -> {EVERYONE_ELSE})", "Reply(owner: Refusal stale)"]),
    (remote_action, [f"Push(diff -> {EVERYONE})"]),
    (remote_old, []),
    (remote_winning, [f"Push(diff -> {EVERYONE})", f"Push(game_over -> {EVERYONE})", "Leave"]),
    (remote_resign, [f"Push(game_over -> {EVERYONE})", "Leave"]),
    (remote_gap, ["Load"]),
    (remote_gap_loaded, [f"Push(snapshot -> {EVERYONE})"]),
    (remote_gap_loaded_error, ["Leave"]),
    (view, ["Reply(new tab: snapshot)"]),
    (watch, ["Reply(new spectator: snapshot)"]),
    (unfollow, []),
    (hint_first, ["Commit"]),
    (hint_marked, ["Reply(owner: HintSpot)"]),
    (hint_conflict_loaded, [f"Push(snapshot -> {EVERYONE_ELSE})", "Reply(owner: Refusal stale)"]),
    (hint_again, ["Reply(owner: HintSpot)"]),
    (hint_in_a_race, ["Reply(owner: Refusal forbidden)"]),
    (on_ended(act_ok), ["Reply(owner: Refusal illegal_move)"]),
    (on_ended(resign_ok), ["Reply(owner: Refusal illegal_move)"]),
    (on_ended(hint_first), ["Reply(owner: Refusal illegal_move)"]),
    (on_ended(view), ["Reply(new tab: None)"]),
    (on_ended(watch), ["Reply(new spectator: None)"]),
    (on_ended(remote_action), []),
    (on_ended(unfollow), []),
    (on_replaced(act_ok), ["Reply(owner: Refusal stale)"]),
    (on_replaced(resign_ok), ["Reply(owner: Refusal stale)"]),
    (on_replaced(hint_first), ["Reply(owner: Refusal stale)"]),
    (on_replaced(view), ["Reply(new tab: None)"]),
    (on_replaced(watch), ["Reply(new spectator: None)"]),
    (on_replaced(remote_action), []),
]


def row_id(row: tuple[Callable[[Harness], list[str]], list[str]]) -> str:
    scenario = row[0]
    closure = getattr(scenario, "__closure__", None) or ()
    inner = [cell.cell_contents.__name__ for cell in closure if callable(cell.cell_contents)]
    return f"{scenario.__name__}:{inner[0]}" if inner else scenario.__name__


@pytest.mark.parametrize(("scenario", "expected"), ORDER, ids=[row_id(row) for row in ORDER])
def test_the_order_of_effects_of_every_command(
    scenario: Callable[[Harness], list[str]], expected: list[str]
) -> None:
    """The room's owner views (and acts), its other tab views, a spectator watches: what the last
    command of each scenario causes, in order, and who each push goes to. The requester gets no push
    (but the game_over of a game found finished when it reloads); the room awaits an outcome after a
    Commit, Load or Rebuild only."""
    harness = Harness().followed()
    assert scenario(harness) == expected
    awaits = bool(expected) and expected[-1] in ("Commit", "Load", "Rebuild")
    assert (harness.room.awaiting is not None) is awaits
    if "Leave" in expected and harness.room.ended is not None:
        assert not harness.room.is_open() and not harness.room.is_followed(), "followers let go"
    elif "Leave" in expected:  # the stored game could not be read: the registry closes it on Leave
        assert Loaded in harness.kinds_handled
    replies = [effect for effect in harness.effects if isinstance(effect, Reply)]
    assert len(replies) <= 1, "a command answers at most one request"


def test_every_command_and_effect_kind_is_in_the_table() -> None:
    """The table hands the room every kind of command and sees every kind of effect."""
    commands: set[type[Any]] = set()
    effects: set[type[Any]] = set()
    for scenario, _ in ORDER:
        harness = Harness().followed()
        scenario(harness)
        commands |= harness.kinds_handled
        effects |= harness.kinds_returned
    assert commands == {
        Act,
        Resign,
        View,
        Watch,
        Unfollow,
        HintPosition,
        RemoteCommit,
        Committed,
        Loaded,
        Rebuilt,
    }
    assert effects == {Commit, Reply, Push, Publish, Load, Rebuild, Leave}
