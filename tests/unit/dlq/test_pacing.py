"""The replay rate limiter: never faster than --rate on average, bursts of one second's worth."""

from __future__ import annotations

import pytest
from fakes import FakeClock

from tenantq.dlq.pacing import RateLimiter, check_rate
from tenantq.errors import ConfigurationError


def test_first_second_is_free_then_the_rate_holds() -> None:
    time = FakeClock()
    limiter = RateLimiter(10, clock=time, sleep=time.sleep)
    assert limiter.acquire(10) == 0.0
    waited = limiter.acquire(50)
    assert waited == pytest.approx(5.0)
    assert time.now == pytest.approx(5.0)


def test_slow_rate_paces_one_at_a_time() -> None:
    time = FakeClock()
    limiter = RateLimiter(0.5, clock=time, sleep=time.sleep)
    for _ in range(4):
        limiter.acquire()
    # One token at start, then one every two seconds.
    assert time.now == pytest.approx(6.0)
    assert limiter.batch_size(200) == 1


def test_idle_time_refills_only_up_to_the_burst() -> None:
    time = FakeClock()
    limiter = RateLimiter(5, clock=time, sleep=time.sleep)
    limiter.acquire(5)
    time.now += 100.0  # a long canary wait
    start = time.now
    limiter.acquire(15)
    assert time.now - start == pytest.approx(2.0)


def test_batch_size_is_about_a_second_of_publishes() -> None:
    assert RateLimiter(50).batch_size(200) == 50
    assert RateLimiter(5000).batch_size(200) == 200


@pytest.mark.parametrize("rate", [0, -1, float("inf")])
def test_nonsense_rates_are_refused(rate: float) -> None:
    with pytest.raises(ValueError):
        RateLimiter(rate)


@pytest.mark.parametrize("rate", [0.0, -1.0, float("nan"), float("inf"), 1e7])
def test_a_rate_is_a_finite_positive_bounded_number(rate: float) -> None:
    with pytest.raises(ConfigurationError, match="publishes per second"):
        check_rate(rate)
    assert check_rate(0.5) == 0.5
