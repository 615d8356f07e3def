"""Quick match's shell: the deployment's one pool, the connections of this process waiting in it,
and this process's timer.

The pool is the table ``quick_waits`` (`server.storage.quick_waits`): one row per waiting player,
whichever process holds its connection, so that players on different workers or nodes are matched
by the same rules as players on one. ``quick_race`` reads the player's shown rating and adds its row,
``since`` in wall time (`server.clock`: the processes share no other clock). While anyone waits
here, one task for the process (none per player, none when nobody waits here) runs a **round** at
once, and then about once a second or when a player starts waiting:

1. it pushes the expiry of this process's waits forward (`WAIT_EXPIRY`) and sweeps the rows past
   theirs: their process died without a goodbye, so they are no waits;
2. it reads the live rows and decides the races with the pure
   `server.play.race.matchmaking.form_races`, the same function whichever process runs it;
3. it **claims** each race that seats one of its own waits (every live wait's process ticks, so each
   race has a claimer), in one transaction that stores the race (`RaceRegistry.quick_race`: public,
   seated, ready, its countdown begun) and marks its rows claimed only if each one is still there,
   unclaimed and live. Two processes forming the same race, or overlapping ones, at once never both
   seat a player: the loser's transaction rolls back, and it reads the pool again at once
   (`CLAIM_ROUNDS` times at most) to find the winner's claim;
4. the claimer holds the race (`RaceRegistry.hold_new`), has its own waits' connections follow it
   (through the room's own `RaceWatch`, so each is pushed the ``race`` snapshot at the room's ``v``)
   and tells the processes of the other waits on the bus (`QuickRaceEvent`); each of those has its
   connection follow the race (read from the database: a copy, as any node keeps one) and deletes
   the row. A round that reads a claimed row of its own does the same, so a bus event lost costs a
   second, not a seat.

A waiting player who disconnects, or sends ``quick_race_leave`` (to any process: the row is deleted
wherever it is held), waits no longer; a leave that a claim beat finds nothing (the player is seated
and follows its race). No unit of work is held open across another await: each statement of a round
is a unit of its own, and the claim's transaction runs its statements only, so on SQLite (one
writer) no write waits on quick match's event loop turns.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import logging
from collections.abc import Callable, Coroutine, Sequence
from functools import partial
from typing import Any, Final

from server.clock import utc_now
from server.errors import ErrorCode, Refusal
from server.ids import new_id
from server.play.bus import Event, QuickRaceEvent
from server.play.game_room import PlayerRef
from server.play.race.commands import RaceWatch
from server.play.race.matchmaking import FormRace, MatchRules, Waiting, form_races
from server.play.race.ratings import network_of, shown_rating
from server.play.race.registry import RaceRegistry, RaceRoomDriver
from server.play.race.value import Entrant
from server.play.session import Session
from server.storage import Database, quick_waits, races
from server.storage.ratings import load_ratings
from server.storage.records import QuickWait, RaceWrite

__all__ = ["CLAIM_ROUNDS", "WAIT_EXPIRY", "QuickMatch"]

logger = logging.getLogger(__name__)

#: Seconds a wait's row lives past its process's last round: a process killed without a goodbye
#: leaves waits that others ignore, then sweep, this long after (ten missed rounds: a process busy
#: or a database slow for a few seconds does not lose its waits).
WAIT_EXPIRY: Final = 10.0
#: Reads of the pool in one round at most while its claims are lost to other processes' (each lost
#: claim means another process seated someone: the next read sees it).
CLAIM_ROUNDS: Final = 3


class _Lost(Exception):
    """A claim found one of its rows claimed, left or expired (its transaction rolls back)."""


@dataclasses.dataclass(slots=True, eq=False)
class _Wait:
    """A wait of this process: its connection, its row's id, and the race that claimed it once known."""

    session: Session
    player: PlayerRef
    wait_id: str
    added: int  # the order waits were added in (a round judges only those added before its read)
    race: str | None = None


class QuickMatch:
    """Owned by the request handler; the only owner of this process's waits (its rows of the pool and
    the connections that asked)."""

    def __init__(
        self,
        database: Database,
        races: RaceRegistry,
        rules: MatchRules,
        *,
        time_limit: int,
        holder: str,
        publish: Callable[[Event], None],
        node: str,
        period: float = 1.0,
        expiry: float = WAIT_EXPIRY,
        clock: Callable[[], dt.datetime] = utc_now,
    ) -> None:
        """``holder`` names this process in the rows (its one name: `Presence.holder`'s);
        ``publish`` is the bus's; ``node`` names this process on the bus (for logs)."""
        self._database = database
        self._races = races
        self._rules = rules
        self._time_limit = time_limit
        self.holder = holder
        self._publish = publish
        self._node = node
        self._period = period
        self._expiry = dt.timedelta(seconds=expiry)
        #: The pool's clock, wall time (tests move it).
        self.clock = clock
        self._waits: dict[str, _Wait] = {}  # player id → its wait held here
        self._asking: dict[str, Session] = {}  # player id → the connection whose quick_race is served
        self._added = 0
        self._wake = asyncio.Event()
        self._timer: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def is_waiting(self, player_id: str) -> bool:
        """``player_id`` waits from this process, not seated yet."""
        wait = self._waits.get(player_id)
        return wait is not None and wait.race is None

    async def enqueue(self, session: Session, player: PlayerRef, cells: int) -> None:
        """``player`` (on ``session``) waits for a quick race of ``cells``: its row is in the pool
        once this returns.

        Raises:
            Refusal: illegal_move when it waits already (from any process) or holds a seat in a race
                not over (on any node). StorageUnavailable: the database could not be read or written.
        """
        if player.id in self._waits or player.id in self._asking:
            raise Refusal(ErrorCode.ILLEGAL_MOVE, "you wait for a quick race already: quick_race_leave first")
        if self._races.seated_in_open_race(player.id):
            raise Refusal(ErrorCode.ILLEGAL_MOVE, "you hold a seat in a race not over: race_leave it first")
        self._asking[player.id] = session
        try:
            async with self._database.connection() as conn:
                stored = (await load_ratings(conn, cells, [player.id])).get(player.id)
                seated = await races.seated_in_open_race(conn, player.id)
            if seated:
                raise Refusal(
                    ErrorCode.ILLEGAL_MOVE, "you hold a seat in a race not over: race_leave it first"
                )
            now = self.clock()
            wait = QuickWait(
                wait_id=new_id(),
                player_id=player.id,
                player_name=player.name,
                bot=bool(player.bot),
                network=network_of(session.address),
                cells=cells,
                rating=shown_rating(stored),
                since=now,
                holder=self.holder,
                expires_at=now + self._expiry,
            )
            try:
                async with self._database.transaction() as conn:
                    await quick_waits.add_wait(conn, wait)
            except quick_waits.WaitConflict:
                raise Refusal(
                    ErrorCode.ILLEGAL_MOVE,
                    "you wait for a quick race already (on another connection): quick_race_leave first",
                ) from None
        finally:
            still_asked = self._asking.get(player.id) is session
            if still_asked:
                del self._asking[player.id]
        if not still_asked:  # the connection closed meanwhile: nobody waits there
            self._spawn(self._remove((wait.wait_id,)))
            return
        self._added += 1
        self._waits[player.id] = _Wait(session, player, wait.wait_id, self._added)
        self._wake.set()
        if self._timer is None:
            self._timer = asyncio.get_running_loop().create_task(self._tick_forever(), name="quick-match")

    async def leave(self, player_id: str) -> bool:
        """``player_id`` waits no longer, from whichever process it waited; False when it did not wait,
        or a race claimed it first (it follows that race).

        Raises:
            StorageUnavailable: the database could not be written (the player still waits).
        """
        async with self._database.write_alone() as conn:
            left = await quick_waits.leave_wait(conn, player_id)
        wait = self._waits.get(player_id)
        if left and wait is not None and wait.race is None:
            del self._waits[player_id]
        return left

    def released(self, session: Session) -> None:
        """``session``'s connection closed: its player waits no longer (when it waited from there); a
        race that claimed it keeps the seat (the player race_watches it again)."""
        player = session.player
        if player is None:
            return
        if self._asking.get(player.id) is session:
            del self._asking[player.id]  # its enqueue, when done, removes the row it added
        wait = self._waits.get(player.id)
        if wait is not None and wait.session is session:
            del self._waits[player.id]
            self._spawn(self._remove((wait.wait_id,)))

    def seated_elsewhere(self, event: QuickRaceEvent) -> None:
        """Another process formed race ``event.race`` from the pool (the bus): the waits of this
        process it seated follow it."""
        waits = set(event.waits)
        self._seated(event.race, [wait for wait in self._waits.values() if wait.wait_id in waits])

    async def close(self) -> None:
        """Stop the timer and the follows under way, and remove this process's rows (the node stops):
        once the database is still open."""
        tasks = [*self._tasks, *([self._timer] if self._timer else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._waits.clear()
        try:
            async with self._database.write_alone() as conn:
                await quick_waits.clear_waits(conn, self.holder)
        except Exception:  # the database away: the rows expire (WAIT_EXPIRY)
            logger.warning("could not remove the quick match waits of %s", self.holder, exc_info=True)

    # ------------------------------------------------------------------ internals

    async def _tick_forever(self) -> None:
        failing = False  # one warning per outage, not one a second
        try:
            while self._waits:
                self._wake.clear()  # before the round: a wait added during it wakes the next
                try:
                    await self.tick()
                except Exception:  # the database away, or a bug: the timer must outlive it
                    if not failing:
                        logger.warning("a quick match round failed; retrying", exc_info=True)
                    failing = True
                else:
                    failing = False
                if not self._waits:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._period)
        finally:
            self._timer = None

    async def tick(self) -> None:
        """A round now: keep this process's waits alive, sweep the dead, and form what the pool
        allows (the timer's; two processes' at once in the tests).

        Raises:
            StorageUnavailable: the database could not be read or written.
        """
        now = self.clock()
        mine = [wait.wait_id for wait in self._waits.values() if wait.race is None]
        async with self._database.write_alone() as conn:
            await quick_waits.refresh_waits(conn, mine, now + self._expiry)
        async with self._database.write_alone() as conn:
            await quick_waits.sweep_waits(conn, now)
        for _ in range(CLAIM_ROUNDS):
            added = self._added
            now = self.clock()
            async with self._database.connection() as conn:
                rows = await quick_waits.live_waits(conn, now)
            self._follow_rows(rows, added)
            if not await self._form([row for row in rows if row.race_id is None], now):
                return

    def _follow_rows(self, rows: Sequence[QuickWait], added: int) -> None:
        """What the pool says of this process's waits (added before it was read): claimed ones follow
        their race; those no longer in it were left from another process, or swept, and wait no more."""
        by_id = {row.wait_id: row for row in rows}
        for wait in list(self._waits.values()):
            if wait.race is not None or wait.added > added:
                continue
            row = by_id.get(wait.wait_id)
            if row is None:
                del self._waits[wait.player.id]
            elif row.race_id is not None:
                self._seated(row.race_id, [wait])

    async def _form(self, rows: Sequence[QuickWait], now: dt.datetime) -> bool:
        """Claim the races of the unclaimed ``rows`` that seat a wait of this process; False when
        each was claimed, True when one was lost (the pool changed: read it again)."""
        by_player = {row.player_id: row for row in rows}
        waiting = [Waiting(row.player_id, row.rating, row.cells, row.since.timestamp()) for row in rows]
        mine = {wait.wait_id for wait in self._waits.values() if wait.race is None}
        for formed in form_races(waiting, now.timestamp(), self._rules):
            seats = [by_player[seat.player] for seat in formed.players]
            if mine.isdisjoint(seat.wait_id for seat in seats):
                continue  # every seat is another process's: one of them claims it
            if not await self._claim(formed, seats, now):
                return True
        return False

    async def _claim(self, formed: FormRace, seats: Sequence[QuickWait], now: dt.datetime) -> bool:
        """Store the race of ``seats`` and claim their rows in one transaction; then hold it here, have
        this process's seats follow it and tell the others'. False when a row was not there to claim."""
        players = tuple(
            Entrant(PlayerRef.of(seat.player_id, seat.player_name, bot=seat.bot), seat.network)
            for seat in seats
        )
        race = self._races.quick_race(players, cells=formed.cells, time_limit=self._time_limit)
        wait_ids = [seat.wait_id for seat in seats]
        try:
            async with self._database.transaction() as conn:
                await races.store_race(conn, RaceWrite(race.record(), new=True))
                if not await quick_waits.claim_waits(conn, wait_ids, race.id, now):
                    raise _Lost
        except _Lost:
            return False
        self._races.hold_new(race)
        others = tuple(seat.wait_id for seat in seats if seat.holder != self.holder)
        if others:
            self._publish(QuickRaceEvent(self._node, race.id, others))
        claimed = set(wait_ids)
        self._seated(race.id, [wait for wait in self._waits.values() if wait.wait_id in claimed])
        return True

    def _seated(self, race_id: str, waits: list[_Wait]) -> None:
        """``waits`` of this process were claimed by race ``race_id``: they follow it (once)."""
        waits = [wait for wait in waits if wait.race is None]
        for wait in waits:
            wait.race = race_id
        if waits:
            self._spawn(self._follow(race_id, waits))

    async def _follow(self, race_id: str, waits: list[_Wait]) -> None:
        """Have each of ``waits``' connections follow the race, its ``race`` snapshot pushed; then
        their rows go (a connection closed meanwhile follows nothing: its race keeps the seat)."""
        try:
            for wait in waits:
                if self._waits.get(wait.player.id) is wait:
                    await self._watch(race_id, wait)
        except Exception:
            logger.exception(
                "quick race %s could not be followed by %s", race_id, [w.player.id for w in waits]
            )
        finally:
            for wait in waits:
                if self._waits.get(wait.player.id) is wait:
                    del self._waits[wait.player.id]
            await self._remove([wait.wait_id for wait in waits])

    async def _watch(self, race_id: str, wait: _Wait) -> None:
        """``wait``'s connection follows race ``race_id`` (found again when its room was let go before
        the watch's turn)."""
        for _ in range(3):
            race: RaceRoomDriver = await self._races.find(race_id)
            if race.is_open():
                wait.session.watch(race)
            replies = await race.ask(partial(RaceWatch, wait.session, wait.player, None))
            if isinstance(replies, BaseException):
                raise replies
            if isinstance(replies, list):
                for message in replies:
                    self._races.services.push((wait.session,), message)
                return

    async def _remove(self, wait_ids: Sequence[str]) -> None:
        """Delete rows of this process's waits that are over (its rows expire if this fails)."""
        try:
            async with self._database.write_alone() as conn:
                await quick_waits.remove_waits(conn, wait_ids)
        except Exception:
            logger.warning("could not remove quick match waits %s", list(wait_ids), exc_info=True)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
