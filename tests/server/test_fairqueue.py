"""`FairQueue`, the hint solver's fair share, without sockets or a solver."""

from __future__ import annotations

import pytest

from server.services.fairqueue import Asker, FairQueue, Full

FLOOD = [Asker(f"p_flood{n}", "127.0.0.1") for n in range(12)]
BYSTANDER = Asker("p_bystander", "127.0.0.2")


def queue(*, running: int = 1, per_player: int = 2, per_address: int = 4, total: int = 64) -> FairQueue[str]:
    return FairQueue(running=running, per_player=per_player, per_address=per_address, total=total)


def run_all(fair: FairQueue[str]) -> list[str]:
    """Every job in the order it runs, one at a time, each done before the next starts."""
    order: list[str] = []
    while (job := fair.next()) is not None:
        asker, name = job
        order.append(name)
        fair.done(asker)
    return order


def test_a_player_over_its_share_is_refused_and_others_are_not() -> None:
    fair = queue(per_player=2)
    one = Asker("p_one", "127.0.0.1")
    assert fair.offer(one, "a") is None and fair.offer(one, "b") is None
    assert fair.offer(one, "c") is Full.PLAYER  # the third of one player
    assert fair.offer(Asker("p_two", "127.0.0.1"), "d") is None
    assert fair.held_by(one) == (2, 3) and fair.held == 3


def test_an_address_over_its_share_is_refused_whatever_player_asks() -> None:
    fair = queue(per_player=2, per_address=4)
    refusals = [fair.offer(asker, asker.player) for asker in FLOOD]
    assert refusals[:4] == [None] * 4 and refusals[4:] == [Full.ADDRESS] * 8
    assert fair.offer(BYSTANDER, "mine") is None  # another address has its own share
    assert fair.held == 5


def test_a_full_queue_refuses_everyone_with_its_own_reason() -> None:
    fair = queue(per_address=4, total=3)
    for n in range(3):
        assert fair.offer(Asker(f"p_{n}", f"127.0.0.{n + 1}"), f"job{n}") is None
    assert fair.offer(BYSTANDER, "late") is Full.QUEUE
    assert fair.held == 3


def test_jobs_run_in_turn_between_addresses_then_between_players() -> None:
    fair = queue(per_address=4)
    for asker in FLOOD[:2]:  # two players of one address, two hints each
        assert fair.offer(asker, f"{asker.player}-1") is None
        assert fair.offer(asker, f"{asker.player}-2") is None
    assert fair.offer(BYSTANDER, "bystander") is None  # queued last
    assert run_all(fair) == ["p_flood0-1", "bystander", "p_flood1-1", "p_flood0-2", "p_flood1-2"]


def test_at_most_running_jobs_run_and_a_done_one_frees_its_place_and_share() -> None:
    fair = queue(running=2, per_player=1)
    askers = [Asker(f"p_{n}", f"127.0.0.{n + 1}") for n in range(3)]
    for asker in askers:
        assert fair.offer(asker, asker.player) is None
    first, second = fair.next(), fair.next()
    assert first is not None and second is not None and fair.next() is None  # two slots
    assert fair.running == 2 and fair.held == 3
    assert fair.offer(first[0], "again") is Full.PLAYER  # running still holds the share
    fair.done(first[0])
    assert fair.held_by(first[0]) == (0, 0) and fair.held == 2
    assert fair.next() == (askers[2], "p_2")
    assert fair.offer(first[0], "again") is None


def test_a_bystander_waits_behind_at_most_one_job_of_a_flooding_address() -> None:
    """The flood keeps its share full (each refused or finished hint is asked again at once); the
    bystander's hint, asked at any point, runs after at most the running job and one of the flood."""
    fair = queue(per_address=4)
    for asker in FLOOD[:4]:
        fair.offer(asker, "flood")
    running = fair.next()
    assert running is not None
    fair.offer(BYSTANDER, "bystander")
    ran_before = 0
    while True:
        fair.done(running[0])
        for asker in FLOOD:  # the flood asks again as soon as there is room
            fair.offer(asker, "flood")
        job = fair.next()
        assert job is not None
        if job[1] == "bystander":
            break
        ran_before += 1
        running = job
    assert ran_before <= 1


@pytest.mark.parametrize("limits", [{"running": 0}, {"per_player": 0}, {"per_address": 0}, {"total": 0}])
def test_every_limit_is_at_least_one(limits: dict[str, int]) -> None:
    """A zero limit would make a queue that refuses or never runs anything: refused when made."""
    with pytest.raises(ValueError, match="at least 1"):
        FairQueue[str](**{"running": 1, "per_player": 1, "per_address": 1, "total": 1, **limits})
