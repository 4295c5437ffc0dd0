"""Circuit breaker and dependency guard: opening on a failure rate, half-open probes, token
buckets, all-or-nothing acquisition."""

from __future__ import annotations

from tenantq.consumer.circuit_breaker import BreakerPolicy, CircuitBreaker
from tenantq.consumer.dependencies import DependencyGuard, DependencyPolicy


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_opens_on_failure_rate_and_probes_close_it() -> None:
    clock = Clock()
    breaker = CircuitBreaker(
        BreakerPolicy(failure_rate=0.5, minimum_calls=4, window=4, open_seconds=10), clock
    )
    for success in (True, False, True):
        breaker.record(success)
    assert breaker.state == "closed"  # three calls are fewer than the minimum
    assert breaker.record(False) == "open"
    assert not breaker.acquire()
    assert breaker.blocked_for() == 10
    clock.now = 10
    assert breaker.state == "half_open"
    assert breaker.acquire()
    assert not breaker.acquire()  # one probe at a time
    assert breaker.record(True) == "closed"
    assert breaker.acquire()


def test_failed_probe_opens_again() -> None:
    clock = Clock()
    breaker = CircuitBreaker(BreakerPolicy(minimum_calls=1, window=1, open_seconds=5), clock)
    breaker.record(False)
    clock.now = 5
    assert breaker.acquire()
    assert breaker.record(False) == "open"
    assert breaker.blocked_for() == 5


def test_guard_rate_limit_and_all_or_nothing() -> None:
    clock = Clock()
    guard = DependencyGuard(
        {"smtp": DependencyPolicy(rate=1, burst=2), "api": DependencyPolicy(rate=1, burst=1)}, clock
    )
    assert guard.acquire(["smtp", "api"])
    assert not guard.ready(["api"])
    assert not guard.acquire(["smtp", "api"])  # api has no token: smtp's is given back
    assert guard.ready(["smtp"])
    clock.now = 1.0
    assert guard.acquire(["smtp", "api"])


def test_open_breaker_reports_wait() -> None:
    clock = Clock()
    guard = DependencyGuard(
        {
            "api": DependencyPolicy(
                breaker=BreakerPolicy(minimum_calls=1, window=1, open_seconds=30)
            )
        },
        clock,
    )
    assert guard.open_for(["api"]) is None
    guard.record(["api"], False)
    assert guard.open_for(["api"]) == 30
    assert guard.ready(["api"])  # open means "defer", not "wait here"
