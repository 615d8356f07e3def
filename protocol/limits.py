"""The numbers of protocol v1: field limits every message obeys, and defaults of the server's limits.

Field limits are part of the protocol (a client relies on them); the ``DEFAULT_*`` values are the
server's settings out of the box, which an operator may change, so clients must not hard-code them.
"""

from __future__ import annotations

import re

__all__ = [
    "CURSOR_PATTERN",
    "CURSOR_RULE",
    "DEFAULT_MAX_FRAME_SIZE",
    "DEFAULT_MAX_GAMES_PER_CONNECTION",
    "DEFAULT_MAX_WATCHES_PER_CONNECTION",
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_RATE_BURST",
    "DEFAULT_RATE_PER_SECOND",
    "ID_PATTERN",
    "ID_RULE",
    "MAX_CODE_LENGTH",
    "MAX_CURSOR_LENGTH",
    "MAX_GAME_ACTIONS",
    "MAX_GROUP",
    "MAX_ID_LENGTH",
    "MAX_INT",
    "MAX_NAME_LENGTH",
    "MAX_PAGE_SIZE",
    "MAX_PROFILE_RECENT",
    "MAX_REPLAY_STEPS",
    "MAX_REQUEST_ID_LENGTH",
    "MAX_TOKEN_LENGTH",
    "PROTOCOL_VERSION",
    "TOKEN_PATTERN",
    "TOKEN_RULE",
]

#: The version of the protocol these numbers belong to, which ``hello`` states.
PROTOCOL_VERSION = 1

# --------------------------------------------------------------------------- field limits (protocol)

#: Largest integer on the wire (request ids, versions): the largest exact integer of a JSON double.
MAX_INT = 2**53 - 1
#: A string request ``id`` has at most this many characters.
MAX_REQUEST_ID_LENGTH = 64
#: Game and player ids: 1..32 characters of ``[A-Za-z0-9_-]``.
MAX_ID_LENGTH = 32
#: A player name: 1..32 characters, no control or format characters, no blank at either end.
MAX_NAME_LENGTH = 32
#: A session token: 1..64 printable ASCII characters without blanks.
MAX_TOKEN_LENGTH = 64
#: A game code such as ``EO1-C8-AAAAAFA`` (14 characters) is sent in at most 16.
MAX_CODE_LENGTH = 16
#: An opaque paging cursor (``after`` / ``next``): 1..200 printable ASCII characters without blanks.
MAX_CURSOR_LENGTH = 200
#: ``n`` of ``move`` and ``auto``: a group holds at most 13 cards (a King down to an Ace).
MAX_GROUP = 13
#: ``limit`` of ``live`` and ``leaderboard``: 1..100, 20 when omitted.
MAX_PAGE_SIZE = 100
#: The most actions (moves and undos) a game may have. A won game takes 100 to 200 actions, a long one
#: with many undos a few hundred: 2,000 is ten times a long real game, and replaying it costs about 10 ms.
#: At the bound every action is refused (``illegal_move``); the game can still be resigned.
MAX_GAME_ACTIONS = 2000
DEFAULT_PAGE_SIZE = 20
#: A ``replay`` reply holds at most this many steps (about 40 KB of JSON): a longer game comes in
#: pages, so that no reply is big enough to overflow a slow reader's write buffer.
MAX_REPLAY_STEPS = 500
#: ``recent`` of a ``profile`` lists at most this many finished games.
MAX_PROFILE_RECENT = 10

#: The shapes of ids, tokens and cursors, each with the rule an error about it states: the parser
#: checks requests with them, ``checks`` the server's own messages.
ID_PATTERN = re.compile(rf"[A-Za-z0-9_-]{{1,{MAX_ID_LENGTH}}}")
ID_RULE = f"1..{MAX_ID_LENGTH} characters of A-Z a-z 0-9 _ -"
#: A race's invitation code: 8 letters and digits, none easily mistaken for another (no 0 O 1 I L).
INVITE_PATTERN = re.compile(r"[A-HJKMNP-Z2-9]{8}")
INVITE_RULE = "8 characters of A-Z 2-9 but I L O"
#: A race's seats, and its time limit in seconds.
RACE_SEATS = (2, 8)
RACE_TIME_LIMIT = (30, 3600)
DEFAULT_RACE_TIME_LIMIT = 300
TOKEN_PATTERN = re.compile(rf"[!-~]{{1,{MAX_TOKEN_LENGTH}}}")
TOKEN_RULE = f"1..{MAX_TOKEN_LENGTH} printable ASCII characters"
CURSOR_PATTERN = re.compile(rf"[!-~]{{1,{MAX_CURSOR_LENGTH}}}")
CURSOR_RULE = f"a cursor of 1..{MAX_CURSOR_LENGTH} printable ASCII characters"

# --------------------------------------------------------------------------- server settings (defaults)

#: Frames over this many bytes close the connection with 1009.
DEFAULT_MAX_FRAME_SIZE = 4096
#: Token bucket per connection: this many frames at once ...
DEFAULT_RATE_BURST = 400
#: ... refilled at this rate; a frame finding the bucket empty gets ``rate_limited``, and a client
#: that goes on sending a whole burst's worth while refused is closed with 1008.
DEFAULT_RATE_PER_SECOND = 200.0
#: Games one connection may have open (created or resumed) at a time.
DEFAULT_MAX_GAMES_PER_CONNECTION = 16
#: Games one connection may watch at a time.
DEFAULT_MAX_WATCHES_PER_CONNECTION = 32
