"""The throughput benchmark's end-to-end phase: its rate is timed from the first enqueue call
to the last job finished, its CPU per job counts only the jobs finished inside the CPU
window, and each configuration is compared with PgQueuer's best end-to-end rate of the same
round, never with another round's nor with the backlog's rates."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "loadtest"))

from bench_cpu import CpuWindow  # noqa: E402
from bench_report import (  # noqa: E402
    end_to_end_rate,
    end_to_end_ratios,
    end_to_end_table,
    round_ratios,
    summarize,
)
from bench_run import EndToEnd, Measured, RunOptions  # noqa: E402


class FixedWindow:
    """A sampler whose window holds 0.5 s of worker CPU from 101.0 to 103.0."""

    def window(self, started: float, ended: float) -> CpuWindow:
        return CpuWindow(101.0, 103.0, {"worker": 0.5}, {("worker", "member"): 0.5})


#: Stands in for the CpuSampler the phase reads its window from.
SAMPLER: Any = FixedWindow()


def measured(
    system: str, label: str, round_number: int, end_to_end: float | None = None
) -> Measured:
    """A run whose backlog went at 1,000 jobs/s and whose end-to-end phase (if any) at
    ``end_to_end`` jobs/s."""
    run = Measured(
        system=system, label=label, command="", jobs=10_000, first_start=0.0,
        last_finish=10.0, finishes=[], startup_seconds=0.0, cpu=None, cpu_jobs=0,
        round_number=round_number,
    )  # fmt: skip
    if end_to_end is not None:
        run.end_to_end = EndToEnd(jobs=int(end_to_end * 10), seconds=10.0, cpu=None, cpu_jobs=0)
    return run


def test_the_phase_is_off_unless_asked() -> None:
    options = RunOptions(jobs=1000, latency_seconds=0.0, sample_interval=0.1, report_dir=Path())
    assert options.end_to_end == 0


def test_the_phase_runs_from_the_first_enqueue_call_to_the_last_finish() -> None:
    run = measured("tenantq", "tenantq c32 p2 (defaults)", 1)
    finishes = [100.5, 101.5, 102.0, 102.5, 104.0]
    run.record_end_to_end(SAMPLER, started=100.0, finishes=finishes, expected=5)
    assert run.end_to_end is not None
    assert (run.end_to_end.jobs, run.end_to_end.seconds, run.end_to_end.rate) == (5, 4.0, 1.25)
    # 0.5 s of CPU over the three jobs finished inside the window (101.0, 103.0].
    assert run.end_to_end_micros()["worker"] == 0.5e6 / 3
    assert run.notes == []
    assert run.micros_per_job() == {}  # the backlog's figures are left alone


def test_jobs_that_never_succeeded_are_noted() -> None:
    run = measured("pgqueuer", "PgQueuer batch 500 x2 processes", 1)
    run.record_end_to_end(SAMPLER, started=100.0, finishes=[101.0, 102.0], expected=3)
    assert run.end_to_end is not None and run.end_to_end.jobs == 2
    assert run.notes == ["end to end: 2 of 3 jobs succeeded"]
    nothing = measured("pgqueuer", "PgQueuer batch 500 x2 processes", 1)
    nothing.record_end_to_end(SAMPLER, started=100.0, finishes=[], expected=3)
    assert nothing.end_to_end is None
    assert nothing.notes == ["end to end: 0 of 3 jobs succeeded"]


def results() -> list[Measured]:
    return [
        measured("tenantq", "tenantq c32 p2 (defaults)", 1, 6000.0),
        measured("tenantq", "tenantq c2048 p2 threads", 1, 9000.0),
        measured("pgqueuer", "PgQueuer batch 100", 1, 2000.0),
        measured("pgqueuer", "PgQueuer batch 500 x2 processes", 1, 3000.0),
        measured("tenantq", "tenantq c32 p2 (defaults)", 2, 8000.0),
        measured("tenantq", "tenantq c2048 p2 threads", 2, 10000.0),
        measured("pgqueuer", "PgQueuer batch 100", 2, 5000.0),
        measured("pgqueuer", "PgQueuer batch 500 x2 processes", 2, 4000.0),
        measured("tenantq", "tenantq c32 p2 (defaults)", 3, 7000.0),  # no PgQueuer phase
        measured("pgqueuer", "PgQueuer batch 100", 3),
    ]


def test_each_configuration_is_compared_with_pgqueuers_best_of_the_same_round() -> None:
    assert end_to_end_ratios(results()) == {
        "tenantq c32 p2 (defaults)": [2.0, 1.6],
        "tenantq c2048 p2 threads": [3.0, 2.0],
        "PgQueuer batch 100": [2000.0 / 3000.0, 1.0],
        "PgQueuer batch 500 x2 processes": [1.0, 0.8],
    }


def test_the_best_of_each_system_per_round_uses_the_rate_asked_for() -> None:
    assert round_ratios(results(), end_to_end_rate) == [3.0, 2.0]
    assert round_ratios(results()) == [1.0, 1.0, 1.0]  # the backlog's rates, every round


def test_the_second_table_gives_median_and_min_over_the_rounds() -> None:
    lines = end_to_end_table(summarize(results()), results())
    assert (
        lines[2]
        == "| tenantq c32 p2 (defaults) | 7,000 (6,000) | 1.80 (1.60) | — | — | — | — | — |"
    )
    assert (
        lines[3] == "| tenantq c2048 p2 threads | 9,500 (9,000) | 2.50 (2.00) | — | — | — | — | — |"
    )
    assert lines[-1] == ""
    assert len(lines) == 2 + 4 + 1


def test_without_the_phase_there_is_no_second_table() -> None:
    plain = [measured("tenantq", "tenantq c32 p2 (defaults)", 1), measured("pgqueuer", "x", 1)]
    assert end_to_end_table(summarize(plain), plain) == []
    assert round_ratios(plain, end_to_end_rate) == []
