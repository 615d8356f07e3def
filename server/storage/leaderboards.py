"""Leaderboard summaries: kept up to date when a game finishes, read by keyset pages and index counts.

What is stored, and why
-----------------------
A game board ranks each player's *best* game once (like Nakama's ``best`` operator). Computing that at
query time means grouping every game of the board by player, on every page (a variant board of a
million games would group a third of them), and ranking needs all of them. So the best game is kept, in
``board_bests``: one row per (scope, player), where a *scope* is one board, one order and one period
bucket, e.g. ``V/8/m/w2026-11-30`` (variant C8, ``moves`` order, the week from Monday 2026-11-30).

Periods are calendar buckets in UTC (protocol/README.md): the current day, the current ISO week (from
Monday) and all time. A player's best game of this week is simply their row in this week's bucket, so
no query ever aggregates over a time window. One finished game touches at most 21 rows (deal and
variant boards: 3 orders × 3 periods each; the daily board: 3 orders) and 3 ``player_stats`` rows
(all time, its day, its week), in the transaction that finishes it (`record_finished_game`, called by
`repository.finish_game`), so a board never disagrees with the games stored. The price is space: in
bench/bench_leaderboard.py a million games made 14.3 million ``board_bests`` rows (most players play a
deal once, so nearly every game is some player's best of its deal in its day, week and all time),
most of them in day and week buckets that close; pruning the closed ones (below) leaves about a
third.

Orders pack the figures they rank by into one integer, ``sort_key``, smaller is better:

- ``moves``: lost ``<< 62 | min(moves, 2^21 - 1) << 41 | min(duration_ms, 2^41 - 1)``: won games first,
  then fewest moves, then shortest time;
- ``time``: lost ``<< 62 | min(duration_ms, 2^41 - 1) << 21 | min(moves, 2^21 - 1)``;
- ``score``: ``-score`` (score is farmable: protocol/README.md says so);
- players ``wins``: ``(2^31 - 1 - won) << 32`` plus ``played`` when ``won > 0``, else ``2^32 - 1 -
  played``: most wins, then the higher win rate (with equal wins: fewer games), then more games (only
  when nobody has a win, all rates being 0);
- players ``score``: ``-best_score``.

Moves beyond 2,097,151 and durations beyond 69 years saturate (and then tie); nothing else is lost.
Rows with equal ``sort_key`` share a rank (standard competition ranking, "1224"), and are listed by
earliest finish (game boards), then by id.

Reading
-------
Every read walks the index ``(scope, sort_key, finished_at, game_id)`` (``(scope, wins_key|score_key,
player_id)`` for players): a page is a keyset range after the last row's key, never an OFFSET. Only
the first row of a page needs its rank: the ranks of the rest follow from their position on the page.
The rows around a player are ranges bounded on every column of the key, so that they never walk the
rows tied with the player's sort key (`_keyset_ranges`).

Ranks
-----
A row's rank is ``1 + (rows of the scope with a smaller key)`` (+ the ties before it, for its place).
Counting those rows is an index range as long as the rank: 25 ms p99 around a random player of the
largest board (49,351 players) at 1M games. So ``rank_buckets`` keeps, for the
scopes of ``board_bests`` and ``player_stats`` (board ``g``, ``w``, ``s``), how many rows have a key in
each *bucket*, a fixed coarse function of the key (`bucket_floor`, the bucket's smallest key), and a
rank is the sum of the buckets before the row's plus a count of its bucket's rows before it: one
statement (`_rank_statement`), two short ranges. When the row's bucket holds its key alone
(`bucket_is_the_key`), the rank and the ties before the row (for a page's places) are buckets' ``n``
(`_key_bucket_counts`): the ties of that key are never counted row by row. The buckets are chosen so
that both ranges stay short on the largest boards (a few hundred buckets, a few thousand rows in the
fullest, and a bucket of its own for a key many rows share):

- ``moves``: the won bit and the move count (``key >> 41``); ``time``: 8.2 s of duration (``>> 34``);
  game ``score`` and players ``score``: 8 points (``>> 3``);
- players ``wins``: the key itself when there is no win or fewer than 32 games: most of a day's or a
  week's players have played a game or two and tie (at 1M games, 9,000 of the week's 32,600 players
  have one win in one game, 7,500 no win in one game); with 32 games or more, the win count's keys
  from 32 games (few players). At 1M games in bench_leaderboard: 569 buckets all time (the fullest
  bucket of several keys 325 rows), 170 this week (3 rows), 57 today.

Every scope is counted but the deal boards' day and week buckets (`is_counted`), whose rank stays
the plain count: one deal's players of one day or week, few (a dozen a day per deal at 1M games in
bench_leaderboard), so that their counts would be about one row per row, doubling the rows a finish
writes there and the rows the pruner deletes (those buckets are most of what it deletes). The one
large exception, the daily deal's board of its day, holds that day's players of the daily: its count
is as long as the daily board's, which is counted.

They are kept where the rows change, by triggers (migration 4e7c2a9b5d18, and c30328233f01 for the
players' wins buckets; their SQL computes the same buckets: change both together, with a migration
that rebuilds the counts): a row inserted adds one to its bucket; a row whose key moves to another
bucket takes one from the old and adds one to the new; a move within a bucket (most ``player_stats``
updates) writes nothing. Triggers see the true old and new key in the writer's transaction, which
the upsert does not tell the application (PostgreSQL's ON CONFLICT DO UPDATE returns neither whether
it changed the row nor the old key), so the counts are exact with any number of writers, and every
path that writes the rows (migrations too) keeps them. Rows are deleted only by the pruner, a closed
scope at a time, and it deletes the scope's counts with them (`server.storage.pruning`): no delete
trigger, which would add a count update to each row deleted. A bucket left empty stays, ``n = 0``.

The cost: a finish writes one more row per counted summary row it inserts, two per improvement that
changes bucket (bench/bench_leaderboard.py reports rows and bytes per finish). On PostgreSQL a bucket row is
locked from the finish's update to its commit, so finishes that touch the same bucket of the same
scope (the all-time variant boards' popular move counts) commit one after another: at most one per
commit latency (about 1,000/s for a 1 ms commit) for each such bucket, against about 80 finishes/s
in all at 8,000 actions/s. No two finishes' moves wait on each other in a cycle: a finish writes
its rows in scope order, and a row only moves one way: a best to a smaller bucket (it only
improves), a players row by score to a smaller one, by wins to a bucket of more wins plus games (a
game adds a game, a win one more; the win count's bucket of many games counts 32 games); and within
a row, its insert counts its score bucket before its wins bucket, as its moves do (PostgreSQL fires
the two update triggers by name: ``s`` before ``w``; until revision c30328233f01 the insert took
them the other way round, so that an insert and a move in one scope could wait on each other).
What would move that bound: count rows sharded by player (a shard in the key, a rank summing
that many times more rows). The rating board is not counted: a row per rated player of a variant,
small; its rank is the plain count.

The sum and the count are one statement, read in the page's snapshot (`use_one_snapshot`), so the
ranks agree with the rows even while games finish.

Within a game scope a row only ever gets better (a best never gets worse), so a cursor never skips or
repeats a row whose key did not change while paging; a player row may move either way (a lost game
lowers the win rate), and then appears where it now stands.

Bots rank apart from people: a bot's game goes to the same scopes with ``B/`` in front
(``B/V/8/m/a``, and ``B/a`` for the players board), never to the people's; `bots_scope` makes them.
A player is a bot or not for life (``players.bot``), so a player's rows are all on one side.

The rating board of a variant (race ratings, `server.storage.ratings`) reads ``ratings`` through the
same machinery: its scope is the variant's ``cells`` and its key ``(sort_key, player_id)``, with
``sort_key`` minus the shown rating (`rating_page`, `rating_around`).

Only the current and the previous day and week buckets are kept: the older ones are deleted by the
maintenance job of `server.services.pruning` (what it keeps and why: `server.storage.pruning`), and a
cursor pinning one is refused (`server.services.rankings`). The all-time buckets and the daily boards
are kept for ever.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from sqlalchemy import (
    BigInteger,
    BindParameter,
    ColumnElement,
    Integer,
    Select,
    Subquery,
    and_,
    bindparam,
    case,
    cast,
    func,
    literal_column,
    select,
    tuple_,
    union_all,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.expression import ClauseElement, Executable

from server.storage.records import (
    BoardGame,
    BoardPage,
    BoardPlayer,
    FinishedGameFigures,
    GameKey,
    PlayerKey,
    PlayerProfile,
    RankedGame,
    RatedPlayer,
    Rating,
)
from server.storage.tables import board_bests, games, player_stats, players, rank_buckets, ratings

__all__ = [
    "DURATION_CAP",
    "LOST_BIT",
    "MOVES_CAP",
    "Counted",
    "GameOrder",
    "Period",
    "PlayerOrder",
    "board_rows",
    "bots_scope",
    "bucket_floor",
    "daily_scope",
    "deal_scope",
    "explain",
    "game_around",
    "game_order_of",
    "game_page",
    "game_sort_key",
    "get_profile",
    "is_counted",
    "period_bucket",
    "player_around",
    "player_page",
    "player_scope",
    "player_stats_rows",
    "record_finished_game",
    "statements",
    "use_one_snapshot",
    "variant_scope",
    "wins_key",
]

GameOrder = Literal["moves", "time", "score"]
PlayerOrder = Literal["wins", "score"]
Period = Literal["day", "week", "all"]

LOST_BIT: Final = 1 << 62
MOVES_CAP: Final = (1 << 21) - 1
DURATION_CAP: Final = (1 << 41) - 1
_WON_CAP: Final = (1 << 31) - 1
_PLAYED_CAP: Final = (1 << 32) - 1
GAME_ORDERS: Final[tuple[GameOrder, ...]] = ("moves", "time", "score")
_ORDER_TAGS: Final[dict[GameOrder, str]] = {"moves": "m", "time": "t", "score": "s"}
_VARIANTS: Final = (8, 4, 2)
_BOTS_PREFIX: Final = "B/"
RECENT_GAMES: Final = 10

#: The boards of ``rank_buckets``: a game board, the players board by wins, by score.
Counted = Literal["g", "w", "s"]
#: Bucket widths (bits dropped from the key): game orders' and the players board's score. Fixed by the
#: triggers of migration 4e7c2a9b5d18, which compute the same buckets in SQL: change both together.
_GAME_SHIFTS: Final[dict[GameOrder, int]] = {"moves": 41, "time": 34, "score": 3}
_SCORE_SHIFT: Final = 3
_NO_WINS: Final = _WON_CAP << 32  # the smallest wins_key of a player with no win
#: Players with a win and fewer games than this have a bucket per key (per wins and games played); the
#: wins buckets are fixed by the triggers of migration c30328233f01, likewise.
_FEW_GAMES: Final = 32


# --------------------------------------------------------------------------- keys and scopes


def game_sort_key(order: GameOrder, *, won: bool, moves: int, duration_ms: int, score: int) -> int:
    """The packed ``sort_key`` of a game under ``order`` (smaller is better; see the module docstring)."""
    if order == "score":
        return -score
    lost = 0 if won else LOST_BIT
    moves = min(max(moves, 0), MOVES_CAP)
    duration_ms = min(max(duration_ms, 0), DURATION_CAP)
    if order == "moves":
        return lost | moves << 41 | duration_ms
    return lost | duration_ms << 21 | moves


def wins_key(*, played: int, won: int) -> int:
    """The players board's ``wins`` key: most wins, then higher win rate, then more games played."""
    tail = played if won > 0 else _PLAYED_CAP - played
    return (_WON_CAP - won) * (_PLAYED_CAP + 1) + tail


def period_bucket(period: Period, day: dt.date) -> str:
    """The bucket of ``period`` holding the UTC ``day``: ``a``, ``d2026-11-30`` or ``w2026-11-30``
    (a week is named by its Monday)."""
    if period == "all":
        return "a"
    if period == "day":
        return f"d{day.isoformat()}"
    return f"w{(day - dt.timedelta(days=day.weekday())).isoformat()}"


def deal_scope(code: str, order: GameOrder, bucket: str) -> str:
    """The scope of the deal board of ``code``: ``D/EO1-C8-AAAAAFA/m/a``."""
    return f"D/{code}/{_ORDER_TAGS[order]}/{bucket}"


def variant_scope(cells: int, order: GameOrder, bucket: str) -> str:
    """The scope of the variant board of ``cells``: ``V/8/m/a``."""
    return f"V/{cells}/{_ORDER_TAGS[order]}/{bucket}"


def daily_scope(day: dt.date, cells: int, order: GameOrder) -> str:
    """The scope of the daily board of ``day`` in ``cells``' variant: ``Y/2026-11-30/8/m``."""
    return f"Y/{day.isoformat()}/{cells}/{_ORDER_TAGS[order]}"


def player_scope(bucket: str) -> str:
    """The scope of the players board of a period bucket (the bucket itself)."""
    return bucket


def bots_scope(scope: str, bots: bool) -> str:
    """The scope itself for people's games, its bots' twin (``B/`` in front) when ``bots``."""
    return _BOTS_PREFIX + scope if bots else scope


def game_order_of(scope: str) -> GameOrder:
    """The order of a game board's scope (`deal_scope`, `variant_scope`, `daily_scope`, bots' or not)."""
    parts = scope.removeprefix(_BOTS_PREFIX).split("/")
    tag = parts[3] if parts[0] == "Y" else parts[2]
    return next(order for order, known in _ORDER_TAGS.items() if known == tag)


def is_counted(scope: str) -> bool:
    """Whether ``rank_buckets`` counts a game board's scope: all but the deal boards' day and week
    buckets (see "Ranks" above)."""
    return not scope.removeprefix(_BOTS_PREFIX).startswith("D/") or scope.endswith("/a")


def bucket_floor(board: Counted, scope: str, key: int) -> int:
    """The smallest key of the bucket of ``key`` in ``rank_buckets`` (see "Ranks" above)."""
    if board == "w":  # the key, or the win count's keys of many games
        return key if bucket_is_the_key(board, key) else key >> 32 << 32 | _FEW_GAMES
    shift = _GAME_SHIFTS[game_order_of(scope)] if board == "g" else _SCORE_SHIFT
    return key >> shift << shift


def bucket_is_the_key(board: Counted, key: int) -> bool:
    """Whether the bucket of ``key`` holds that key alone: the players board's no-win keys and those of
    fewer than `_FEW_GAMES` games, where most of its rows tie (see "Ranks" above)."""
    return board == "w" and (key >= _NO_WINS or key & _PLAYED_CAP < _FEW_GAMES)


def _utc_day(moment: dt.datetime) -> dt.date:
    return moment.astimezone(dt.UTC).date()


def board_rows(game: RankedGame) -> list[dict[str, Any]]:
    """The ``board_bests`` candidates of a finished game: one per scope it plays in."""
    day = _utc_day(game.finished_at)
    buckets = [period_bucket(period, day) for period in ("all", "day", "week")]
    rows: list[dict[str, Any]] = []
    for order in GAME_ORDERS:
        key = game_sort_key(
            order, won=game.won, moves=game.moves, duration_ms=game.duration_ms, score=game.score
        )
        scopes = [deal_scope(game.code, order, bucket) for bucket in buckets]
        scopes += [variant_scope(game.cells, order, bucket) for bucket in buckets]
        if game.daily_date is not None:
            scopes.append(daily_scope(game.daily_date, game.cells, order))
        rows.extend(
            {
                "scope": bots_scope(scope, game.bot),
                "player_id": game.player_id,
                "sort_key": key,
                "finished_at": game.finished_at,
                "game_id": game.id,
            }
            for scope in scopes
        )
    return rows


def player_stats_rows(game: RankedGame) -> list[dict[str, Any]]:
    """The ``player_stats`` increments of a finished game: all time, its UTC day and its week."""
    day = _utc_day(game.finished_at)
    won = 1 if game.won else 0
    return [
        {
            "scope": bots_scope(player_scope(period_bucket(period, day)), game.bot),
            "player_id": game.player_id,
            "played": 1,
            "won": won,
            "best_score": game.score,
            "wins_key": wins_key(played=1, won=won),
            "score_key": -game.score,
        }
        for period in ("all", "day", "week")
    ]


# --------------------------------------------------------------------------- writing


def _insert(conn: AsyncConnection, table: Any) -> Any:
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


def _upsert_best(conn: AsyncConnection) -> Executable:
    """Insert a candidate, or replace the stored best when the candidate comes strictly before it."""
    insert = _insert(conn, board_bests)
    new, old = insert.excluded, board_bests.c
    return insert.on_conflict_do_update(  # type: ignore[no-any-return]
        index_elements=[old.scope, old.player_id],
        set_={"sort_key": new.sort_key, "finished_at": new.finished_at, "game_id": new.game_id},
        where=tuple_(new.sort_key, new.finished_at, new.game_id)
        < tuple_(old.sort_key, old.finished_at, old.game_id),
    )


def _wins_key_sql(played: ColumnElement[Any], won: ColumnElement[Any]) -> ColumnElement[Any]:
    """`wins_key` in SQL (constants inline, so that PostgreSQL computes in bigint)."""
    return (literal_column(str(_WON_CAP)) - won) * literal_column(str(_PLAYED_CAP + 1)) + case(
        (won > 0, played), else_=literal_column(str(_PLAYED_CAP)) - played
    )


def _upsert_stats(conn: AsyncConnection) -> Executable:
    """Insert a player's first game of a bucket, or add a game to the bucket's figures."""
    insert = _insert(conn, player_stats)
    new, old = insert.excluded, player_stats.c
    played = old.played + new.played
    won = old.won + new.won
    best = case((new.best_score > old.best_score, new.best_score), else_=old.best_score)
    return insert.on_conflict_do_update(  # type: ignore[no-any-return]
        index_elements=[old.scope, old.player_id],
        set_={
            "played": played,
            "won": won,
            "best_score": best,
            "wins_key": _wins_key_sql(played, won),
            "score_key": -best,
        },
    )


async def record_finished_game(conn: AsyncConnection, game: RankedGame) -> None:
    """Put a finished game on every board it belongs to, in the caller's transaction.

    The game becomes its player's row in a scope when it comes before the row stored there (or there is
    none); the player's figures of all time, of its day and of its week count it. Call it exactly once
    per game (`repository.finish_game` does), or ``played`` counts the game twice.
    """
    # Rows in primary-key order, so that concurrent writers (PostgreSQL) lock them in the same order.
    await conn.execute(_upsert_best(conn), sorted(board_rows(game), key=lambda row: row["scope"]))
    await conn.execute(_upsert_stats(conn), sorted(player_stats_rows(game), key=lambda row: row["scope"]))


# --------------------------------------------------------------------------- reading: the two kinds of board


#: What one board's rows have in common: a scope string (``board_bests``, ``player_stats``), or the
#: variant (``ratings``, one board per cell count).
_Scope = str | int


@dataclass(frozen=True, slots=True)
class _Board:
    """How to read one kind of board: its table, scope column, key columns (in order) and row select.

    Its templates are found by ``name``: a copy that ranks by counting every row (``counted`` None,
    bench/bench_rank_buckets.py's old way) finds its board's.
    """

    name: str
    scope: Any
    player: Any
    keys: tuple[Any, ...]
    counted: Counted | None = None  # its board in ``rank_buckets``; None: ranks count every row before

    def where_scope(self, scope: _Scope | BindParameter[Any]) -> ColumnElement[bool]:
        return self.scope == scope  # type: ignore[no-any-return]


_GAME_BOARD: Final = _Board(
    "games",
    board_bests.c.scope,
    board_bests.c.player_id,
    (board_bests.c.sort_key, board_bests.c.finished_at, board_bests.c.game_id),
    "g",
)


def _players_board(order: PlayerOrder, sort_key: Any, counted: Counted) -> _Board:
    """A players board of ``player_stats``: by ``sort_key``, then by player."""
    stats = player_stats.c
    return _Board(order, stats.scope, stats.player_id, (sort_key, stats.player_id), counted)


_WINS_BOARD: Final = _players_board("wins", player_stats.c.wins_key, "w")
_SCORE_BOARD: Final = _players_board("score", player_stats.c.score_key, "s")


#: The rating board of a variant: best rating first (``sort_key`` is minus the shown rating), then by id.
_RATING_BOARD: Final = _Board(
    "rating", ratings.c.cells, ratings.c.player_id, (ratings.c.sort_key, ratings.c.player_id)
)


def _player_board(order: PlayerOrder) -> _Board:
    return _WINS_BOARD if order == "wins" else _SCORE_BOARD


def _rows_statement(board: _Board, scope: _Scope | BindParameter[Any]) -> Select[Any]:
    if board is _GAME_BOARD:
        return (
            select(
                *board.keys,
                board_bests.c.player_id,
                players.c.name,
                players.c.bot,
                games.c.code,
                games.c.cells,
                games.c.won,
                games.c.score,
                games.c.moves,
                games.c.duration_ms,
            )
            .select_from(
                board_bests.join(games, games.c.id == board_bests.c.game_id).join(
                    players, players.c.id == board_bests.c.player_id
                )
            )
            .where(board.where_scope(scope))
        )
    if board is _RATING_BOARD:
        return (
            select(
                ratings.c.sort_key,
                ratings.c.player_id,
                players.c.name,
                players.c.bot,
                ratings.c.mu,
                ratings.c.sigma,
                ratings.c.races,
            )
            .select_from(ratings.join(players, players.c.id == ratings.c.player_id))
            .where(board.where_scope(scope))
        )
    return (
        select(
            board.keys[0],
            player_stats.c.player_id,
            players.c.name,
            players.c.bot,
            player_stats.c.played,
            player_stats.c.won,
            player_stats.c.best_score,
        )
        .select_from(player_stats.join(players, players.c.id == player_stats.c.player_id))
        .where(board.where_scope(scope))
    )


#: A statement built once (`_PAGE_TEMPLATES`, `_RANK_TEMPLATES`, `_AROUND_TEMPLATES`) and the values of
#: its bound parameters for one read: building a board's statements anew took more of a read's CPU
#: than the database's work (about 1.7 ms for the around read), since SQLAlchemy builds and keys the
#: whole tree each time; a template is keyed once and compiled once.
_Bound = tuple[Select[Any], dict[str, Any]]


def _key_parameters(name: str, columns: Sequence[Any]) -> tuple[BindParameter[Any], ...]:
    return tuple(bindparam(f"{name}{index}", type_=column.type) for index, column in enumerate(columns))


def _key_values(name: str, values: Sequence[Any]) -> dict[str, Any]:
    return {f"{name}{index}": value for index, value in enumerate(values)}


def _page_template(board: _Board, *, after: bool) -> Select[Any]:
    """A page of ``:limit`` rows in board order, after the key ``:after0…`` when ``after``."""
    statement = (
        _rows_statement(board, bindparam("scope"))
        .order_by(*board.keys)
        .limit(bindparam("limit", type_=Integer))
    )
    if after:
        statement = statement.where(tuple_(*board.keys) > tuple_(*_key_parameters("after", board.keys)))
    return statement


def _page_read(board: _Board, scope: _Scope, after: Sequence[Any] | None, limit: int) -> _Bound:
    parameters = {"scope": scope, "limit": limit, **_key_values("after", after or ())}
    return _PAGE_TEMPLATES[board, after is not None], parameters


#: How a rank is counted (`_rank_read`): every row before it; a sum of the buckets before its bucket and
#: a count within it; or, when its bucket is its key alone, buckets only.
_RankWay = Literal["rows", "buckets", "key"]


def _rank_template(board: _Board, way: _RankWay) -> Select[Any]:
    """(rows with a smaller sort key than ``:key``, rows with that sort key before the tiebreak
    ``:tie0…``) in the scope ``:scope``.

    ``buckets`` sums the ``rank_buckets`` before the bucket starting at ``:lo`` and counts the rows of
    that bucket before the key; ``rows`` counts every row before it; ``key``, when the bucket holds the
    key alone, reads both from buckets (`_key_bucket_counts`).
    """
    sort_key, *tiebreak = board.keys
    table = sort_key.table
    scope: BindParameter[Any] = bindparam("scope")
    key = bindparam("key", type_=BigInteger())
    if way == "key":
        return _key_bucket_counts(board, scope, key)
    tied_before = (
        select(func.count())
        .select_from(table)
        .where(
            board.where_scope(scope),
            sort_key == key,
            tuple_(*tiebreak) < tuple_(*_key_parameters("tie", tiebreak)),
        )
    )
    if way == "rows":
        smaller = select(func.count()).select_from(table).where(board.where_scope(scope), sort_key < key)
        return select(smaller.scalar_subquery(), tied_before.scalar_subquery())
    lo = bindparam("lo", type_=BigInteger())
    buckets_before = select(_sum(rank_buckets.c.n)).where(
        rank_buckets.c.scope == scope, rank_buckets.c.board == board.counted, rank_buckets.c.lo < lo
    )
    in_bucket = (
        select(func.count())
        .select_from(table)
        .where(board.where_scope(scope), sort_key >= lo, sort_key < key)
    )
    smaller_sum = buckets_before.scalar_subquery() + in_bucket.scalar_subquery()
    return select(smaller_sum, tied_before.scalar_subquery())


def _key_bucket_counts(board: _Board, scope: BindParameter[Any], key: BindParameter[Any]) -> Select[Any]:
    """`_rank_template`'s counts for the first row of a page, from the buckets up to ``:key``'s, which
    holds that key alone: no count walks its ties.

    The ties before the row are its key's count less the ties from it on the page (``:on_page``):
    exact when another key follows them on the page, the only case where `_ranks` uses them (when the
    whole page ties, its rows share the first row's rank).
    """
    buckets = rank_buckets.c
    smaller, tied = (
        case((condition, buckets.n), else_=0) for condition in (buckets.lo < key, buckets.lo == key)
    )
    return select(_sum(smaller), _sum(tied) - bindparam("on_page", type_=BigInteger())).where(
        buckets.scope == scope, buckets.board == board.counted, buckets.lo <= key
    )


def _sum(counts: ColumnElement[Any]) -> ColumnElement[Any]:
    """The sum of ``counts`` over the rows, 0 for none: a bigint on both (PostgreSQL sums to numeric)."""
    return cast(func.coalesce(func.sum(counts), 0), BigInteger)


def _rank_read(board: _Board, scope: _Scope, keys: Sequence[Sequence[Any]]) -> _Bound:
    """The rank statement of ``keys[0]``, the first of a page's keys: counted boards sum
    ``rank_buckets``, the rating board and the deal boards' day and week scopes count every row before
    it (see "Ranks" above)."""
    first = keys[0]
    parameters = {"scope": scope, "key": first[0]}
    if board.counted is not None and bucket_is_the_key(board.counted, first[0]):
        on_page = next((index for index, key in enumerate(keys) if key[0] != first[0]), len(keys))
        return _RANK_TEMPLATES[board.name, "key"], {**parameters, "on_page": on_page}
    parameters.update(_key_values("tie", first[1:]))
    if board.counted is None or (board.counted == "g" and not is_counted(str(scope))):
        return _RANK_TEMPLATES[board.name, "rows"], parameters
    assert isinstance(scope, str)
    parameters["lo"] = bucket_floor(board.counted, scope, first[0])
    return _RANK_TEMPLATES[board.name, "buckets"], parameters


async def _ranks(
    conn: AsyncConnection, board: _Board, scope: _Scope, keys: Sequence[Sequence[Any]]
) -> list[int]:
    """Competition ranks of consecutive rows of a board, from one count query for the first row."""
    if not keys:
        return []
    template, parameters = _rank_read(board, scope, keys)
    counts: Any = (await conn.execute(template, parameters)).one()
    smaller, tied_before = counts
    ranks = [int(smaller) + 1]
    position = int(smaller) + int(tied_before)  # of the first row, from 0
    for index in range(1, len(keys)):
        ranks.append(ranks[-1] if keys[index][0] == keys[index - 1][0] else position + index + 1)
    return ranks


def _game_row(row: Any, rank: int) -> BoardGame:
    return BoardGame(
        rank=rank,
        player_id=row.player_id,
        player_name=row.name,
        game_id=row.game_id,
        code=row.code,
        cells=row.cells,
        won=bool(row.won),
        score=row.score,
        moves=row.moves,
        duration_ms=row.duration_ms or 0,
        finished_at=row.finished_at,
        key=GameKey(row.sort_key, row.finished_at, row.game_id),
        player_bot=bool(row.bot),
    )


def _player_row(row: Any, rank: int) -> BoardPlayer:
    return BoardPlayer(
        rank=rank,
        player_id=row.player_id,
        player_name=row.name,
        played=row.played,
        won=row.won,
        best_score=row.best_score,
        key=PlayerKey(row[0], row.player_id),
        player_bot=bool(row.bot),
    )


def _rated_row(row: Any, rank: int) -> RatedPlayer:
    return RatedPlayer(
        rank=rank,
        player_id=row.player_id,
        player_name=row.name,
        rating=Rating(row.mu, row.sigma, row.races),
        key=PlayerKey(row.sort_key, row.player_id),
        player_bot=bool(row.bot),
    )


def _key_of(board: _Board, row: Any) -> tuple[Any, ...]:
    return tuple(row[: len(board.keys)]) if board is _GAME_BOARD else (row[0], row.player_id)


async def _page(
    conn: AsyncConnection, board: _Board, scope: _Scope, after: Sequence[Any] | None, limit: int
) -> tuple[list[Any], list[int], bool]:
    rows = list((await conn.execute(*_page_read(board, scope, after, limit + 1))).all())
    has_more = len(rows) > limit
    rows = rows[:limit]
    return rows, await _ranks(conn, board, scope, [_key_of(board, row) for row in rows]), has_more


async def _around(
    conn: AsyncConnection, board: _Board, scope: _Scope, player_id: str, limit: int
) -> tuple[list[Any], list[int], bool]:
    """The player's row with up to ``(limit - 1) // 2`` rows before it; the rest of ``limit`` after it.

    At the top of the board there are fewer rows before, and the rows after fill the page; at the
    bottom, the other way round. No row when the player has none in the scope.
    """
    rows = list((await conn.execute(*_around_read(board, scope, player_id, limit))).all())
    own = next((index for index, row in enumerate(rows) if row.player_id == player_id), None)
    if own is None:
        return [], [], False
    before, own_row, after = rows[:own], rows[own], rows[own + 1 :]
    take_before = min(len(before), max((limit - 1) // 2, limit - 1 - len(after)))
    take_after = min(len(after), limit - 1 - take_before)
    rows = [*before[len(before) - take_before :], own_row, *after[:take_after]]
    ranks = await _ranks(conn, board, scope, [_key_of(board, row) for row in rows])
    return rows, ranks, len(after) > take_after


def _around_template(board: _Board) -> Select[Any]:
    """In board order: up to ``:before`` rows just before the player's own key, then up to ``:after``
    rows from it (the own row first); none when the player has no row. Its bound parameters are
    ``scope``, ``player``, ``before`` and ``after`` (`_around_parameters`).

    One statement, the own key a subquery of both sides: a read of the page around a player is two
    round trips (this, then the rank count), not four, and each costs the event loop a database call
    (the around reads of the largest boards are the slowest reads).
    Each side is a union of index ranges (`_keyset_ranges`). Built once per board
    (`_AROUND_TEMPLATES`): building it anew takes about 1.3 ms of the read's CPU, more than the rank's
    count.
    """
    scope: BindParameter[Any] = bindparam("scope")
    player: BindParameter[Any] = bindparam("player")
    own = [
        select(key).where(board.where_scope(scope), board.player == player).scalar_subquery()
        for key in board.keys
    ]
    before = _side(board, scope, _keyset_ranges(board.keys, own, before=True), "before", descending=True)
    after = _side(board, scope, _keyset_ranges(board.keys, own, before=False), "after", descending=False)
    both = union_all(select(before), select(after)).subquery()
    return select(both).order_by(*(both.c[column.name] for column in board.keys))


def _keyset_ranges(keys: Sequence[Any], own: Sequence[Any], *, before: bool) -> list[ColumnElement[bool]]:
    """``keys < own`` (``before``) or ``keys >= own``, as one range per key column: the columns before
    it equal to the own key's, it below (above) the own key's.

    A row-value comparison with a subquery on its right bounds only the first column of SQLite's
    index range, the rest filtering row by row: each side walked every row tied with the own sort key
    (at 1M games, 9,000 of a week's players have one win in one game: the around read of that board
    took 9.9 / 17.4 ms p50 / p99 on SQLite). These ranges bound every column.
    """
    ranges = []
    for index, (column, value) in enumerate(zip(keys, own, strict=True)):
        last = index == len(keys) - 1
        bound = column < value if before else (column >= value if last else column > value)
        ranges.append(and_(*(k == v for k, v in zip(keys[:index], own[:index], strict=True)), bound))
    return ranges


def _side(
    board: _Board,
    scope: BindParameter[Any],
    ranges: Sequence[ColumnElement[bool]],
    limit: str,
    *,
    descending: bool,
) -> Subquery:
    """The first ``:limit`` rows of the ranges together, going away from the own key."""
    order = [column.desc() if descending else column for column in board.keys]
    parts = union_all(
        *(
            select(
                _rows_statement(board, scope)
                .where(keys)
                .order_by(*order)
                .limit(bindparam(limit, type_=Integer))
                .subquery()
            )
            for keys in ranges
        )
    ).subquery()
    columns = [parts.c[column.name] for column in board.keys]
    ordered = [column.desc() if descending else column for column in columns]
    return select(parts).order_by(*ordered).limit(bindparam(limit, type_=Integer)).subquery()


def _around_read(board: _Board, scope: _Scope, player_id: str, limit: int) -> _Bound:
    parameters = {"scope": scope, "player": player_id, "before": limit - 1, "after": limit + 1}
    return _AROUND_TEMPLATES[board], parameters


_BOARDS: Final = (_GAME_BOARD, _WINS_BOARD, _SCORE_BOARD, _RATING_BOARD)
_PAGE_TEMPLATES: Final = {
    (board, after): _page_template(board, after=after) for board in _BOARDS for after in (False, True)
}
_RANK_TEMPLATES: Final = {
    (board.name, way): _rank_template(board, way)
    for board in _BOARDS
    for way in ("rows", "buckets", "key")
    if way == "rows" or (board.counted is not None and (way == "buckets" or board.counted == "w"))
}
"""Every board ranks by rows; a counted one by buckets too; the wins board, whose buckets may be a key
alone (`bucket_is_the_key`), by the key's bucket too."""
_AROUND_TEMPLATES: Final = {board: _around_template(board) for board in _BOARDS}


def _bound(read: _Bound) -> Select[Any]:
    """A template with its parameters' values in it (to show its plan; reads pass them apart)."""
    template, parameters = read
    return template.params(parameters)


def _rank_statement(board: _Board, scope: _Scope, first: Sequence[Any]) -> Select[Any]:
    return _bound(_rank_read(board, scope, [first]))


def _around_statement(board: _Board, scope: _Scope, player_id: str, limit: int) -> Select[Any]:
    return _bound(_around_read(board, scope, player_id, limit))


async def use_one_snapshot(conn: AsyncConnection) -> None:
    """Make the reads of ``conn``'s next transaction see one snapshot of the database.

    A page takes several statements (rows, then ranks; ``around``: the player's key, the rows before,
    the rows from it): read from one snapshot, the ranks and rows agree even while games finish.
    PostgreSQL needs REPEATABLE READ for that (its default READ COMMITTED snapshots each statement);
    a SQLite read transaction already keeps one snapshot. Call it before the connection's first
    statement.
    """
    if conn.dialect.name == "postgresql":
        await conn.execution_options(isolation_level="REPEATABLE READ")


async def game_page(
    conn: AsyncConnection, scope: str, *, after: GameKey | None = None, limit: int = 20
) -> BoardPage[BoardGame]:
    """A page of a game board: at most ``limit`` rows after ``after`` (from the top when None)."""
    key = None if after is None else (after.sort_key, after.finished_at, after.game_id)
    rows, ranks, has_more = await _page(conn, _GAME_BOARD, scope, key, limit)
    return BoardPage(tuple(map(_game_row, rows, ranks)), has_more)


async def game_around(
    conn: AsyncConnection, scope: str, player_id: str, *, limit: int = 20
) -> BoardPage[BoardGame]:
    """The page of a game board around a player's row (see `_around`); empty when the player has none."""
    rows, ranks, has_more = await _around(conn, _GAME_BOARD, scope, player_id, limit)
    return BoardPage(tuple(map(_game_row, rows, ranks)), has_more)


async def player_page(
    conn: AsyncConnection, scope: str, order: PlayerOrder, *, after: PlayerKey | None = None, limit: int = 20
) -> BoardPage[BoardPlayer]:
    """A page of the players board of a period bucket, in ``order``."""
    key = None if after is None else (after.sort_key, after.player_id)
    rows, ranks, has_more = await _page(conn, _player_board(order), scope, key, limit)
    return BoardPage(tuple(map(_player_row, rows, ranks)), has_more)


async def player_around(
    conn: AsyncConnection, scope: str, order: PlayerOrder, player_id: str, *, limit: int = 20
) -> BoardPage[BoardPlayer]:
    """The page of the players board around a player's row; empty when the player has none."""
    rows, ranks, has_more = await _around(conn, _player_board(order), scope, player_id, limit)
    return BoardPage(tuple(map(_player_row, rows, ranks)), has_more)


async def rating_page(
    conn: AsyncConnection, cells: int, *, after: PlayerKey | None = None, limit: int = 20
) -> BoardPage[RatedPlayer]:
    """A page of the rating board of variant ``cells``: highest shown rating first, then by id."""
    key = None if after is None else (after.sort_key, after.player_id)
    rows, ranks, has_more = await _page(conn, _RATING_BOARD, cells, key, limit)
    return BoardPage(tuple(map(_rated_row, rows, ranks)), has_more)


async def rating_around(
    conn: AsyncConnection, cells: int, player_id: str, *, limit: int = 20
) -> BoardPage[RatedPlayer]:
    """The page of the rating board around a player's row; empty when the player has no rating there."""
    rows, ranks, has_more = await _around(conn, _RATING_BOARD, cells, player_id, limit)
    return BoardPage(tuple(map(_rated_row, rows, ranks)), has_more)


# --------------------------------------------------------------------------- profiles


def _figures(row: Any) -> FinishedGameFigures:
    return FinishedGameFigures(
        game_id=row.id,
        code=row.code,
        cells=row.cells,
        won=bool(row.won),
        score=row.score,
        moves=row.moves,
        duration_ms=row.duration_ms or 0,
        finished_at=row.finished_at,
    )


_FIGURES: Final = (
    games.c.id,
    games.c.code,
    games.c.cells,
    games.c.won,
    games.c.score,
    games.c.moves,
    games.c.duration_ms,
    games.c.finished_at,
)


async def get_profile(
    conn: AsyncConnection, player_id: str, *, recent: int = RECENT_GAMES
) -> PlayerProfile | None:
    """A player's profile, or None when there is no such player (a bot's figures are from its boards)."""
    player = (
        await conn.execute(
            select(players.c.id, players.c.name, players.c.bot).where(players.c.id == player_id)
        )
    ).first()
    if player is None:
        return None
    bot = bool(player.bot)
    stats = (
        await conn.execute(
            select(player_stats.c.played, player_stats.c.won, player_stats.c.best_score).where(
                player_stats.c.scope == bots_scope(player_scope("a"), bot),
                player_stats.c.player_id == player_id,
            )
        )
    ).first()
    best_scopes = {bots_scope(variant_scope(cells, "moves", "a"), bot): cells for cells in _VARIANTS}
    best_rows = (
        await conn.execute(
            select(board_bests.c.scope, *_FIGURES)
            .join(games, games.c.id == board_bests.c.game_id)
            .where(
                board_bests.c.scope.in_(best_scopes),
                board_bests.c.player_id == player_id,
                board_bests.c.sort_key < LOST_BIT,
            )
        )
    ).all()
    best = sorted((_figures(row) for row in best_rows), key=lambda figures: _VARIANTS.index(figures.cells))
    daily = await conn.scalars(
        select(games.c.daily_date)
        .where(
            games.c.player_id == player_id,
            games.c.finished_at.is_not(None),
            games.c.won.is_(True),
            games.c.daily_date.is_not(None),
            games.c.hinted.is_(False),
        )
        .distinct()
        .order_by(games.c.daily_date)
    )
    recent_rows = (
        await conn.execute(
            select(*_FIGURES)
            .where(games.c.player_id == player_id, games.c.finished_at.is_not(None))
            .order_by(games.c.finished_at.desc(), games.c.id.desc())
            .limit(recent)
        )
    ).all()
    return PlayerProfile(
        player_id=player.id,
        name=player.name,
        played=stats.played if stats else 0,
        won=stats.won if stats else 0,
        best_score=stats.best_score if stats else 0,
        best=tuple(best),
        daily_wins=tuple(daily),
        recent=tuple(map(_figures, recent_rows)),
        bot=bot,
    )


# --------------------------------------------------------------------------- query plans


class _Explain(Executable, ClauseElement):
    """``EXPLAIN QUERY PLAN`` (SQLite) or ``EXPLAIN`` (PostgreSQL) of a statement, with its parameters."""

    inherit_cache = False

    def __init__(self, statement: ClauseElement, *, analyze: bool) -> None:
        self.statement = statement
        self.analyze = analyze


def _compile_explain(element: _Explain, compiler: Any, **kw: Any) -> str:
    if compiler.dialect.name == "sqlite":
        prefix = "EXPLAIN QUERY PLAN "
    else:
        prefix = "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " if element.analyze else "EXPLAIN (COSTS OFF) "
    return prefix + str(compiler.process(element.statement, **kw))


def _register_explain() -> None:
    from sqlalchemy.ext.compiler import compiles

    compiles(_Explain)(_compile_explain)


_register_explain()


async def explain(conn: AsyncConnection, statement: ClauseElement, *, analyze: bool = False) -> list[str]:
    """The query plan of ``statement``, one line per step (SQLite: ``EXPLAIN QUERY PLAN`` rows)."""
    result = await conn.execute(_Explain(statement, analyze=analyze))
    if conn.dialect.name == "sqlite":
        return [f"{row[0]}:{row[1]} {row[3]}" for row in result]
    return [str(row[0]) for row in result]


def statements(
    kind: Literal["games", "wins", "score"], scope: str, key: Sequence[Any], player_id: str, *, limit: int
) -> dict[str, Select[Any]]:
    """The statements a board read runs, by name, to show their plans (bench/bench_leaderboard.py).

    ``key`` is a row's key as a tuple (games: sort key, finish, game id; players: sort key, player id).
    """
    board = {"games": _GAME_BOARD, "wins": _WINS_BOARD, "score": _SCORE_BOARD}[kind]
    return {
        "page": _bound(_page_read(board, scope, None, limit + 1)),
        "page after a cursor": _bound(_page_read(board, scope, key, limit + 1)),
        "rank of a row": _rank_statement(board, scope, key),
        "rows around a player": _around_statement(board, scope, player_id, limit),
    }
