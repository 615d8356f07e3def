"""`server.play.race.ratings`: a race of N is one OpenSkill match of N, ties included; pure."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.play.race.ratings import (
    ESTABLISHED_NETWORKS,
    MEETINGS_PER_DAY,
    NEWCOMER,
    FarmGuard,
    Placement,
    RatedRace,
    Rating,
    RatingChange,
    meetings_of,
    network_of,
    rate_race,
    rated_players,
    rated_race,
    shown_rating,
)
from server.storage.records import RaceRecord, RaceSeatRecord


def by_player(changes: tuple[RatingChange, ...]) -> dict[str, RatingChange]:
    return {change.player_id: change for change in changes}


def test_rate_race_two_newcomers_the_winner_gains_what_the_loser_loses() -> None:
    changes = by_player(rate_race([Placement("ann", 1), Placement("bo", 2)], {}))
    ann, bo = changes["ann"], changes["bo"]
    assert ann.before == bo.before == NEWCOMER
    assert ann.after.mu > NEWCOMER.mu > bo.after.mu
    assert ann.after.mu - NEWCOMER.mu == pytest.approx(NEWCOMER.mu - bo.after.mu)
    assert ann.after.sigma < NEWCOMER.sigma and bo.after.sigma < NEWCOMER.sigma
    assert ann.after.races == bo.after.races == 1
    assert ann.after.display > NEWCOMER.display == 1000
    assert (ann.place, bo.place) == (1, 2)


def test_rate_race_eight_players_the_better_place_the_higher_rating() -> None:
    seats = [Placement(f"p{place}", place) for place in range(1, 9)]
    changes = rate_race(seats, {})
    assert [change.player_id for change in changes] == [seat.player_id for seat in seats]
    mus = [change.after.mu for change in changes]
    assert mus == sorted(mus, reverse=True) and len(set(mus)) == 8
    assert changes[0].after.mu > NEWCOMER.mu > changes[-1].after.mu
    assert all(change.after.sigma < NEWCOMER.sigma for change in changes)


def test_rate_race_tied_players_of_equal_ratings_end_equal() -> None:
    changes = by_player(rate_race([Placement("ann", 1), Placement("bo", 2), Placement("cy", 2)], {}))
    assert changes["bo"].after == changes["cy"].after
    assert changes["ann"].after.mu > NEWCOMER.mu > changes["bo"].after.mu


def test_rate_race_all_tied_keeps_equal_skills_and_makes_them_surer() -> None:
    changes = rate_race([Placement(name, 1) for name in ("ann", "bo", "cy", "di")], {})
    for change in changes:
        assert change.after.mu == pytest.approx(NEWCOMER.mu)
        assert change.after.sigma < NEWCOMER.sigma
        assert change.after.races == 1


def test_rate_race_all_tied_pulls_unequal_skills_together() -> None:
    strong, weak = Rating(32.0, 2.0, 40), Rating(18.0, 2.0, 40)
    changes = by_player(rate_race([Placement("ann", 1), Placement("bo", 1)], {"ann": strong, "bo": weak}))
    assert changes["ann"].after.mu < strong.mu
    assert changes["bo"].after.mu > weak.mu


def test_rate_race_a_newcomer_moves_far_a_veteran_little() -> None:
    veteran = Rating(mu=30.0, sigma=1.5, races=200)
    current = {"vet1": veteran, "vet2": veteran}
    changes = by_player(rate_race([Placement("new", 1), Placement("vet1", 2), Placement("vet2", 3)], current))
    new, vet = changes["new"], changes["vet1"]
    assert new.before == NEWCOMER and vet.before == veteran
    assert new.after.mu - new.before.mu > 5 * abs(vet.after.mu - vet.before.mu)
    assert new.after.races == 1 and vet.after.races == 201


def test_rate_race_an_upset_moves_more_than_the_expected_result() -> None:
    strong, weak = Rating(35.0, 3.0, 50), Rating(15.0, 3.0, 50)
    current = {"strong": strong, "weak": weak}
    expected = by_player(rate_race([Placement("strong", 1), Placement("weak", 2)], current))
    upset = by_player(rate_race([Placement("weak", 1), Placement("strong", 2)], current))
    gain_expected = expected["strong"].after.mu - strong.mu
    gain_upset = upset["weak"].after.mu - weak.mu
    assert gain_upset > 3 * gain_expected > 0


def test_rate_race_unrated_seats_are_left_out() -> None:
    """A bot between two people changes nothing of their ratings: they are rated among themselves."""
    with_bot = rate_race([Placement("ann", 1), Placement("bot", 2, rated=False), Placement("bo", 3)], {})
    without = rate_race([Placement("ann", 1), Placement("bo", 2)], {})
    assert [change.player_id for change in with_bot] == ["ann", "bo"]
    assert [change.after for change in with_bot] == [change.after for change in without]


@pytest.mark.parametrize(
    "placements",
    [
        [],
        [Placement("ann", 1)],
        [Placement("ann", 1), Placement("bot", 2, rated=False)],
        [Placement("bot1", 1, rated=False), Placement("bot2", 2, rated=False)],
    ],
)
def test_rate_race_fewer_than_two_rated_changes_nothing(placements: list[Placement]) -> None:
    assert rate_race(placements, {"ann": Rating(30.0, 2.0, 9)}) == ()


def test_rate_race_only_the_order_of_places_counts() -> None:
    spaced = rate_race([Placement("ann", 3), Placement("bo", 7), Placement("cy", 7)], {})
    packed = rate_race([Placement("ann", 1), Placement("bo", 2), Placement("cy", 2)], {})
    assert [change.after for change in spaced] == [change.after for change in packed]


@pytest.mark.parametrize(
    ("placements", "message"),
    [
        ([Placement("ann", 1), Placement("ann", 2)], "two seats"),
        ([Placement("bot", 1, rated=False), Placement("bot", 2, rated=False)], "two seats"),
        ([Placement("ann", 0), Placement("bo", 1)], "places start at 1"),
        ([Placement("ann", 1), Placement("bo", -3)], "places start at 1"),
    ],
)
def test_rate_race_refuses_bad_placements(placements: list[Placement], message: str) -> None:
    """Bad input tried: a player seated twice (rated or not), a place of 0, a negative place."""
    with pytest.raises(ValueError, match=message):
        rate_race(placements, {})


def test_rate_race_leaves_its_inputs_alone() -> None:
    current = {"ann": Rating(28.0, 4.0, 3)}
    rate_race([Placement("ann", 2), Placement("bo", 1)], current)
    assert current == {"ann": Rating(28.0, 4.0, 3)}


def test_rated_race_is_the_stored_value_of_rate_race() -> None:
    at = dt.datetime(2026, 12, 2, 5, 0, tzinfo=dt.UTC)
    seats = [Placement("ann", 2), Placement("bo", 1)]
    current = {"ann": Rating(27.0, 5.0, 4)}
    assert rated_race("race-1", 4, seats, current, at) == RatedRace(
        "race-1", 4, rate_race(seats, current), at
    )


def test_shown_rating_of_a_newcomer_and_of_a_rated_player() -> None:
    assert shown_rating(None) == NEWCOMER.display == 1000
    assert shown_rating(Rating(30.0, 2.0, 12)) == 1000 + 40 * 24


ratings = st.builds(
    Rating,
    mu=st.floats(min_value=-10.0, max_value=60.0),
    sigma=st.floats(min_value=0.05, max_value=NEWCOMER.sigma),
    races=st.integers(min_value=0, max_value=10_000),
)


@given(winner=ratings, loser=ratings)
def test_rate_race_the_winner_of_two_never_loses_rating(winner: Rating, loser: Rating) -> None:
    changes = by_player(rate_race([Placement("w", 1), Placement("l", 2)], {"w": winner, "l": loser}))
    assert changes["w"].after.mu >= winner.mu
    assert changes["w"].after.display >= winner.display
    assert changes["l"].after.mu <= loser.mu  # (its shown rating may still rise: its sigma shrank)


@given(
    seats=st.lists(
        st.tuples(ratings, st.integers(min_value=1, max_value=8), st.booleans()), min_size=2, max_size=8
    )
)
def test_rate_race_sigma_never_grows(seats: list[tuple[Rating, int, bool]]) -> None:
    placements = [Placement(f"p{i}", place, rated) for i, (_, place, rated) in enumerate(seats)]
    current = {f"p{i}": rating for i, (rating, _, _) in enumerate(seats)}
    changes = rate_race(placements, current)
    rated = sum(rated for _, _, rated in seats)
    assert len(changes) == (rated if rated >= 2 else 0)
    for change in changes:
        assert change.before == current[change.player_id]
        assert change.after.sigma <= change.before.sigma
        assert change.after.races == change.before.races + 1


# ---------------------------------------------------------------------- farming (FarmGuard)


def seat(
    number: int, network: str | None, place: int | None = None, bot: bool = False, unplaced: bool = False
) -> RaceSeatRecord:
    """Seat ``number`` of player ``p<number>`` on ``network``, placed ``place`` (its number if not
    said), or without a place."""
    placed = None if unplaced else number if place is None else place
    return RaceSeatRecord(
        number, f"p{number}", f"p{number}", bot, None, "won", 0, 0, 0, 0, placed, network=network
    )


OPEN = FarmGuard(distinct_networks=False, meetings_per_day=None, established_networks=None)


@pytest.mark.parametrize(
    ("seats", "meetings", "guard", "networks_met", "rated"),
    [
        ([seat(1, "a"), seat(2, "b")], {}, FarmGuard(established_networks=None), {}, {"p1", "p2"}),
        # one network: nobody of it is rated, whatever its place
        ([seat(1, "a"), seat(2, "a")], {}, FarmGuard(established_networks=None), {}, set()),
        (
            [seat(1, "a"), seat(2, "a"), seat(3, "b"), seat(4, "c")],
            {},
            FarmGuard(established_networks=None),
            {},
            {"p3", "p4"},
        ),
        # an unknown network could be anyone's
        (
            [seat(1, None), seat(2, "b"), seat(3, "c")],
            {},
            FarmGuard(established_networks=None),
            {},
            {"p2", "p3"},
        ),
        # "any": one network rates
        ([seat(1, "a"), seat(2, "a")], {}, OPEN, {}, {"p1", "p2"}),
        # bots are never rated, and share no network with anyone
        (
            [seat(1, "a"), seat(2, "a", bot=True), seat(3, "b")],
            {},
            FarmGuard(established_networks=None),
            {},
            {"p1", "p3"},
        ),
        # a seat without a place (none is stored for a race not finished) is not rated
        ([seat(1, "a"), seat(2, "b", unplaced=True), seat(3, "c")], {}, OPEN, {}, {"p1", "p3"}),
        # the day's meetings: a and b met 3 times, b is dropped, c is rated against a
        (
            [seat(1, "a"), seat(2, "b"), seat(3, "c")],
            {frozenset("ab"): 3},
            FarmGuard(established_networks=None),
            {},
            {"p1", "p3"},
        ),
        (
            [seat(1, "a"), seat(2, "b")],
            {frozenset("ab"): 2},
            FarmGuard(established_networks=None),
            {},
            {"p1", "p2"},
        ),
        # best place first: with b placed first, it is a that is dropped
        (
            [seat(1, "a", place=2), seat(2, "b", place=1), seat(3, "c", place=3)],
            {frozenset("ab"): 3},
            FarmGuard(established_networks=None),
            {},
            {"p2", "p3"},
        ),
        ([seat(1, "a"), seat(2, "b")], {frozenset("ab"): 30}, OPEN, {}, {"p1", "p2"}),
        # established: two players of at least 5 networks met, or nobody is rated
        ([seat(1, "a"), seat(2, "b")], {}, FarmGuard(), {"p1": 5, "p2": 4}, set()),
        ([seat(1, "a"), seat(2, "b")], {}, FarmGuard(), {"p1": 5, "p2": 9}, {"p1", "p2"}),
        ([seat(1, "a"), seat(2, "b"), seat(3, "c")], {}, FarmGuard(), {"p1": 5, "p3": 5}, {"p1", "p2", "p3"}),
        # the established pair must survive the other rules
        ([seat(1, "a"), seat(2, "a"), seat(3, "c")], {}, FarmGuard(), {"p1": 5, "p2": 5, "p3": 0}, set()),
    ],
)
def test_rated_players(
    seats: list[RaceSeatRecord],
    meetings: dict[frozenset[str], int],
    guard: FarmGuard,
    networks_met: dict[str, int],
    rated: set[str],
) -> None:
    assert rated_players(seats, meetings, guard, networks_met) == rated


def test_the_guards_defaults_are_the_documented_numbers() -> None:
    guard = FarmGuard()
    assert (guard.distinct_networks, guard.meetings_per_day, guard.established_networks) == (True, 3, 5)
    assert (MEETINGS_PER_DAY, ESTABLISHED_NETWORKS) == (3, 5)


def test_meetings_count_each_pair_of_networks_once_a_race() -> None:
    assert meetings_of([["a", "b", "c"], ["b", "a", "a"], ["c"], []]) == {
        frozenset("ab"): 2,
        frozenset("ac"): 1,
        frozenset("bc"): 1,
    }


def test_a_network_is_kept_as_a_digest() -> None:
    digest = network_of("203.0.113.7")
    assert digest is not None and len(digest) == 16 and int(digest, 16) >= 0
    assert "203" not in digest and digest == network_of("203.0.113.7") != network_of("203.0.113.8")
    assert network_of("") is None


def test_the_guard_rates_the_race_of_its_rated_players_only() -> None:
    at = dt.datetime(2026, 12, 7, tzinfo=dt.UTC)
    race = RaceRecord(
        id="r1",
        code="CODE",
        creator_id="p1",
        cells=8,
        seats=3,
        time_limit_s=60,
        public=True,
        state="finished",
        deal_code="unused",
        created_at=at,
        starts_at=at,
        ends_at=at,
        finished_at=at,
        seated=(seat(1, "a"), seat(2, "b"), seat(3, "b")),
        revision=9,
    )
    rated = FarmGuard(established_networks=None)(race, {}, [], {})
    assert [change.player_id for change in rated.changes] == []  # b twice: only a is left
    rated = FarmGuard(established_networks=None)(
        dataclasses.replace(race, seated=(seat(1, "a"), seat(2, "b"), seat(3, "c"))), {}, [["a", "c"]] * 3, {}
    )
    assert rated.changes == rate_race([Placement("p1", 1), Placement("p2", 2)], {})
    assert FarmGuard().meetings_since(race) == at - dt.timedelta(days=1)
    assert OPEN.meetings_since(race) is None
