"""Guarantee: a worker killed (-9, with its handler process) while a tenant is in the hot lane
loses no job: another worker finishes every job of the lane and of the main topic, each ran at
least once, and only jobs that were running in the killed worker ran twice."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from support import WorkerProcess, all_in, hot_lane_settings, short_leases, wait_for

import tenantq


def test_a_worker_killed_while_a_tenant_is_in_the_lane_loses_nothing(
    make_settings: Any, db: psycopg.Connection[Any]
) -> None:
    settings = hot_lane_settings(make_settings, 600.0, worker=short_leases())
    whale = f"whale-{uuid.uuid4().hex[:6]}"
    with tenantq.Producer(settings) as producer:
        jobs = [
            ref.job_id
            for ref in producer.enqueue_batch(
                [
                    {"job_type": "sleepy", "tenant": whale, "payload": {"seconds": 0.05, "n": n}}
                    for n in range(400)
                ]
            ).result(60)
        ]
        jobs += [
            producer.enqueue("sleepy", tenant=f"cold{n}", payload={"seconds": 0.05})
            .result(30)
            .job_id
            for n in range(20)
        ]
    first = WorkerProcess(settings, "apps:APP")
    try:
        wait_for(
            lambda: (
                db.execute(
                    "SELECT count(*) FROM tenantq_tenant_placement WHERE tenant_id = %s "
                    "AND mode = 'lane'",
                    (whale,),
                ).fetchone()
                == (1,)
            ),
            timeout=60,
            what="the whale in the lane",
        )
        wait_for(
            lambda: (
                (
                    db.execute(
                        "SELECT count(*) FROM test_executions WHERE job_id = ANY(%s)", (jobs,)
                    ).fetchone()
                    or (0,)
                )[0]
                >= 40
            ),
            timeout=60,
            what="the lane flowing",
        )
    finally:
        first.kill()  # -9, with its handler process
    second = WorkerProcess(settings, "apps:APP")
    try:
        wait_for(lambda: all_in(db, jobs, {"succeeded"}), timeout=180, what="every job done")
    finally:
        assert second.terminate(90) == 0
    runs = dict(
        db.execute(
            "SELECT job_id, count(*) FROM test_executions WHERE job_id = ANY(%s) "
            "AND note = 'done' GROUP BY job_id",
            (jobs,),
        ).fetchall()
    )
    assert set(runs) == set(jobs), "a job never ran"
    twice = [job for job, count in runs.items() if count > 1]
    # Only what ran in the killed worker's 32 slots at the kill can run again.
    assert len(twice) <= settings.worker.concurrency, twice
