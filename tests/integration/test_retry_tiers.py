"""Guarantee: a job failing twice then succeeding goes through the retry tiers (tier 0, then
tier 1) and never starts before its due time, while other tenants' jobs keep flowing; the
delay accuracy of the tiers (start time minus due time) is measured."""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from typing import Any

import psycopg
from support import all_in, running_worker, wait_for

import tenantq
from tenantq.consumer.retry_policy import RetryPolicy


def test_fail_twice_then_succeed_through_the_tiers(
    settings: tenantq.Settings, db: psycopg.Connection[Any]
) -> None:
    app = tenantq.App(settings)
    starts: dict[uuid.UUID, list[float]] = {}
    failed_at: dict[tuple[uuid.UUID, int], float] = {}
    delays = {1: 0.8, 2: 2.5}  # first covered by tier 0 (1 s), second by tier 1 (3 s)
    lock = threading.Lock()
    other_done: list[float] = []

    @app.job("flaky", max_attempts=5)
    def flaky(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        now = time.time()
        with lock:
            starts.setdefault(ctx.job_id, []).append(now)
        if ctx.attempt <= 2:
            failed_at[(ctx.job_id, ctx.attempt)] = time.time()
            raise tenantq.RetryableError("network timeout", delay=delays[ctx.attempt])

    @app.job("steady", max_attempts=2)
    def steady(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        with lock:
            other_done.append(time.time())

    with tenantq.Producer(settings, app) as producer:
        flaky_ids = [
            producer.enqueue("flaky", tenant=f"hot{i % 3}", payload={}).result(30).job_id
            for i in range(30)
        ]
    with running_worker(app, settings, concurrency=8, retry_policy=RetryPolicy()):
        # while the flaky jobs wait in the tiers, other tenants' jobs keep flowing
        wait_for(lambda: len(failed_at) >= 30, timeout=30, what="first failures")
        with tenantq.Producer(settings, app) as producer:
            steady_ids = [
                producer.enqueue("steady", tenant=f"cold{i}", payload={}).result(30).job_id
                for i in range(20)
            ]
        wait_for(lambda: all_in(db, steady_ids, {"succeeded"}), timeout=30, what="cold tenants")
        cold_finished = max(other_done)
        wait_for(lambda: all_in(db, flaky_ids, {"succeeded"}), timeout=60, what="flaky jobs")
    assert cold_finished < min(starts[j][2] for j in flaky_ids)  # cold ones did not wait
    lateness = []
    for job_id in flaky_ids:
        assert len(starts[job_id]) == 3
        for attempt in (1, 2):
            due = failed_at[(job_id, attempt)] + delays[attempt]
            lateness.append(starts[job_id][attempt] - due)
    assert min(lateness) >= 0, "a retry started before its due time"
    ordered = sorted(lateness)
    p50 = statistics.median(ordered)
    p99 = ordered[int(len(ordered) * 0.99) - 1]
    print(
        f"tier delay accuracy over {len(ordered)} retries: p50 {p50 * 1000:.0f} ms late, "
        f"p99 {p99 * 1000:.0f} ms late, max {ordered[-1] * 1000:.0f} ms"
    )
    rows = db.execute(
        "SELECT attempts, state::text FROM tenantq_jobs WHERE id = ANY(%s)", (flaky_ids,)
    ).fetchall()
    assert set(rows) == {(3, "succeeded")}
    outcomes = db.execute(
        "SELECT attempt, outcome FROM tenantq_job_attempts WHERE job_id = %s ORDER BY id",
        (flaky_ids[0],),
    ).fetchall()
    assert outcomes == [(1, "retrying"), (2, "retrying"), (3, "succeeded")]
