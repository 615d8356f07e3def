"""The event as a value (server/play/event/): every case of docs/events.md's scoring, the event's
life and the missed-start rule, and the standings' order, pages, around-me and diffs; hypothesis
checks that positions are a permutation, places agree with the merits and a void re-ranks as if
the voided entrant had not played."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import Player as PlayerRef
from server.errors import ErrorCode, Refusal
from server.play.event.scoring import (
    NO_FIGURES,
    Figures,
    GameResult,
    Outcome,
    ScoringRules,
    outcome,
    tally,
)
from server.play.event.value import Entry, Event, EventPlan, Phase, Standings

T0 = dt.datetime(2026, 12, 7, 12, 0, tzinfo=dt.UTC)
END = T0 + dt.timedelta(hours=1)
RULES = ScoringRules(END, 600)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def game(start: float, took: float | None, *, won: bool = True, **flags: bool) -> GameResult:
    """A game started ``start`` s after T0 that ended ``took`` s later (None: still playing)."""
    ended = None if took is None else at(start + took)
    return GameResult("g", at(start), ended, won=won, moves=80 if won else 10, **flags)


# ----------------------------------------------------------------------------------- scoring


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (game(0, 600), Outcome.WIN),  # exactly the allowance is still a full win
        (game(0, 601), Outcome.SLOW_WIN),
        (game(0, 300, berserk=True), Outcome.WIN),
        (game(0, 301, berserk=True), Outcome.SLOW_WIN),  # berserk halves the allowance
        (game(0, 100, won=False), Outcome.LOSS),
        (game(0, 100, hinted=True), Outcome.HINTED),
        (game(0, 100, won=False, hinted=True), Outcome.HINTED),
        (game(3550, 100), Outcome.LATE),  # won after the end
        (game(3550, 100, won=False), Outcome.LATE),
        (game(3000, 600), Outcome.WIN),  # won at the end's instant exactly
        (game(0, None), None),  # still playing: nothing decided
    ],
)
def test_the_outcome_of_every_case(result: GameResult, expected: Outcome | None) -> None:
    assert outcome(result, RULES) is expected


def test_odd_allowances_halve_down_to_the_second() -> None:
    rules = ScoringRules(END, 61)
    assert outcome(game(0, 30, berserk=True), rules) is Outcome.WIN
    assert outcome(game(0, 31, berserk=True), rules) is Outcome.SLOW_WIN


def points(*results: GameResult) -> int:
    return tally(results, RULES).points


def test_wins_score_two_then_four_on_fire() -> None:
    assert points(game(0, 100)) == 2
    assert points(game(0, 100), game(100, 100)) == 4
    assert points(game(0, 100), game(100, 100), game(200, 100)) == 8  # the third is on fire
    assert points(*(game(100 * n, 100) for n in range(5))) == 2 + 2 + 4 + 4 + 4


@pytest.mark.parametrize(
    "breaker",
    [game(100, 100, won=False), game(100, 700), game(100, 100, hinted=True)],
    ids=["loss", "slow_win", "hinted"],
)
def test_a_loss_a_slow_win_or_a_hint_puts_the_fire_out(breaker: GameResult) -> None:
    figures = tally([game(0, 50), game(50, 50), breaker, game(1000, 100)], RULES)
    slow = 1 if outcome(breaker, RULES) is Outcome.SLOW_WIN else 0
    assert figures.points == 2 + 2 + slow + 2  # the last win is not doubled
    assert figures.streak == 1


def test_berserk_adds_one_to_a_full_win_never_doubled() -> None:
    assert points(game(0, 100, berserk=True)) == 3
    assert points(game(0, 50), game(50, 50), game(100, 100, berserk=True)) == 2 + 2 + 5
    assert points(game(0, 400, berserk=True)) == 1  # a slow berserk win: no bonus
    assert points(game(0, 100, berserk=True, won=False)) == 0
    assert points(game(0, 100, berserk=True, hinted=True)) == 0


def test_a_late_game_neither_counts_nor_breaks_the_streak() -> None:
    figures = tally([game(0, 50), game(50, 50), game(3550, 100)], RULES)
    assert figures == Figures(4, 2, 100_000, at(100), 2, 2)
    assert tally([game(3550, None)], RULES) == NO_FIGURES


def test_the_figures_of_a_mixed_run() -> None:
    results = [game(0, 100), game(100, 700), game(800, 50, won=False), game(850, 100), game(950, 100)]
    assert tally(results, RULES) == Figures(2 + 1 + 0 + 2 + 2, 3, 300_000, at(1050), 5, 2)
    # a loss does not move the time a point was last reached
    assert tally([game(0, 100), game(100, 50, won=False)], RULES).reached_at == at(100)


# ----------------------------------------------------------------------------------- the event


def plan(**changes: Any) -> EventPlan:
    base = EventPlan("Sunday C8", 8, at(-600), T0, at(1800), END, 1000, 20)
    return base._replace(**changes)


def draw(cells: int, deals: int) -> tuple[str, ...]:
    return tuple(f"EO1-C{cells}-AAAAA{chr(65 + n % 26)}{chr(65 + n // 26)}" for n in range(deals))


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"name": ""}, "name"),
        ({"name": "x" * 65}, "name"),
        ({"cells": 3}, "cells"),
        ({"max_players": 0}, "max_players"),
        ({"max_players": 100_001}, "max_players"),
        ({"deals": 0}, "deals"),
        ({"deals": 201}, "deals"),
        ({"game_time_s": 59}, "game_time_s"),
        ({"review_s": -1}, "review_s"),
        ({"opens_at": at(1)}, "opens_at <= starts_at"),
        ({"closes_at": at(-1)}, "opens_at <= starts_at"),
        ({"closes_at": END + dt.timedelta(seconds=1)}, "opens_at <= starts_at"),
        ({"ends_at": T0, "closes_at": T0}, "before ends_at"),
        ({"opens_at": dt.datetime(2026, 12, 7)}, "time zone"),
    ],
)
def test_a_plan_out_of_bounds_is_refused(changes: dict[str, Any], problem: str) -> None:
    with pytest.raises(Refusal) as refused:
        Event.planned("e1", plan(**changes), at(-1000))
    assert refused.value.code is ErrorCode.BAD_REQUEST
    assert problem in str(refused.value)


def test_an_event_ending_in_the_past_is_refused() -> None:
    with pytest.raises(Refusal, match="past"):
        Event.planned("e1", plan(), END)


def test_its_life_one_stored_change_per_phase_and_the_deals_drawn_at_the_start() -> None:
    event = Event.planned("e1", plan(), at(-1000))
    assert event.phase is Phase.SCHEDULED and event.deal_codes == () and event.deal_code(1) is None
    assert event.advance(at(-700), draw) is event  # nothing due
    opened = event.advance(at(-600), draw)
    assert (opened.phase, opened.revision, opened.deal_codes) == (Phase.OPEN, 1, ())

    def no_draw(cells: int, deals: int) -> tuple[str, ...]:
        raise AssertionError("no draw before the start")

    assert opened.advance(at(-1), no_draw) is opened
    running = opened.advance(T0, draw)
    assert (running.phase, running.revision, running.started_at) == (Phase.RUNNING, 2, T0)
    assert running.deal_code(1) == draw(8, 20)[0] and running.deal_code(20) == draw(8, 20)[19]
    assert running.deal_code(21) is None and running.deal_code(0) is None
    assert running.advance(at(10), no_draw) is running  # drawn once
    review = running.advance(END, no_draw)
    assert (review.phase, review.deal_codes) == (Phase.REVIEW, running.deal_codes)
    final = review.advance(END + dt.timedelta(seconds=600), no_draw)
    assert final.phase is Phase.FINAL and final.advance(END + dt.timedelta(days=9), no_draw) is final


def test_a_start_missed_by_less_than_half_its_time_starts_late_and_keeps_its_end() -> None:
    event = Event.planned("e1", plan(), at(-1000))
    late = event.advance(at(1800), draw)  # exactly half of the hour: still started
    assert (late.phase, late.started_at, late.ends_at, late.revision) == (Phase.RUNNING, at(1800), END, 1)


@pytest.mark.parametrize("when", [at(1801), END, END + dt.timedelta(days=1)])
def test_a_start_missed_by_more_than_half_cancels_it(when: dt.datetime) -> None:
    cancelled = Event.planned("e1", plan(), at(-1000)).advance(when, draw)
    assert (cancelled.phase, cancelled.cancel_reason, cancelled.deal_codes) == (
        Phase.CANCELLED,
        "missed_start",
        (),
    )
    assert cancelled.advance(when + dt.timedelta(days=1), draw) is cancelled


def test_a_missed_end_ends_it_when_taken_up() -> None:
    running = Event.planned("e1", plan(), at(-1000)).advance(T0, draw)
    assert running.advance(END + dt.timedelta(seconds=60), draw).phase is Phase.REVIEW
    assert running.advance(END + dt.timedelta(days=1), draw).phase is Phase.FINAL


def test_cancel_once() -> None:
    cancelled = Event.planned("e1", plan(), at(-1000)).cancel("operator")
    assert cancelled.phase is Phase.CANCELLED
    with pytest.raises(Refusal, match="cancelled already"):
        cancelled.cancel("again")


@pytest.mark.parametrize(
    ("now", "entrants", "refusal"),
    [
        (at(-601), 0, "entry opens"),
        (at(1800), 0, "entry closed"),  # closes_at itself is closed
        (at(100), 1000, "full"),
        (END, 0, "over"),
    ],
)
def test_entry_refused(now: dt.datetime, entrants: int, refusal: str) -> None:
    event = Event.planned("e1", plan(), at(-1000)).advance(min(now, T0), draw)
    with pytest.raises(Refusal, match=refusal) as refused:
        event.check_entry(now, entrants)
    assert refused.value.code is ErrorCode.ILLEGAL_MOVE


def test_entry_open_before_and_after_the_start() -> None:
    event = Event.planned("e1", plan(), at(-1000))
    event.check_entry(at(-600), 0)
    event.check_entry(at(1799), 999)


# ----------------------------------------------------------------------------------- standings


def entry(n: int, points: int = 0, wins: int = 0, win_ms: int = 0, reached: float | None = None) -> Entry:
    reached_at = None if reached is None else at(reached)
    return Entry(
        PlayerRef.of(f"p{n}", f"P{n}", bot=False), n, Figures(points, wins, win_ms, reached_at, wins, 0)
    )


def test_the_order_and_its_tie_breaks() -> None:
    standings = Standings.of(
        [
            entry(1, 4, 2, 500, 50),
            entry(2, 4, 2, 400, 60),  # faster wins beat the earlier arrival
            entry(3, 4, 1, 100, 10),  # fewer wins
            entry(4, 6, 2, 900, 90),  # most points
            entry(5, 4, 2, 400, 55),  # same wins and time, reached first
            entry(6),
            entry(7),  # equal on everything: a shared place, listed in entry order
        ]
    )
    assert [row.player.id for row in standings.rows()] == ["p4", "p5", "p2", "p1", "p3", "p6", "p7"]
    assert [row.place for row in standings.rows()] == [1, 2, 3, 4, 5, 6, 6]
    assert [row.position for row in standings.rows()] == [1, 2, 3, 4, 5, 6, 7]
    assert standings.places()["p7"] == 6


def test_a_point_reached_beats_none() -> None:
    standings = Standings.of([entry(1, 1, 0, 0, None), entry(2, 1, 0, 0, 3000)])
    assert [row.player.id for row in standings.rows()] == ["p2", "p1"]


def test_pages_and_around_me() -> None:
    standings = Standings.of(entry(n, points=100 - n) for n in range(1, 26))
    rows, following = standings.page(0, 10)
    assert [row.position for row in rows] == list(range(1, 11)) and following == 10
    rows, following = standings.page(20, 10)
    assert [row.position for row in rows] == list(range(21, 26)) and following is None
    assert standings.page(30, 10) == ((), None)
    assert [row.position for row in standings.around("p1", 2)] == [1, 2, 3]
    assert [row.position for row in standings.around("p13", 2)] == [11, 12, 13, 14, 15]
    assert [row.position for row in standings.around("p25", 2)] == [23, 24, 25]
    assert standings.around("nobody", 2) == ()


def test_a_change_is_the_next_version_and_its_diff_is_the_rows_that_moved() -> None:
    old = Standings.of([entry(1, 4), entry(2, 2), entry(3, 0), entry(4, 0)], version=7)
    assert old.with_entries([old.ranked[0]]) is old  # no change, no version
    new = old.with_entries([entry(3, 6), entry(5)])
    assert new.version == 8 and len(new) == 5
    diff = new.diff(old)
    assert (diff.since, diff.version, diff.removed) == (7, 8, ())
    assert {row.player.id: (row.position, row.place) for row in diff.rows} == {
        "p3": (1, 1),
        "p1": (2, 2),
        "p2": (3, 3),
        "p4": (4, 4),  # the same position, one place down
        "p5": (5, 4),  # joins after p4, sharing its place
    }
    assert new.diff(new).rows == ()


def test_a_void_lists_the_entrant_last_without_a_place() -> None:
    standings = Standings.of([entry(1, 9), entry(2, 4), entry(3, 4)]).void("p1")
    assert [(row.player.id, row.place, row.voided) for row in standings.rows()] == [
        ("p2", 1, False),
        ("p3", 1, False),
        ("p1", None, True),
    ]
    assert "p1" not in standings.places() and standings.place_of("p1") is None
    with pytest.raises(Refusal) as refused:
        standings.void("nobody")
    assert refused.value.code is ErrorCode.NOT_FOUND


figures = st.builds(
    Figures,
    st.integers(0, 12),
    st.integers(0, 4),
    st.sampled_from([0, 1000, 2000]),
    st.one_of(st.none(), st.sampled_from([at(10), at(20)])),
    st.just(0),
    st.just(0),
)


@st.composite
def entries(draw: st.DrawFn) -> list[Entry]:
    drawn = draw(st.lists(figures, min_size=1, max_size=40))
    return [Entry(PlayerRef.of(f"p{n}", f"P{n}", bot=False), n, f) for n, f in enumerate(drawn, 1)]


def reference_places(listed: list[Entry]) -> dict[str, int]:
    """Places from scratch: one more than the number of entrants strictly better."""
    return {e.player.id: 1 + sum(o.merit() < e.merit() for o in listed if o is not e) for e in listed}


@settings(max_examples=60, deadline=None)
@given(entries(), st.data())
def test_positions_are_a_permutation_and_places_agree_with_merit(
    listed: list[Entry], data: st.DataObject
) -> None:
    order = data.draw(st.permutations(listed))
    standings = Standings.of(order)
    rows = standings.rows()
    assert sorted(row.position for row in rows) == list(range(1, len(listed) + 1))
    assert standings.places() == reference_places(listed)
    # built at once or one entry at a time: the same listing
    one_by_one = Standings()
    for e in order:
        one_by_one = one_by_one.with_entries([e])
    assert one_by_one.rows() == rows and one_by_one.version == len(listed)


@settings(max_examples=60, deadline=None)
@given(entries(), st.data())
def test_a_void_re_ranks_as_if_the_entrant_had_not_played(listed: list[Entry], data: st.DataObject) -> None:
    voided = data.draw(st.sampled_from(listed))
    standings = Standings.of(listed).void(voided.player.id)
    others = [e for e in listed if e is not voided]
    assert standings.places() == reference_places(others)
    assert standings.rows()[-1].player.id == voided.player.id
    replayed = Standings.of(others)
    diff = standings.diff(Standings.of(listed))
    assert {row.player.id for row in diff.rows} >= {voided.player.id}
    assert [row[:2] for row in standings.rows()[:-1]] == [row[:2] for row in replayed.rows()]


@settings(max_examples=40, deadline=None)
@given(entries(), entries())
def test_a_diff_brings_a_follower_from_one_version_to_the_next(
    first: list[Entry], second: list[Entry]
) -> None:
    old = Standings.of(first)
    changed = [dataclasses.replace(e, number=e.number + 100) for e in second]
    new = old.with_entries(changed)
    diff = new.diff(old)
    kept = {row.player.id: row for row in old.rows()}
    kept.update({row.player.id: row for row in diff.rows})
    for player in diff.removed:
        kept.pop(player)
    assert sorted(kept.values()) == sorted(new.rows())
