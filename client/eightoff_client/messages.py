"""What the server sends, as TypedDicts: the decoded frame itself, typed (protocol/README.md section 6).

Fields the spec marks optional are ``NotRequired``; ``from`` is a Python keyword, so the maps that
carry it use the functional syntax. Unknown fields a later server adds stay in the dict (section 12).
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

__all__ = [
    "Ack",
    "Action",
    "Change",
    "Diff",
    "ErrorReply",
    "GameOver",
    "GameRow",
    "GamesPage",
    "Hint",
    "LeaderboardPage",
    "LiveGame",
    "LivePage",
    "Ok",
    "Op",
    "Player",
    "PlayerRow",
    "Profile",
    "ProfileGame",
    "ServerInfo",
    "Snapshot",
    "Status",
    "Streak",
    "Welcome",
]

Status = Literal["playing", "won", "resigned"]
RequestId = int | str


class Player(TypedDict):
    id: str
    name: str
    bot: NotRequired[bool]  # present (true) for a bot's player only


class ServerInfo(TypedDict):
    version: str
    node: str


class Welcome(TypedDict):
    type: Literal["welcome"]
    id: NotRequired[RequestId]
    player: Player
    token: NotRequired[str]
    server: ServerInfo
    games: list[str]
    next: NotRequired[str]


class Foundations(TypedDict):
    S: str | None
    H: str | None
    D: str | None
    C: str | None


class Snapshot(TypedDict):
    type: Literal["snapshot"]
    id: NotRequired[RequestId]
    game: str
    v: int
    code: str
    player: Player
    tableau: list[list[str]]
    cells: list[str | None]
    foundations: Foundations
    score: int
    moves: int
    status: Status
    started_at: str


Op = TypedDict("Op", {"cards": list[str], "from": str, "to": str, "top": NotRequired[str | None]})


class Ack(TypedDict):
    type: Literal["ack"]
    id: NotRequired[RequestId]
    game: str
    v: int
    ops: list[Op]
    score: int
    moves: int
    status: Status


class Diff(TypedDict):
    type: Literal["diff"]
    game: str
    v: int
    ops: list[Op]
    score: int
    moves: int
    status: Status


#: An ``ack`` or a ``diff``: what one action changed.
Change = Ack | Diff


class GameOver(TypedDict):
    type: Literal["game_over"]
    id: NotRequired[RequestId]
    game: str
    won: bool
    score: int
    moves: int
    duration_ms: int


class Ok(TypedDict):
    type: Literal["ok"]
    id: NotRequired[RequestId]


#: An action as a ``hint`` gives it (``{"type": "move", "from": "t3", "to": "fH", "n": 1}``), or as
#: `Client.play` takes it: a ``move``, ``tap``, ``auto`` or ``undo`` request without ``id``, ``game``, ``v``.
Action = TypedDict(
    "Action", {"type": str, "from": NotRequired[str], "to": NotRequired[str], "n": NotRequired[int]}
)


class Hint(TypedDict):
    type: Literal["hint"]
    id: NotRequired[RequestId]
    game: str
    v: int
    verdict: Literal["win", "lost", "unknown"]
    action: NotRequired[Action]


class LiveGame(TypedDict):
    game: str
    player: Player
    code: str
    moves: int
    score: int
    watchers: int
    started_at: str
    sealed: NotRequired[bool]


class LivePage(TypedDict):
    type: Literal["live"]
    id: NotRequired[RequestId]
    games: list[LiveGame]
    next: NotRequired[str]


class GameRow(TypedDict):
    """A row of the ``deal``, ``variant`` and ``daily`` boards: a player's best game."""

    rank: int
    player: Player
    game: str
    code: str
    cells: int
    won: bool
    moves: int
    duration_ms: int
    score: int
    finished_at: str


class PlayerRow(TypedDict):
    """A row of the ``players`` board."""

    rank: int
    player: Player
    played: int
    won: int
    win_rate: float
    best_score: int


class RatingRow(TypedDict):
    """A row of the ``rating`` board: a player's race rating in the variant."""

    rank: int
    player: Player
    rating: int
    races: int


class LeaderboardPage(TypedDict):
    type: Literal["leaderboard"]
    id: NotRequired[RequestId]
    rows: list[GameRow] | list[PlayerRow] | list[RatingRow]
    next: NotRequired[str]


class ProfileGame(TypedDict):
    game: str
    code: str
    cells: int
    won: bool
    score: int
    moves: int
    duration_ms: int
    finished_at: str


class Streak(TypedDict):
    current: int
    best: int


class ProfileRating(TypedDict):
    """A player's race rating in one variant."""

    cells: int
    rating: int
    races: int


class Profile(TypedDict):
    type: Literal["profile"]
    id: NotRequired[RequestId]
    player: Player
    played: int
    won: int
    win_rate: float
    best_score: int
    best: list[ProfileGame]
    streak: Streak
    recent: list[ProfileGame]
    ratings: list[ProfileRating]


class GamesPage(TypedDict):
    type: Literal["games"]
    id: NotRequired[RequestId]
    games: list[str]
    next: NotRequired[str]


class ErrorReply(TypedDict):
    type: Literal["error"]
    id: NotRequired[RequestId]
    code: str
    message: str
