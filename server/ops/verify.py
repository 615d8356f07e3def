"""``eightoff verify``: every stored game replayed through the engine must end as stored, since only
games played on the server may count on the boards; and every stored rating must be what its races
made it (`verify_ratings`); every finished race's places follow from its seats' stored figures and
every seat's game is stored with the race's deal (`verify_races`)."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from engine import InvalidCodeError, Status
from server.play.race.places import Figures, places
from server.play.race.ratings import NEWCOMER, Placement, rate_race
from server.play.replay import UnreplayableAction, replay_stored
from server.storage import Database, StoredGame, repository
from server.storage import races as stored_races
from server.storage import ratings as stored_ratings
from server.storage.records import RaceRecord, RatedRace, Rating, RatingChange
from server.storage.unfinished import ABANDONED

__all__ = [
    "Mismatch",
    "check_finished_race",
    "check_rated_race",
    "check_rating_history",
    "check_stored_game",
    "verify_games",
    "verify_races",
    "verify_ratings",
]

_Row = TypeVar("_Row")
_Key = TypeVar("_Key")
#: A player's rating in one variant and its changes (`stored_ratings.rating_histories_after`).
_History = tuple[str, int, Rating | None, tuple[RatingChange, ...]]
#: Game id → (deal code, player, race) (`stored_races.games_of_races`).
_Games = dict[str, tuple[str, str, str | None]]


@dataclass(frozen=True, slots=True)
class Mismatch:
    """A stored game whose action log does not replay to its stored figures."""

    game_id: str
    problem: str


def check_stored_game(stored: StoredGame) -> str | None:
    """Replay a stored game as the server loads it (`server.play.replay.replay_stored`); None when it
    ends as stored, else what differs.

    Only games played on the server count on the boards: this is the check that every stored result
    is what its actions produce (`eightoff verify` runs it on every game). Every game's actions must
    replay from its deal; an unfinished game's figures (score, moves, undos) are not final, so only
    its status and cells are compared.
    """
    try:
        game = replay_stored(stored)
    except InvalidCodeError as exc:
        return f"code {stored.code!r} is not a game code: {exc}"
    except UnreplayableAction as exc:
        return str(exc)
    if stored.status == ABANDONED:  # its figures are never stored: nothing more to compare
        return None
    compared: list[tuple[str, object, object]] = [
        ("status", stored.status, game.status.value),
        ("cells", stored.cells, game.deal.cells),
    ]
    # An unfinished game's row holds its figures as of a recent action, not necessarily the last
    # (see `server.play.game_room.FIGURES_INTERVAL`): only a finished game's figures are final.
    if stored.status != Status.PLAYING.value:
        compared += [
            ("won", stored.won, game.status is Status.WON),
            ("score", stored.score, game.score),
            ("moves", stored.moves, game.moves),
            ("undos", stored.undos, game.undos),
        ]
    differences = [
        f"{name} stored {stored_value!r}, replayed {replayed!r}"
        for name, stored_value, replayed in compared
        if stored_value != replayed
    ]
    if stored.status != Status.PLAYING.value and (stored.finished_at is None or stored.duration_ms is None):
        differences.append("finished without finished_at or duration_ms")
    return "; ".join(differences) or None


async def verify_games(
    database: Database,
    *,
    batch: int = 500,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[int, list[Mismatch]]:
    """Check every stored game (`check_stored_game`), in id order, ``batch`` games per read.

    Args:
        progress: called after each batch with (games checked, games stored when the check began).

    Returns:
        The number of games checked and the mismatches found.
    """
    async with database.connection() as conn:
        total = await repository.count_games(conn)

    async def read(conn: AsyncConnection, after: str | None) -> Sequence[StoredGame]:
        return await repository.load_games_after(conn, after, batch)

    def check(stored: StoredGame) -> Mismatch | None:
        problem = check_stored_game(stored)
        return None if problem is None else Mismatch(stored.id, problem)

    shown = None if progress is None else lambda checked: progress(checked, total)
    return await _walk(database, read, lambda stored: stored.id, check, shown)


async def _walk(
    database: Database,
    read: Callable[[AsyncConnection, _Key | None], Awaitable[Sequence[_Row]]],
    key: Callable[[_Row], _Key],
    check: Callable[[_Row], Mismatch | None],
    progress: Callable[[int], None] | None = None,
) -> tuple[int, list[Mismatch]]:
    """Every stored row, a page after the key of the one before (each page read as of one moment:
    a game and its actions, a race and its games), checked: how many, and the mismatches."""
    checked = 0
    mismatches: list[Mismatch] = []
    after: _Key | None = None
    while True:
        async with database.snapshot() as conn:
            page = await read(conn, after)
        if not page:
            return checked, mismatches
        mismatches += [mismatch for mismatch in map(check, page) if mismatch is not None]
        checked += len(page)
        after = key(page[-1])
        if progress is not None:
            progress(checked)


def _same(stored: Rating, expected: Rating) -> bool:
    return (
        stored.races == expected.races
        and math.isclose(stored.mu, expected.mu, rel_tol=1e-9, abs_tol=1e-12)
        and math.isclose(stored.sigma, expected.sigma, rel_tol=1e-9, abs_tol=1e-12)
    )


def check_rated_race(race: RatedRace) -> str | None:
    """Rate a stored race again from its stored befores and places; None when every after is what
    OpenSkill gives (`server.play.race.ratings.rate_race`), else what differs."""
    if len(race.changes) < 2:
        return f"{len(race.changes)} rated player(s): a race of fewer than two rates nobody"
    placements = [Placement(change.player_id, change.place) for change in race.changes]
    again = rate_race(placements, {change.player_id: change.before for change in race.changes})
    wrong = [
        f"{stored.player_id} stored {stored.after}, rated {rated.after}"
        for stored, rated in zip(race.changes, again, strict=True)
        if not _same(stored.after, rated.after)
    ]
    return "; ".join(wrong) or None


def check_rating_history(stored: Rating | None, changes: Sequence[RatingChange]) -> str | None:
    """One player's rating in one variant against its races: they chain from a newcomer's rating
    (each race starts from the one before), and the last one is the stored rating; None when so."""
    expected = NEWCOMER
    for change in changes:
        if not _same(change.before, expected):
            return f"a race starts from {change.before}, not from {expected}"
        expected = change.after
    if stored is None:
        return None if not changes else f"no rating stored, its races make {expected}"
    if not changes:
        return f"rating {stored} without a rated race"
    if not _same(stored, expected):
        return f"rating stored {stored}, its races make {expected}"
    return None


async def verify_ratings(database: Database, *, batch: int = 500) -> tuple[int, list[Mismatch]]:
    """Check every rated race (`check_rated_race`) and every player's rating history in each variant
    (`check_rating_history`), ``batch`` at a time.

    Returns:
        The number of rated races checked, and the mismatches (``game_id`` naming the race, or the
        player and variant as ``player/C8``).
    """

    async def races(conn: AsyncConnection, after: str | None) -> Sequence[RatedRace]:
        return await stored_ratings.rated_races_after(conn, after, batch)

    def check_race(race: RatedRace) -> Mismatch | None:
        problem = check_rated_race(race)
        return None if problem is None else Mismatch(race.race_id, problem)

    async def histories(conn: AsyncConnection, after: tuple[str, int] | None) -> Sequence[_History]:
        return await stored_ratings.rating_histories_after(conn, after, batch)

    def check_history(history: _History) -> Mismatch | None:
        player, cells, rating, changes = history
        problem = check_rating_history(rating, changes)
        return None if problem is None else Mismatch(f"{player}/C{cells}", problem)

    checked, mismatches = await _walk(database, races, lambda race: race.race_id, check_race)
    _, history_mismatches = await _walk(
        database, histories, lambda history: (history[0], history[1]), check_history
    )
    return checked, mismatches + history_mismatches


def check_finished_race(race: RaceRecord, games: _Games) -> str | None:
    """Why a finished race is not what its seats say (None: it is): its places are not the ones
    `server.play.race.places.places` gives its seats' stored figures, or a seat's game is missing, of
    another player, of another race or of another deal. ``games``: `races.games_of_races`."""
    figures = {s.seat: Figures(s.status, s.cards_home, s.moves, s.time_ms) for s in race.seated}
    expected = dict(sorted(places(figures).items()))
    stored = {seat.seat: seat.place for seat in sorted(race.seated, key=lambda seat: seat.seat)}
    if stored != expected:
        return f"places stored {stored}, the seats' figures give {expected}"
    for seat in race.seated:
        if seat.game_id is None:
            if seat.status not in ("left", "waiting"):
                return f"seat {seat.seat} ({seat.status}) has no game"
            continue
        game = games.get(seat.game_id)
        if game is None:
            return f"seat {seat.seat}'s game {seat.game_id} is not stored"
        code, player_id, race_id = game
        if (code, player_id, race_id) != (race.deal_code, seat.player_id, race.id):
            return (
                f"seat {seat.seat}'s game {seat.game_id} is of deal {code}, player {player_id}, race"
                f" {race_id}; the race's deal is {race.deal_code}, the seat's player {seat.player_id}"
            )
    return None


async def verify_races(database: Database, *, batch: int = 500) -> tuple[int, list[Mismatch]]:
    """Check every finished race (`check_finished_race`), ``batch`` at a time.

    Returns:
        The number of finished races checked, and the mismatches (``game_id`` naming the race).
    """

    async def read(conn: AsyncConnection, after: str | None) -> Sequence[tuple[RaceRecord, _Games]]:
        races = await stored_races.finished_races_after(conn, after, batch)
        game_ids = [seat.game_id for race in races for seat in race.seated if seat.game_id is not None]
        games = await stored_races.games_of_races(conn, game_ids)
        return [(race, games) for race in races]

    def check(race_and_games: tuple[RaceRecord, _Games]) -> Mismatch | None:
        race, games = race_and_games
        problem = check_finished_race(race, games)
        return None if problem is None else Mismatch(race.id, problem)

    return await _walk(database, read, lambda race_and_games: race_and_games[0].id, check)
