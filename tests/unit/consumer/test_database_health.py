"""The worker's view of its database: one change of state per outage (a leftover connection
of the outage failing after the return is no news), and a capped, jittered backoff."""

from __future__ import annotations

from fakes import FakeClock

from tenantq.consumer.database_health import BACKOFF_CAP_SECONDS, DatabaseHealth


def test_one_down_and_one_up_per_outage() -> None:
    clock = FakeClock(100.0)
    changes: list[bool] = []
    health = DatabaseHealth(on_change=changes.append, clock=clock, jitter=lambda: 1.0)
    health.failed("server closed the connection", opened_at=99.0)
    assert not health.up
    health.failed("connection refused")  # another thread: still the same outage
    clock.sleep(3.0)
    assert health.down_for() == 3.0
    health.succeeded()
    health.succeeded()
    # A connection opened before the database came back fails now: a leftover, not news.
    health.failed("terminating connection", opened_at=101.0)
    assert health.up and changes == [False, True]
    # A connection opened after the return fails: a new outage.
    clock.sleep(1.0)
    health.failed("terminating connection", opened_at=103.5)
    assert not health.up and changes == [False, True, False]


def test_backoff_grows_to_its_cap_with_jitter() -> None:
    high = DatabaseHealth(jitter=lambda: 1.0)
    low = DatabaseHealth(jitter=lambda: 0.0)
    assert high.backoff(0) == 0.1 and low.backoff(0) == 0.05
    assert high.backoff(3) == 0.8
    assert high.backoff(50) == BACKOFF_CAP_SECONDS and low.backoff(50) == BACKOFF_CAP_SECONDS / 2
