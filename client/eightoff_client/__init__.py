"""An asyncio client for the Eight Off game server (WebSocket protocol v1), for bots and tools.

    async with eightoff_client.connect("ws://127.0.0.1:8765/ws", name="Bot") as client:
        board = await client.new_game(winnable=True)
        ack = await client.move(board.game, "t8", "t6")

It depends on websockets and msgpack only, and imports nothing of the server.
"""

from eightoff_client.board import Applied, Board
from eightoff_client.client import Client, connect
from eightoff_client.codec import SUBPROTOCOLS, Encoding
from eightoff_client.errors import (
    BadRequest,
    ConnectionLost,
    EightOffError,
    Forbidden,
    IllegalMove,
    Internal,
    NotFound,
    ProtocolViolation,
    RateLimited,
    ServerError,
    Stale,
    TooLarge,
    Unauthorized,
    Unavailable,
    UnsupportedVersion,
)
from eightoff_client.messages import (
    Ack,
    Action,
    Change,
    Diff,
    ErrorReply,
    GameOver,
    GameRow,
    GamesPage,
    Hint,
    LeaderboardPage,
    LiveGame,
    LivePage,
    Ok,
    Op,
    Player,
    PlayerRow,
    Profile,
    ProfileGame,
    ProfileRating,
    RatingRow,
    ServerInfo,
    Snapshot,
    Status,
    Streak,
    Welcome,
)

__all__ = [
    "SUBPROTOCOLS",
    "Ack",
    "Action",
    "Applied",
    "BadRequest",
    "Board",
    "Change",
    "Client",
    "ConnectionLost",
    "Diff",
    "EightOffError",
    "Encoding",
    "ErrorReply",
    "Forbidden",
    "GameOver",
    "GameRow",
    "GamesPage",
    "Hint",
    "IllegalMove",
    "Internal",
    "LeaderboardPage",
    "LiveGame",
    "LivePage",
    "NotFound",
    "Ok",
    "Op",
    "Player",
    "PlayerRow",
    "Profile",
    "ProfileGame",
    "ProfileRating",
    "ProtocolViolation",
    "RateLimited",
    "RatingRow",
    "ServerError",
    "ServerInfo",
    "Snapshot",
    "Stale",
    "Status",
    "Streak",
    "TooLarge",
    "Unauthorized",
    "Unavailable",
    "UnsupportedVersion",
    "Welcome",
    "connect",
]

__version__ = "0.1.0"
