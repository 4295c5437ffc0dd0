"""The circuit breaker: opening on a failure rate, half-open probes."""

from __future__ import annotations

from fakes import FakeClock

from tenantq.consumer.circuit_breaker import BreakerPolicy, CircuitBreaker


def test_opens_on_failure_rate_and_probes_close_it() -> None:
    clock = FakeClock()
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
    clock = FakeClock()
    breaker = CircuitBreaker(BreakerPolicy(minimum_calls=1, window=1, open_seconds=5), clock)
    breaker.record(False)
    clock.now = 5
    assert breaker.acquire()
    assert breaker.record(False) == "open"
    assert breaker.blocked_for() == 5
