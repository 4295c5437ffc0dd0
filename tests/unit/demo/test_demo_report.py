"""The demo's verdict names the jobs that did not end, so a failed run can be followed up."""

from __future__ import annotations

import uuid
from typing import Any

from tenantq.demo.kafka import DeadLetterReport
from tenantq.demo.plan import plan_workload
from tenantq.demo.record import DemoOptions, DemoRun
from tenantq.demo.report import summarize
from tenantq.store.job_sets import JobOutcome

#: The knobs of a run but its job count (which the report reads).
OPTIONS: dict[str, Any] = {
    "tenants": 3,
    "processes": 2,
    "concurrency": 32,
    "seed": 7,
    "timeout": 300.0,
    "report_dir": None,
    "delete_topics": False,
}


def demo_run(workload_jobs: int, rows_for: int) -> DemoRun:
    workload = plan_workload(workload_jobs, 3, seed=7)
    job_ids = [uuid.uuid4() for _ in workload.jobs]
    outcomes = [
        JobOutcome(job_ids[job.seq], job.tenant, job.job_type, "succeeded", 1, None, 0, 0, 1)
        for job in workload.jobs[:rows_for]
    ]
    return DemoRun(
        options=DemoOptions(jobs=workload_jobs, **OPTIONS),
        prefix="demo",
        workload=workload,
        job_ids=job_ids,
        outcomes=outcomes,
        dead_letters=DeadLetterReport(),
        samples=[],
        crashes=0,
        pool_exit=0,
        timed_out=True,
        started_wall=0.0,
    )


def test_jobs_that_never_reached_the_database_are_named_with_tenant_and_type() -> None:
    run = demo_run(10, rows_for=9)
    missing = run.workload.jobs[9]
    problems = summarize(run).problems
    line = next(problem for problem in problems if "not terminal" in problem)
    assert line.startswith("1 jobs are not terminal: ")
    assert f"{run.job_ids[9]} ({missing.tenant}, {missing.job_type}, no row)" in line


def test_a_long_list_is_cut_after_five() -> None:
    run = demo_run(10, rows_for=2)
    line = next(p for p in summarize(run).problems if "not terminal" in p)
    assert line.startswith("8 jobs are not terminal: ")
    assert line.endswith(" and 3 more")
    assert line.count("no row") == 5
