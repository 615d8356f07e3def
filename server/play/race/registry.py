"""The node's copies of races: which are in memory, making them, finding them by id or invitation
code, keeping them in step with the other nodes' copies, and sweeping up the races nobody holds.

`RaceRegistry` is the only owner of the map from race id to its driver (a `RaceRoom` on the same
`RoomDriver` as a game) and the only writer of a race room's ``replaced`` and ``kept``. A race stays
in memory until it is over (its timers run there); a race that finished here is then kept for its
followers (so that a rematch asked of it reaches them) until its last follower goes or
`KEEP_AFTER_END` seconds have passed; any other finished race is read from the database when watched.
It is told of its seats' commits by the game rooms (`observe`, through `RoomServices.observe`), and
of the other nodes' stored changes of a race it holds by the bus (`race_changed`).

Across nodes (docs/races.md): any node with a follower of a race, or a room of one of its seats'
games, holds a copy; the database row is the authority (fenced by its revision). A running copy
holds its seats' games (`hold`, `RoomRegistry.pin`) so that their commits on other nodes reach it.
No node takes up every open race at start: each sweeps the database every `SWEEP_INTERVAL` seconds
for races whose timed change is due and that it does not hold (their nodes died, or nobody follows
them), and takes them up; two nodes sweeping one race are settled by its fence.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
import secrets
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, TypeAlias

from engine import Deal
from protocol import RatingShift, ServerMessage
from protocol.errors import RequestId
from server.clock import utc_now
from server.errors import ErrorCode, Refusal
from server.ids import new_id
from server.metrics import Metrics
from server.play.bus import Event, RaceEvent
from server.play.commands import Follower, Tick
from server.play.driver import Pusher, RoomDriver, RoomServices
from server.play.effects import SeatProgress
from server.play.game_room import FinishedGame
from server.play.race.commands import RaceChanged, RaceRematch, Rematch, SeatChanged
from server.play.race.room import RaceRoom
from server.play.race.value import LOBBY_TIMEOUT, Entrant, Phase, Race, Seat, SeatStatus
from server.play.registry import RoomRegistry
from server.play.replay import replay_stored
from server.storage import Database, StoredGame, races, ratings, repository
from server.storage.committer import Committer, StoreRace
from server.storage.records import RaceRecord, RaceWrite

__all__ = ["KEEP_AFTER_END", "SWEEP_GRACE", "SWEEP_INTERVAL", "RaceRegistry", "RaceRoomDriver", "invite_code"]

logger = logging.getLogger(__name__)

RaceRoomDriver: TypeAlias = RoomDriver[RaceRoom]
_INVITE_LETTERS = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
#: Seconds a race that finished on this node stays in memory for its followers (its rematch reaches
#: them): memory stays bounded by the races finished in the last 10 minutes (a player makes at most
#: 30 an hour), each let go sooner when its last follower goes.
KEEP_AFTER_END = 600.0
#: Seconds between two sweeps of a node for due races it does not hold (one indexed query each).
SWEEP_INTERVAL = 1.5
#: Seconds a timed change is overdue before a node that does not hold the race takes it up: the node
#: that holds it does it on time, so a sweep finds only the races nobody holds.
SWEEP_GRACE = 1.0


def invite_code() -> str:
    """A fresh invitation code (`protocol.limits.INVITE_PATTERN`): 40 random bits."""
    return "".join(secrets.choice(_INVITE_LETTERS) for _ in range(8))


class RaceRegistry:
    """Owned by the app; see the module docstring. It is the node's `RaceHooks`: the game registry
    (``games``, asked for when needed: each holds the other) tells it of its seats' games."""

    def __init__(
        self,
        database: Database,
        committer: Committer,
        metrics: Metrics,
        push: Pusher,
        publish: Callable[[Event], None],
        games: Callable[[], RoomRegistry],
        *,
        winnable: Callable[[int], Deal],
        countdown: float,
        board_delay: float,
    ) -> None:
        self._database = database
        self._committer = committer
        self._metrics = metrics
        self._winnable = winnable
        self._countdown = countdown
        self._board_delay = board_delay
        self._rooms: dict[str, RaceRoomDriver] = {}
        self._codes: dict[str, str] = {}  # invitation code → id, of the races in ``_rooms``
        #: Races that finished here, kept for their followers: each with the timer that lets it go.
        self._kept: dict[str, tuple[RaceRoomDriver, asyncio.TimerHandle]] = {}
        self._games = games
        self._held: dict[str, tuple[str, ...]] = {}  # race → the seats' games it pins on this node
        self._tasks: set[asyncio.Task[None]] = set()  # takings-up and holds under way
        self._sweeper: asyncio.Task[None] | None = None
        #: The races' clock (tests move it; `wake_all` has every race look at it again).
        self.clock: Callable[[], dt.datetime] = utc_now

        def counted_push(audience: Iterable[Any], message: ServerMessage) -> None:
            audience = tuple(audience)
            self._metrics.race_updates.inc(len(audience))
            push(audience, message)

        self.services = RoomServices(
            committer=committer,
            push=counted_push,
            publish=publish,
            load=_no_game,
            left=self._left,
            idle=self._idle,  # an open race stays (its timers run here); a kept one goes
            races=self,
        )

    def room(self, race_id: str) -> RaceRoomDriver | None:
        return self._rooms.get(race_id)

    async def create(
        self, creator: Entrant, *, cells: int, seats: int, time_limit: int, public: bool
    ) -> RaceRoomDriver:
        """A new race with ``creator`` in seat 1; returns once it is stored."""
        race = self._new_race(creator, cells=cells, seats=seats, time_limit_s=time_limit, public=public)
        return await self._open(race)

    def quick_race(self, players: tuple[Entrant, ...], *, cells: int, time_limit: int) -> Race:
        """A public race formed by quick match, not stored yet: ``players`` seated and ready, its
        countdown begun. Quick match stores it in the transaction that claims its players' waits,
        then has it held here (`hold_new`; `server.play.race.quick_match`)."""
        race = self._new_race(
            players[0], cells=cells, seats=len(players), time_limit_s=time_limit, public=True
        )
        return dataclasses.replace(
            race,
            seated={
                number: Seat(player, ready=True, network=network)
                for number, (player, network) in enumerate(players, 1)
            },
            phase=Phase.COUNTDOWN,
            starts_at=race.created_at + dt.timedelta(seconds=self._countdown),
        )

    def hold_new(self, race: Race) -> RaceRoomDriver:
        """Hold a new race here, now that it is stored (its timers armed: its countdown runs)."""
        self._metrics.races_made.inc()
        return self._add(self._room(race))

    async def _open(self, race: Race) -> RaceRoomDriver:
        """Store the new race, then hold it here."""
        await self._committer.stored(StoreRace(RaceWrite(race.record(), new=True)))
        return self.hold_new(race)

    def _new_race(self, creator: Entrant, *, cells: int, seats: int, time_limit_s: int, public: bool) -> Race:
        """A new race in its lobby with ``creator`` in seat 1: this registry's deal, code and clock."""
        player, network = creator
        return Race(
            id=new_id(),
            code=invite_code(),
            creator=player,
            cells=cells,
            seats=seats,
            time_limit_s=time_limit_s,
            public=public,
            deal=self._winnable(cells),
            created_at=self.clock(),
            seated={1: Seat(player, network=network)},
        )

    def _room(self, race: Race) -> RaceRoom:
        """The one place a race room is made: this node's delays, clock and name."""
        games = self._games()
        return RaceRoom(
            race,
            countdown_s=self._countdown,
            board_delay_s=self._board_delay,
            clock=self._now,
            node=games.node,
            publishes=games.publishes,
        )

    @staticmethod
    def would_make_rematch(race: RaceRoomDriver, player_id: str) -> bool:
        """A rematch of ``race`` asked by ``player_id`` now would make a race (its creations allowance
        is spent only then)."""
        value = race.room.race
        return (
            value.phase is Phase.FINISHED and value.rematch is None and value.seat_of(player_id) is not None
        )

    async def rematch(
        self, race: RaceRoomDriver, follower: Follower, asker: Entrant, request_id: RequestId | None
    ) -> Rematch | None:
        """Ask finished ``race`` for its rematch on behalf of ``asker``: the race's `Rematch` (made by
        this ask: the new race, ``asker`` seated, is stored and taken up here before anyone is told of
        it), or None when the room was let go before the ask's turn (find the race again).

        Raises:
            Refusal: not a player of the race, the race not finished, stale (another node linked it).
        """
        value = race.room.race
        player = asker.player
        made = self._new_race(
            asker, cells=value.cells, seats=value.seats, time_limit_s=value.time_limit_s, public=value.public
        )

        def take_up(outcome: object, reply_to: Callable[[object], None]) -> None:
            if isinstance(outcome, Rematch) and outcome.made:  # stored: in memory before the diff goes
                self._metrics.races_made.inc()
                self._add(self._room(made))
            reply_to(outcome)

        outcome = await race.ask(
            lambda reply_to: RaceRematch(
                follower, player, made.record(), request_id, lambda outcome: take_up(outcome, reply_to)
            )
        )
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome if isinstance(outcome, Rematch) else None

    def seated_in_open_race(self, player_id: str) -> bool:
        """``player_id`` holds a seat in a race of this node not over (quick match refuses it without
        a read; `server.storage.races.seated_in_open_race` asks every node's)."""
        return any(
            driver.is_open() and driver.room.race.seat_of(player_id) is not None
            for driver in self._rooms.values()
        )

    async def find(self, race_id: str) -> RaceRoomDriver:
        """The race ``race_id``, read from the database when it is not in memory (a race over is not
        kept: it only answers its snapshot).

        Raises:
            Refusal: not_found. StorageUnavailable: the database could not be read.
        """
        found = self._in_memory(race_id)
        if found is not None:
            return found
        async with self._database.connection() as conn:
            record = await races.load_race(conn, race_id)
        if record is None:
            raise Refusal(ErrorCode.NOT_FOUND, f"no race {race_id}")
        room = self._room(await self._race_of(record))
        found = self._in_memory(race_id)  # taken up meanwhile by another find
        if found is not None:
            return found
        return self._add(room) if room.is_open() else RoomDriver(room, self.services)

    async def find_by_code(self, code: str) -> RaceRoomDriver:
        """The race of invitation ``code``: from the index of the races held here, else the database's."""
        held = self._codes.get(code)
        if held is not None:
            return self._rooms[held]
        async with self._database.connection() as conn:
            race_id = await races.race_id_by_code(conn, code)
        if race_id is None:
            raise Refusal(ErrorCode.NOT_FOUND, f"no race has the invitation code {code}")
        return await self.find(race_id)

    async def sweep(self) -> int:
        """Take up the races not over whose timed change is overdue and that this node does not hold
        (`SWEEP_GRACE`): their Tick does what is due. How many were taken up."""
        now = self.clock() - dt.timedelta(seconds=SWEEP_GRACE)
        async with self._database.connection() as conn:
            due = await races.due_race_ids(conn, now, LOBBY_TIMEOUT)
        taken = [race_id for race_id in due if race_id not in self._rooms]
        for race_id in taken:
            await self.find(race_id)
        return len(taken)

    def start(self) -> None:
        """Sweep every `SWEEP_INTERVAL` seconds until `close` (the first sweep at once)."""
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep_forever(), name="race-sweep")

    async def close(self) -> None:
        tasks = [*self._tasks, *([self._sweeper] if self._sweeper else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _sweep_forever(self) -> None:
        while True:
            try:
                await self.sweep()
            except Exception:  # the database away: the next sweep tries again
                logger.warning("sweeping for due races failed", exc_info=True)
            await asyncio.sleep(SWEEP_INTERVAL)

    def observe(self, race_id: str, progress: SeatProgress) -> None:
        """A seat's game committed ``progress``: tell this node's copy of its race (a seat's game
        room takes its race up when it is made: `ensure`)."""
        room = self._rooms.get(race_id)
        if room is not None:
            room.send(SeatChanged(progress))

    def race_changed(self, event: RaceEvent) -> None:
        """Another node stored a change of a race: this node's copy, if any, catches up (a finished one
        kept here too: the change may be its rematch, which its followers are then told of)."""
        room = self._in_memory(event.race)
        if room is not None:
            room.send(RaceChanged(event.revision))

    def ensure(self, race_id: str) -> None:
        """Hold a copy of race ``race_id`` (a seat's game is played here): taken up unless it is."""
        if race_id not in self._rooms:
            self._spawn(self._take_up(race_id))

    def hold(self, race_id: str, games: tuple[str, ...]) -> None:
        """Keep the rooms of a running race's seats' games on this node (pinned), each read once:
        what it shows now goes to the race, then its commits here and on other nodes do."""
        self._held[race_id] = games
        for game_id in games:
            self._games().pin(game_id)
            self._spawn(self._load_seat(race_id, game_id))

    # ------------------------------------------------------------------ internals

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _take_up(self, race_id: str) -> None:
        try:
            await self.find(race_id)
        except Exception:  # a seat's game plays on; the sweep or a follower takes the race up later
            logger.warning("taking up race %s failed", race_id, exc_info=True)

    async def _load_seat(self, race_id: str, game_id: str) -> None:
        games = self._games()
        try:
            found = await games.find(game_id)
        except Exception:
            logger.warning("holding game %s of race %s failed", game_id, race_id, exc_info=True)
            return
        if isinstance(found, FinishedGame):
            games.unpin(game_id)
            progress = SeatProgress.of(game_id, found.game, self.clock())
        else:
            progress = found.room.progress()
        if race_id not in self._held:  # the race left meanwhile
            games.unpin(game_id)
        self.observe(race_id, progress)

    async def load_race(self, race_id: str) -> RaceRecord | None:
        """The race as stored."""
        async with self._database.connection() as conn:
            return await races.load_race(conn, race_id)

    def wake_all(self) -> None:
        """Every race in memory looks at its clock now (what is due happens)."""
        for room in list(self._rooms.values()):
            room.send(Tick())

    def _now(self) -> dt.datetime:
        return self.clock()

    def _in_memory(self, race_id: str) -> RaceRoomDriver | None:
        """The race in memory: not over, or finished here and kept."""
        found = self._rooms.get(race_id)
        if found is None and race_id in self._kept:
            found = self._kept[race_id][0]
        return found

    def _add(self, room: RaceRoom) -> RaceRoomDriver:
        driver = RoomDriver(room, self.services)
        self._rooms[room.id] = driver
        self._codes[room.race.code] = room.id
        self._metrics.live_races.set(len(self._rooms))
        driver.send(Tick())  # arms its timers (a countdown or a time limit under way)
        return driver

    def _left(self, driver: RaceRoomDriver) -> None:
        room = driver.room
        self._close_seats_games(room.race)
        for game_id in self._held.pop(room.id, ()):
            self._games().unpin(game_id)
        if self._rooms.get(room.id) is driver:
            del self._rooms[room.id]
            self._codes.pop(room.race.code, None)
            self._metrics.live_races.set(len(self._rooms))
            if room.race.phase.over:
                self._metrics.races_ended.labels(_how(room.race)).inc()
            if room.race.phase is Phase.FINISHED and not room.replaced:
                self._keep(driver)
                return
        self._let_go(driver)

    def _close_seats_games(self, race: Race) -> None:
        """A race that finished closes its seats' games held here: no game of its deal plays on past
        it (a seat that lost could otherwise copy the winner's line, watchable now, into its game)."""
        if race.phase is not Phase.FINISHED or race.finished_at is None:
            return
        games = self._games()
        for seat in race.seated.values():
            if seat.game is not None:
                games.close_at(seat.game, race.finished_at)

    def _keep(self, driver: RaceRoomDriver) -> None:
        """A race finished here stays for its followers, `KEEP_AFTER_END` seconds at most."""
        timer = asyncio.get_running_loop().call_later(KEEP_AFTER_END, self._let_go, driver)
        driver.room.kept = True
        self._kept[driver.id] = (driver, timer)

    def _idle(self, driver: RaceRoomDriver) -> None:
        """No one follows the room any more: a kept race goes (an open one stays: its timers run)."""
        if driver.room.kept:
            self._let_go(driver)

    def _let_go(self, driver: RaceRoomDriver) -> None:
        room = driver.room
        room.replaced, room.kept = True, False
        kept = self._kept.get(room.id)
        if kept is not None and kept[0] is driver:
            del self._kept[room.id]
            kept[1].cancel()

    async def load_ratings(self, race_id: str) -> dict[str, tuple[int, int]]:
        """What race ``race_id`` did to its players' shown ratings, as stored with its result."""
        async with self._database.connection() as conn:
            rated = await ratings.load_race_rating_changes(conn, race_id)
        if rated is None:
            return {}
        return {change.player_id: (change.before.display, change.after.display) for change in rated.changes}

    async def _race_of(self, record: RaceRecord) -> Race:
        """The race as stored, with what its seats' games say: a running race's playing seats take
        their games' figures (the race stores none per action); a finished race's seats their games'
        final boards (what `race_watch` of it shows) and its rating changes."""
        finished = record.state == Phase.FINISHED
        shifts = await self.load_ratings(record.id) if finished else {}
        race = Race.of(record, {player: RatingShift(*shift) for player, shift in shifts.items()})
        if race.starts_at is None or race.phase not in (Phase.RUNNING, Phase.FINISHED):
            return race
        seated = dict(race.seated)
        for number, seat in race.seated.items():
            if seat.game is None or (not finished and seat.status is not SeatStatus.PLAYING):
                continue
            async with self._database.connection() as conn:
                stored = await repository.load_game(conn, seat.game)
            if stored is None:
                continue
            game = await asyncio.to_thread(replay_stored, stored)
            # the time of a game's last action is not stored: the seat's time, as the race stored it
            progress = SeatProgress.of(
                seat.game, game, race.starts_at + dt.timedelta(milliseconds=seat.time_ms)
            )
            if finished:
                seated[number] = dataclasses.replace(seat, progress=progress)
            else:
                seated[number] = seat.progressed(progress, race.starts_at)
        return dataclasses.replace(race, seated=seated)


async def _no_game(game_id: str) -> StoredGame | None:
    raise LookupError(f"a race room reads no game ({game_id})")


def _how(race: Race) -> str:
    if race.phase is Phase.CANCELLED:
        return "cancelled"
    if any(seat.status is SeatStatus.WON for seat in race.seated.values()):
        return "won"
    if race.ends_at is not None and race.finished_at is not None and race.finished_at >= race.ends_at:
        return "time"
    return "resigned"
