"""Wire protocol v1 of the Eight Off server, sans-I/O: message types, strict validation of untrusted
input, the msgpack and JSON codecs, error and close codes, and the builders of server messages.

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
            send(protocol.encode(exc.reply(), subprotocol))
"""

from __future__ import annotations

from protocol.builders import (
    ack,
    card_text,
    diff,
    error,
    game_over,
    game_row,
    hint,
    layout_fields,
    leaderboard,
    live,
    live_game,
    move_action,
    ok,
    ops,
    player_info,
    player_row,
    profile,
    profile_game,
    snapshot,
    welcome,
)
from protocol.checks import SERVER_MESSAGE_TYPES, validate_server_message
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
from protocol.timestamps import format_timestamp, parse_timestamp

__all__ = [
    "CLIENT_MESSAGE_TYPES",
    "OWN_FOUNDATION",
    "PROTOCOL_VERSION",
    "SERVER_MESSAGE_TYPES",
    "ActionRequest",
    "AutoRequest",
    "Board",
    "ClientMessage",
    "CloseCode",
    "ErrorCode",
    "GameRequest",
    "HelloRequest",
    "HintRequest",
    "LeaderboardRequest",
    "LiveRequest",
    "MoveRequest",
    "NewGameRequest",
    "Order",
    "OwnFoundation",
    "Period",
    "ProfileRequest",
    "ProtocolError",
    "RequestId",
    "ResignRequest",
    "ResumeRequest",
    "Subprotocol",
    "TapRequest",
    "TapSource",
    "Target",
    "UndoRequest",
    "UnwatchRequest",
    "WatchRequest",
    "ack",
    "card_text",
    "decode",
    "decode_server_message",
    "decode_value",
    "diff",
    "encode",
    "encode_json",
    "encode_msgpack",
    "error",
    "format_timestamp",
    "game_over",
    "game_row",
    "hint",
    "layout_fields",
    "leaderboard",
    "live",
    "live_game",
    "move_action",
    "ok",
    "ops",
    "parse_client_message",
    "parse_timestamp",
    "player_info",
    "player_row",
    "profile",
    "profile_game",
    "select_subprotocol",
    "snapshot",
    "validate_server_message",
    "welcome",
]
