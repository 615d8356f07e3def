"""Wire protocol v1 of the Eight Off server, sans-I/O: message types, strict validation of untrusted
input, the msgpack and JSON codecs, error and close codes, and the server messages as typed values.

It imports only the standard library, msgpack and ``engine``: no asyncio, sockets, SQL, clocks or
random numbers. protocol/README.md is the normative specification; protocol/asyncapi.yaml says the
same in AsyncAPI 3.0.

Server side, per frame::

    try:
        request = protocol.decode(frame, subprotocol)
    except protocol.ProtocolError as exc:
        if exc.close_code is not None:
            ...close the connection with exc.close_code...
        else:
            send(protocol.encode(exc.reply().to_wire(), subprotocol))
"""

from __future__ import annotations

from protocol.checks import validate_server_message
from protocol.codec import (
    Subprotocol,
    decode,
    decode_server_message,
    decode_value,
    encode,
    encode_json,
    encode_msgpack,
    select_subprotocol,
)
from protocol.errors import CloseCode, ErrorCode, ProtocolError, RequestId
from protocol.messages import (
    CLIENT_MESSAGE_TYPES,
    OWN_FOUNDATION,
    ActionRequest,
    AutoRequest,
    Board,
    ClientMessage,
    GameRequest,
    GamesRequest,
    HelloRequest,
    HintRequest,
    LeaderboardRequest,
    LiveRequest,
    MoveRequest,
    NewGameRequest,
    Order,
    OwnFoundation,
    Period,
    ProfileRequest,
    ResignRequest,
    ResumeRequest,
    TapRequest,
    TapSource,
    Target,
    UndoRequest,
    UnwatchRequest,
    WatchRequest,
)
from protocol.parse import PROTOCOL_VERSION, parse_client_message
from protocol.server_messages import (
    SERVER_MESSAGE_TYPES,
    Ack,
    Diff,
    ErrorReply,
    Foundations,
    GameOver,
    GameRow,
    GamesPage,
    Hint,
    LeaderboardPage,
    LiveGame,
    LivePage,
    Ok,
    Player,
    PlayerRow,
    Profile,
    ProfileGame,
    ServerInfo,
    ServerMessage,
    Snapshot,
    Streak,
    Verdict,
    Welcome,
    card_text,
    layout_fields,
    move_action,
)
from protocol.timestamps import format_timestamp, parse_timestamp

__all__ = [
    "CLIENT_MESSAGE_TYPES",
    "OWN_FOUNDATION",
    "PROTOCOL_VERSION",
    "SERVER_MESSAGE_TYPES",
    "Ack",
    "ActionRequest",
    "AutoRequest",
    "Board",
    "ClientMessage",
    "CloseCode",
    "Diff",
    "ErrorCode",
    "ErrorReply",
    "Foundations",
    "GameOver",
    "GameRequest",
    "GameRow",
    "GamesPage",
    "GamesRequest",
    "HelloRequest",
    "Hint",
    "HintRequest",
    "LeaderboardPage",
    "LeaderboardRequest",
    "LiveGame",
    "LivePage",
    "LiveRequest",
    "MoveRequest",
    "NewGameRequest",
    "Ok",
    "Order",
    "OwnFoundation",
    "Period",
    "Player",
    "PlayerRow",
    "Profile",
    "ProfileGame",
    "ProfileRequest",
    "ProtocolError",
    "RequestId",
    "ResignRequest",
    "ResumeRequest",
    "ServerInfo",
    "ServerMessage",
    "Snapshot",
    "Streak",
    "Subprotocol",
    "TapRequest",
    "TapSource",
    "Target",
    "UndoRequest",
    "UnwatchRequest",
    "Verdict",
    "WatchRequest",
    "Welcome",
    "card_text",
    "decode",
    "decode_server_message",
    "decode_value",
    "encode",
    "encode_json",
    "encode_msgpack",
    "format_timestamp",
    "layout_fields",
    "move_action",
    "parse_client_message",
    "parse_timestamp",
    "select_subprotocol",
    "validate_server_message",
]
