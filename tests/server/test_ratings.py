"""`server.play.race.ratings`: a race of N is one OpenSkill match of N, ties included; pure."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.play.race.ratings import (
    NEWCOMER,
    Placement,
    RatedRace,
    Rating,
    RatingChange,
    rate_race,
    rated_race,
    shown_rating,
)


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
