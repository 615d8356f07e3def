"""`server.play.race.matchmaking`: quick match's rules, from command lists and pools alone (no loop):
the `Matchmaker` state machine, and `form_races`, the function every process runs on the shared pool."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.play.race.matchmaking import FormRace, Matchmaker, MatchRules, Waiting, form_races

RULES = MatchRules(band=100, widening=10, enough=3, max_players=4, wait=30)


@dataclass(frozen=True)
class Enqueue:
    player: str
    rating: float
    at: float
    cells: int = 8


@dataclass(frozen=True)
class Leave:
    player: str


@dataclass(frozen=True)
class Tick:
    at: float


Command = Enqueue | Leave | Tick


def run(
    commands: list[Command], rules: MatchRules = RULES
) -> tuple[list[tuple[float, int, list[str]]], Matchmaker]:
    """Every race formed, as (time, cells, players anchor first), and the matchmaker after."""
    matchmaker = Matchmaker(rules)
    formed: list[FormRace] = []
    for command in commands:
        if isinstance(command, Enqueue):
            formed += matchmaker.enqueue(command.player, command.rating, command.cells, command.at)
        elif isinstance(command, Leave):
            matchmaker.leave(command.player)
        else:
            formed += matchmaker.tick(command.at)
    return [(race.at, race.cells, [seat.player for seat in race.players]) for race in formed], matchmaker


CASES: list[tuple[str, list[Any], list[tuple[float, int, list[str]]], list[str]]] = [
    ("one player waits", [Enqueue("a", 1000, 0), Tick(29)], [], ["a"]),
    (
        "enough players near each other start at once",
        [Enqueue("a", 1000, 0), Enqueue("b", 1050, 1), Enqueue("c", 950, 2)],
        [(2, 8, ["a", "b", "c"])],
        [],
    ),
    (
        "a player out of the band keeps waiting",
        [Enqueue("a", 1000, 0), Enqueue("b", 1050, 0), Enqueue("far", 1500, 0)],
        [],
        ["a", "b", "far"],
    ),
    (
        "the band widens with waiting: 100 + 10 a second reaches 1200 after 10 s",
        [Enqueue("a", 1000, 0), Enqueue("b", 1000, 0), Enqueue("c", 1200, 0), Tick(9.9), Tick(10)],
        [(10, 8, ["a", "b", "c"])],
        [],
    ),
    (
        "at the wait limit a player races whoever waits, far or not, even below enough",
        [Enqueue("a", 1000, 0), Enqueue("far", 2500, 5), Tick(29.9), Tick(30)],
        [(30, 8, ["a", "far"])],
        [],
    ),
    (
        "alone at the wait limit: it keeps waiting",
        [Enqueue("a", 1000, 0), Tick(30), Tick(100)],
        [],
        ["a"],
    ),
    (
        "variants never mix",
        [Enqueue("a", 1000, 0, 8), Enqueue("b", 1000, 0, 4), Enqueue("c", 1000, 0, 8), Tick(31)],
        [(31, 8, ["a", "c"])],
        ["b"],
    ),
    (
        "at the wait limit a race takes max_players at most, the nearest first; the rest race too",
        [Enqueue(p, r, 0) for p, r in [("a", 1000), ("b", 1500), ("c", 2000), ("d", 2500), ("e", 3000)]]
        + [Enqueue("f", 1300, 0), Tick(30)],
        [(30, 8, ["a", "f", "b", "c"]), (30, 8, ["d", "e"])],
        [],
    ),
    (
        "the oldest player is served first",
        [Enqueue("old", 1000, 0), Enqueue("b", 1150, 10), Enqueue("c", 1240, 10), Enqueue("d", 1100, 11)],
        [(11, 8, ["old", "d", "b"])],
        ["c"],
    ),
    (
        "a younger group forms when the oldest can't",
        [Enqueue("old", 3000, 0), Enqueue("b", 1000, 1), Enqueue("c", 1010, 1), Enqueue("d", 1020, 2)],
        [(2, 8, ["b", "c", "d"])],
        ["old"],
    ),
    (
        "a player who left is matched with nobody",
        [Enqueue("a", 1000, 0), Enqueue("b", 1000, 0), Leave("b"), Enqueue("c", 1000, 1), Tick(30)],
        [(30, 8, ["a", "c"])],
        [],
    ),
    (
        "asking again keeps the place",
        [Enqueue("a", 1000, 0), Enqueue("a", 1000, 20), Enqueue("b", 5000, 25), Tick(30)],
        [(30, 8, ["a", "b"])],
        [],
    ),
    (
        "asking for another variant starts the wait anew there",
        [Enqueue("a", 1000, 0, 8), Enqueue("a", 1000, 20, 4), Enqueue("b", 5000, 25, 4), Tick(30), Tick(50)],
        [(50, 4, ["a", "b"])],
        [],
    ),
]


@pytest.mark.parametrize(
    ("commands", "races", "left"), [case[1:] for case in CASES], ids=[c[0] for c in CASES]
)
def test_matchmaker_table(
    commands: list[Command], races: list[tuple[float, int, list[str]]], left: list[str]
) -> None:
    formed, matchmaker = run(commands)
    assert formed == races
    assert sorted(w.player for w in matchmaker.waiting()) == sorted(left)


def test_matchmaker_leave_says_whether_the_player_waited() -> None:
    matchmaker = Matchmaker(RULES)
    matchmaker.enqueue("a", 1000, 8, 0)
    assert matchmaker.is_waiting("a")
    assert matchmaker.leave("a") is True
    assert matchmaker.leave("a") is False
    assert not matchmaker.is_waiting("a")


def test_matchmaker_refuses_time_going_back_and_bad_ratings() -> None:
    """Bad input tried: a tick earlier than the last command, an enqueue earlier still, ratings NaN
    and infinite."""
    matchmaker = Matchmaker(RULES)
    matchmaker.tick(10)
    with pytest.raises(ValueError, match="time went back"):
        matchmaker.tick(9)
    with pytest.raises(ValueError, match="time went back"):
        matchmaker.enqueue("a", 1000, 8, 5)
    for rating in (math.nan, math.inf):
        with pytest.raises(ValueError, match="not a finite number"):
            matchmaker.enqueue("a", rating, 8, 11)
    assert matchmaker.waiting() == ()


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ({"band": -1}, "band"),
        ({"band": math.nan}, "band"),
        ({"widening": -0.5}, "widening"),
        ({"max_players": 1}, "max_players"),
        ({"max_players": 9}, "max_players"),
        ({"enough": 1}, "enough"),
        ({"enough": 5, "max_players": 4}, "enough"),
        ({"wait": 0}, "wait"),
        ({"wait": math.inf}, "wait"),
    ],
)
def test_match_rules_refuse_bad_parameters(rules: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MatchRules(**rules)  # type: ignore[arg-type]


def test_waiting_band_widens_then_is_unlimited() -> None:
    waiting = Waiting("a", 1000, 8, since=10)
    assert waiting.band(RULES, 10) == 100
    assert waiting.band(RULES, 15) == 150
    assert waiting.band(RULES, 40) == math.inf
    assert waiting.band(RULES, 9.5) == 100  # another process's clock a little ahead: no wait yet


def test_form_races_changes_nothing_and_refuses_a_player_twice() -> None:
    """The pool's rows go in as they were read; the caller seats the players of what comes out."""
    pool = [Waiting("a", 1000, 8, 0), Waiting("b", 1020, 8, 1), Waiting("c", 1040, 8, 2)]
    before = list(pool)
    assert form_races(pool, 2, RULES) == [FormRace(8, (pool[0], pool[1], pool[2]), 2)]
    assert form_races(pool, 2, RULES) == form_races(tuple(pool), 2, RULES)
    assert pool == before
    with pytest.raises(ValueError, match="a waits twice"):
        form_races([*pool, Waiting("a", 1000, 4, 3)], 3, RULES)


# --------------------------------------------------------------------------- properties

commands = st.lists(
    st.one_of(
        st.builds(
            Enqueue,
            player=st.sampled_from([f"p{i}" for i in range(12)]),
            rating=st.integers(min_value=500, max_value=2500).map(float),
            at=st.just(0.0),
            cells=st.sampled_from([8, 4, 2]),
        ),
        st.builds(Leave, player=st.sampled_from([f"p{i}" for i in range(12)])),
        st.builds(Tick, at=st.just(0.0)),
    ),
    max_size=60,
)
steps = st.lists(st.floats(min_value=0, max_value=8), min_size=60, max_size=60)
rules = st.builds(
    MatchRules,
    band=st.floats(min_value=0, max_value=300),
    widening=st.floats(min_value=0, max_value=50),
    enough=st.integers(min_value=2, max_value=4),
    max_players=st.integers(min_value=4, max_value=8),
    wait=st.floats(min_value=1, max_value=60),
)


@settings(max_examples=300)
@given(script=commands, gaps=steps, rules=rules)
def test_matchmaker_properties(script: list[Command], gaps: list[float], rules: MatchRules) -> None:
    """No player in two races (nor waiting and seated), every race within its anchor's band when it
    formed, of one variant, 2..max_players seats, and after every command nobody waits past the
    limit while another player of its variant waits."""
    matchmaker = Matchmaker(rules)
    now = 0.0
    seated: set[str] = set()
    since: dict[str, float] = {}
    for command, gap in zip(script, gaps, strict=False):
        if isinstance(command, Enqueue) and command.player in seated:
            continue  # a seated player races; the shell does not queue it again meanwhile
        if not isinstance(command, Leave):  # a leave takes no time: the shell ticks on
            now += gap
        if isinstance(command, Enqueue):
            known = next((w for w in matchmaker.waiting() if w.player == command.player), None)
            if known is None or known.cells != command.cells:
                since[command.player] = now
            formed = matchmaker.enqueue(command.player, command.rating, command.cells, now)
        elif isinstance(command, Leave):
            matchmaker.leave(command.player)
            formed = []
        else:
            formed = matchmaker.tick(now)
        for race in formed:
            players = [seat.player for seat in race.players]
            assert 2 <= len(players) <= rules.max_players
            assert not seated & set(players) and len(set(players)) == len(players)
            seated |= set(players)
            anchor = race.players[0]
            assert anchor.since == since[anchor.player]
            for seat in race.players:
                assert seat.cells == race.cells
                assert abs(seat.rating - anchor.rating) <= anchor.band(rules, now)
        waiting = matchmaker.waiting()
        assert not seated & {w.player for w in waiting}
        for cells in {w.cells for w in waiting}:
            of_variant = [w for w in waiting if w.cells == cells]
            if len(of_variant) >= 2:
                assert all(now - w.since < rules.wait for w in of_variant)


def oracle_races(waiting: list[Waiting], rules: MatchRules, now: float) -> list[FormRace]:
    """The rules of the module docstring, as plainly as they read (every anchor against every
    player): the oracle `Matchmaker`'s bisection must agree with."""
    waiting = list(waiting)
    formed: list[FormRace] = []
    while True:
        for anchor in waiting:
            band = anchor.band(rules, now)
            near = sorted(
                (
                    other
                    for other in waiting
                    if other.cells == anchor.cells
                    and other.player != anchor.player
                    and abs(other.rating - anchor.rating) <= band
                ),
                key=lambda other: (abs(other.rating - anchor.rating), other.since),
            )
            group = (anchor, *near[: rules.max_players - 1])
            if len(group) >= rules.enough or (band == math.inf and len(group) >= 2):
                formed.append(FormRace(anchor.cells, group, now))
                waiting = [w for w in waiting if w not in group]
                break
        else:
            return formed


@settings(max_examples=300)
@given(
    script=commands,
    gaps=steps,
    rules=rules,
    ratings=st.lists(st.sampled_from([900.0, 1000.0, 1000.0, 1100.0])),
)
def test_matchmaker_agrees_with_the_plain_rules(
    script: list[Command], gaps: list[float], rules: MatchRules, ratings: list[float]
) -> None:
    """The same script through the matchmaker and through the oracle forms the same races; equal
    ratings (many ties of distance) and exact band edges included."""
    matchmaker = Matchmaker(rules)
    now = 0.0
    for index, (command, gap) in enumerate(zip(script, gaps, strict=False)):
        if isinstance(command, Leave):
            matchmaker.leave(command.player)
            continue
        now += gap
        before = list(matchmaker.waiting())
        if isinstance(command, Enqueue):
            rating = ratings[index] if index < len(ratings) else command.rating
            known = next((w for w in before if w.player == command.player), None)
            if known is None or known.cells != command.cells:
                before = [w for w in before if w.player != command.player]
                before.append(Waiting(command.player, rating, command.cells, now))
            formed = matchmaker.enqueue(command.player, rating, command.cells, now)
        else:
            formed = matchmaker.tick(now)
        assert formed == oracle_races(before, rules, now)


pools = st.lists(
    st.tuples(
        st.sampled_from([900.0, 1000.0, 1050.0, 1100.0, 1500.0, 2500.0]),
        st.sampled_from([8, 4, 2]),
        st.floats(min_value=0, max_value=60),
    ),
    max_size=24,
)


@settings(max_examples=300)
@given(pool=pools, now=st.floats(min_value=0, max_value=90), rules=rules)
def test_form_races_agrees_with_the_plain_rules_on_any_pool(
    pool: list[tuple[float, int, float]], now: float, rules: MatchRules
) -> None:
    """Any pool, as rows read oldest first (some ``since`` after ``now``: other processes' clocks),
    forms what the oracle forms, and what a `Matchmaker` that saw those players come forms."""
    waiting = [
        Waiting(f"p{i}", rating, cells, since)
        for i, (rating, cells, since) in enumerate(sorted(pool, key=lambda row: row[2]))
    ]
    formed = form_races(waiting, now, rules)
    assert formed == oracle_races(waiting, rules, now)
    matchmaker = Matchmaker(rules)
    came = []
    for player in waiting:
        if player.since <= now:
            came += matchmaker.enqueue(player.player, player.rating, player.cells, player.since)
    if not came and all(player.since <= now for player in waiting):
        assert matchmaker.tick(now) == formed
