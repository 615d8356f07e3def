"""The server's own cost per action, without sockets: decode → handler → engine → ack → encode.

Runs the real ``RequestHandler`` of an in-process ``App`` on move/undo requests: with the real group
commit and one action in flight (commit latency dominates, wall time); with the real group commit and
``CONCURRENT`` games each running a closed loop (as ``bench_load`` at N = 100, without the sockets),
reporting the CPU time per action of the event-loop thread and of the other threads (the SQLite
writer) apart, once through ``serve`` as a connection calls it (each reply's ``respond`` sends the
game's next request in the next loop iteration, as a frame arriving would: no task per game; an action
on a free room is answered from its commit's callback) and once through ``handle`` awaited by a task
per game (``handle``: the same path, awaited); and with commits answered at once (the Python work
of a request alone, wall time).
Beside them a baseline measured in the same run: msgpack-decoding the same frame and encoding an
ack-sized reply, which is what the echo server of ``bench_load`` does.

The event-loop figure of the concurrent run, plus the echo server's CPU per message in ``bench_load``,
is a floor for the server's CPU per action over real sockets: one event loop can do no better than
one action per their sum.

Then a per-stage split of one action's CPU, each stage run alone in a tight loop (``STAGE_COUNT``
repetitions, best of ``STAGE_ROUNDS`` rounds, this thread's CPU time: ``time.thread_time``, so another
process taking the core does not count), and the ratio of each to the baseline timed the same way:

- decode: ``protocol.decode`` of the move (and undo) frame;
- engine: what the room does with the game: resolve the request against the position, ``play`` it,
  its notation for the write; move/undo pairs, as ``bench_load`` plays them (a new game, untimed,
  before one reaches ``MAX_GAME_ACTIONS``);
- reply: ``Ack.of`` the action's transfer (the reply value);
- encode: the ack's ``to_wire()`` and ``protocol.encode``;
- commit: the writer thread's CPU per action in a real group commit (SQLite ``synchronous=FULL``,
  through the app's ``Committer``) of ``COMMIT_BATCH`` action writes at a time, one per game, as
  under load; the CPU of the threads other than this one (the writer; the others idle) over the
  actions committed. The event loop's own share of it (submit, hand-back) is shown beside it, not
  summed (the durable whole below includes it);
- transport: websockets' sans-I/O framing: a ``ServerProtocol`` (open) parses the client's masked
  binary frame (``receive_data`` + ``events_received``) and frames the ack (``send_binary`` +
  ``data_to_send``); no socket, no event loop: a floor for what any websockets-based transport adds.

Beside the sum of the stages, the measured wholes: decode + engine + reply + encode against the
request work alone (commit skipped, this thread's CPU): the difference is the handler and room around
them (routing, the room's turn, the write, the announcement); all stages but transport against the
durable concurrent run (event loop + other threads); and the sum of all the stages, a floor for
``bench_load``'s server CPU per action, which also pays the sockets, the event loop's I/O and the
asyncio layers.

Run: ``.venv/bin/python -m bench.bench_request_path`` (about 15 seconds). This is not a test: it
asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import functools
import resource
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgpack  # type: ignore[import-untyped]
from websockets.frames import Frame, Opcode
from websockets.protocol import State
from websockets.server import ServerProtocol

import protocol
from engine import Game, Transfer
from protocol.limits import MAX_GAME_ACTIONS
from server.app import App
from server.config import Settings
from server.dispatch import Answer, RequestHandler
from server.errors import refusal_for
from server.ops.runtime import fast_event_loop
from server.play.game_room import PlayerRef
from server.play.session import Session
from server.storage import ActionRecord, PlayerRecord
from server.storage.committer import AddPlayer, AppendActions, Done, Write

ACTIONS = 20_000
CONCURRENT = 100
CONCURRENT_SECONDS = 3.0
ACTIONS_PER_GAME = MAX_GAME_ACTIONS - MAX_GAME_ACTIONS % 2
CODE = "EO1-C8-AAAAAFA"  # cells 5-8 empty: t1 → c5 is legal at the deal
STAGE_COUNT = 20_000
STAGE_ROUNDS = 3
COMMIT_BATCH = 50  # action writes per commit: one per game, as with 50 games in flight at once
COMMIT_ROUNDS = 60
SUBPROTOCOL = protocol.Subprotocol.MSGPACK


def _instant_submit(write: Write, done: Done) -> None:
    """A commit answered at once: in the next loop iteration, as the pipeline never calls back from
    ``submit`` itself."""
    asyncio.get_running_loop().call_soon(done, None)


def _handler(app: App) -> RequestHandler:
    """The app's own handler: the code path a connection uses."""
    return app.services.handler


def _baseline(frames: list[bytes], reply: protocol.ServerMessage, count: int) -> None:
    wire = reply.to_wire()
    for index in range(count):
        msgpack.unpackb(frames[index % 2])
        msgpack.packb(wire)


@dataclass
class Timing:
    wall: float  # seconds per action
    cpu: float  # this thread's CPU seconds per action


async def _measure(app: App, client: Session, count: int) -> tuple[Timing, protocol.ServerMessage]:
    """Seconds per move/undo over ``count`` actions; a new game (timed too, a few per run) before one
    reaches the bound on a game's length."""
    handler = _handler(app)
    reply: protocol.ServerMessage = protocol.Ok()
    frames: list[bytes] = []
    started, cpu = time.perf_counter(), time.thread_time()
    for index in range(count):
        if index % ACTIONS_PER_GAME == 0:
            frames = await _move_and_undo(app, client)
        request = protocol.decode(frames[index % 2], SUBPROTOCOL)
        for reply in await handler.handle(client, request):
            protocol.encode(reply.to_wire(), SUBPROTOCOL)
    return Timing((time.perf_counter() - started) / count, (time.thread_time() - cpu) / count), reply


def _cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


async def _window(seconds: float, done: Callable[[], int]) -> tuple[float, float, float]:
    """Actions per second over the next ``seconds``, ``done()`` counting them, and the CPU seconds per
    action of this (the event loop's) thread and of the other threads (the SQLite writer)."""
    count, thread, process, started = (
        done(),
        _cpu_seconds(resource.RUSAGE_THREAD),
        _cpu_seconds(resource.RUSAGE_SELF),
        time.perf_counter(),
    )
    await asyncio.sleep(seconds)
    count = done() - count
    thread = _cpu_seconds(resource.RUSAGE_THREAD) - thread
    process = _cpu_seconds(resource.RUSAGE_SELF) - process
    elapsed = time.perf_counter() - started
    return count / elapsed, thread / count, (process - thread) / count


async def _measure_concurrent(app: App, games: int, seconds: float) -> tuple[float, float, float]:
    """``games`` closed loops of move/undo with the real group commit; returns actions per second
    and the CPU seconds per action of this (the event loop's) thread and of the other threads."""
    handler = _handler(app)
    done = 0
    running = True

    async def play(index: int) -> None:
        nonlocal done
        client = await _new_client(app, f"bench-{index}")
        frames = await _move_and_undo(app, client)
        turn = 0
        while running:
            request = protocol.decode(frames[turn], SUBPROTOCOL)
            for reply in await handler.handle(client, request):
                protocol.encode(reply.to_wire(), SUBPROTOCOL)
            turn ^= 1
            done += 1

    players = [asyncio.create_task(play(index)) for index in range(games)]
    await asyncio.sleep(1.0)  # every game started, the loops warm
    figures = await _window(seconds, lambda: done)
    running = False
    await asyncio.gather(*players)
    return figures


async def _measure_served(app: App, games: int, seconds: float) -> tuple[float, float, float]:
    """As `_measure_concurrent`, through ``serve`` and ``respond`` callbacks instead of tasks."""
    handler = _handler(app)
    loop = asyncio.get_running_loop()
    done = 0
    running = True
    stopped = asyncio.Event()
    playing = games
    refused: dict[str, int] = {}

    def play(client: Session, frames: list[bytes], turn: int) -> None:
        nonlocal playing
        if not running:
            playing -= 1
            if not playing:
                stopped.set()
            return
        request = protocol.decode(frames[turn], SUBPROTOCOL)
        handler.serve(client, request, functools.partial(answered, client, frames, turn))

    def answered(client: Session, frames: list[bytes], turn: int, outcome: Answer) -> None:
        nonlocal done
        if isinstance(outcome, BaseException):  # e.g. unavailable on a loaded machine: the same frame again
            code = refusal_for(outcome, "a bench action").code.value
            refused[code] = refused.get(code, 0) + 1
        else:
            for reply in outcome:
                protocol.encode(reply.to_wire(), SUBPROTOCOL)
            done += 1
            turn ^= 1
        loop.call_soon(play, client, frames, turn)  # the next frame arrives later, not inside respond

    clients = [await _new_client(app, f"served-{index}") for index in range(games)]
    frames = [await _move_and_undo(app, client) for client in clients]
    for client, pair in zip(clients, frames, strict=True):
        play(client, pair, 0)
    await asyncio.sleep(1.0)
    figures = await _window(seconds, lambda: done)
    running = False
    await stopped.wait()
    if refused:
        print(f"  (refusals during the serve run, retried: {refused})")
    return figures


async def _new_client(app: App, player_id: str) -> Session:
    client = Session(SUBPROTOCOL)
    client.identify(PlayerRef(player_id, "bench"))
    record = PlayerRecord(player_id, "bench", player_id.rjust(64, "0"), dt.datetime.now(dt.UTC))
    await app.committer.stored(AddPlayer(record))
    return client


async def _new_game(app: App, client: Session) -> str:
    new_game = protocol.decode(protocol.encode_msgpack({"type": "new_game", "code": CODE}), SUBPROTOCOL)
    (snapshot,) = await _handler(app).handle(client, new_game)
    assert isinstance(snapshot, protocol.Snapshot)
    return snapshot.game


def _frames(game: str) -> list[bytes]:
    """The two frames that play ``game`` back and forth: move t1 → c5, undo."""
    return [
        protocol.encode_msgpack({"type": "move", "id": 1, "game": game, "from": "t1", "to": "c5"}),
        protocol.encode_msgpack({"type": "undo", "id": 2, "game": game}),
    ]


async def _move_and_undo(app: App, client: Session) -> list[bytes]:
    """A new game of ``client`` and the two frames that play it back and forth."""
    return _frames(await _new_game(app, client))


# --------------------------------------------------------------------------- the stages, one by one


def _per_action(run: Callable[[int], float | None], count: int = STAGE_COUNT) -> float:
    """This thread's CPU seconds per repetition of ``run(count)``, best of ``STAGE_ROUNDS`` rounds (a
    round returns its own CPU seconds when it leaves untimed work out, else None: all of it counts)."""
    best = float("inf")
    run(count // 10)  # warm-up
    for _ in range(STAGE_ROUNDS):
        started = time.thread_time()
        own = run(count)
        best = min(best, (time.thread_time() - started if own is None else own) / count)
    return best


def _decode(frames: list[bytes]) -> Callable[[int], None]:
    def run(count: int) -> None:
        decode = protocol.decode
        for index in range(count):
            decode(frames[index & 1], SUBPROTOCOL)

    return run


def _action_requests(frames: list[bytes]) -> list[protocol.ActionRequest]:
    requests = [protocol.decode(frame, SUBPROTOCOL) for frame in frames]
    actions = [request for request in requests if isinstance(request, protocol.ActionRequest)]
    if len(actions) != len(requests):
        raise RuntimeError(f"not game actions: {requests!r}")
    return actions


def _engine(frames: list[bytes]) -> Callable[[int], float]:
    """Resolve + play + notation, move/undo pairs; a new game (untimed) every ``ACTIONS_PER_GAME``."""
    resolvers = [request.action for request in _action_requests(frames)]

    def run(count: int) -> float:
        spent = 0.0
        left = count
        while left:
            game = Game.from_code(CODE)
            chunk = min(left, ACTIONS_PER_GAME)
            started = time.thread_time()
            for index in range(chunk):
                action = resolvers[index & 1](game)
                game.play(action)
                action.symbol()
            spent += time.thread_time() - started
            left -= chunk
        return spent

    return run


def _transfers(frames: list[bytes]) -> list[tuple[Game, Transfer]]:
    """A game after a move and after its undo, each with its transfer (what the reply stages take)."""
    move, undo = _action_requests(frames)
    moved = Game.from_code(CODE)
    move_transfer = moved.play(move.action(moved))
    undone = moved.copy()
    undo_transfer = undone.play(undo.action(undone))
    return [(moved, move_transfer), (undone, undo_transfer)]


def _reply(game_id: str, frames: list[bytes]) -> Callable[[int], None]:
    pairs = _transfers(frames)

    def run(count: int) -> None:
        of = protocol.Ack.of
        for index in range(count):
            game, transfer = pairs[index & 1]
            of(game_id, game, transfer, index)

    return run


def _acks(game_id: str, frames: list[bytes]) -> list[protocol.Ack]:
    return [protocol.Ack.of(game_id, game, transfer, 1) for game, transfer in _transfers(frames)]


def _encode(acks: list[protocol.Ack]) -> Callable[[int], None]:
    def run(count: int) -> None:
        encode = protocol.encode
        for index in range(count):
            encode(acks[index & 1].to_wire(), SUBPROTOCOL)

    return run


def _transport(frames: list[bytes], replies: list[bytes]) -> Callable[[int], None]:
    """websockets' sans-I/O core: parse a masked client frame, frame the reply (no socket, no loop)."""
    wire = [Frame(Opcode.BINARY, frame).serialize(mask=True) for frame in frames]
    server = ServerProtocol(state=State.OPEN, max_size=None)
    server.receive_data(wire[0])
    (event,) = server.events_received()
    if not isinstance(event, Frame) or event.data != frames[0]:
        raise RuntimeError(f"the sans-I/O server parsed {event!r}")

    def run(count: int) -> None:
        receive, events, send, outgoing = (
            server.receive_data,
            server.events_received,
            server.send_binary,
            server.data_to_send,
        )
        for index in range(count):
            receive(wire[index & 1])
            events()
            send(replies[index & 1])
            outgoing()

    return run


async def _commit_stage(app: App, batch: int, rounds: int) -> tuple[float, float, float]:
    """``rounds`` group commits of ``batch`` action writes (one per game, submitted in one loop
    iteration): CPU seconds per action of the other threads (the writer) and of this one (submit,
    hand-back), and the commits per second."""
    games = []
    for index in range(batch):
        client = await _new_client(app, f"commit-{index}")
        games.append(await _new_game(app, client))
    submit = app.committer.stored

    async def commit_round(v: int) -> None:
        notation = "t1-c5" if v % 2 else "undo"
        await asyncio.gather(*(submit(AppendActions([ActionRecord(game, v, notation)])) for game in games))

    for v in range(1, 6):  # warm-up: the writer's connection opened, the statements compiled
        await commit_round(v)
    thread, process, started = (
        _cpu_seconds(resource.RUSAGE_THREAD),
        _cpu_seconds(resource.RUSAGE_SELF),
        time.perf_counter(),
    )
    for v in range(6, 6 + rounds):
        await commit_round(v)
    elapsed = time.perf_counter() - started
    thread = _cpu_seconds(resource.RUSAGE_THREAD) - thread
    process = _cpu_seconds(resource.RUSAGE_SELF) - process
    writes = batch * rounds
    return (process - thread) / writes, thread / writes, rounds / elapsed


@dataclass
class Split:
    baseline: float
    decode: float
    engine: float
    reply: float
    encode: float
    commit: float
    commit_loop: float
    commits_per_second: float
    transport: float


def _stages(frames: list[bytes], game_id: str, commit: tuple[float, float, float]) -> Split:
    acks = _acks(game_id, frames)
    replies = [protocol.encode_msgpack(ack.to_wire()) for ack in acks]
    baseline_frames = frames
    return Split(
        baseline=_per_action(lambda count: _baseline(baseline_frames, acks[0], count)),
        decode=_per_action(_decode(frames)),
        engine=_per_action(_engine(frames)),
        reply=_per_action(_reply(game_id, frames)),
        encode=_per_action(_encode(acks)),
        commit=commit[0],
        commit_loop=commit[1],
        commits_per_second=commit[2],
        transport=_per_action(_transport(frames, replies)),
    )


def _report_split(split: Split, alone: Timing, concurrent_cpu: float) -> None:
    def line(label: str, seconds: float, note: str = "") -> None:
        print(f"  {label:<52}: {seconds * 1e6:7.2f} µs  {seconds / split.baseline:5.1f}x  {note}".rstrip())

    print()
    print(
        f"per-stage split of one action's CPU (this thread's CPU, best of {STAGE_ROUNDS} rounds of "
        f"{STAGE_COUNT:,}; x = ratio to the baseline)"
    )
    line("baseline msgpack unpackb+packb", split.baseline)
    line("decode    protocol.decode (move/undo frame)", split.decode)
    line("engine    resolve + play + notation (move/undo)", split.engine)
    line("reply     Ack.of (the ack value)", split.reply)
    line("encode    Ack.to_wire + protocol.encode", split.encode)
    line(
        f"commit    writer thread, {COMMIT_BATCH} writes a commit",
        split.commit,
        f"({split.commits_per_second:,.0f} commits/s; event loop's share {split.commit_loop * 1e6:.1f} µs, "
        "not summed)",
    )
    line("transport websockets ServerProtocol: parse + frame", split.transport)
    request = split.decode + split.engine + split.reply + split.encode
    durable = request + split.commit
    line("sum decode+engine+reply+encode", request)
    rest = f"(rest: {(alone.cpu - request) * 1e6:.1f} µs of handler and room around the stages)"
    line("  measured: request work alone (commit skipped)", alone.cpu, rest)
    line("sum of the stages but transport", durable)
    line(f"  measured: {CONCURRENT} games at once, durable", concurrent_cpu, "(event loop + other threads)")
    line(
        "sum of all the stages", durable + split.transport, "(bench_load's server pays sockets + asyncio too)"
    )


async def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite+aiosqlite:///{Path(directory) / 'bench.sqlite3'}"
        # Every game comes from one in-process "address": the new-game quotas (issue 20) would refuse
        # the benchmark's own set-up, as bench_load's server flags say too.
        settings = Settings(
            port=0,
            database_url=url,
            new_games_per_player_per_minute=None,
            new_games_per_address_per_minute=None,
        )
        app = await App.start(settings)
        try:
            client = await _new_client(app, "bench-player")
            durable, _ = await _measure(app, client, 2_000)
            served = await _measure_served(app, CONCURRENT, CONCURRENT_SECONDS)
            rate, loop_cpu, other_cpu = await _measure_concurrent(app, CONCURRENT, CONCURRENT_SECONDS)
            commit = await _commit_stage(app, COMMIT_BATCH, COMMIT_ROUNDS)
            app.committer.submit = _instant_submit  # type: ignore[method-assign]
            await _measure(app, client, 2_000)  # warm-up
            alone, reply = await _measure(app, client, ACTIONS)
            game_id = await _new_game(app, client)
        finally:
            await app.shutdown()
    baseline_frames = _frames(game_id)  # the same frames, for the baseline and the stages
    started = time.perf_counter()
    _baseline(baseline_frames, reply, ACTIONS)
    baseline = (time.perf_counter() - started) / ACTIONS
    print("server request path per action (no sockets), SQLite synchronous=FULL")
    print(f"  with a durable commit, one in flight : {durable.wall * 1e6:8.1f} µs")
    for how, (each_rate, each_loop, each_other) in (
        ("serve", served),
        ("handle", (rate, loop_cpu, other_cpu)),
    ):
        print(
            f"  {f'{CONCURRENT} games at once, durable, {how}':<37}: {each_rate:8,.0f} actions/s; CPU per"
            f" action: event loop {each_loop * 1e6:.1f} µs, other threads (SQLite writer)"
            f" {each_other * 1e6:.1f} µs"
        )
    print(f"  request work alone (commit skipped)  : {alone.wall * 1e6:8.1f} µs")
    ratio = alone.wall / baseline
    print(f"  baseline msgpack unpackb+packb       : {baseline * 1e6:8.1f} µs   ratio {ratio:.1f}x")
    _report_split(_stages(baseline_frames, game_id, commit), alone, loop_cpu + other_cpu)


if __name__ == "__main__":
    # No options: --help says what it measures instead of running it, and a stray flag is refused.
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None).parse_args()
    with asyncio.Runner(loop_factory=fast_event_loop()) as runner:  # the server's event loop
        runner.run(main())
