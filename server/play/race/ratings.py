"""Race ratings with OpenSkill (Weng-Lin, the Plackett-Luce model): pure, no I/O, no clock.

A race of N rated players is one match of N one-player teams, ranked by place; equal places are a
tie. Who is rated, and what is shown:

- **People are rated, guests included; bots race unrated.** A guest is a lasting player (its token
  keeps it, and its rating with it), so a guest's races count. A bot (``hello`` with ``bot: true``)
  ranks only on the bots' boards elsewhere; here it is simply left out: the rated players of a race
  are rated among themselves only, in the order of their places (a bot between them changes
  nothing).
- **Fewer than two rated players: no change** (a match of one says nothing about skill); the race
  still counts as a race, not as a rated one.
- **Ratings are per variant** (C8, C4 and C2 are different games): a player has up to three.
- **Shown rating**: ``round(1000 + 40 * (mu - 3 * sigma))`` (`server.storage.records.Rating.display`),
  the skill a player has with 99.7 % confidence: a newcomer (mu 25, sigma 25/3) shows 1000 and climbs
  as races make the estimate surer. Leaderboards and quick match use it.
- **Sigma never grows** (``limit_sigma``): a rated race only ever makes the estimate surer.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Final, NamedTuple

from openskill.models import PlackettLuce, PlackettLuceRating

from server.storage.records import RaceRecord, RatedRace, Rating, RatingChange

__all__ = [
    "NEWCOMER",
    "Placement",
    "RatedRace",
    "Rating",
    "RatingChange",
    "rate_race",
    "rated_race",
    "shown_rating",
]

#: The model: OpenSkill's defaults (mu 25, sigma 25/3, beta 25/6, tau 25/300), sigma never growing.
_MODEL: Final = PlackettLuce(limit_sigma=True)
#: The rating of a player with no rated race in the variant.
NEWCOMER: Final = Rating(mu=_MODEL.mu, sigma=_MODEL.sigma, races=0)


class Placement(NamedTuple):
    """One seat's result in a finished race.

    Attributes:
        player_id: the seat's player.
        place: 1 for first; seats of equal place tie (any positive integers: only their order counts).
        rated: False for a seat that races unrated (a bot).
    """

    player_id: str
    place: int
    rated: bool = True


def rate_race(placements: Sequence[Placement], current: Mapping[str, Rating]) -> tuple[RatingChange, ...]:
    """The rating changes of a finished race, one per rated seat, in the order of ``placements``.

    Args:
        placements: every seat of the race (unrated ones are skipped).
        current: the stored ratings of the rated players in the race's variant; a player missing
            from it is a newcomer (`NEWCOMER`).

    Returns:
        The changes; empty when fewer than two seats are rated.

    Raises:
        ValueError: a player seated twice, or a place below 1.
    """
    seen: set[str] = set()
    for placement in placements:
        if placement.player_id in seen:
            raise ValueError(f"player {placement.player_id} has two seats in one race")
        if placement.place < 1:
            raise ValueError(f"place {placement.place} of {placement.player_id}: places start at 1")
        seen.add(placement.player_id)
    rated = [placement for placement in placements if placement.rated]
    if len(rated) < 2:
        return ()
    before = [current.get(placement.player_id, NEWCOMER) for placement in rated]
    teams = [[_MODEL.rating(mu=rating.mu, sigma=rating.sigma)] for rating in before]
    after: list[list[PlackettLuceRating]] = _MODEL.rate(teams, ranks=[float(p.place) for p in rated])
    return tuple(
        RatingChange(
            player_id=placement.player_id,
            place=placement.place,
            before=old,
            after=Rating(mu=new.mu, sigma=new.sigma, races=old.races + 1),
        )
        for placement, old, (new,) in zip(rated, before, after, strict=True)
    )


def rated_race(
    race_id: str, cells: int, placements: Sequence[Placement], current: Mapping[str, Rating], at: dt.datetime
) -> RatedRace:
    """`rate_race`, as the value a race's result stores (`server.storage.commit_backends.StoreRatings`).

    Raises:
        ValueError: as `rate_race`.
    """
    return RatedRace(race_id=race_id, cells=cells, changes=rate_race(placements, current), at=at)


def rate_finished_race(race: RaceRecord, current: Mapping[str, Rating]) -> RatedRace:
    """A finished race's rating changes from its stored places: every seat that holds a place, bots
    unrated among the rated (the commit pipeline calls this in the race's finishing transaction)."""
    placements = [
        Placement(seat.player_id, seat.place, rated=not seat.player_bot)
        for seat in race.seated
        if seat.place is not None
    ]
    assert race.finished_at is not None, "only a finished race is rated"
    return rated_race(race.id, race.cells, placements, current, race.finished_at)


def shown_rating(rating: Rating | None) -> int:
    """The rating a player shows (and quick match uses): its stored one's, a newcomer's for None."""
    return (rating or NEWCOMER).display
