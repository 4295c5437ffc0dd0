"""The dependency guard: token buckets per dependency, all-or-nothing acquisition, and an open
breaker reported as a wait."""

from __future__ import annotations

from fakes import FakeClock

from tenantq.consumer.circuit_breaker import BreakerPolicy
from tenantq.consumer.dependencies import DependencyGuard, DependencyPolicy


def test_guard_rate_limit_and_all_or_nothing() -> None:
    clock = FakeClock()
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
    clock = FakeClock()
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
