"""The flood meter: a tenant floods a producer when it sends at least the rate and a quarter
of the producer's jobs in a window; it stops after a calm stretch under half the rate."""

from __future__ import annotations

import pytest
from fakes import FakeClock

from tenantq.producer.flood_meter import (
    CALM_SECONDS,
    WINDOW_SECONDS,
    FloodChange,
    FloodMeter,
)


def jobs(**per_tenant: int) -> dict[str, int]:
    return per_tenant


def test_nothing_is_decided_before_the_window_ends() -> None:
    clock = FakeClock(10.0)
    meter = FloodMeter(1_000, clock)
    assert meter.count(jobs(whale=5_000)) is None
    assert meter.flooding == frozenset()


def test_a_tenant_over_the_rate_and_a_quarter_of_the_jobs_floods() -> None:
    clock = FakeClock(10.0)
    meter = FloodMeter(1_000, clock)
    meter.count(jobs(whale=500, **{f"cold{i}": 1 for i in range(5)}))
    clock.now += 1.5 * WINDOW_SECONDS
    change = meter.count(jobs(cold0=1))
    assert change == FloodChange(frozenset({"whale"}), frozenset())
    assert meter.flooding == frozenset()  # only once the producer applies it
    meter.apply(change)
    assert meter.flooding == frozenset({"whale"})


def test_an_even_bulk_of_many_tenants_is_no_flood() -> None:
    clock = FakeClock(10.0)
    meter = FloodMeter(1_000, clock)
    # 200 tenants at 2,000 jobs/s each: every one over the rate, none a quarter of the jobs.
    meter.count(jobs(**{f"tenant-{i}": 200 for i in range(200)}))
    clock.now += 1.5 * WINDOW_SECONDS
    assert meter.count({}) is None


def test_a_tenant_under_the_rate_does_not_flood_however_large_its_share() -> None:
    clock = FakeClock(10.0)
    meter = FloodMeter(1_000, clock)
    meter.count(jobs(alone=75))  # 500 jobs/s
    clock.now += 1.5 * WINDOW_SECONDS
    assert meter.count({}) is None


def test_a_flooding_tenant_leaves_after_a_calm_stretch_only() -> None:
    clock = FakeClock(10.0)
    meter = FloodMeter(1_000, clock)
    meter.apply(FloodChange(frozenset({"whale"}), frozenset()))
    # Above half the rate: it stays, however long.
    step = 1.5 * WINDOW_SECONDS
    for _ in range(100):
        clock.now += step
        assert meter.count(jobs(whale=90)) is None  # 600 jobs/s
    assert meter.flooding == frozenset({"whale"})
    # Under half the rate: it stays until CALM_SECONDS have passed, then leaves.
    decided = []
    start = clock.now
    while clock.now - start < CALM_SECONDS + 1:
        clock.now += step
        change = meter.count(jobs(whale=15))  # 100 jobs/s
        if change is not None:
            decided.append((clock.now - start, change))
    first_at, first = decided[0]
    assert first.leaving == frozenset({"whale"}) and first.joining == frozenset()
    assert CALM_SECONDS <= first_at < CALM_SECONDS + step
    meter.apply(first)
    assert meter.flooding == frozenset()


def test_the_rate_is_a_positive_number() -> None:
    with pytest.raises(ValueError, match="positive"):
        FloodMeter(0, FakeClock())
