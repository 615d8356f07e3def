"""Quick match's shell: the node's one `Matchmaker`, the connections waiting in it, and its timer.

The pure `server.play.race.matchmaking.Matchmaker` decides who races whom; this shell reads a player's
shown rating when it asks (``quick_race``), ticks the matchmaker about once a second with one task
for the whole node (started when someone waits, ending when nobody does), opens each race it forms
(`RaceRegistry.open_quick`: seated, ready, its countdown begun) and has every seat's connection
follow it (the ``race`` snapshot is pushed to it). A waiting player who disconnects or says
``quick_race_leave`` waits no longer.

The pool is per process: with ``--workers N`` or several nodes, each has its own (docs/races.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from functools import partial

from server.errors import ErrorCode, Refusal
from server.play.game_room import PlayerRef
from server.play.race.commands import RaceWatch
from server.play.race.matchmaking import FormRace, Matchmaker, MatchRules
from server.play.race.ratings import network_of, shown_rating
from server.play.race.registry import RaceRegistry
from server.play.race.value import Entrant
from server.play.session import Session
from server.storage import Database
from server.storage.ratings import load_ratings

__all__ = ["QuickMatch"]

logger = logging.getLogger(__name__)


class QuickMatch:
    """Owned by the request handler; the only owner of the matchmaker and of who waits from where."""

    def __init__(
        self,
        database: Database,
        races: RaceRegistry,
        rules: MatchRules,
        *,
        time_limit: int,
        period: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._database = database
        self._races = races
        self._matchmaker = Matchmaker(rules)
        self._time_limit = time_limit
        self._period = period
        self._clock = clock
        self._waiting: dict[str, tuple[Session, PlayerRef]] = {}  # player id → its connection
        self._timer: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._opening: set[Session] = set()  # connections of races being opened (formed, not yet followed)

    def is_waiting(self, player_id: str) -> bool:
        return self._matchmaker.is_waiting(player_id)

    async def enqueue(self, session: Session, player: PlayerRef, cells: int) -> None:
        """``player`` (on ``session``) waits for a quick race of ``cells``.

        Raises:
            Refusal: illegal_move when it waits already or holds a seat in a race not over.
        """
        if self._matchmaker.is_waiting(player.id):
            raise Refusal(ErrorCode.ILLEGAL_MOVE, "you wait for a quick race already: quick_race_leave first")
        if self._races.seated_in_open_race(player.id):
            raise Refusal(ErrorCode.ILLEGAL_MOVE, "you hold a seat in a race not over: race_leave it first")
        async with self._database.connection() as conn:
            stored = (await load_ratings(conn, cells, [player.id])).get(player.id)
        if self._matchmaker.is_waiting(player.id):  # asked twice meanwhile
            raise Refusal(ErrorCode.ILLEGAL_MOVE, "you wait for a quick race already: quick_race_leave first")
        self._waiting[player.id] = (session, player)
        self._form(self._matchmaker.enqueue(player.id, shown_rating(stored), cells, self._clock()))
        if self._timer is None and self._waiting:
            self._timer = asyncio.get_running_loop().create_task(self._tick_forever())

    def leave(self, player_id: str) -> bool:
        """``player_id`` waits no longer; False when it was not waiting."""
        self._waiting.pop(player_id, None)
        return self._matchmaker.leave(player_id)

    def released(self, session: Session) -> None:
        """``session``'s connection closed: its player waits no longer (when it waited from there)."""
        if session.player is not None and self._waiting.get(session.player.id, (None,))[0] is session:
            self.leave(session.player.id)
        self._opening.discard(session)  # its race keeps the seat: the player race_watches it again

    async def close(self) -> None:
        """Stop the timer and the races being opened (the node stops)."""
        for task in [*self._tasks, *([self._timer] if self._timer else [])]:
            task.cancel()
        await asyncio.gather(*self._tasks, *([self._timer] if self._timer else []), return_exceptions=True)

    # ------------------------------------------------------------------ internals

    async def _tick_forever(self) -> None:
        try:
            while self._waiting:
                await asyncio.sleep(self._period)
                self._form(self._matchmaker.tick(self._clock()))
        finally:
            self._timer = None

    def _form(self, formed: list[FormRace]) -> None:
        for race in formed:
            seats = [self._waiting.pop(waiting.player) for waiting in race.players]
            self._opening.update(session for session, _ in seats)
            task = asyncio.get_running_loop().create_task(self._open(race.cells, seats))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _open(self, cells: int, seats: list[tuple[Session, PlayerRef]]) -> None:
        """Open the race and have each seat's connection follow it: its ``race`` snapshot pushed."""
        try:
            race = await self._races.open_quick(
                tuple(Entrant(player, network_of(session.address)) for session, player in seats),
                cells=cells,
                time_limit=self._time_limit,
            )
        except Exception:
            logger.exception("a quick race of %s could not be opened", [p.id for _, p in seats])
            self._opening.difference_update(session for session, _ in seats)
            return
        for session, player in seats:
            if session not in self._opening:
                continue  # closed meanwhile: a connection gone follows nothing
            self._opening.discard(session)
            session.watch(race)
            replies = await race.ask(partial(RaceWatch, session, player, None))
            if isinstance(replies, list):
                for message in replies:
                    self._races.services.push((session,), message)
