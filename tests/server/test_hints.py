"""Hints, winnable deals and the winnable daily deal over real WebSockets. What a hint stores (the
game marked hinted, kept off the boards) runs on both databases; the solver's answers, its queue and
its workers on SQLite alone (`dbutil.SQLITE_ONLY`), being the same on either."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import signal
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from engine import Deal, Game, Layout, Move
from server.app import App
from server.errors import ErrorCode
from server.services import hints
from server.services.hints import SOLVER_NICENESS, Asker, SolverBusy, SolvingService
from server.services.winnable import winnable_deals
from server.storage import StorageUnavailable
from server.storage.commit_backends import actions_of
from server.storage.committer import Done, MarkHinted, Write, WriteConflict
from server.storage.tables import games
from solver import Verdict, solve_deal, winnable_daily_deal
from tests.server.test_workers import Node
from tests.support import dbutil, serverutil
from tests.support.waiting import eventually
from tests.support.wsclient import WsClient


@pytest.fixture
async def fast_app(database_url: str) -> Any:
    """A server whose token bucket lets a test play a whole game with a hint before each move."""
    async with serverutil.running_app(
        database_url, sqlite_synchronous="NORMAL", rate_per_second=5000.0, rate_burst=5000
    ) as app:
        yield app


@pytest.fixture
def fast_url(fast_app: App) -> str:
    return serverutil.ws_url(fast_app)


async def player(url: str, name: str) -> WsClient:
    client = await WsClient.open(url)
    await client.hello(name=name)
    return client


async def follow_hints(client: WsClient, game: str) -> tuple[int, dict[str, Any]]:
    """Play the hinted action until the game is won; returns the hints asked and the last reply."""
    hints = 0
    while True:
        hint = await client.request("hint", game=game)
        assert hint["type"] == "hint" and hint["verdict"] == "win", hint
        hints += 1
        action = {key: value for key, value in hint["action"].items() if key != "type"}
        reply = await client.request("move", game=game, v=hint["v"], **action)
        assert reply["type"] == "ack", reply
        if reply["status"] == "won":
            return hints, reply


@dbutil.SQLITE_ONLY
@pytest.mark.parametrize("cells", [8, 4, 2])
async def test_hints_followed_from_the_opening_win_proven_winnable_deals(fast_url: str, cells: int) -> None:
    client = await player(fast_url, "Hinted")
    for deal in winnable_deals(cells)[:4]:
        snapshot = await client.request("new_game", code=deal.code())
        hints, last = await follow_hints(client, snapshot["game"])
        assert hints == last["moves"] == last["v"]
        over = await client.recv()
        assert over["type"] == "game_over" and over["won"] is True
    await client.close()


@dbutil.SQLITE_ONLY
async def test_hint_from_a_dead_opening_is_lost(url: str) -> None:
    dead = next(Deal(n, 2) for n in range(10_000) if not Game(Deal(n, 2)).legal_moves)
    client = await player(url, "Stuck")
    game = (await client.request("new_game", code=dead.code()))["game"]
    hint = await client.request("hint", game=game)
    assert hint == {"type": "hint", "id": hint["id"], "game": game, "v": 0, "verdict": "lost"}
    again = await client.request("hint", game=game)  # the cached answer
    assert {**again, "id": hint["id"]} == hint
    await client.close()


@dbutil.SQLITE_ONLY
async def test_hint_refusals(url: str) -> None:
    owner, other = await player(url, "Owner"), await player(url, "Other")
    game = (await owner.request("new_game", code=winnable_deals(8)[0].code()))["game"]
    assert (await other.request("hint", game=game))["code"] == "forbidden"
    assert (await owner.request("hint", game="g_nope"))["code"] == "not_found"
    await owner.request("resign", game=game)
    assert (await owner.request("hint", game=game))["code"] == "illegal_move"
    assert (await owner.request("hint"))["code"] == "bad_request"
    assert (await owner.request("hint", game=game, v=0))["code"] == "bad_request"
    await owner.close()
    await other.close()


async def test_a_hinted_game_ranks_on_no_leaderboard(fast_url: str) -> None:
    code = winnable_deals(8)[1].code()
    helped, alone = await player(fast_url, "Helped"), await player(fast_url, "Alone")
    for client, name in ((helped, "Helped"), (alone, "Alone")):
        game = (await client.request("new_game", code=code))["game"]
        if name == "Helped":
            await follow_hints(client, game)
        else:  # the same line, found without asking the server
            for move in solve_deal(Deal.from_code(code)).moves:
                fields = {"from": move.source.symbol(), "to": move.target.symbol(), "n": move.count}
                assert (await client.request("move", game=game, **fields))["type"] == "ack"
        assert (await client.recv())["type"] == "game_over"
    for board in ({"board": "deal", "code": code}, {"board": "variant", "cells": 8}, {"board": "players"}):
        rows = (await alone.request("leaderboard", **board))["rows"]
        assert [row["player"]["name"] for row in rows] == ["Alone"], board
    profile = await helped.request("profile")
    assert (profile["played"], profile["won"]) == (0, 0) and len(profile["recent"]) == 1
    await helped.close()
    await alone.close()


@dbutil.SQLITE_ONLY
async def test_new_game_winnable_deals_from_the_table(url: str) -> None:
    client = await player(url, "Picky")
    for cells in (8, 4, 2):
        snapshot = await client.request("new_game", cells=cells, winnable=True)
        assert Deal.from_code(snapshot["code"]) in winnable_deals(cells)
        await client.request("resign", game=snapshot["game"])
    await client.close()


@dbutil.SQLITE_ONLY
async def test_new_game_daily_is_the_winnable_daily_deal(url: str) -> None:
    client = await player(url, "Daily")
    today = dt.datetime.now(dt.UTC).date()
    for cells in (8, 4):
        snapshot = await client.request("new_game", daily=True, cells=cells)
        assert snapshot["code"] == winnable_daily_deal(today, cells).code()
        await client.request("resign", game=snapshot["game"])
    await client.close()


@dbutil.SQLITE_ONLY
async def test_solving_service_refuses_hints_beyond_its_queue(app: App) -> None:
    service = SolvingService(max_waiting_hints=1)
    try:
        layout: Layout = Deal(1, 4).layout()
        first = asyncio.ensure_future(service.hint("g_1", 0, layout, Asker("p_1", "127.0.0.1")))
        await asyncio.sleep(0)
        with pytest.raises(SolverBusy) as busy:
            await service.hint("g_2", 0, layout, Asker("p_2", "127.0.0.2"))
        assert busy.value.code is ErrorCode.UNAVAILABLE
        # the same position shares the one in flight, whoever asks
        same = await service.hint("g_1", 0, layout, Asker("p_2", "127.0.0.2"))
        assert same == await first
    finally:
        service.close()


@dbutil.SQLITE_ONLY
async def test_solving_service_refuses_a_player_or_an_address_over_its_share(app: App) -> None:
    """Issue 20: past its share a player (or an address) is told ``rate_limited``; others still queue."""
    service = SolvingService(hints_per_player=1, hints_per_address=2)
    layouts = [Deal(n, 8).layout() for n in range(1, 5)]
    try:
        first = asyncio.ensure_future(service.hint("g_1", 0, layouts[0], Asker("p_1", "127.0.0.1")))
        await asyncio.sleep(0)
        with pytest.raises(SolverBusy) as player_busy:
            await service.hint("g_2", 0, layouts[1], Asker("p_1", "127.0.0.1"))
        second = asyncio.ensure_future(service.hint("g_3", 0, layouts[2], Asker("p_2", "127.0.0.1")))
        await asyncio.sleep(0)
        with pytest.raises(SolverBusy) as address_busy:
            await service.hint("g_4", 0, layouts[3], Asker("p_3", "127.0.0.1"))
        elsewhere = await service.hint("g_4", 0, layouts[3], Asker("p_3", "127.0.0.2"))
        assert [player_busy.value.code, address_busy.value.code] == [ErrorCode.RATE_LIMITED] * 2
        assert "once one is answered" in str(player_busy.value) and "your address" in str(address_busy.value)
        for hint in (await first, await second, elsewhere):
            assert hint[0] is Verdict.WIN and hint[1] is not None
        # answered: the shares are free again
        assert (await service.hint("g_2", 0, layouts[1], Asker("p_1", "127.0.0.1")))[0] is Verdict.WIN
    finally:
        service.close()


async def test_the_solver_workers_run_below_the_servers_priority() -> None:
    """Issue 20: under a hint flood the solver worker took a core that the server and its players'
    moves needed (on a 2-core machine, a bystander's move waited behind it). A hint may wait, a move
    should not: the workers run `SOLVER_NICENESS` below the server's priority."""
    service = SolvingService()
    try:
        hint = await service.hint("g_1", 0, Deal(1, 8).layout(), Asker("p_1", "127.0.0.1"))
        assert hint[0] is Verdict.WIN
        worker = await asyncio.get_running_loop().run_in_executor(service._executor(), os.nice, 0)
        assert worker == min(19, os.nice(0) + SOLVER_NICENESS)
    finally:
        service.close()


async def test_the_winning_line_is_replayed_in_the_solver_not_on_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 20 (the hint flood): each answered hint replayed its winning line (a game rebuilt move by
    move, some milliseconds) on the event loop, to keep its positions. The solver worker does that
    now: nothing of it runs in the server's process, and the line still answers the next position."""
    replayed: list[Layout] = []
    replay = hints._line_steps

    def counted(layout: Layout, moves: tuple[Move, ...]) -> dict[Layout, Move]:
        replayed.append(layout)
        return replay(layout, moves)

    monkeypatch.setattr(hints, "_line_steps", counted)  # in this process only: the worker is spawned
    service = SolvingService()
    try:
        layout = Deal(1, 8).layout()
        verdict, move = await service.hint("g_1", 0, layout, Asker("p_1", "127.0.0.1"))
        assert verdict is Verdict.WIN and move is not None
        game = Game.from_layout(layout)
        game.push(move)
        assert service._lines["g_1"][game.layout()] is not None  # the next position is on the line
        assert replayed == []
    finally:
        service.close()


def children(pid: int) -> set[int]:
    """The pids of the children of process ``pid`` (Linux ``/proc``; none once it is gone)."""
    try:
        return {int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}
    except FileNotFoundError:
        return set()


def running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (an orphan's exit waits for init's reaping)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def is_pool_worker(pid: int) -> bool:
    """Whether process ``pid`` is a worker spawned by multiprocessing (``spawn_main`` on its command line)."""
    try:
        return b"multiprocessing.spawn" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return False


async def test_started_solver_workers_are_up_before_the_first_hint_and_solve_it() -> None:
    """Issue 20 (the hint flood): the solver's worker started at the first hint, a new interpreter
    importing the engine and the solver while the others played. ``start`` starts them at once; the
    first hint then starts no process (before: the first hint started the one worker)."""
    before = children(os.getpid())
    service = SolvingService(workers=2)
    try:
        await service.start()
        await eventually(lambda: len(children(os.getpid()) - before) == 2, "both solver workers are up")
        workers = children(os.getpid()) - before
        hint = await service.hint("g_1", 0, Deal(1, 8).layout(), Asker("p_1", "127.0.0.1"))
        assert hint[0] is Verdict.WIN
        assert children(os.getpid()) - before == workers
        solver = await asyncio.get_running_loop().run_in_executor(service._executor(), os.getpid)
        assert solver in workers
    finally:
        service.close()


@pytest.mark.parametrize("workers", [1, 2])
async def test_eightoff_serve_starts_its_solver_workers_as_it_listens(workers: int, tmp_path: Path) -> None:
    """Each serving process (the one process, or each worker of ``--workers 2``) has its solver
    worker running, at the solver's lower priority, before anyone asks a hint."""
    node = Node(f"sqlite+aiosqlite:///{tmp_path / 'eightoff.db'}", tmp_path / "stderr.log", workers=workers)
    try:
        servers = [node.process.pid] if workers == 1 else list(node.worker_pids().values())

        niceness = min(19, os.getpriority(os.PRIO_PROCESS, servers[0]) + SOLVER_NICENESS)

        def solvers() -> set[int]:
            # A pool's worker, not its resource tracker (another child of the server, at the server's
            # niceness: the same as the solver's when the tests themselves run at nice 9 or more).
            found = {child for server in servers for child in children(server) if is_pool_worker(child)}
            return {child for child in found if os.getpriority(os.PRIO_PROCESS, child) == niceness}

        await eventually(lambda: len(solvers()) == len(servers), "each server has its solver worker")
    finally:
        node.stop()


@pytest.mark.parametrize("workers", [1, 2])
async def test_a_killed_server_s_solver_worker_ends_with_it(workers: int, tmp_path: Path) -> None:
    """``kill -9`` of a serving process (the one process, or a worker of ``--workers 2``) left its
    solver worker running for ever, holding its ~50 MiB and the pool's resource tracker: the worker
    also holds the write end of the queue it reads, so no end-of-file ever tells it. Each solver
    worker watches its parent and exits once it is gone."""
    node = Node(f"sqlite+aiosqlite:///{tmp_path / 'eightoff.db'}", tmp_path / "stderr.log", workers=workers)
    try:
        server = node.process.pid if workers == 1 else next(iter(node.worker_pids().values()))
        niceness = min(19, os.getpriority(os.PRIO_PROCESS, server) + SOLVER_NICENESS)
        await eventually(
            lambda: any(
                is_pool_worker(child) and os.getpriority(os.PRIO_PROCESS, child) == niceness
                for child in children(server)
            ),
            "the server's solver worker is up",
        )
        orphans = children(server)
        os.kill(server, signal.SIGKILL)
        await eventually(
            lambda: not any(running(pid) for pid in orphans),
            f"the solver worker and the resource tracker ({sorted(orphans)}) end with their server",
            timeout=10,
        )
    finally:
        if node.process.poll() is None:
            node.process.kill()
            node.process.wait(timeout=30)


@dbutil.SQLITE_ONLY
async def test_closing_the_solving_service_cancels_the_hints_still_waiting(app: App) -> None:
    """A hint queued behind another when the service closes is cancelled, not left waiting for ever
    (nor solved in a pool started again after the close)."""
    service = SolvingService()
    askers = [Asker("p_1", "127.0.0.1"), Asker("p_2", "127.0.0.2")]
    hints = [
        asyncio.ensure_future(service.hint(f"g_{n}", 0, Deal(n + 1, 8).layout(), asker))
        for n, asker in enumerate(askers)
    ]
    await asyncio.sleep(0)
    service.close()
    for hint in hints:
        with pytest.raises(asyncio.CancelledError):
            await hint
    await asyncio.sleep(0.1)
    assert service._pool is None


async def test_closing_the_solving_service_ends_its_workers_even_mid_search() -> None:
    """A worker stopping its node waited for its solver process for ever (seen in CI: `eightoff serve
    --workers 2` stopped 0.05 s after it served, one worker never exited). The pool asks its processes
    to stop through its queue, which a process busy with a search (or one that never reads the
    request) does not answer, and the interpreter's exit joins them: ``close`` ends them itself. Here a
    job that would run for a minute stands for a search that never ends."""
    service = SolvingService()
    await service.start()
    before = children(os.getpid())
    solver = await asyncio.get_running_loop().run_in_executor(service._executor(), os.getpid)
    assert solver in before
    search = asyncio.get_running_loop().run_in_executor(service._executor(), time.sleep, 60)
    await asyncio.sleep(0.2)  # pacing: the job is handed to the worker, which sleeps in it
    service.close()
    await eventually(lambda: solver not in children(os.getpid()), "the solver process is gone", timeout=10)
    with pytest.raises(BrokenProcessPool):  # the search ended with its process
        await search


FLOOD_CONNECTIONS = 12
BYSTANDER_HINTS = 20


#: Loops a second at most per flooding connection: 240 hints asked a second in all, many times what the
#: solver answers (the queue stays full, as in the attack: before the fair queue, 5 to 16 of the
#: bystander's 20 were answered), yet little enough CPU that the test's one process (server and
#: clients) is not what delays the bystander (unpaced, its requests sometimes waited past 10 s).
FLOOD_PACE = 20.0


#: Seconds the bystander waits for each reply: what the flood test measures is whether its hints are
#: answered (latency is bench_attacks' business), and on a loaded machine the flood's game churn alone
#: can keep a reply past the usual 10 s.
PATIENCE = 60.0


async def hint_loop(
    client: WsClient, replies: list[dict[str, Any]], rounds: int | None = None, pace: float | None = None
) -> None:
    """new_game, hint, resign, over and over (``rounds`` times, or until cancelled; at most ``pace``
    loops a second): each hint is of a new game's opening, so none is answered from the cache."""
    done = 0
    while rounds is None or done < rounds:
        started = time.monotonic()
        client.reply_timeout = PATIENCE
        game = (await client.request("new_game"))["game"]
        replies.append(await client.request("hint", game=game))
        assert (await client.request("resign", game=game))["type"] == "game_over"
        done += 1
        if pace is not None:
            await asyncio.sleep(max(0.0, started + 1 / pace - time.monotonic()))


@pytest.fixture
async def churn_app(sqlite_database_url: str) -> Any:
    """A server without the new-game quotas: the hint flood below starts far more games than they
    allow, and it is the solver's share that it tests (tests/server/test_quotas.py has the quotas).
    On SQLite alone: the share is the solving service's, in memory; on PostgreSQL the flood's game
    churn (a new game and a resign per hint) took 21 s instead of 3, and once kept the bystander's
    reply past 10 s, while what storage answers a hint is tried on both backends above and below."""
    settings = {"new_games_per_player_per_minute": None, "new_games_per_address_per_minute": None}
    async with serverutil.running_app(sqlite_database_url, sqlite_synchronous="NORMAL", **settings) as app:
        yield app


async def test_a_bystanders_hints_are_answered_during_a_hint_flood_from_one_address(churn_app: App) -> None:
    """Issue 20, item 5: 12 connections from 127.0.0.1 looping new_game, hint, resign took every place
    of the solver's queue (58 % of another player's hints were ``unavailable``). The flood gets
    ``rate_limited`` past its address's share; the bystander, on 127.0.0.2, has 90 % or more of its
    hints answered."""
    app, url = churn_app, serverutil.ws_url(churn_app)
    flooders = [await player(url, f"Flood {n}") for n in range(FLOOD_CONNECTIONS)]
    bystander = await WsClient.open(url, sock=serverutil.socket_from("127.0.0.2", app.port))
    await bystander.hello(name="Bystander")
    flood_replies: list[dict[str, Any]] = []
    floods = [asyncio.ensure_future(hint_loop(client, flood_replies, pace=FLOOD_PACE)) for client in flooders]
    try:
        while len(flood_replies) < FLOOD_CONNECTIONS:  # every flooder is asking
            await asyncio.sleep(0.01)
        mine: list[dict[str, Any]] = []
        await hint_loop(bystander, mine, BYSTANDER_HINTS)
        assert not any(flood.done() for flood in floods), "a flooder stopped before the bystander was done"
    finally:
        for flood in floods:
            flood.cancel()
        await asyncio.gather(*floods, return_exceptions=True)
    answered = sum(reply["type"] == "hint" for reply in mine)
    assert answered / BYSTANDER_HINTS >= 0.9, [reply.get("code") for reply in mine]
    flood_codes = {reply.get("code", reply["type"]) for reply in flood_replies}
    assert flood_codes == {"hint", "rate_limited"}, flood_codes  # never unavailable: a share, not the queue
    for client in (*flooders, bystander):
        await client.close()


# ---------------------------------------------------------------- hints racing moves (two tabs)


def move_fields(move: Move) -> dict[str, Any]:
    return {"from": move.source.symbol(), "to": move.target.symbol(), "n": move.count}


class HeldActions:
    """Holds the commit of every action write of ``app`` until ``release``; the commit then fails
    (``unavailable``) or goes through. Other writes (a hinted mark) pass at once."""

    def __init__(self, app: App, monkeypatch: pytest.MonkeyPatch) -> None:
        self._submit = app.committer.submit
        self.reached = asyncio.Event()
        self._released = asyncio.Event()
        self._fail = False
        self.hinted: list[str] = []
        self._holding: set[asyncio.Task[None]] = set()
        monkeypatch.setattr(app.committer, "submit", self._held)

    def _held(self, write: Write, done: Done) -> None:
        if isinstance(write, MarkHinted):
            self.hinted.append(write.game_id)
        if not actions_of(write):
            self._submit(write, done)
            return
        self.reached.set()
        task = asyncio.get_running_loop().create_task(self._submit_when_released(write, done))
        self._holding.add(task)
        task.add_done_callback(self._holding.discard)

    async def _submit_when_released(self, write: Write, done: Done) -> None:
        await self._released.wait()
        if self._fail:
            done(StorageUnavailable("the test's database failed"))
        else:
            self._submit(write, done)

    def release(self, *, fail: bool) -> None:
        self._fail = fail
        self._released.set()


async def two_tabs(url: str, name: str) -> tuple[WsClient, WsClient]:
    first = await player(url, name)
    second = await WsClient.open(url)
    await second.hello(token=first.token)
    return first, second


async def hint_while_a_move_is_held(
    held: HeldActions, mover: WsClient, hinter: WsClient, game: str, move: Move, *, fail: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One tab's move is applied and waits for its commit while the other tab asks for a hint; the
    commit then fails or goes through. The replies to the move and to the hint."""
    moving = asyncio.ensure_future(mover.request("move", game=game, **move_fields(move)))
    await held.reached.wait()
    hinting = asyncio.ensure_future(hinter.request("hint", game=game))
    await asyncio.wait([hinting], timeout=0.5)  # the bug answered here, from the uncommitted position
    held.release(fail=fail)
    return await moving, await hinting


async def stored_hinted(app: App, game: str) -> bool:
    async with app.database.connection() as conn:
        return bool(await conn.scalar(select(games.c.hinted).where(games.c.id == game)))


async def test_a_hint_describes_the_committed_position_not_a_move_rolled_back(
    fast_app: App, fast_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect: the hint read the game while another tab's move was applied but not committed; the move
    failed and was rolled back, and the hint (cached by (game, v)) described a version that never was."""
    deal = winnable_deals(8)[0]
    first, second = await two_tabs(fast_url, "Two tabs")
    game = (await first.request("new_game", code=deal.code()))["game"]
    assert (await second.request("resume", game=game))["v"] == 0
    held = HeldActions(fast_app, monkeypatch)
    opening = Game(deal)
    rolled_back, other, *_ = list(opening.legal_moves)
    moved, hint = await hint_while_a_move_is_held(held, first, second, game, rolled_back, fail=True)
    assert moved["code"] == "unavailable", moved
    assert hint["type"] == "hint" and hint["v"] == 0 and hint["verdict"] == "win", hint
    action = {key: value for key, value in hint["action"].items() if key != "type"}
    # another position at v 1 gets its own hint, not one cached for the move rolled back
    monkeypatch.undo()
    assert (await first.request("move", game=game, v=0, **move_fields(other)))["type"] == "ack"
    at_one = await second.request("hint", game=game)
    assert at_one["v"] == 1 and at_one["verdict"] in ("win", "unknown", "lost"), at_one
    assert (await first.request("undo", game=game, v=1))["type"] == "ack"
    assert (await first.request("move", game=game, v=2, **action))["type"] == "ack"  # the hint was legal
    for client in (first, second):
        await client.close()


async def test_a_hint_during_the_winning_move_is_refused_and_the_win_ranks(
    fast_app: App, fast_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect: a hint asked while the other tab's winning move waited for its commit was solved from the
    won position (verdict win without an action, which the protocol forbids), then marked the game
    hinted after it was won and ranked."""
    deal = winnable_deals(8)[2]
    first, second = await two_tabs(fast_url, "Winner")
    game = (await first.request("new_game", code=deal.code()))["game"]
    line = solve_deal(deal).moves
    for move in line[:-1]:
        assert (await first.request("move", game=game, **move_fields(move)))["type"] == "ack"
    assert (await second.request("resume", game=game))["v"] == len(line) - 1
    held = HeldActions(fast_app, monkeypatch)
    moved, hint = await hint_while_a_move_is_held(held, first, second, game, line[-1], fail=False)
    assert moved["type"] == "ack" and moved["status"] == "won", moved
    assert hint["type"] == "error" and hint["code"] == "illegal_move", hint
    assert held.hinted == [] and not await stored_hinted(fast_app, game)
    rows = (await first.request("leaderboard", board="deal", code=deal.code()))["rows"]
    assert [row["player"]["name"] for row in rows] == ["Winner"]
    for client in (first, second):
        await client.close()


async def test_a_hint_asked_before_the_win_keeps_the_game_off_the_boards(
    fast_app: App, fast_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect: the game was marked hinted only after solving; a win from the other tab meanwhile ranked
    it, and the mark came after (hinted, yet on the boards). The mark is stored before solving."""
    deal = winnable_deals(8)[3]
    first, second = await two_tabs(fast_url, "Quick")
    game = (await first.request("new_game", code=deal.code()))["game"]
    line = solve_deal(deal).moves
    for move in line[:-1]:
        assert (await first.request("move", game=game, **move_fields(move)))["type"] == "ack"
    solving = asyncio.Event()
    solved = asyncio.Event()
    real_hint = fast_app.services.solving.hint

    async def slow_hint(game_id: str, v: int, layout: Layout, asker: Asker) -> Any:
        solving.set()
        await solved.wait()
        return await real_hint(game_id, v, layout, asker)

    monkeypatch.setattr(fast_app.services.solving, "hint", slow_hint)
    hinting = asyncio.ensure_future(second.request("hint", game=game))
    await solving.wait()
    assert (await first.request("move", game=game, **move_fields(line[-1])))["status"] == "won"
    solved.set()
    hint = await hinting
    assert hint["type"] == "hint" and hint["v"] == len(line) - 1 and hint["verdict"] == "win", hint
    assert await stored_hinted(fast_app, game)
    assert (await first.request("leaderboard", board="deal", code=deal.code()))["rows"] == []
    for client in (first, second):
        await client.close()


async def test_a_game_is_marked_hinted_once_and_never_once_finished(
    fast_app: App, fast_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One UPDATE per game (the room remembers it), and the pipeline refuses to mark a finished game."""
    client = await player(fast_url, "Once")
    deal = winnable_deals(8)[0]
    game = (await client.request("new_game", code=deal.code()))["game"]
    held = HeldActions(fast_app, monkeypatch)
    held.release(fail=False)
    for move in solve_deal(deal).moves[:3]:
        assert (await client.request("hint", game=game))["verdict"] == "win"
        assert (await client.request("move", game=game, **move_fields(move)))["type"] == "ack"
    assert held.hinted == [game] and await stored_hinted(fast_app, game)
    other = (await client.request("new_game", code=deal.code()))["game"]
    assert (await client.request("resign", game=other))["type"] == "game_over"
    with pytest.raises(WriteConflict):
        await fast_app.committer.stored(MarkHinted(other))
    assert not await stored_hinted(fast_app, other)
    await client.close()
