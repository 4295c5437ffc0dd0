"""The token bucket: burst, refill, retry-after, refunds and thread safety (no sleeps)."""

from __future__ import annotations

import threading

import pytest
from fakes import FakeClock

from tenantq.token_bucket import TokenBucket


def test_starts_full_and_allows_a_burst() -> None:
    bucket = TokenBucket(rate=10, burst=5, clock=FakeClock(50.0))
    assert [bucket.take() for _ in range(5)] == [0.0] * 5
    assert bucket.take() == pytest.approx(0.1)


def test_refills_at_the_rate_and_caps_at_burst() -> None:
    clock = FakeClock(50.0)
    bucket = TokenBucket(rate=2, burst=4, clock=clock)
    for _ in range(4):
        bucket.take()
    clock.now += 1.0
    assert bucket.available == pytest.approx(2.0)
    clock.now += 100.0
    assert bucket.available == pytest.approx(4.0)
    assert bucket.full


def test_retry_after_says_when_enough_tokens_are_due() -> None:
    clock = FakeClock(50.0)
    bucket = TokenBucket(rate=4, burst=8, clock=clock)
    assert bucket.take(8) == 0.0
    wait = bucket.take(3)
    assert wait == pytest.approx(0.75)
    clock.now += wait
    assert bucket.take(3) == 0.0


def test_a_refused_take_takes_nothing() -> None:
    clock = FakeClock(50.0)
    bucket = TokenBucket(rate=1, burst=3, clock=clock)
    bucket.take(2)
    assert bucket.take(2) > 0
    assert bucket.available == pytest.approx(1.0)


def test_give_back_refunds_up_to_burst() -> None:
    bucket = TokenBucket(rate=1, burst=3, clock=FakeClock(50.0))
    bucket.take(3)
    bucket.give_back(2)
    assert bucket.available == pytest.approx(2.0)
    bucket.give_back(10)
    assert bucket.available == pytest.approx(3.0)


def test_a_clock_stepping_back_does_not_drain() -> None:
    clock = FakeClock(50.0)
    bucket = TokenBucket(rate=1, burst=3, clock=clock)
    bucket.take(1)
    clock.now -= 10
    assert bucket.available == pytest.approx(2.0)


@pytest.mark.parametrize(("rate", "burst"), [(0, 1), (-1, 1), (float("nan"), 1), (1, 0.5)])
def test_nonsense_parameters(rate: float, burst: float) -> None:
    with pytest.raises(ValueError):
        TokenBucket(rate=rate, burst=burst)


def test_more_than_burst_can_never_be_taken() -> None:
    with pytest.raises(ValueError, match="burst"):
        TokenBucket(rate=1, burst=2).take(3)


def test_threads_never_take_more_than_exists() -> None:
    bucket = TokenBucket(rate=1e-9, burst=1000, clock=FakeClock(50.0))
    taken = []
    lock = threading.Lock()

    def worker() -> None:
        count = 0
        for _ in range(500):
            if bucket.take() == 0.0:
                count += 1
        with lock:
            taken.append(count)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(taken) == 1000
