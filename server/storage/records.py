"""Frozen values that cross the storage boundary; ORM rows never leave `server.storage`.

Every `datetime` here is timezone-aware UTC: storage refuses naive datetimes on the way in and returns
aware UTC datetimes on the way out, on SQLite as on PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Generic, NamedTuple, TypeVar

_Row = TypeVar("_Row")


@dataclass(frozen=True, slots=True)
class PlayerRecord:
    """A registered player.

    Attributes:
        id: the player id (at most 32 characters).
        name: the display name (at most 64 characters).
        token_hash: hex SHA-256 of the player's secret token; the token itself is never stored.
        created_at: when the player was created (aware, UTC).
        bot: the player is a program, for life (declared in the hello that made it).
    """

    id: str
    name: str
    token_hash: str
    created_at: datetime
    bot: bool = False


@dataclass(frozen=True, slots=True)
class GameStart:
    """What is known about a game when it starts; see `repository.insert_game`.

    Attributes:
        id: the game id (at most 32 characters).
        player_id: the id of the player who plays it.
        code: the canonical game code, e.g. ``EO1-C8-AAAAAFA``.
        cells: the number of cells of the variant (8, 4 or 2).
        daily_date: the UTC date of the daily challenge this game plays, or None.
        started_at: when the game started (aware, UTC).
        race_id: the race this game is a seat of, or None.
    """

    id: str
    player_id: str
    code: str
    cells: int
    daily_date: date | None
    started_at: datetime
    race_id: str | None = None


@dataclass(frozen=True, slots=True)
class GameFigures:
    """A game's running figures after an action, for its row (``live`` reads them).

    Attributes:
        score, moves, undos: the game's figures after the action.
        at: when the action was accepted (aware, UTC): the game's ``active_at``.
    """

    score: int
    moves: int
    undos: int
    at: datetime


class ActionRecord(NamedTuple):
    """One action to append; see `repository.append_actions`. A named tuple, not a frozen dataclass:
    one is made per action on the event loop, and a tuple costs a fraction of the time to make.

    Attributes:
        game_id: the game.
        v: the version the action produces (from 1); (game_id, v) is the fence between writers.
        action: its notation (``"t1-c5"``, ``"undo"``, ``"resign"``), opaque to storage.
        at_ms: when the server accepted it, in milliseconds since the Unix epoch (None: unknown).
            Fourth, so that a record reads as the ``(game_id, v, action, at_ms)`` row it stores.
        figures: when set, the game's row takes them in the same commit (the writer sends
            them now and then, not with every action: see `server.play.game_room`).
    """

    game_id: str
    v: int
    action: str
    at_ms: int | None = None
    figures: GameFigures | None = None


@dataclass(frozen=True, slots=True)
class LiveGame:
    """An unfinished game as ``live`` lists it: its committed figures and its owner."""

    id: str
    player_id: str
    player_name: str
    code: str
    score: int
    moves: int
    started_at: datetime
    active_at: datetime
    cells: int = 8
    daily_date: date | None = None  # a daily game's date (its deal is shared: `server.services.sealing`)
    player_bot: bool = False
    race_id: str | None = None  # a race seat's game (its deal is shared too)


@dataclass(frozen=True, slots=True)
class LiveRoomsChange:
    """The games whose rooms a process (``holder``, `server.play.presence`) now holds, and those it no
    longer holds (disjoint), for ``live_rooms``."""

    holder: str
    held: tuple[str, ...]
    released: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GameDaily:
    """The daily challenge a game plays (see `repository.game_daily`): whose game it is, the day
    (None: the game plays no daily), the variant and the deal's code. Never changes once the game is
    stored."""

    player_id: str
    day: date | None
    cells: int
    code: str
    race_id: str | None = None  # the race the game is a seat of (its deal is shared too)


@dataclass(frozen=True, slots=True)
class DailyStanding:
    """What a player has played of one daily challenge (a day and a variant; see
    `repository.daily_standings`): a finished game (won or resigned), an unfinished one."""

    day: date
    cells: int
    finished: bool
    playing: bool


@dataclass(frozen=True, slots=True)
class GameResult:
    """The final figures of a game, written once when it ends; see `repository.finish_game`.

    Attributes:
        id: the game id.
        status: ``"won"`` or ``"resigned"``.
        score: the final score.
        moves: the move count, as the engine reports it.
        undos: the number of undos.
        finished_at: when the game ended (aware, UTC).
        duration_ms: the playing time in milliseconds.
        won: True when every card reached the foundations.
    """

    id: str
    status: str
    score: int
    moves: int
    undos: int
    finished_at: datetime
    duration_ms: int
    won: bool


@dataclass(frozen=True, slots=True)
class StoredGame:
    """A game as stored: its row plus its actions, enough to rebuild it by replaying from the deal.

    Attributes:
        actions: the engine notations of the accepted actions, in version order; ``actions[i]`` produced
            version ``i + 1``, so ``len(actions)`` is the game's current version.
        action_times: when the server accepted each action (milliseconds since the Unix epoch), in
            the same order; None for an action stored before times were kept. Empty: not read.
        hinted: the player asked for a hint during the game.
    """

    id: str
    player_id: str
    code: str
    cells: int
    daily_date: date | None
    status: str
    score: int
    moves: int
    undos: int
    started_at: datetime
    finished_at: datetime | None
    duration_ms: int | None
    won: bool
    actions: tuple[str, ...]
    race_id: str | None = None
    action_times: tuple[int | None, ...] = ()
    hinted: bool = False

    @property
    def version(self) -> int:
        """The version of the game: the number of actions stored."""
        return len(self.actions)


# Leaderboards ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RankedGame:
    """A finished game as the leaderboards see it; see `leaderboards.record_finished_game`.

    Attributes:
        daily_date: the UTC date of the daily challenge the game played, or None.
        finished_at: when the game ended (aware); it decides the day and week buckets.
        bot: the player is a bot: the game ranks on the bots' boards, never on the people's.
    """

    id: str
    player_id: str
    code: str
    cells: int
    daily_date: date | None
    score: int
    moves: int
    duration_ms: int
    won: bool
    finished_at: datetime
    bot: bool = False


@dataclass(frozen=True, slots=True)
class GameKey:
    """Where a game row stands on its board: ``sort_key`` (smaller is better), then the earlier finish,
    then the game id. Ranks compare ``sort_key`` only: rows with equal keys share a rank."""

    sort_key: int
    finished_at: datetime
    game_id: str


@dataclass(frozen=True, slots=True)
class PlayerKey:
    """Where a player row stands on the players board: ``sort_key`` (smaller is better), then the id."""

    sort_key: int
    player_id: str


@dataclass(frozen=True, slots=True)
class BoardGame:
    """A row of a game board: a player's best game in the board's scope, with its competition rank."""

    rank: int
    player_id: str
    player_name: str
    game_id: str
    code: str
    cells: int
    won: bool
    score: int
    moves: int
    duration_ms: int
    finished_at: datetime
    key: GameKey
    player_bot: bool = False


@dataclass(frozen=True, slots=True)
class BoardPlayer:
    """A row of the players board: a player's finished games in the period, with its competition rank."""

    rank: int
    player_id: str
    player_name: str
    played: int
    won: int
    best_score: int
    key: PlayerKey
    player_bot: bool = False


@dataclass(frozen=True, slots=True)
class BoardPage(Generic[_Row]):
    """Rows of a board in order, and whether more rows follow the last one."""

    rows: tuple[_Row, ...]
    has_more: bool


@dataclass(frozen=True, slots=True)
class FinishedGameFigures:
    """The figures of one finished game, as a profile shows them."""

    game_id: str
    code: str
    cells: int
    won: bool
    score: int
    moves: int
    duration_ms: int
    finished_at: datetime


@dataclass(frozen=True, slots=True)
class PlayerProfile:
    """What a player's profile shows; see `leaderboards.get_profile`.

    Attributes:
        best: per cell variant (8, 4, 2 in that order), the player's best won game by the ``moves``
            order (fewest moves, then shortest time), for the variants the player has won.
        daily_wins: the distinct dates of the daily challenges the player won, oldest first.
        recent: the player's latest finished games, newest first.
    """

    player_id: str
    name: str
    played: int
    won: int
    best_score: int
    best: tuple[FinishedGameFigures, ...]
    daily_wins: tuple[date, ...]
    recent: tuple[FinishedGameFigures, ...]
    bot: bool = False


#: The displayed rating is ``round(RATING_BASE + RATING_SCALE * (mu - 3 * sigma))``: an ordinal, the
#: skill a player has with 99.7 % confidence, on a scale of whole points (a newcomer shows 1000).
RATING_BASE = 1000
RATING_SCALE = 40


@dataclass(frozen=True, slots=True)
class Rating:
    """A player's skill in one variant (Weng-Lin: a normal belief of mean ``mu``, deviation ``sigma``).

    Attributes:
        mu: the estimated skill (a newcomer's is 25).
        sigma: how unsure that estimate is (a newcomer's is 25/3; it shrinks with every rated race).
        races: the rated races behind it: the stored row's version, the fence of its next change.
    """

    mu: float
    sigma: float
    races: int = 0

    @property
    def display(self) -> int:
        """The rating shown to players and ranked by: see `RATING_BASE`."""
        return round(RATING_BASE + RATING_SCALE * (self.mu - 3 * self.sigma))


@dataclass(frozen=True, slots=True)
class RatingChange:
    """What one race did to one rated player's rating.

    Attributes:
        player_id: the player.
        place: the player's place in the race (1 first; equal places are a tie).
        before: the rating the race started from (``races`` 0: a newcomer, no stored row).
        after: the rating it ends with (``races`` one more).
    """

    player_id: str
    place: int
    before: Rating
    after: Rating


@dataclass(frozen=True, slots=True)
class RatedRace:
    """The rating changes of one finished race, stored with its result (`StoreRatings`).

    Attributes:
        race_id: the race (at most 32 characters); rated at most once.
        cells: the variant (8, 4 or 2): ratings are per variant.
        changes: one per rated player (empty when fewer than two were rated).
        at: when the race ended (aware, UTC).
    """

    race_id: str
    cells: int
    changes: tuple[RatingChange, ...]
    at: datetime


@dataclass(frozen=True, slots=True)
class RatedPlayer:
    """A row of the rating board of a variant (`server.storage.leaderboards.rating_page`), with its
    competition rank; ``key.sort_key`` is minus the shown rating."""

    rank: int
    player_id: str
    player_name: str
    rating: Rating
    key: PlayerKey
    player_bot: bool = False


# Races ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RaceSeatRecord:
    """One seat of a race as stored (see `server.storage.tables.RaceSeatRow`)."""

    seat: int
    player_id: str
    player_name: str
    player_bot: bool
    game_id: str | None
    status: str
    cards_home: int
    moves: int
    score: int
    time_ms: int
    place: int | None
    ready: bool = False
    #: The digest of the network the seat joined from (docs/ratings.md, Farming); None: unknown.
    network: str | None = None


@dataclass(frozen=True, slots=True)
class RaceRecord:
    """A race as stored, its seats included; a `RaceWrite` stores it whole."""

    id: str
    code: str
    creator_id: str
    cells: int
    seats: int
    time_limit_s: int
    public: bool
    state: str
    deal_code: str
    created_at: datetime
    starts_at: datetime | None
    ends_at: datetime | None
    finished_at: datetime | None
    seated: tuple[RaceSeatRecord, ...]
    #: The revision this record is (0: as made); a write of revision r follows r - 1 or fails.
    revision: int = 0
    #: The race made as this finished race's rematch, and its invitation code (read back with it).
    rematch_id: str | None = None
    rematch_code: str | None = None


@dataclass(frozen=True, slots=True)
class RaceWrite:
    """A race stored whole (inserted when ``new``, else its row and seats replaced if the stored
    race is at the revision before, else a conflict), with the games its seats start (at the
    reveal) or the rematch it names, in one transaction."""

    race: RaceRecord
    new: bool = False
    games: tuple[GameStart, ...] = ()
    #: A new race stored with this write: the finished race's rematch (``race.rematch_id``), so the
    #: link and the race it names are stored together or not at all.
    rematch: RaceRecord | None = None


@dataclass(frozen=True, slots=True)
class QuickWait:
    """A row of quick match's pool (``quick_waits``): a player (its id, name, bot flag and network) waiting
    for a quick race of ``cells`` at ``rating`` since ``since``, its connection held by process
    ``holder`` until ``expires_at`` at least; ``race_id`` once a race claimed it."""

    wait_id: str
    player_id: str
    player_name: str
    bot: bool
    cells: int
    rating: float
    since: datetime
    holder: str
    expires_at: datetime
    race_id: str | None = None
    #: The digest of the network it waits from (a seat's `RaceSeatRecord.network`); None: unknown.
    network: str | None = None


@dataclass(frozen=True, slots=True)
class GameRace:
    """Whom a race seat's game is sealed from: the race's state and players."""

    race_id: str
    state: str
    player_ids: frozenset[str]
    ends_at: datetime | None


@dataclass(frozen=True, slots=True)
class EventRecord:
    """An event as stored (docs/events.md); ``deal_codes`` empty until its start."""

    id: str
    name: str
    cells: int
    opens_at: datetime
    starts_at: datetime
    closes_at: datetime
    ends_at: datetime
    max_players: int
    deals: int
    game_time_s: int
    review_s: int
    state: str
    created_at: datetime
    created_by: str
    deal_codes: tuple[str, ...] = ()
    started_at: datetime | None = None
    cancel_reason: str | None = None
    #: The revision this record is (0: as made); a write of revision r follows r - 1 or fails.
    revision: int = 0


@dataclass(frozen=True, slots=True)
class EventEntryRecord:
    """An entrant as stored: its player, join order and figures as of its last scored game."""

    event_id: str
    player_id: str
    player_name: str
    player_bot: bool
    number: int
    joined_at: datetime
    points: int = 0
    wins: int = 0
    win_ms: int = 0
    games: int = 0
    streak: int = 0
    reached_at: datetime | None = None
    place: int | None = None
    voided: bool = False


@dataclass(frozen=True, slots=True)
class EventGameRecord:
    """An entrant's game of one deal of an event, with what its ``games`` row says of its end."""

    event_id: str
    player_id: str
    deal: int
    game_id: str
    berserk: bool
    status: str
    won: bool
    hinted: bool
    moves: int
    started_at: datetime
    finished_at: datetime | None
