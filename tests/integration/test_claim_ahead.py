"""Claim-ahead: short jobs are leased a batch ahead of free slots; the leases that wait for a
slot are given back, their attempt returned, when the worker stops; long jobs get nothing
leased ahead (no lease sits idle behind a slow handler)."""

from __future__ import annotations

import time
from typing import Any

import psycopg
from support import count_of, counting_app, running_worker, wait_for

import tenantq


def succeeded(db: psycopg.Connection[Any], job_ids: list[Any]) -> int:
    return count_of(
        db,
        "SELECT count(*) FROM tenantq_jobs WHERE id = ANY(%s) AND state = 'succeeded'",
        (job_ids,),
    )


def enqueue_noops(settings: tenantq.Settings, job_type: str, count: int) -> list[Any]:
    with tenantq.Producer(settings) as producer:
        futures = producer.enqueue_many(
            [{"job_type": job_type, "tenant": f"t{i % 16}", "payload": {}} for i in range(count)]
        )
        return [future.result(60).job_id for future in futures]


def test_a_worker_stopped_with_jobs_claimed_ahead_gives_them_back(
    settings: tenantq.Settings, db: psycopg.Connection[Any]
) -> None:
    app, ran = counting_app(settings, "tiny")
    job_ids = enqueue_noops(settings, "tiny", 5_000)
    with running_worker(app, settings, concurrency=4) as first:
        # The estimate needs a few claims and finishes before it leases ahead; a loaded
        # machine gets there later, not never.
        wait_for(
            lambda: first.stats["claimed_ahead"] > 0 and succeeded(db, job_ids) >= 500,
            timeout=120,
            what="500 jobs done, some of them claimed ahead",
        )
    assert succeeded(db, job_ids) < len(job_ids), "the worker finished before it was stopped"
    # Nothing is left leased: the waiting leases went back at the stop, not at their expiry.
    leased = db.execute(
        "SELECT count(*) FROM tenantq_jobs WHERE id = ANY(%s) AND lease_owner IS NOT NULL",
        (job_ids,),
    ).fetchone()
    assert leased == (0,)
    with running_worker(app, settings, concurrency=4):
        wait_for(lambda: succeeded(db, job_ids) == len(job_ids), timeout=180, what="the rest done")
    attempts = db.execute(
        "SELECT attempts, count(*) FROM tenantq_jobs WHERE id = ANY(%s) GROUP BY attempts",
        (job_ids,),
    ).fetchall()
    assert attempts == [(1, len(job_ids))], "a job given back spent its attempt"
    assert set(ran) == set(job_ids)
    assert max(ran.values()) == 1


def test_long_jobs_are_not_claimed_ahead(
    settings: tenantq.Settings, db: psycopg.Connection[Any]
) -> None:
    app = tenantq.App(settings)
    started: dict[Any, float] = {}

    @app.job("slow")
    def slow(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        started[ctx.job_id] = time.time()
        time.sleep(0.3)

    job_ids = enqueue_noops(settings, "slow", 12)
    with running_worker(app, settings, concurrency=2) as worker:
        wait_for(lambda: succeeded(db, job_ids) == len(job_ids), timeout=60, what="all done")
    assert worker.stats["claimed_ahead"] == 0
    leased_at = dict(
        db.execute(
            "SELECT job_id, extract(epoch FROM started_at)::float8 FROM tenantq_job_attempts"
            " WHERE job_id = ANY(%s)",
            (job_ids,),
        ).fetchall()
    )
    assert set(leased_at) == set(started) == set(job_ids)
    # Each job started as soon as it was leased, not a job's length (0.3 s) later.
    waits = sorted(started[job_id] - leased_at[job_id] for job_id in job_ids)
    assert waits[-1] < 0.15, waits
