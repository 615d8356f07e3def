"""The token buckets on a fake clock: a flood at any pace above the refill rate ends in CLOSE after
exactly one more bucketful of refusals; a pause that refills the bucket forgives; buckets by key are
forgotten once full."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.ratelimit import BucketsByKey, Metered, TokenBucket


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def flood(bucket: TokenBucket, clock: FakeClock, pace: float, frames: int) -> list[Metered]:
    verdicts = []
    for _ in range(frames):
        verdicts.append(bucket.take())
        if verdicts[-1] is Metered.CLOSE:
            break
        clock.now += 1 / pace
    return verdicts


@given(excess=st.floats(min_value=0.02, max_value=1000.0))
def test_bucket_closes_a_flood_at_any_pace_above_the_rate(excess: float) -> None:
    """Paced at rate * (1 + excess): closed after exactly ``burst`` refusals."""
    clock = FakeClock()
    bucket = TokenBucket(200.0, 400, clock)
    verdicts = flood(bucket, clock, 200.0 * (1 + excess), 10_000_000)
    assert verdicts[-1] is Metered.CLOSE
    assert verdicts.count(Metered.REFUSE) == 400


def test_bucket_never_closes_a_client_at_the_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(200.0, 400, clock)
    assert set(flood(bucket, clock, 199.0, 100_000)) == {Metered.SERVE}


def test_bucket_forgives_only_when_full_again() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10.0, 10, clock)
    assert [bucket.take() for _ in range(15)].count(Metered.REFUSE) == 5
    clock.now += 0.5  # half a refill: five tokens, the debt stays
    assert [bucket.take() for _ in range(5)] == [Metered.SERVE] * 5
    assert [bucket.take() for _ in range(6)] == [Metered.REFUSE] * 5 + [Metered.CLOSE]
    clock.now += 1.0  # full again: forgiven
    assert bucket.debt == 11 and bucket.is_full() and bucket.debt == 0


def test_bucket_rejects_nonsense_settings() -> None:
    with pytest.raises(ValueError):
        TokenBucket(0.0, 10)
    with pytest.raises(ValueError):
        TokenBucket(1.0, 0)


def test_buckets_by_key_limit_each_key_and_forget_full_ones() -> None:
    clock = FakeClock()
    buckets = BucketsByKey(rate=1.0, burst=3, clock=clock)
    assert [buckets.allow("a") for _ in range(4)] == [True, True, True, False]
    assert buckets.allow("b")
    assert len(buckets) == 2
    clock.now += 3.0
    assert buckets.allow("c")  # the sweep forgot a and b, both full again
    assert len(buckets) == 1
    assert [buckets.allow("a") for _ in range(4)] == [True, True, True, False]


def test_penalized_key_waits_at_least_a_refill() -> None:
    clock = FakeClock()
    buckets = BucketsByKey(rate=10.0, burst=20, clock=clock)
    buckets.penalize("a")  # from full: 20 - 40 = -20 tokens
    clock.now += 2.05  # 20.5 tokens back: 0.5
    assert not buckets.allow("a")
    assert buckets.allow("b")
    clock.now += 0.1
    assert buckets.allow("a")


def test_penalties_at_once_do_not_add_up() -> None:
    """Eight connections of one address closed for flooding in the same second (the deafpings attack)
    once locked the address out for eight refills, 16 s at the bench's settings: a penalty is a wait
    of one refill from the last closure, however many closures there were."""
    clock = FakeClock()
    buckets = BucketsByKey(rate=10.0, burst=20, clock=clock)
    for _ in range(8):
        buckets.penalize("a")
    clock.now += 2.05
    assert not buckets.allow("a")
    clock.now += 0.1
    assert buckets.allow("a")


def test_a_penalty_counts_from_the_last_closure() -> None:
    clock = FakeClock()
    buckets = BucketsByKey(rate=10.0, burst=20, clock=clock)
    buckets.penalize("a")
    clock.now += 1.5  # -20 + 15 = -5 tokens
    buckets.penalize("a")  # back to -20, not -45
    clock.now += 2.05
    assert not buckets.allow("a")
    clock.now += 0.1
    assert buckets.allow("a")


def test_a_token_given_back_is_taken_again_but_never_past_the_burst_nor_into_a_penalty() -> None:
    clock = FakeClock()
    buckets = BucketsByKey(rate=1.0, burst=3, clock=clock)
    assert [buckets.allow("a") for _ in range(3)] == [True, True, True]
    buckets.give_back("a")
    assert [buckets.allow("a") for _ in range(2)] == [True, False]
    for _ in range(5):
        buckets.give_back("a")  # 3 at most, the burst
    assert [buckets.allow("a") for _ in range(4)] == [True, True, True, False]
    buckets.give_back("nobody")  # forgotten (full) or never seen: nothing to give back
    assert len(buckets) == 1
    buckets.penalize("a")  # 0 - 3 = -3 tokens: only time pays a penalty back
    for _ in range(5):
        buckets.give_back("a")
    clock.now += 3.5
    assert [buckets.allow("a") for _ in range(2)] == [False, False]
    clock.now += 0.6
    assert buckets.allow("a")
