"""Guarantee: ``loadtest/hot_partition.py --repeat`` judges a scenario on its median run and
pools the runs' cold jobs for the pooled percentiles, never on one run's p99 alone."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "loadtest"))

from hot_partition_report import (  # noqa: E402
    ClockOffset,
    PhaseSpec,
    ProducerCount,
    RunData,
    analyse,
    repeat_name,
    repeated_scenario,
    repeats,
    repeats_rows,
)

PHASES = [PhaseSpec("calm", 0.0, 10.0, 10.0, 0.0), PhaseSpec("flood", 10.0, 20.0, 10.0, 5000.0)]


def run(name: str, calm_wait: float, flood_waits: list[float], hot_jobs: int) -> RunData:
    """100 cold jobs per phase (flood ones waiting ``flood_waits`` in turn), ``hot_jobs``
    started in the flood, against a capacity of 1,000 jobs/s."""
    jobs: list[tuple[str, float, float | None]] = []
    for index in range(100):
        at = index * 0.1
        jobs.append(("cold-a", at, at + calm_wait))
        flood_at = 10.0 + at
        jobs.append(("cold-a", flood_at, flood_at + flood_waits[index % len(flood_waits)]))
    step = 9.0 / hot_jobs
    jobs += [("whale", 10.0 + i * step, 10.5 + i * step) for i in range(hot_jobs)]
    return RunData(
        name=name, scenario="flood", summary="test", protection="on",
        protection_environment={}, prefix="p", queue="q", partitions=12, workers=2,
        slots_per_worker=32, job_ms=50.0, seed=7, hot_tenant="whale", cold_tenants=["cold-a"],
        neighbours=[], hot_partition=0, phases=PHASES, capacity=1000.0,
        capacity_method="given", capacity_detail={},
        producer={"cold": [ProducerCount(), ProducerCount()]}, jobs=jobs,
        hot_not_started={}, samples=[], lane_stays={}, clock=ClockOffset(0.0, 0.0),
        drain_seconds=0.0, drained=True, lane_topic=True,
    )  # fmt: skip


def test_names_of_repeats_lead_back_to_their_scenario() -> None:
    assert repeat_name("flood-100x-off", 3) == "flood-100x-off-r3"
    assert repeated_scenario("flood-100x-off-r3") == "flood-100x-off"
    assert repeated_scenario("flood-100x") == "flood-100x"
    assert repeated_scenario("zipf-rx") == "zipf-rx"


def test_a_scenario_is_judged_on_its_median_run_and_pooled_jobs() -> None:
    figures = [
        analyse(run(repeat_name("flood", 1), 0.010, [0.012], hot_jobs=7_000)),
        # One bad run: its p99 ratio is 10x; the median run's is 1.5x.
        analyse(run(repeat_name("flood", 2), 0.010, [0.012, 0.100], hot_jobs=7_000)),
        analyse(run(repeat_name("flood", 3), 0.010, [0.015], hot_jobs=3_000)),
        analyse(run("other", 0.010, [0.100], hot_jobs=1_000)),  # run once: no repeats entry
    ]
    (found,) = repeats(figures)
    assert found.scenario == "flood" and found.runs == ["flood-r1", "flood-r2", "flood-r3"]
    assert found.protection == "on"
    assert found.ratios == pytest.approx([1.2, 10.0, 1.5])
    assert found.median_ratio == pytest.approx(1.5) and found.ratio_met is True
    # 990 unused jobs/s (capacity 1,000 - 10 cold): 7,000 in 10 s is 71%, 3,000 is 30%.
    assert found.shares == pytest.approx([700 / 990, 700 / 990, 300 / 990], rel=1e-3)
    assert found.median_share == pytest.approx(700 / 990, rel=1e-3) and found.share_met is True
    # Pooled: 300 flood jobs, of which 50 waited 100 ms: the p99 is 100 ms.
    assert found.pooled_calm_p99 == pytest.approx(0.010)
    assert found.pooled_load_p99 == pytest.approx(0.100)
    assert found.pooled_ratio == pytest.approx(10.0)
    (row,) = repeats_rows([found])
    assert row[0] == "flood" and row[1] == "3" and "1.50x met" in row[3]


def test_a_median_past_the_target_is_not_met() -> None:
    figures = [
        analyse(run(repeat_name("flood", k), 0.010, [wait], hot_jobs=7_000))
        for k, wait in enumerate([0.030, 0.025, 0.012], start=1)
    ]
    (found,) = repeats(figures)
    assert found.median_ratio == pytest.approx(2.5) and found.ratio_met is False
