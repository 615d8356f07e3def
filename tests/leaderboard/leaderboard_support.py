"""Helpers of the leaderboard tests: finished games written through the real finishing path, the
service with a fixed clock, whole boards read page by page, and an oracle that ranks games and players
straight from their definitions (tuples and fractions, not the packed keys the storage uses).

Games are written with ``repository.insert_game`` + ``repository.finish_game``: the path the
committer takes when a game ends, so the summaries are maintained exactly as in production. (Only
the API tests play real games: these tests need chosen figures and finishing times.)
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import protocol
from engine import Deal
from server.services.rankings import LeaderboardService
from server.storage import Database, GameResult, GameStart, PlayerRecord, repository

UTC = dt.UTC
#: A Monday noon, UTC.
T0 = dt.datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CODE = "EO1-C8-AAAAAFA"


@dataclass(frozen=True)
class Finished:
    """A finished game as the tests write it."""

    id: str
    player: str
    code: str = CODE
    daily_date: dt.date | None = None
    won: bool = True
    moves: int = 100
    duration_ms: int = 60_000
    score: int = 0
    finished_at: dt.datetime = T0

    @property
    def cells(self) -> int:
        return Deal.from_code(self.code).cells


@dataclass
class Recorder:
    """Writes finished games (and their players) and remembers them for the oracle."""

    database: Database
    games: list[Finished] = field(default_factory=list)
    players: set[str] = field(default_factory=set)

    async def add(self, *games: Finished) -> None:
        async with self.database.transaction() as conn:
            for game in games:
                if game.player not in self.players:
                    await repository.insert_player(
                        conn,
                        PlayerRecord(
                            id=game.player,
                            name=f"name-{game.player}",
                            token_hash=f"{game.player:0>64}"[-64:],
                            created_at=T0 - dt.timedelta(days=400),
                        ),
                    )
                    self.players.add(game.player)
                started_at = game.finished_at - dt.timedelta(milliseconds=game.duration_ms)
                await repository.insert_game(
                    conn,
                    GameStart(
                        id=game.id,
                        player_id=game.player,
                        code=game.code,
                        cells=game.cells,
                        daily_date=game.daily_date,
                        started_at=started_at,
                    ),
                )
                finished = await repository.finish_game(
                    conn,
                    GameResult(
                        id=game.id,
                        status="won" if game.won else "resigned",
                        score=game.score,
                        moves=game.moves,
                        undos=0,
                        finished_at=game.finished_at,
                        duration_ms=game.duration_ms,
                        won=game.won,
                    ),
                )
                assert finished
        self.games.extend(games)


def service(database: Database, now: dt.datetime = T0) -> LeaderboardService:
    return LeaderboardService(database, clock=lambda: now)


async def ask(svc: LeaderboardService, **fields: Any) -> dict[str, Any]:
    """One page, as the protocol parses the request; the reply is checked against the protocol."""
    request = protocol.parse_client_message({"type": "leaderboard", **fields})
    assert isinstance(request, protocol.LeaderboardRequest)
    reply = (await svc.leaderboard(request)).to_wire()
    protocol.validate_server_message(reply)
    return reply


async def whole_board(
    svc: LeaderboardService, *, limit: int, after: str | None = None, **fields: Any
) -> list[dict[str, Any]]:
    """Every row of a board, page after page (from ``after`` when given)."""
    rows: list[dict[str, Any]] = []
    cursor: dict[str, Any] = {} if after is None else {"after": after}
    while True:
        reply = await ask(svc, limit=limit, **fields, **cursor)
        rows.extend(reply["rows"])
        assert len(reply["rows"]) <= limit
        if "next" not in reply:
            return rows
        assert len(reply["rows"]) == limit
        cursor = {"after": reply["next"]}


# --------------------------------------------------------------------------- the oracle


def in_period(game: Finished, period: str, now: dt.datetime) -> bool:
    day, today = game.finished_at.astimezone(UTC).date(), now.astimezone(UTC).date()
    if period == "day":
        return day == today
    if period == "week":
        return day - dt.timedelta(days=day.weekday()) == today - dt.timedelta(days=today.weekday())
    return True


def game_rank_key(game: Finished, order: str) -> tuple[Any, ...]:
    """What ``rank`` compares, from the protocol's words."""
    if order == "moves":
        return (not game.won, game.moves, game.duration_ms)
    if order == "time":
        return (not game.won, game.duration_ms, game.moves)
    return (-game.score,)


def competition_ranks(keys: list[Any]) -> list[int]:
    ranks: list[int] = []
    for index, key in enumerate(keys):
        ranks.append(ranks[-1] if index and key == keys[index - 1] else index + 1)
    return ranks


def expected_game_board(games: list[Finished], order: str) -> list[tuple[int, str, str]]:
    """(rank, player, game) of a game board holding ``games``: each player's best game once."""
    best: dict[str, tuple[Any, ...]] = {}
    for game in games:
        key = (game_rank_key(game, order), game.finished_at, game.id)
        if game.player not in best or key < best[game.player]:
            best[game.player] = key
    ordered = sorted((key, player) for player, key in best.items())
    ranks = competition_ranks([key[0] for key, _ in ordered])
    return [(rank, player, key[2]) for rank, (key, player) in zip(ranks, ordered, strict=True)]


def expected_players_board(games: list[Finished], order: str) -> list[tuple[int, str, int, int]]:
    """(rank, player, played, won) of the players board holding ``games``."""
    figures: dict[str, list[int]] = {}
    for game in games:
        played_won_best = figures.setdefault(game.player, [0, 0, 0])
        played_won_best[0] += 1
        played_won_best[1] += game.won
        played_won_best[2] = max(played_won_best[2], game.score)

    def rank_key(item: tuple[str, list[int]]) -> tuple[Any, ...]:
        played, won, best_score = item[1]
        if order == "score":
            return (-best_score,)
        return (-won, -Fraction(won, played), -played)

    ordered = sorted(figures.items(), key=lambda item: (rank_key(item), item[0]))
    ranks = competition_ranks([rank_key(item) for item in ordered])
    return [
        (rank, player, played, won) for rank, (player, (played, won, _)) in zip(ranks, ordered, strict=True)
    ]


def game_rows(rows: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
    return [(row["rank"], row["player"]["id"], row["game"]) for row in rows]


def player_rows(rows: list[dict[str, Any]]) -> list[tuple[int, str, int, int]]:
    return [(row["rank"], row["player"]["id"], row["played"], row["won"]) for row in rows]
