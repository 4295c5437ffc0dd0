"""Both sides of the throughput benchmark size their latency phase alike: half the measured
rate unless one is given, for ``latency_seconds``, and at least one job."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "loadtest"))

from bench_run import RunOptions  # noqa: E402


def test_the_latency_phase_runs_at_half_the_measured_rate_unless_given_one() -> None:
    options = RunOptions(jobs=1000, latency_seconds=10.0, sample_interval=0.5, report_dir=Path())
    assert options.half_load(800.0) == (400.0, 4000)
    given = RunOptions(1000, 10.0, 0.5, Path(), latency_rate=50.0)
    assert given.half_load(800.0) == (50.0, 500)


def test_the_latency_phase_enqueues_at_least_one_job() -> None:
    options = RunOptions(jobs=1000, latency_seconds=0.001, sample_interval=0.5, report_dir=Path())
    assert options.half_load(10.0) == (5.0, 1)
