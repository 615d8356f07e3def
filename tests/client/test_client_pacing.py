"""The client keeps to the server's request rate by itself: a bot that plays as fast as it is
answered never meets ``rate_limited`` (protocol/README.md section 10, "Pacing")."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import eightoff_client
from eightoff_client.pacing import DEFAULT_BURST, DEFAULT_RATE, Pace
from server.config import Settings
from tests.support import dbutil, serverutil

#: A server far stricter than the default, so that a few dozen requests cross its rate.
SERVER_RATE, SERVER_BURST = 20.0, 10
REQUESTS = 40


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_pace_lets_a_burst_through_then_spaces_frames_at_its_rate() -> None:
    clock = FakeClock()
    pace = Pace(10.0, 3, clock)
    assert [pace.delay() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert [pace.delay() for _ in range(3)] == pytest.approx([0.1, 0.2, 0.3])  # each waits its turn
    clock.now += 0.3  # the three waited: the bucket is empty again, not in debt
    assert pace.delay() == pytest.approx(0.1)
    clock.now += 60.0  # a long pause refills a burst, never more
    assert [pace.delay() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert pace.delay() == pytest.approx(0.1)


@pytest.mark.parametrize(("rate", "burst"), [(0.0, 1), (-1.0, 1), (1.0, 0)])
def test_a_pace_needs_a_rate_and_a_burst(rate: float, burst: int) -> None:
    with pytest.raises(ValueError, match="a pace needs"):
        Pace(rate, burst)


def test_the_default_pace_is_under_the_servers_default_rate() -> None:
    settings = Settings()
    assert settings.rate_per_second > DEFAULT_RATE
    assert settings.rate_burst > DEFAULT_BURST


@pytest.fixture
async def strict_url(tmp_path: Path) -> AsyncIterator[str]:
    url = dbutil.sqlite_url(tmp_path / "pacing.db")
    async with serverutil.running_app(
        url, sqlite_synchronous="NORMAL", rate_per_second=SERVER_RATE, rate_burst=SERVER_BURST
    ) as app:
        yield serverutil.ws_url(app)


async def resume_as_fast_as_answered(client: eightoff_client.Client, game: str) -> None:
    for _ in range(REQUESTS):
        await client.resume(game)


async def test_a_client_answered_at_once_outruns_the_servers_rate_unpaced(strict_url: str) -> None:
    async with eightoff_client.connect(strict_url, name="Fast", rate_per_second=None) as client:
        board = await client.new_game()
        with pytest.raises(eightoff_client.RateLimited):
            await resume_as_fast_as_answered(client, board.game)


async def test_a_paced_client_never_meets_the_servers_rate(strict_url: str) -> None:
    rate, burst = SERVER_RATE * 0.9, SERVER_BURST - 2  # the margin the default pace keeps too
    async with eightoff_client.connect(
        strict_url, name="Paced", rate_per_second=rate, rate_burst=burst
    ) as client:
        board = await client.new_game()
        started = time.monotonic()
        await resume_as_fast_as_answered(client, board.game)
        elapsed = time.monotonic() - started
    # hello and new_game took two of the burst: the rest of the requests waited their turn
    assert elapsed >= (REQUESTS + 2 - burst) / rate - 0.05
