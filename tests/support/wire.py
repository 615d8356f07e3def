"""The wire as tests see it: the shared client vectors as frames, their decoded form, and a winning line
(the client board that follows a game by its diffs is in ``tests.support.board``)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
from pathlib import Path
from typing import Any

import msgpack  # type: ignore[import-untyped]

import protocol
from engine import Cell, Column, Deal, Foundation, Move
from protocol import OwnFoundation, Subprotocol

VECTORS_PATH = Path(protocol.__file__).parent / "vectors" / "client_messages.json"
VECTORS: dict[str, Any] = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))

#: Python field names of the request classes → wire names, for the vectors' ``decoded`` form.
_WIRE_NAMES = {"source": "from", "target": "to", "count": "n", "request_id": "id", "deal": "code"}


def frame_of(message: object, subprotocol: Subprotocol) -> bytes | str:
    """``message`` as a client would send it on ``subprotocol``."""
    if subprotocol is Subprotocol.MSGPACK:
        return msgpack.packb(message, use_bin_type=True)  # type: ignore[no-any-return]
    return json.dumps(message, ensure_ascii=False)


def raw_frame(case: dict[str, Any]) -> bytes | str:
    """The frame of a ``frames`` case: a binary frame from hex, or a text frame."""
    if "binary_hex" in case:
        return bytes.fromhex(case["binary_hex"])
    text: str = case["text"]
    return text


def _plain(value: object) -> object:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, Column | Cell | Foundation | OwnFoundation):
        return value.symbol()
    if isinstance(value, Deal):
        return value.code()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    raise TypeError(f"no plain form for {value!r}")


def decoded_form(request: protocol.ClientMessage) -> dict[str, object]:
    """A request as the vectors' ``decoded`` field writes it: wire names, every field, null = absent."""
    form: dict[str, object] = {"type": request.TYPE, "id": _plain(request.request_id)}
    for field in dataclasses.fields(request):
        if field.name != "request_id":
            form[_WIRE_NAMES.get(field.name, field.name)] = _plain(getattr(request, field.name))
    return form


def move_fields(move: Move) -> dict[str, Any]:
    """The fields of a ``move`` request for ``move`` (``n`` only for a group, as a client sends it)."""
    fields: dict[str, Any] = {"from": move.source.symbol(), "to": move.target.symbol()}
    if move.count > 1:
        fields["n"] = move.count
    return fields


#: A win of EO1-C8-AAAAAFA (found by tests/solver.py once; the notation is stable).
_WINNING_TEXT = (
    "t8-t6 t4-t2 t8-c8 t8-c7 t8-c6 t8-c5 c2-t8 t1-t8:2 t4-t1 t7-c2 c8-t7 t4-c8 c2-t4 t4-t3:2 t4-c2 t4-t8 "
    "c4-t4 c1-t4 t6-t4:2 t6-t7 c8-t6 t8-c8 t8-c4 t7-c1 c4-t8 c8-t8 t7-c8 t6-c4 c8-t7 t8-c8 c1-t7 t4-c1 "
    "c8-t8 c4-t6 t8-c8 t7-c4 c8-t8 t4-c8 c4-t7 t3-c4 c8-t4 c1-t4 t8-c8 t7-c1 c8-t8 t6-c8 c1-t7 t3-c1 "
    "c8-t6 t2-c8 c1-t3 c4-t3 t8-c4 t7-c1 c4-t8 t6-c4 c1-t7 t4-c1 c4-t6 t1-c4 c8-t2 c1-t4 t8-c8 t7-c1 "
    "c8-t8 t6-c8 c1-t7 t3-c1 c8-t6 t2-c8 c1-t3 t1-c1 c8-t2 t1-c8 t1-fH t1-t8 c1-t1 c4-t1 t8-c4 t7-c1 "
    "c4-t8 t6-c4 c1-t7 t6-c1 t6-fH c7-fH c6-fH t6-t4 c5-t6 t8-c7 t8-c6 t7-c5 c6-t8 c7-t8 t7-c7 t6-c6 "
    "c7-t7 t8-c7 c5-t7 t5-c5 c7-t8 c6-t6 t8-c7 t7-c6 c7-t8 t5-c7 c6-t7 t5-c6 t5-t8 c2-t5 c1-t5 c4-t5 "
    "t8-c4 t8-c2 t7-c1 c2-t8 c4-t8 t7-c4 t6-c2 c4-t7 c1-t7 t8-c4 t5-c1 c4-t8 t7-c4 c2-t6 t8-c2 c4-t7 "
    "t4-c4 c2-t8 c1-t5 t8-c2 t7-c1 c2-t8 t6-c2 c1-t7 t4-c1 c2-t6 t3-c2 c1-t4 c4-t4 t8-c4 t7-c1 c4-t8 "
    "t6-c4 c1-t7 t5-c1 c4-t6 t3-c4 c1-t5 t3-c1 t3-fH c2-fH c4-fH c1-fH t8-c4 t8-c2 t7-c1 c2-t8 c4-t8 "
    "t7-c4 t6-c2 c4-t7 c1-t7 t8-c4 t5-c1 c4-t8 c2-t6 t8-c4 t7-c2 c4-t8 t5-c4 c2-t7 t4-c2 c4-t5 c1-t5 "
    "t8-c4 t7-c1 c4-t8 t6-c4 c1-t7 t4-c1 c4-t6 t3-c4 c1-t4 c2-t4 t7-t3:3 t8-c2 t7-c1 c8-t7 c4-t7 c2-t8 "
    "t7-c8 t7-c4 t7-c2 t7-fH t7-fD t3-fH t3-fH t3-fH t3-fH t3-fD t2-t3:2 t2-fD t3-fD t3-fD t3-fD c8-fD "
    "c4-fD c2-fD c3-fD t2-fS t6-fS t6-fS c7-fS c5-fS t2-fS c6-fS t2-fS t5-fS t5-fS t5-fS t5-fS c1-fS "
    "t5-fC t8-fC t8-fC t8-fC t8-fC t8-fC t8-fC t8-fC t4-fC t4-fC t4-fC t4-fC t4-fC t2-fD t1-fD t1-fD"
)
WINNING_LINE = tuple(_WINNING_TEXT.split())


def sample_server_values() -> list[protocol.ServerMessage]:
    """One or more messages of every server type, as values made from real games."""
    from engine import UNDO, Game, Move

    player = protocol.Player("p_1", "Ann")
    started = protocol.parse_timestamp("2026-11-30T04:48:59.123Z")
    game = Game.from_code("EO1-C8-AAAAAFA")
    messages: list[protocol.ServerMessage] = [
        protocol.Snapshot.of("g_1", game, player=player, started_at=started, request_id=1)
    ]
    for index, text in enumerate(WINNING_LINE[:80]):
        transfer = game.play(Move.parse(text))
        messages.append(
            protocol.Ack.of("g_1", game, transfer, index)
            if index % 2
            else protocol.Diff.of("g_1", game, transfer)
        )
    messages.append(protocol.Diff.of("g_1", game, game.play(UNDO)))
    for cells in (4, 2):
        messages.append(
            protocol.Snapshot.of(
                "g_2", Game.from_code(f"EO1-C{cells}-AAAAAFA"), player=player, started_at=started
            )
        )
    game_row = protocol.GameRow(
        rank=1, player=player, game="g_1", code="EO1-C8-AAAAAFA", cells=8, won=True, moves=240,
        duration_ms=600_000, score=935, finished_at=started,
    )  # fmt: skip
    profile_game = protocol.ProfileGame(
        "g_1", code="EO1-C2-AAAAAFA", cells=2, won=True, score=935, moves=240, duration_ms=600_000,
        finished_at=started,
    )  # fmt: skip
    live_game = protocol.LiveGame(
        "g_1", player=player, code="EO1-C4-AAAAAFA", moves=3, score=10, watchers=2, started_at=started
    )
    server = protocol.ServerInfo("0.1.0", "node-a")
    messages += [
        protocol.GameOver(game="g_1", won=True, score=935, moves=240, duration_ms=3_600_000, request_id=3),
        protocol.GameOver(game="g_1", won=False, score=0, moves=0, duration_ms=0),
        protocol.Welcome(player=player, server=server, games=("g_1", "g_2"), token="tok"),
        protocol.Welcome(player=player, server=server, games=(), request_id=1),
        protocol.Ok(),
        protocol.Ok(request_id="x"),
        protocol.LivePage(games=(live_game,), next_cursor="abc", request_id=9),
        protocol.LivePage(games=(dataclasses.replace(live_game, sealed=True),)),  # sealed to the asker
        protocol.LivePage(games=()),
        protocol.Welcome(player=player, server=server, games=("g_1",), next_cursor="x.g_1"),
        protocol.GamesPage(games=("g_2", "g_1"), next_cursor="20261130044859123000.g_1", request_id=15),
        protocol.GamesPage(games=()),
        protocol.LeaderboardPage(rows=(game_row,), next_cursor="n1"),
        protocol.LeaderboardPage(rows=(protocol.PlayerRow(1, player, played=4, won=3, best_score=935),)),
        protocol.LeaderboardPage(
            rows=(protocol.PlayerRow(7, player, played=0, won=0, best_score=0),), request_id=2
        ),
        protocol.Hint(
            game="g_1", v=3, verdict=protocol.Verdict.WIN, action=Move.parse("t1-t4:3"), request_id=5
        ),
        protocol.Hint(game="g_1", v=0, verdict=protocol.Verdict.LOST, request_id=6),
        protocol.Hint(game="g_1", v=7, verdict=protocol.Verdict.UNKNOWN),
        protocol.LeaderboardPage(rows=()),
        protocol.LeaderboardPage(
            rows=(
                protocol.RatingRow(1, player, rating=1312, races=9),
                protocol.RatingRow(2, player, 1000, 1),
            ),
            next_cursor="n2",
            request_id=8,
        ),
        protocol.Profile(
            player=player,
            played=4,
            won=3,
            best_score=935,
            best=(profile_game,),
            streak=protocol.Streak(2, 5),
            recent=(profile_game,),
            ratings=(protocol.ProfileRating(8, 1312, 9), protocol.ProfileRating(2, 987, 2)),
            request_id=4,
        ),
        protocol.Profile(
            player=player, played=0, won=0, best_score=0, best=(), streak=protocol.Streak(0, 0), recent=()
        ),
        protocol.ErrorReply(code=protocol.ErrorCode.STALE, message="game g_1 is at v=12"),
        protocol.ErrorReply(code=protocol.ErrorCode.ILLEGAL_MOVE, message="t1-t2 is illegal", request_id=5),
    ]
    return messages + _sample_replays(player, started) + sample_race_values(player, started)


def _sample_replays(player: protocol.Player, started: dt.datetime) -> list[protocol.ServerMessage]:
    """``replay`` pages: a won game whole, and a page from the middle of one being played (an undo
    included)."""
    from engine import UNDO, Game, Move, Status

    game = Game.from_code("EO1-C8-AAAAAFA")
    deal = game.layout()
    steps = []
    for text in WINNING_LINE:
        transfer = game.play(Move.parse(text))
        steps.append(protocol.ReplayStep((transfer,), game.score, game.moves))
    whole = protocol.Replay(
        game="g_1", code="EO1-C8-AAAAAFA", player=player, started_at=started, status=Status.WON,
        v=len(steps), tableau=deal.columns, cells=deal.cells, foundations=protocol.Foundations.of(deal),
        since=0, steps=tuple(steps[:500]), duration_ms=754_012, request_id=7,
    )  # fmt: skip
    playing = Game.from_code("EO1-C8-AAAAAFA")
    for text in WINNING_LINE[:10]:
        playing.play(Move.parse(text))
    undone = protocol.ReplayStep((playing.play(UNDO),), playing.score, playing.moves)
    page = dataclasses.replace(
        whole,
        status=Status.PLAYING,
        v=11,
        since=9,
        steps=(steps[9], undone),
        duration_ms=None,
        request_id=None,
    )
    return [whole, page]


def sample_race_values(player: protocol.Player, started: dt.datetime) -> list[protocol.ServerMessage]:
    """A race in the lobby, its reveal, and a delayed board."""
    from engine import Game

    waiting = protocol.RaceSeat(1, player, True, None, "waiting", 0, 0, 0, 0, None)
    won = protocol.RaceSeat(2, player, True, "g_2", "won", 52, 120, 935, 95_000, 1)
    lobby = protocol.Race(
        race="r_1", v=3, code="K7M2QX9P", creator=player.id, cells=8, seats=8, time_limit=300,
        public=False, state="lobby", starts_at=None, ends_at=None, deal=None, rows=(waiting,),
        board_delay_ms=30_000, request_id=1,
    )  # fmt: skip
    ends = started + dt.timedelta(minutes=5)
    board = protocol.Snapshot.of("g_2", Game.from_code("EO1-C8-AAAAAFA"), player=player, started_at=started)
    return [
        lobby,
        dataclasses.replace(
            lobby,
            state="finished",
            starts_at=started,
            ends_at=ends,
            deal="EO1-C8-AAAAAFA",
            rows=(won,),
            request_id=None,
        ),
        protocol.RaceDiff("r_1", 4, player.id, "running", started, ends, "EO1-C8-AAAAAFA", (won,), (1,)),
        protocol.RaceBoard("r_1", 2, board),
    ]


def sample_server_messages() -> list[dict[str, object]]:
    """``sample_server_values`` on the wire."""
    return [message.to_wire() for message in sample_server_values()]
