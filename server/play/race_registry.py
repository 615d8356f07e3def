"""The node's races: which are in memory, making them, finding them by id or invitation code, and
taking up again, at start, every race the database holds as not over.

`RaceRegistry` is the only owner of the map from race id to its driver (a `RaceRoom` on the same
`RoomDriver` as a game) and the only writer of a race room's ``replaced`` and ``kept``. A race stays
in memory until it is over (its timers run there); a race that finished here is then kept for its
followers (so that a rematch asked of it reaches them) until its last follower goes or
`KEEP_AFTER_END` seconds have passed; any other finished race is read from the database when watched.
It is told of its seats' commits by the game rooms (`observe`, through `RoomServices.observe`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import secrets
from collections.abc import Callable
from typing import TypeAlias

from engine import Deal, Status
from protocol import RaceLink
from protocol.errors import RequestId
from server.clock import utc_now
from server.errors import ErrorCode, Refusal
from server.ids import new_id
from server.ops.metrics import Metrics
from server.play.commands import Follower
from server.play.driver import RoomDriver, RoomServices
from server.play.game_room import PlayerRef
from server.play.race_commands import RaceRematch, Rematch, SeatChanged, SeatProgress, Tick
from server.play.race_room import RaceRoom, Seat
from server.play.registry import RoomRegistry
from server.play.replay import replay_stored
from server.storage import Database, races, ratings, repository
from server.storage.committer import Committer, Write
from server.storage.records import RaceRecord, RaceWrite

__all__ = ["KEEP_AFTER_END", "RaceRegistry", "RaceRoomDriver", "invite_code"]

logger = logging.getLogger(__name__)

RaceRoomDriver: TypeAlias = RoomDriver[RaceRoom]
_INVITE_LETTERS = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
#: Seconds a race that finished on this node stays in memory for its followers (its rematch reaches
#: them): memory stays bounded by the races finished in the last 10 minutes (a player makes at most
#: 30 an hour), each let go sooner when its last follower goes.
KEEP_AFTER_END = 600.0


def invite_code() -> str:
    """A fresh invitation code (`protocol.limits.INVITE_PATTERN`): 40 random bits."""
    return "".join(secrets.choice(_INVITE_LETTERS) for _ in range(8))


class RaceRegistry:
    """Owned by the app; see the module docstring."""

    def __init__(
        self,
        database: Database,
        committer: Committer,
        metrics: Metrics,
        games: RoomRegistry,
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
        #: Races that finished here, kept for their followers: each with the timer that lets it go.
        self._kept: dict[str, tuple[RaceRoomDriver, asyncio.TimerHandle]] = {}
        #: The races' clock (tests move it; `wake_all` has every race look at it again).
        self.clock: Callable[[], dt.datetime] = utc_now
        push = games.services.push

        def counted_push(audience: object, message: object) -> None:
            self._metrics.race_updates.inc(len(audience))  # type: ignore[arg-type]
            push(audience, message)  # type: ignore[arg-type]

        self.services = RoomServices(
            committer=committer,
            push=counted_push,
            publish=None,
            load=games.services.load,  # never asked: a race room loads nothing
            left=self._left,
            idle=self._idle,  # an open race stays (its timers run here); a kept one goes
            load_ratings=self._rating_shifts,
        )
        games.observe = self.observe

    def room(self, race_id: str) -> RaceRoomDriver | None:
        return self._rooms.get(race_id)

    async def create(
        self, creator: PlayerRef, *, cells: int, seats: int, time_limit: int, public: bool
    ) -> RaceRoomDriver:
        """A new race with ``creator`` in seat 1; returns once it is stored."""
        return await self._open(
            creator,
            cells=cells,
            seats=seats,
            time_limit_s=time_limit,
            public=public,
            seated={1: Seat(creator)},
        )

    async def open_quick(
        self, players: tuple[PlayerRef, ...], *, cells: int, time_limit: int
    ) -> RaceRoomDriver:
        """A public race formed by quick match: ``players`` seated and ready, its countdown begun;
        returns once it is stored (its players then race_watch it: `server.play.quick_match`)."""
        now = self.clock()
        return await self._open(
            players[0],
            cells=cells,
            seats=len(players),
            time_limit_s=time_limit,
            public=True,
            seated={number: Seat(player, ready=True) for number, player in enumerate(players, 1)},
            now=now,
            state="countdown",
            starts_at=now + dt.timedelta(seconds=self._countdown),
        )

    async def _open(
        self,
        creator: PlayerRef,
        *,
        cells: int,
        seats: int,
        time_limit_s: int,
        public: bool,
        seated: dict[int, Seat],
        now: dt.datetime | None = None,
        state: str = "lobby",
        starts_at: dt.datetime | None = None,
    ) -> RaceRoomDriver:
        """A new race room with this registry's deal, code, clock and delays, made at ``now``; stored."""
        room = self._new_room(
            creator,
            cells=cells,
            seats=seats,
            time_limit_s=time_limit_s,
            public=public,
            seated=seated,
            now=now,
            state=state,
            starts_at=starts_at,
        )
        await self._committer.stored(Write(race=RaceWrite(room.record(), new=True)))
        self._metrics.races_made.inc()
        return self._add(room)

    def _new_room(
        self,
        creator: PlayerRef,
        *,
        cells: int,
        seats: int,
        time_limit_s: int,
        public: bool,
        seated: dict[int, Seat],
        now: dt.datetime | None = None,
        state: str = "lobby",
        starts_at: dt.datetime | None = None,
    ) -> RaceRoom:
        """A new race room with this registry's deal, code, clock and delays (not stored yet)."""
        return RaceRoom(
            id=new_id(),
            code=invite_code(),
            creator=creator,
            cells=cells,
            seats=seats,
            time_limit_s=time_limit_s,
            public=public,
            deal=self._winnable(cells),
            created_at=now or self.clock(),
            countdown_s=self._countdown,
            board_delay_s=self._board_delay,
            state=state,
            seated=seated,
            starts_at=starts_at,
            clock=self._now,
        )

    @staticmethod
    def would_make_rematch(race: RaceRoomDriver, player_id: str) -> bool:
        """A rematch of ``race`` asked by ``player_id`` now would make a race (its creations allowance
        is spent only then)."""
        room = race.room
        return room.state == "finished" and room.rematch is None and room.seat_of(player_id) is not None

    async def rematch(
        self, race: RaceRoomDriver, follower: Follower, asker: PlayerRef, request_id: RequestId | None
    ) -> Rematch | None:
        """Ask finished ``race`` for its rematch on behalf of ``asker``: the race's `Rematch` (made by
        this ask: the new race, ``asker`` seated, is stored and taken up here before anyone is told of
        it), or None when the room was let go before the ask's turn (find the race again).

        Raises:
            Refusal: not a player of the race, the race not finished, stale (another node linked it).
        """
        room = race.room
        made = self._new_room(
            asker,
            cells=room.cells,
            seats=room.seats,
            time_limit_s=room.time_limit_s,
            public=room.public,
            seated={1: Seat(asker)},
        )

        def take_up(outcome: object, reply_to: Callable[[object], None]) -> None:
            if isinstance(outcome, Rematch) and outcome.made:  # stored: in memory before the diff goes
                self._metrics.races_made.inc()
                self._add(made)
            reply_to(outcome)

        outcome = await race.ask(
            lambda reply_to: RaceRematch(
                follower, asker, made.record(), request_id, lambda outcome: take_up(outcome, reply_to)
            )
        )
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome if isinstance(outcome, Rematch) else None

    def seated_in_open_race(self, player_id: str) -> bool:
        """``player_id`` holds a seat in a race of this node not over (quick match refuses it)."""
        return any(
            driver.is_open() and driver.room.seat_of(player_id) is not None for driver in self._rooms.values()
        )

    async def find(self, race_id: str) -> RaceRoomDriver:
        """The race ``race_id``, read from the database when it is not in memory (a race over is not
        kept: it only answers its snapshot).

        Raises:
            Refusal: not_found. StorageUnavailable: the database could not be read.
        """
        found = self._held(race_id)
        if found is not None:
            return found
        async with self._database.connection() as conn:
            record = await races.load_race(conn, race_id)
        if record is None:
            raise Refusal(ErrorCode.NOT_FOUND, f"no race {race_id}")
        room = await self._room_of(record)
        found = self._held(race_id)  # taken up meanwhile by another find
        if found is not None:
            return found
        return self._add(room) if room.is_open() else RoomDriver(room, self.services)

    async def find_by_code(self, code: str) -> RaceRoomDriver:
        for room in self._rooms.values():
            if room.room.code == code:
                return room
        async with self._database.connection() as conn:
            race_id = await races.race_id_by_code(conn, code)
        if race_id is None:
            raise Refusal(ErrorCode.NOT_FOUND, f"no race has the invitation code {code}")
        return await self.find(race_id)

    async def resume_open(self) -> int:
        """Take up every race not over (after a restart): their timers run again. How many."""
        async with self._database.connection() as conn:
            ids = await races.open_race_ids(conn)
        for race_id in ids:
            await self.find(race_id)
        return len(ids)

    def observe(self, race_id: str, progress: SeatProgress) -> None:
        """A seat's game committed ``progress``: tell its race, when this node holds it (a race not
        over is held from its making, or from this node's start; one held elsewhere is not taken
        up for it: there is one authority per race, and the race's fence refuses a second)."""
        room = self._rooms.get(race_id)
        if room is not None:
            room.send(SeatChanged(progress))

    def wake_all(self) -> None:
        """Every race in memory looks at its clock now (what is due happens)."""
        for room in list(self._rooms.values()):
            room.send(Tick())

    # ------------------------------------------------------------------ internals

    def _now(self) -> dt.datetime:
        return self.clock()

    def _held(self, race_id: str) -> RaceRoomDriver | None:
        """The race in memory: not over, or finished here and kept."""
        found = self._rooms.get(race_id)
        if found is None and race_id in self._kept:
            found = self._kept[race_id][0]
        return found

    def _add(self, room: RaceRoom) -> RaceRoomDriver:
        driver = RoomDriver(room, self.services)
        self._rooms[room.id] = driver
        self._metrics.live_races.set(len(self._rooms))
        driver.send(Tick())  # arms its timers (a countdown or a time limit under way)
        return driver

    def _left(self, driver: RaceRoomDriver) -> None:
        room = driver.room
        if self._rooms.get(room.id) is driver:
            del self._rooms[room.id]
            self._metrics.live_races.set(len(self._rooms))
            if room.state in ("finished", "cancelled"):  # else let go after a conflict
                self._metrics.races_ended.labels(_how(room)).inc()
            if room.state == "finished" and not room.replaced:
                self._keep(driver)
                return
        self._let_go(driver)

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

    async def _rating_shifts(self, race_id: str) -> dict[str, tuple[int, int]]:
        """What race ``race_id`` did to its players' shown ratings, as stored with its result."""
        async with self._database.connection() as conn:
            rated = await ratings.load_race_rating_changes(conn, race_id)
        if rated is None:
            return {}
        return {change.player_id: (change.before.display, change.after.display) for change in rated.changes}

    async def _room_of(self, record: RaceRecord) -> RaceRoom:
        """The race as stored; a running race's seats take their games' figures as stored, a finished
        one's its rating changes."""
        shifts = await self._rating_shifts(record.id) if record.state == "finished" else {}
        seated = {}
        for stored in record.seated:
            player = PlayerRef.of(stored.player_id, stored.player_name, bot=stored.player_bot)
            seated[stored.seat] = Seat(
                player,
                ready=stored.status != "waiting" or record.state != "lobby",
                game=stored.game_id,
                status=stored.status,
                cards_home=stored.cards_home,
                moves=stored.moves,
                score=stored.score,
                time_ms=stored.time_ms,
                place=stored.place,
                rating=shifts.get(stored.player_id),
            )
        creator = next(
            (seat.player for seat in seated.values() if seat.player.id == record.creator_id),
            PlayerRef.of(record.creator_id, record.creator_id[:16], bot=False),
        )
        room = RaceRoom(
            id=record.id,
            code=record.code,
            creator=creator,
            cells=record.cells,
            seats=record.seats,
            time_limit_s=record.time_limit_s,
            public=record.public,
            deal=Deal.from_code(record.deal_code),
            created_at=record.created_at,
            countdown_s=self._countdown,
            board_delay_s=self._board_delay,
            state=record.state,
            seated=seated,
            starts_at=record.starts_at,
            ends_at=record.ends_at,
            finished_at=record.finished_at,
            clock=self._now,
            revision=record.revision,
            rematch=None
            if record.rematch_id is None
            else RaceLink(record.rematch_id, record.rematch_code or ""),
        )
        if record.state == "running":
            await self._catch_up(room)
        return room

    async def _catch_up(self, room: RaceRoom) -> None:
        """Each playing seat's figures from its game as stored (the race stores none per action)."""
        for seat in room.seated.values():
            if seat.game is None or seat.status != "playing":
                continue
            async with self._database.connection() as conn:
                stored = await repository.load_game(conn, seat.game)
            if stored is None:
                continue
            game = await asyncio.to_thread(replay_stored, stored)
            seat.cards_home = sum(game.layout().foundations)
            seat.moves, seat.score = game.moves, game.score
            if game.status is not Status.PLAYING:
                seat.status = game.status.value
            seat.progress = SeatProgress(
                seat.game, game.v, game.layout(), game.score, game.moves, game.status, utc_now()
            )
        room.settle()


def _how(room: RaceRoom) -> str:
    if room.state == "cancelled":
        return "cancelled"
    if any(seat.status == "won" for seat in room.seated.values()):
        return "won"
    if room.ends_at is not None and room.finished_at is not None and room.finished_at >= room.ends_at:
        return "time"
    return "resigned"
