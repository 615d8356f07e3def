"""The schema as SQLAlchemy metadata: one `Row` class per table, used by the migrations and by queries.

The schema itself is made only by the migrations in ``migrations/versions``; never call
``Base.metadata.create_all``. A test checks that these classes and the migrations agree.

Rows never leave `server.storage`: the repository converts them to the frozen values of
`server.storage.records`. Relationships are ``lazy="raise"`` so that a forgotten eager load fails loudly
instead of emitting a hidden query.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any, ClassVar, Final

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Date,
    DateTime,
    Dialect,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

NAMING_CONVENTION: Final = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

GAME_STATUSES: Final = ("playing", "won", "resigned")
CELL_COUNTS: Final = (8, 4, 2)


class UTCDateTime(TypeDecorator[datetime]):
    """``DateTime(timezone=True)`` that takes and gives aware UTC datetimes on every backend.

    PostgreSQL stores ``timestamptz`` natively. SQLite has no datetime type: SQLAlchemy stores text and
    drops the offset without converting, and reads naive datetimes back. This type converts to UTC before
    storing (so the text sorts in time order) and marks values read back as UTC.

    Raises:
        ValueError: when given a naive datetime.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value!r}: storage takes aware datetimes only")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    """The declarative base of every table, with deterministic constraint and index names."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UTCDateTime()}


class PlayerRow(Base):
    """A player, who authenticates with a secret token whose SHA-256 is stored."""

    __tablename__ = "players"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(64))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    #: A program, declared in the hello that made the player, for life: its games rank on the bots'
    #: boards only (`server.storage.leaderboards`). No Python default: an insert names it or the
    #: database's default (false) applies, so rows written by older code are people.
    bot: Mapped[bool] = mapped_column(Boolean, server_default=false())
    #: Networks other than its own it finished races against, counted up to what establishes a
    #: player for ratings (`server.play.race.ratings.FarmGuard`): its races rate only once it is.
    networks_met: Mapped[int] = mapped_column(SmallInteger, server_default=text("0"))

    games: Mapped[list[GameRow]] = relationship(back_populates="player", lazy="raise")


class GameRow(Base):
    """One game: its deal, who plays it, and its figures (current while playing, final once it ends)."""

    __tablename__ = "games"
    __table_args__ = (
        CheckConstraint("status IN ('playing', 'won', 'resigned', 'abandoned')", name="status"),
        CheckConstraint("cells IN (8, 4, 2)", name="cells"),
        # Unfinished games of a player.
        Index("ix_games_player_id_status", "player_id", "status"),
        # A player's recent games and daily streak (the profile). The leaderboards read the summary
        # tables below, not this table.
        Index("ix_games_player_id_finished_at", "player_id", "finished_at"),
        Index("ix_games_finished_at", "finished_at"),
        # What a player has played of a day's daily: before another's daily game is shown to them
        # (`server.services.sealing`).
        Index("ix_games_player_id_daily_date", "player_id", "daily_date"),
        # ``live``: the unfinished games active lately, most recent first, a page at a time.
        Index("ix_games_status_active_at_id", "status", "active_at", "id"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    player_id: Mapped[str] = mapped_column(String(32), ForeignKey("players.id"))
    code: Mapped[str] = mapped_column(String(16))
    cells: Mapped[int] = mapped_column(SmallInteger)
    daily_date: Mapped[date | None] = mapped_column(Date)
    status: Mapped[str] = mapped_column(String(16))
    score: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    moves: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    undos: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    duration_ms: Mapped[int | None] = mapped_column(BigInteger)
    won: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # When the game was last seen changing: its start, then the committed actions that carry the
    # game's figures (score, moves and undos, set by the same commit): at most one per
    # `server.play.game_room.FIGURES_INTERVAL`, so an unfinished game's row may lag its latest
    # action; the end writes the final figures. No action row is accepted once the status is final:
    # a trigger refuses it (PostgreSQL), or the game's `GameFenceRow` is gone with it (SQLite).
    active_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    #: The player asked for a hint: the game ranks on no leaderboard (its profile still lists it).
    hinted: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    #: The race this game is a seat of (None: a game of its own): its moves are sealed while the race
    #: runs (`server.services.sealing`) and its commits feed the race's standings.
    race_id: Mapped[str | None] = mapped_column(String(32), ForeignKey("races.id"))

    player: Mapped[PlayerRow] = relationship(back_populates="games", lazy="raise")
    actions: Mapped[list[ActionRow]] = relationship(
        back_populates="game", lazy="raise", order_by="ActionRow.v"
    )


class ActionRow(Base):
    """One accepted action of a game; on PostgreSQL its primary key (game_id, v) is the fence between
    writers.

    ``v`` is the version the action produced, from 1. Two writers can never both commit the same version of
    a game: on PostgreSQL the second insert fails with an IntegrityError. On SQLite actions are appended
    to `ActionJournalRow`, fenced by `GameFenceRow`, and moved here in key order now and then; the table
    is clustered on that key (WITHOUT ROWID), so a game's rows share its pages.
    """

    __tablename__ = "actions"
    __table_args__ = (CheckConstraint("v >= 1", name="v_positive"), {"sqlite_with_rowid": False})

    game_id: Mapped[str] = mapped_column(String(32), ForeignKey("games.id"), primary_key=True)
    v: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    action: Mapped[str] = mapped_column(String(16))
    #: When the server accepted the action: milliseconds since the Unix epoch (UTC), read once on
    #: the event loop as the action is checked (`server.play.game_room`). An integer, not a
    #: timestamp: 6 bytes a row on SQLite where text would take 26. None for actions stored before
    #: times were kept (migration ``action_times``).
    at_ms: Mapped[int | None] = mapped_column(BigInteger)

    game: Mapped[GameRow] = relationship(back_populates="actions", lazy="raise")


class ActionJournalRow(Base):
    """An accepted action not yet moved into ``actions`` (SQLite only; empty on PostgreSQL).

    The SQLite writer appends a commit's actions here, in the order of a sequence, so that they share a
    page or two instead of each landing on its game's leaf page of ``actions``; the compaction
    (`server.storage.commit_backends.compact_journal`) moves them into ``actions`` in key order. The
    fence of a row is its game's `GameFenceRow`, moved by the commit that appends it.
    """

    __tablename__ = "action_journal"

    seq: Mapped[int] = mapped_column(BigInteger().with_variant(Integer(), "sqlite"), primary_key=True)
    game_id: Mapped[str] = mapped_column(String(32))
    v: Mapped[int] = mapped_column(Integer, autoincrement=False)
    action: Mapped[str] = mapped_column(String(16))
    at_ms: Mapped[int | None] = mapped_column(BigInteger)  # as `ActionRow.at_ms`


class GameFenceRow(Base):
    """A game being played and the version of its last action: the (game, v) fence on SQLite.

    Made by a trigger as the game is inserted, deleted by another as its status leaves ``playing``
    (SQLite only; empty on PostgreSQL, where the primary key of ``actions`` is the fence). A commit of
    actions moves ``v`` from the version before its first action of the game to its last, in one
    compare-and-set statement for all its games: a game at another version, or without a row (ended,
    or no such game), fails the commit.
    """

    __tablename__ = "game_fences"
    __table_args__ = ({"sqlite_with_rowid": False},)

    game_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    v: Mapped[int] = mapped_column(Integer, autoincrement=False)


class BoardBestRow(Base):
    """A player's best game on one scope of a game leaderboard; see `server.storage.leaderboards`.

    ``scope`` names the board, its key, its order and its period bucket (``D/EO1-C8-AAAAAFA/m/a``);
    ``sort_key`` packs the figures the order ranks by into one integer, smaller is better. Derived data,
    maintained in the transaction that finishes a game and rebuilt from ``games`` by the migration that
    made it: no foreign keys, so that deleting a game never scans this table.
    """

    __tablename__ = "board_bests"
    __table_args__ = (
        # Pages (keyset), ranks (a count over an index range) and neighbours all walk this index.
        Index(
            "ix_board_bests_scope_sort_key_finished_at_game_id", "scope", "sort_key", "finished_at", "game_id"
        ),
        {"sqlite_with_rowid": False},
    )

    scope: Mapped[str] = mapped_column(String(40), primary_key=True)
    player_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    sort_key: Mapped[int] = mapped_column(BigInteger)
    finished_at: Mapped[datetime] = mapped_column(UTCDateTime())
    game_id: Mapped[str] = mapped_column(String(32))


class PlayerStatsRow(Base):
    """A player's finished games in one period bucket (``a``, ``d2026-11-30``, ``w2026-11-30``).

    ``wins_key`` and ``score_key`` pack the players board's two orders into one integer each, smaller is
    better (see `server.storage.leaderboards`). Derived data like `BoardBestRow`.
    """

    __tablename__ = "player_stats"
    __table_args__ = (
        Index("ix_player_stats_scope_wins_key_player_id", "scope", "wins_key", "player_id"),
        Index("ix_player_stats_scope_score_key_player_id", "scope", "score_key", "player_id"),
        {"sqlite_with_rowid": False},
    )

    scope: Mapped[str] = mapped_column(String(16), primary_key=True)
    player_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    played: Mapped[int] = mapped_column(Integer)
    won: Mapped[int] = mapped_column(Integer)
    best_score: Mapped[int] = mapped_column(Integer)
    wins_key: Mapped[int] = mapped_column(BigInteger)
    score_key: Mapped[int] = mapped_column(BigInteger)


class RankBucketRow(Base):
    """How many rows of one leaderboard scope have a sort key in one bucket (`server.storage.leaderboards`).

    ``board`` is ``g`` (``board_bests``), ``w`` or ``s`` (``player_stats``' ``wins_key`` and
    ``score_key``); ``lo`` is the smallest key of the bucket. Kept by triggers on the two tables (the
    migration that made it), deleted with its scope by the pruner: a rank sums the buckets before a
    row's instead of counting every row before it.
    """

    __tablename__ = "rank_buckets"
    __table_args__ = ({"sqlite_with_rowid": False},)

    scope: Mapped[str] = mapped_column(String(40), primary_key=True)
    board: Mapped[str] = mapped_column(String(1), primary_key=True)
    lo: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    n: Mapped[int] = mapped_column(BigInteger)


class RatingRow(Base):
    """A player's rating in one variant (`server.play.race.ratings`): a row once it has a rated race.

    ``races`` is the row's version: a race's change is stored only onto the rating it was computed
    from (`server.storage.ratings.store_rating_changes`). ``sort_key`` is minus the shown rating
    (smaller is better, as every board's key), for the rating leaderboard.
    """

    __tablename__ = "ratings"
    __table_args__ = (
        CheckConstraint("cells IN (8, 4, 2)", name="cells"),
        CheckConstraint("races >= 1", name="races_positive"),
        # The rating board of a variant: pages, ranks and neighbours walk this index.
        Index("ix_ratings_cells_sort_key_player_id", "cells", "sort_key", "player_id"),
    )

    player_id: Mapped[str] = mapped_column(String(32), ForeignKey("players.id"), primary_key=True)
    cells: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    mu: Mapped[float] = mapped_column(Double)
    sigma: Mapped[float] = mapped_column(Double)
    races: Mapped[int] = mapped_column(Integer)
    sort_key: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class RaceRatingChangeRow(Base):
    """What one race did to one rated player's rating: the key (race_id, player_id) rates a race once.

    ``race_id`` names the race of `server.play` (no foreign key here: the races table comes with the
    race rooms). ``races_before`` is 0 for a newcomer.
    """

    __tablename__ = "race_rating_changes"
    __table_args__ = (
        CheckConstraint("cells IN (8, 4, 2)", name="cells"),
        CheckConstraint("place >= 1", name="place_positive"),
        # A player's rating history (newest first), for a profile.
        Index("ix_race_rating_changes_player_id_cells_at", "player_id", "cells", "at"),
    )

    race_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    player_id: Mapped[str] = mapped_column(String(32), ForeignKey("players.id"), primary_key=True)
    cells: Mapped[int] = mapped_column(SmallInteger)
    place: Mapped[int] = mapped_column(SmallInteger)
    mu_before: Mapped[float] = mapped_column(Double)
    sigma_before: Mapped[float] = mapped_column(Double)
    races_before: Mapped[int] = mapped_column(Integer)
    mu_after: Mapped[float] = mapped_column(Double)
    sigma_after: Mapped[float] = mapped_column(Double)
    at: Mapped[datetime] = mapped_column(UTCDateTime())


class RaceRow(Base):
    """A race: several players, one winnable deal revealed to all at once (`server.play.race.room`).

    ``deal_code`` is chosen when the race is made and stays secret until the race runs; ``code`` is
    the invitation code players join by. Written at each change of phase or seats, never per action:
    the standings follow from the seats' games.
    """

    __tablename__ = "races"
    __table_args__ = (
        CheckConstraint("state IN ('lobby', 'countdown', 'running', 'finished', 'cancelled')", name="state"),
        CheckConstraint("cells IN (8, 4, 2)", name="cells"),
        CheckConstraint("seats BETWEEN 2 AND 8", name="seats"),
        # The races not over (a node's sweep reads those of them whose time has come).
        Index("ix_races_state", "state"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    code: Mapped[str] = mapped_column(String(16), unique=True)
    creator_id: Mapped[str] = mapped_column(String(32), ForeignKey("players.id"))
    cells: Mapped[int] = mapped_column(SmallInteger)
    seats: Mapped[int] = mapped_column(SmallInteger)
    time_limit_s: Mapped[int] = mapped_column(Integer)
    public: Mapped[bool] = mapped_column(Boolean)
    state: Mapped[str] = mapped_column(String(16))
    deal_code: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    starts_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    ends_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    #: +1 per write: a write names the revision it follows, and one that finds another has lost
    #: (two rooms of one race can never both write it: the race's fence, as (game, v) is a game's).
    revision: Mapped[int] = mapped_column(Integer)
    #: The race made as this finished race's rematch (``race_rematch``), once one was asked: set by a
    #: write fenced by ``revision``, so two asks at once make one rematch. No foreign key: the
    #: rematch is inserted in the same transaction, and nothing reads the link but this race's snapshot.
    rematch_id: Mapped[str | None] = mapped_column(String(32))


class RaceSeatRow(Base):
    """One seat of a race: its player, its game once the race runs, and its result once it ends
    (``place`` from 1, shared by a tie: what a rating is computed from)."""

    __tablename__ = "race_seats"
    __table_args__ = (
        CheckConstraint("status IN ('waiting', 'playing', 'won', 'resigned', 'left')", name="status"),
        # A player's races (their results, and the seats they hold).
        Index("ix_race_seats_player_id", "player_id"),
        # A network's rated races of the last day (docs/ratings.md, Farming).
        Index("ix_race_seats_network", "network"),
    )

    race_id: Mapped[str] = mapped_column(String(32), ForeignKey("races.id"), primary_key=True)
    seat: Mapped[int] = mapped_column(SmallInteger, primary_key=True, autoincrement=False)
    player_id: Mapped[str] = mapped_column(String(32), ForeignKey("players.id"))
    #: The seat said it is ready (in the lobby; every seat of a race past it was): stored so that every
    #: node's copy of the race knows it (docs/races.md, Across nodes).
    ready: Mapped[bool] = mapped_column(Boolean, server_default=false())
    game_id: Mapped[str | None] = mapped_column(String(32), ForeignKey("games.id"))
    status: Mapped[str] = mapped_column(String(16))
    cards_home: Mapped[int] = mapped_column(SmallInteger)
    moves: Mapped[int] = mapped_column(Integer)
    score: Mapped[int] = mapped_column(Integer)
    time_ms: Mapped[int] = mapped_column(BigInteger)
    place: Mapped[int | None] = mapped_column(SmallInteger)
    #: A digest of the network the seat joined from (`server.play.race.ratings.network_of`), never the
    #: address: ratings rate only seats of distinct networks. None for a seat stored without one.
    network: Mapped[str | None] = mapped_column(String(16))


class LiveRoomRow(Base):
    """A server process holds the game's room in memory: someone follows the game there (its player or
    a spectator). ``live`` lists only games with a row, so a game whose last follower left leaves the
    list at once instead of after the live window. ``holder`` names one process for its lifetime
    (``server.play.presence``). Rows of a process killed without a goodbye stay until its games leave
    the live window or end; no foreign key, like the summaries, so nothing here is checked on a game's writes.
    """

    __tablename__ = "live_rooms"
    __table_args__ = ({"sqlite_with_rowid": False},)

    game_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    holder: Mapped[str] = mapped_column(String(80), primary_key=True)


class QuickWaitRow(Base):
    """A player waiting for a quick race: the deployment's one pool, read by every process that holds
    a waiting connection (`server.play.race.quick_match`). ``holder`` names the process holding the
    connection (as ``live_rooms`` does), which pushes ``expires_at`` forward while it lives; a row
    past it is no wait (its process died) and is swept. ``race_id`` is set by the transaction that
    claims the row for the race it is seated in (the race is stored in the same one), until its
    holder has its connection follow the race and deletes the row. ``since`` is wall time: the
    processes share no other clock. No foreign key: nothing else's writes check a wait, and the
    race it is seated in checks its player (``race_seats``).
    """

    __tablename__ = "quick_waits"
    __table_args__ = (CheckConstraint("cells IN (8, 4, 2)", name="cells"),)

    wait_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    #: One wait per player in the whole deployment: a second ``quick_race`` anywhere is refused.
    player_id: Mapped[str] = mapped_column(String(32), unique=True)
    #: Who waits, as its connection knows it (the seat a race gives it shows it): its name and bot flag.
    player_name: Mapped[str] = mapped_column(String(64))
    bot: Mapped[bool] = mapped_column(Boolean)
    #: The digest of the network it waits from: its seat's, once a race seats it (`RaceSeatRow`).
    network: Mapped[str | None] = mapped_column(String(16))
    cells: Mapped[int] = mapped_column(SmallInteger)
    #: The shown rating in the variant when it started waiting (`server.play.race.ratings`).
    rating: Mapped[float] = mapped_column(Double)
    since: Mapped[datetime] = mapped_column(UTCDateTime())
    holder: Mapped[str] = mapped_column(String(80))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    race_id: Mapped[str | None] = mapped_column(String(32))


EVENT_STATES: Final = ("scheduled", "open", "running", "review", "final", "cancelled")


class EventRow(Base):
    """An event (docs/events.md): fixed instants, a cap, and the deal sequence drawn at its start.

    ``deal_codes`` (the codes joined by commas) is null until the start: before it the sequence
    does not exist anywhere, so nothing can leak it. Written at each change of phase, fenced by
    ``revision`` as a race is; an entrant's games and figures live in the tables below.
    """

    __tablename__ = "events"
    __table_args__ = (
        CheckConstraint(
            "state IN ('scheduled', 'open', 'running', 'review', 'final', 'cancelled')", name="state"
        ),
        CheckConstraint("cells IN (8, 4, 2)", name="cells"),
        CheckConstraint("max_players >= 1", name="max_players_positive"),
        CheckConstraint("deals BETWEEN 1 AND 200", name="deals"),
        # The listing (upcoming, running, finished) and the events whose next phase is due.
        Index("ix_events_state_starts_at", "state", "starts_at"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(64))
    cells: Mapped[int] = mapped_column(SmallInteger)
    opens_at: Mapped[datetime] = mapped_column(UTCDateTime())
    starts_at: Mapped[datetime] = mapped_column(UTCDateTime())
    closes_at: Mapped[datetime] = mapped_column(UTCDateTime())
    ends_at: Mapped[datetime] = mapped_column(UTCDateTime())
    max_players: Mapped[int] = mapped_column(Integer)
    deals: Mapped[int] = mapped_column(SmallInteger)
    game_time_s: Mapped[int] = mapped_column(Integer)
    review_s: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16))
    deal_codes: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    #: Who made it: ``cli`` or ``http`` (never a player).
    created_by: Mapped[str] = mapped_column(String(16))
    cancel_reason: Mapped[str | None] = mapped_column(String(32))
    #: +1 per write: a write names the revision it follows, and one that finds another has lost.
    revision: Mapped[int] = mapped_column(Integer)


class EventEntryRow(Base):
    """An entrant of an event: its entry number (join order, unique in the event: two joins at once
    cannot take one number) and its figures as of its last scored game."""

    __tablename__ = "event_entries"
    __table_args__ = (
        UniqueConstraint("event_id", "number"),
        CheckConstraint("number >= 1", name="number_positive"),
        # A player's events (its profile).
        Index("ix_event_entries_player_id", "player_id"),
    )

    event_id: Mapped[str] = mapped_column(String(32), ForeignKey("events.id"), primary_key=True)
    player_id: Mapped[str] = mapped_column(String(32), ForeignKey("players.id"), primary_key=True)
    number: Mapped[int] = mapped_column(Integer)
    joined_at: Mapped[datetime] = mapped_column(UTCDateTime())
    points: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    wins: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    win_ms: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    games: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    streak: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    reached_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    #: Once the event is final (shared by a tie); None before, and for a voided result.
    place: Mapped[int | None] = mapped_column(Integer)
    voided: Mapped[bool] = mapped_column(Boolean, server_default=false())


class EventGameRow(Base):
    """An entrant's game of deal ``deal`` (from 1) of an event: its key is the fence that gives an
    entrant one game per deal; the game itself is an ordinary ``games`` row."""

    __tablename__ = "event_games"
    __table_args__ = (CheckConstraint("deal >= 1", name="deal_positive"),)

    event_id: Mapped[str] = mapped_column(String(32), ForeignKey("events.id"), primary_key=True)
    player_id: Mapped[str] = mapped_column(String(32), ForeignKey("players.id"), primary_key=True)
    deal: Mapped[int] = mapped_column(SmallInteger, primary_key=True, autoincrement=False)
    game_id: Mapped[str] = mapped_column(String(32), ForeignKey("games.id"), unique=True)
    #: Asked for berserk: no undo, half the time allowance, +1 on a full win.
    berserk: Mapped[bool] = mapped_column(Boolean, server_default=false())


def _table(row: type[Base]) -> Table:
    table = row.__table__
    if not isinstance(table, Table):  # pragma: no cover - declarative always makes a Table here
        raise TypeError(f"{row.__name__} is not mapped to a Table")
    return table


players: Final = _table(PlayerRow)
games: Final = _table(GameRow)
actions: Final = _table(ActionRow)
action_journal: Final = _table(ActionJournalRow)
game_fences: Final = _table(GameFenceRow)
board_bests: Final = _table(BoardBestRow)
player_stats: Final = _table(PlayerStatsRow)
rank_buckets: Final = _table(RankBucketRow)
ratings: Final = _table(RatingRow)
race_rating_changes: Final = _table(RaceRatingChangeRow)
races: Final = _table(RaceRow)
race_seats: Final = _table(RaceSeatRow)
live_rooms: Final = _table(LiveRoomRow)
quick_waits: Final = _table(QuickWaitRow)
events: Final = _table(EventRow)
event_entries: Final = _table(EventEntryRow)
event_games: Final = _table(EventGameRow)
