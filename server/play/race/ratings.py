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
- **Farming is bounded by networks** (`FarmGuard`, docs/ratings.md, Farming): a seat that shares its
  network with another person's seat races unrated; two networks are rated against each other in at
  most ``meetings_per_day`` races a day; and a race rates only when two of its rated players are
  established, having finished races against people of ``established_networks`` networks other than
  their own. However many guests one player makes, its accounts on a few networks can neither
  establish one another nor make more than a few rated results a day between them.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Final, NamedTuple

from openskill.models import PlackettLuce, PlackettLuceRating

from server.storage.records import RaceRecord, RaceSeatRecord, RatedRace, Rating, RatingChange

__all__ = [
    "ESTABLISHED_NETWORKS",
    "MEETINGS_PER_DAY",
    "NEWCOMER",
    "FarmGuard",
    "Meetings",
    "Placement",
    "RatedRace",
    "Rating",
    "RatingChange",
    "meetings_of",
    "network_of",
    "rate_race",
    "rated_players",
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


#: Rated races a day in which two networks may both have a rated seat (`FarmGuard`).
MEETINGS_PER_DAY: Final = 3
#: Networks other than its own a player must have finished races against before its races rate.
ESTABLISHED_NETWORKS: Final = 5
_DAY: Final = dt.timedelta(days=1)

#: How many rated races of the last day each pair of networks met in (a pair is two digests).
Meetings = Mapping[frozenset[str], int]


def network_of(address: str) -> str | None:
    """The digest a seat keeps of the network it joined from: the per-address limits' address (an IPv6
    client's /64, the forwarded client behind a trusted proxy); None when there is none.

    A digest, not the address, so that a race's rows name no address; it is no secret either (the
    IPv4 addresses can all be tried), so the database is still personal data."""
    if not address:
        return None
    return hashlib.blake2b(address.encode(), digest_size=8, person=b"eightoff-net").hexdigest()


def meetings_of(rated_races: Iterable[Iterable[str]]) -> Counter[frozenset[str]]:
    """`Meetings` from the networks of each rated race's rated seats (a race counts once per pair)."""
    met: Counter[frozenset[str]] = Counter()
    for networks in rated_races:
        met.update(frozenset(pair) for pair in combinations(sorted(set(networks)), 2))
    return met


@dataclass(frozen=True, slots=True)
class FarmGuard:
    """Who of a finished race is rated, so that one player's accounts can't farm a rating
    (docs/ratings.md, Farming); the operator's settings ``--ratings-distinct-networks`` and
    ``--rated-meetings-per-day``.

    Attributes:
        distinct_networks: seats that share a network with another person's seat race unrated (a
            seat of unknown network too: it could be anyone's).
        meetings_per_day: two networks are rated against each other in at most this many races a day
            (None: no cap).
    """

    distinct_networks: bool = True
    meetings_per_day: int | None = MEETINGS_PER_DAY
    established_networks: int | None = ESTABLISHED_NETWORKS

    def meetings_since(self, race: RaceRecord) -> dt.datetime | None:
        """Since when the rated races that count against ``race``'s networks are read (None: none)."""
        if self.meetings_per_day is None or race.finished_at is None:
            return None
        return race.finished_at - _DAY

    def __call__(
        self,
        race: RaceRecord,
        current: Mapping[str, Rating],
        recent: Sequence[Iterable[str]],
        networks_met: Mapping[str, int],
    ) -> RatedRace:
        """A finished race's rating changes, from its stored places, the players' stored ratings, the
        networks of its seats rated in each race of the last day and how many networks each player
        has raced (the commit pipeline calls this in the race's finishing transaction:
        `server.storage.commit_backends.RaceRater`)."""
        rated = rated_players(race.seated, meetings_of(recent), self, networks_met)
        placements = [
            Placement(seat.player_id, seat.place, rated=seat.player_id in rated)
            for seat in race.seated
            if seat.place is not None
        ]
        assert race.finished_at is not None, "only a finished race is rated"
        return rated_race(race.id, race.cells, placements, current, race.finished_at)


def rated_players(
    seats: Sequence[RaceSeatRecord], meetings: Meetings, guard: FarmGuard, networks_met: Mapping[str, int]
) -> frozenset[str]:
    """The players a finished race rates: people with a place, each on a network of its own when the
    guard asks it, taken best place first while their networks have met fewer than
    ``meetings_per_day`` times in rated races of the day with every network taken before (so a seat
    dropped for the cap leaves the rest rated among themselves); and none unless two of them are
    established (``networks_met`` of at least ``established_networks``)."""
    people = [seat for seat in seats if seat.place is not None and not seat.player_bot]
    if guard.distinct_networks:
        per_network = Counter(seat.network for seat in people)
        people = [seat for seat in people if seat.network is not None and per_network[seat.network] == 1]
    taken: list[RaceSeatRecord] = []
    for seat in sorted(people, key=lambda seat: (seat.place, seat.seat)):
        if guard.meetings_per_day is None or all(
            _met(meetings, seat, other) < guard.meetings_per_day for other in taken
        ):
            taken.append(seat)
    if guard.established_networks is not None:
        established = [s for s in taken if networks_met.get(s.player_id, 0) >= guard.established_networks]
        if len(established) < 2:
            return frozenset()
    return frozenset(seat.player_id for seat in taken)


def _met(meetings: Meetings, one: RaceSeatRecord, other: RaceSeatRecord) -> int:
    if one.network is None or other.network is None or one.network == other.network:
        return 0  # unknown or one network: what distinct_networks decides
    return meetings.get(frozenset((one.network, other.network)), 0)


def shown_rating(rating: Rating | None) -> int:
    """The rating a player shows (and quick match uses): its stored one's, a newcomer's for None."""
    return (rating or NEWCOMER).display
