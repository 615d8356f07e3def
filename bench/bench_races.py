"""Race standings benchmark: many races played at once, each followed by its seats and spectators,
beside plain games watched by spectators in the same run (issue 19 item 9).

Run from the project root::

    .venv/bin/python -m bench.bench_races                     (100 races x 8 seats x 10 spectators)
    .venv/bin/python -m bench.bench_races --races 100 --seats 8 --spectators 10 --pace 1 --seconds 10

One target, ``eightoff serve`` (the working tree's code, as in ``bench_load``) on a fresh SQLite file
on loopback, with the per-address, new-game and race limits lifted (every connection is a guest from
127.0.0.1) and a short ``--race-countdown``. Over ``--drivers`` processes (multiprocessing spawn):

- ``--races`` races: a creator ``race_create``s, the other seats ``race_join`` by its code, every seat
  ``race_ready``, ``--spectators`` spectators ``race_watch``, the creator ``race_start``s. After the
  reveal every seat plays its game (``resume``, then ``move``) at ``--pace`` actions a second, each
  move a legal one of the engine's ``Game(deal).legal_moves`` (chosen at random, never undone, so a
  seat's ``moves`` after an action is its game's ``v`` and names the action in the ``race_diff`` row;
  fewer than 52 moves a seat, so no race is won and every race runs through the window).
- the baseline: ``--plain-games`` ordinary games (``new_game``), each played the same way at the same
  pace and ``watch``ed by ``--plain-spectators`` spectators, who get one ``diff`` per action.

Every process records with ``time.monotonic`` (one clock for the machine): a player when it sent each
action and when its ack came; a follower when each ``race_diff`` row (a seat's game and ``moves``) or
``diff`` (a game and ``v``) arrived. Joined afterwards, for the actions sent in the measured window:
the standings' delay to every seat and spectator (from the send and from the ack, p50 / p99), the
plain diff's delay to its spectators the same way, their ratios, and the server's CPU (every thread,
over the window) per ``race_diff`` delivered, beside its floor (everyone in, no one playing). The
window's CPU also pays for the plain games (about 1% of the actions). The ack is the player's: a
``race_diff`` to another process may be read before it, so a delay from the ack can be negative.

Only loopback traffic; every process is stopped when the run ends. This is not a test: it asserts
nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import msgpack  # type: ignore[import-untyped]
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from bench.bench_load import (
    CODE,
    SUBPROTOCOL,
    percentile,
    process_tree,
    split,
    start_target,
    stop_process,
    tree_cpu_seconds,
)
from bench.echo_server import raise_nofile_limit
from engine import Deal, Game, Move
from server.ops.runtime import fast_event_loop

CONNECT_CONCURRENCY = 50  # handshakes in flight per driver
MAX_MOVES = 50  # a seat's moves at most: under 52, so no seat can win and end its race early
TIME_LIMIT = 3600  # seconds: the races outlive the run
DRAIN = 1.0  # seconds after the window for the last pushes to arrive
REPLY_TIMEOUT = 60.0

Key = tuple[str, int]  # (game id, its v after the action)


# --------------------------------------------------------------------------- one connection


@dataclass
class Client:
    """A connection: replies matched to requests by ``id``; pushes recorded as (key, arrival)."""

    ws: ClientConnection
    arrivals: list[tuple[str, Key, float]]  # ("race" or "plain", key, arrival)
    player: str = ""
    pending: dict[int, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    revealed: asyncio.Future[dict[str, Any]] | None = None
    next_id: int = 1
    reader: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        monotonic, unpackb, arrivals = time.monotonic, msgpack.unpackb, self.arrivals
        try:
            async for frame in self.ws:
                arrived = monotonic()
                message = unpackb(frame)
                kind = message.get("type")
                if kind == "race_diff":
                    for row in message["rows"]:
                        if row["moves"] and row["game"]:
                            arrivals.append(("race", (row["game"], row["moves"]), arrived))
                    if message["state"] == "running" and self.revealed and not self.revealed.done():
                        self.revealed.set_result(message)
                elif kind == "diff":
                    arrivals.append(("plain", (message["game"], message["v"]), arrived))
                elif (waiter := self.pending.pop(message.get("id") or 0, None)) is not None:
                    waiter.set_result(message)
        except ConnectionClosed:
            pass

    async def ask(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Send a request, return its reply (an error reply is raised: the setup must not fail)."""
        reply = await self.send(kind, **fields)
        if reply.get("type") == "error":
            raise RuntimeError(f"{kind} refused: {reply}")
        return reply

    async def send(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Send a request and wait for its reply, whatever it is."""
        request_id, self.next_id = self.next_id, self.next_id + 1
        waiter = asyncio.get_running_loop().create_future()
        self.pending[request_id] = waiter
        await self.ws.send(msgpack.packb({"type": kind, "id": request_id, **fields}))
        return await asyncio.wait_for(waiter, REPLY_TIMEOUT)


async def _client(url: str, gate: asyncio.Semaphore, arrivals: list[tuple[str, Key, float]]) -> Client:
    async with gate:
        ws = await connect(url, subprotocols=[SUBPROTOCOL], compression=None, max_size=None, open_timeout=60)
    client = Client(ws, arrivals)
    client.start()
    welcome = await client.ask("hello", protocol=1)
    client.player = welcome["player"]["id"]
    return client


# --------------------------------------------------------------------------- players and followers


@dataclass
class Player:
    """One seat's or plain game's player: its game, kept locally to choose legal moves."""

    client: Client
    kind: str
    game_id: str
    game: Game
    sends: list[tuple[str, Key, float, float]] = field(default_factory=list)  # kind, key, sent, acked


def move_fields(move: Move) -> dict[str, Any]:
    fields: dict[str, Any] = {"from": move.source.symbol(), "to": move.target.symbol()}
    if move.count > 1:
        fields["n"] = move.count
    return fields


async def _play(player: Player, pace: float, start: float, stop: float, rng: random.Random) -> None:
    """From ``start`` (plus a random phase) to ``stop``: one legal move every ``1 / pace`` seconds."""
    due = start + rng.random() / pace
    v = 0
    while v < MAX_MOVES:
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        if due >= stop:
            return
        moves = list(player.game.legal_moves)
        if not moves:
            return  # stuck: this player plays no more
        move = rng.choice(moves)
        sent = time.monotonic()
        reply = await player.client.send("move", game=player.game_id, **move_fields(move))
        acked = time.monotonic()
        if reply.get("type") != "ack":
            raise RuntimeError(f"a move was refused: {reply}")
        player.game.play(move)
        v = reply["v"]
        player.sends.append((player.kind, (player.game_id, v), sent, acked))
        due += 1 / pace


@dataclass
class DriverPlan:
    url: str
    races: int
    seats: int
    spectators: int
    plain_games: int
    plain_spectators: int
    pace: float
    seed: int


async def _race(plan: DriverPlan, gate: asyncio.Semaphore, arrivals: list[Any]) -> list[Player]:
    """One race set up to its reveal: its seats (as players of their games) and its spectators in."""
    seats = await asyncio.gather(*(_client(plan.url, gate, arrivals) for _ in range(plan.seats)))
    watchers = await asyncio.gather(*(_client(plan.url, gate, arrivals) for _ in range(plan.spectators)))
    loop = asyncio.get_running_loop()
    for seat in seats:
        seat.revealed = loop.create_future()
    race = await seats[0].ask("race_create", seats=plan.seats, time_limit=TIME_LIMIT)
    for seat in seats[1:]:
        await seat.ask("race_join", code=race["code"])
    await asyncio.gather(*(seat.ask("race_ready", race=race["race"]) for seat in seats))
    await asyncio.gather(*(watcher.ask("race_watch", race=race["race"]) for watcher in watchers))
    await seats[0].ask("race_start", race=race["race"])
    players = []
    for seat in seats:
        assert seat.revealed is not None
        reveal = await asyncio.wait_for(seat.revealed, REPLY_TIMEOUT)
        row = next(row for row in reveal["rows"] if row["player"]["id"] == seat.player)
        await seat.ask("resume", game=row["game"])
        players.append(Player(seat, "race", row["game"], Game(Deal.from_code(reveal["deal"]))))
    return players


async def _plain(plan: DriverPlan, gate: asyncio.Semaphore, arrivals: list[Any]) -> Player:
    """One ordinary game, its spectators watching."""
    client = await _client(plan.url, gate, arrivals)
    game_id = (await client.ask("new_game", code=CODE))["game"]
    watchers = await asyncio.gather(
        *(_client(plan.url, gate, arrivals) for _ in range(plan.plain_spectators))
    )
    await asyncio.gather(*(watcher.ask("watch", game=game_id) for watcher in watchers))
    return Player(client, "plain", game_id, Game(Deal.from_code(CODE)))


async def _drive(plan: DriverPlan, pipe: Connection) -> dict[str, Any]:
    arrivals: list[tuple[str, Key, float]] = []
    gate = asyncio.Semaphore(CONNECT_CONCURRENCY)
    races = await asyncio.gather(*(_race(plan, gate, arrivals) for _ in range(plan.races)))
    plains = await asyncio.gather(*(_plain(plan, gate, arrivals) for _ in range(plan.plain_games)))
    players = [player for race in races for player in race] + list(plains)
    pipe.send("ready")
    start, stop = await asyncio.to_thread(pipe.recv)
    rng = random.Random(plan.seed)
    await asyncio.gather(*(_play(p, plan.pace, start, stop, random.Random(rng.random())) for p in players))
    await asyncio.to_thread(pipe.recv)  # "collect": the last pushes have had their time
    return {"sends": [send for player in players for send in player.sends], "arrivals": arrivals}


def driver_main(plan: DriverPlan, pipe: Connection) -> None:
    raise_nofile_limit()
    with asyncio.Runner(loop_factory=fast_event_loop()) as runner:
        pipe.send(runner.run(_drive(plan, pipe)))


# --------------------------------------------------------------------------- the run and its report


@dataclass
class Delays:
    kind: str
    actions: int
    deliveries: int
    expected: int
    from_send: list[float]
    from_ack: list[float]

    def p(self, which: str, fraction: float) -> float:
        return percentile(self.from_send if which == "send" else self.from_ack, fraction) * 1e3


def _delays(
    kind: str, followers: int, sends: list[Any], arrivals: list[Any], window: tuple[float, float]
) -> Delays:
    timed = {
        key: (sent, acked) for k, key, sent, acked in sends if k == kind and window[0] <= sent < window[1]
    }
    from_send, from_ack = [], []
    for k, key, arrived in arrivals:
        if k == kind and (times := timed.get(key)) is not None:
            from_send.append(arrived - times[0])
            from_ack.append(arrived - times[1])
    return Delays(
        kind, len(timed), len(from_send), len(timed) * followers, sorted(from_send), sorted(from_ack)
    )


def run(args: argparse.Namespace, root: Path) -> tuple[Delays, Delays, float, float]:
    """Everyone in, then the window played; the standings' and the plain diffs' delays, the CPU over
    the window, and the CPU a second while everyone was in and no one played."""
    connections = args.races * (args.seats + args.spectators) + args.plain_games * (1 + args.plain_spectators)
    extra = (
        f"--race-countdown {args.countdown} --races-per-player-per-hour off "
        "--race-joins-per-player-per-minute off --new-games-per-player-per-minute off "
        # every client is on 127.0.0.1: the per-address budgets would meter the bench's own crowd
        "--races-per-address-per-hour off --reads-per-address-per-second off"
    )
    target = start_target("server", root / "server", extra=extra, capacity=connections)
    context = multiprocessing.get_context("spawn")
    drivers = []
    try:
        for index, (races, plains) in enumerate(
            zip(split(args.races, args.drivers), split(args.plain_games, args.drivers), strict=True)
        ):
            plan = DriverPlan(
                target.url,
                races,
                args.seats,
                args.spectators,
                plains,
                args.plain_spectators,
                args.pace,
                index,
            )
            ours, theirs = context.Pipe()
            process = context.Process(target=driver_main, args=(plan, theirs))
            process.start()
            theirs.close()  # a driver that dies is then an EOF on ``ours``
            drivers.append((process, ours))
        for _, pipe in drivers:
            if not pipe.poll(args.setup_timeout) or pipe.recv() != "ready":
                raise RuntimeError(f"a driver did not get its races set up; the server log: {target.log}")
        members = process_tree(target.process.pid)
        idle_before = tree_cpu_seconds(members)
        time.sleep(args.idle_seconds)  # everyone in, no one playing: the server's floor
        idle = ((tree_cpu_seconds(members) or 0.0) - (idle_before or 0.0)) / args.idle_seconds
        start = time.monotonic() + 0.2
        window = (start + args.settle, start + args.settle + args.seconds)
        for _, pipe in drivers:
            pipe.send((start, window[1]))
        time.sleep(max(0.0, window[0] - time.monotonic()))
        cpu_before = tree_cpu_seconds(members)
        time.sleep(max(0.0, window[1] - time.monotonic()))
        cpu_after = tree_cpu_seconds(members)
        time.sleep(DRAIN)
        for _, pipe in drivers:
            pipe.send("collect")
        results = [pipe.recv() for _, pipe in drivers]
    except BaseException:
        print(
            f"the server's log, its end:\n{target.log.read_text(errors='replace')[-3000:]}", file=sys.stderr
        )
        raise
    finally:
        for process, _ in drivers:
            stop_process(process)
        stop_process(target.process)
    sends = [send for result in results for send in result["sends"]]
    arrivals = [arrival for result in results for arrival in result["arrivals"]]
    race = _delays("race", args.seats + args.spectators, sends, arrivals, window)
    plain = _delays("plain", args.plain_spectators, sends, arrivals, window)
    return race, plain, (cpu_after or 0.0) - (cpu_before or 0.0), idle


def report(
    race: Delays, plain: Delays, cpu: float, idle: float, args: argparse.Namespace, command: str
) -> None:
    print(
        f"bench_races: {args.races} races x {args.seats} seats x {args.spectators} spectators, and "
        f"{args.plain_games} plain games x {args.plain_spectators} spectators, over {args.drivers} drivers; "
        f"every player {args.pace:g} moves/s; window {args.seconds:g} s after {args.settle:g} s\n  {command}"
    )
    header = ("stream", "actions", "deliveries", "of", "send->p50", "p99", "ack->p50", "p99")
    print("{:>10} {:>8} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9}".format(*header))
    for d in (race, plain):
        name = "race_diff" if d.kind == "race" else "diff"
        print(
            f"{name:>10} {d.actions:>8} {d.deliveries:>10} {d.expected:>10} "
            f"{d.p('send', 0.5):>7.2f} ms {d.p('send', 0.99):>6.2f} ms "
            f"{d.p('ack', 0.5):>6.2f} ms {d.p('ack', 0.99):>6.2f} ms"
        )
    # From the ack, a p50 is near 0 (a diff leaves as its ack does): only its p99 makes a ratio.
    ratios = {
        "send p50": race.p("send", 0.5) / plain.p("send", 0.5),
        "send p99": race.p("send", 0.99) / plain.p("send", 0.99),
        "ack p99": race.p("ack", 0.99) / plain.p("ack", 0.99),
    }
    print("race_diff / diff delay: " + ", ".join(f"{name} {value:.2f}x" for name, value in ratios.items()))
    per_delivery = cpu / race.deliveries * 1e6 if race.deliveries else float("nan")
    actions = race.actions + plain.actions
    per_action = cpu / actions * 1e6 if actions else float("nan")
    print(
        f"server CPU over the window: {cpu:.2f} s = {per_delivery:.1f} µs per race_diff delivered, "
        f"{per_action:.0f} µs per action (race and plain, {actions} actions)"
    )
    above = (cpu - idle * args.seconds) / race.deliveries * 1e6 if race.deliveries else float("nan")
    print(
        f"server CPU with everyone in and no one playing: {idle * 1e3:.0f} ms/s; above that floor, "
        f"{above:.1f} µs per race_diff delivered"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--races", type=int, default=100)
    parser.add_argument("--seats", type=int, default=8, help="seats a race (2..8)")
    parser.add_argument("--spectators", type=int, default=10, help="spectators a race")
    parser.add_argument("--plain-games", type=int, default=10, help="the baseline: ordinary games")
    parser.add_argument("--plain-spectators", type=int, default=10, help="spectators a plain game")
    parser.add_argument("--drivers", type=int, default=4, help="client processes")
    parser.add_argument("--pace", type=float, default=1.0, help="each player's moves a second")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds of play before the window")
    parser.add_argument("--seconds", type=float, default=10.0, help="the measured window")
    parser.add_argument("--idle-seconds", type=float, default=3.0, help="the floor's window, before play")
    parser.add_argument(
        "--countdown",
        type=float,
        default=0.5,
        help="the server's --race-countdown",
    )
    parser.add_argument("--setup-timeout", type=float, default=300.0, help="seconds to get everyone in")
    args = parser.parse_args(argv)
    if (args.settle + args.seconds + 1) * args.pace >= MAX_MOVES:
        parser.error(f"(settle + seconds) x pace must stay under {MAX_MOVES} moves a seat (no seat may win)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    raise_nofile_limit()
    command = " ".join([".venv/bin/python -m bench.bench_races", *(sys.argv[1:] if argv is None else argv)])
    with tempfile.TemporaryDirectory(prefix="eightoff-bench-races-") as tmp:
        race, plain, cpu, idle = run(args, Path(tmp))
    report(race, plain, cpu, idle, args, command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
