"""Guarantee: the attempt ledger the migrations build accepts exactly the outcomes tenantq
declares (``tenantq.states.Outcome``); every attempt row a worker writes says when the attempt
started (the lease time, by the database clock) and how it ended; and a worker's tenant
metric labels go first to the tenants Postgres says carry the most work."""

from __future__ import annotations

import re
import uuid
from typing import Any

import psycopg
from support import all_in, running_worker, wait_for

import tenantq
from tenantq.states import Outcome
from tenantq.store.statements import QUEUE_JOBS_DELETE


def test_the_database_accepts_exactly_the_declared_outcomes(db: psycopg.Connection[Any]) -> None:
    row = db.execute(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conname = 'ck_tenantq_attempt_log_outcome_known'"
    ).fetchone()
    assert row is not None
    assert set(re.findall(r"'([a-z_]+)'", row[0])) == {outcome.value for outcome in Outcome}


def test_attempt_rows_record_when_each_attempt_started(
    make_settings: Any, db: psycopg.Connection[Any]
) -> None:
    settings = make_settings()
    app = tenantq.App(settings)
    seen: set[uuid.UUID] = set()

    @app.job("flaky", max_attempts=3)
    def flaky(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        if ctx.job_id not in seen:
            seen.add(ctx.job_id)
            raise tenantq.RetryableError("first attempt fails", delay=0.2)

    with tenantq.Producer(settings, app) as producer:
        ids = [
            producer.enqueue("flaky", tenant=f"t{i}", payload={}).result(30).job_id
            for i in range(5)
        ]
    with running_worker(app, settings):
        wait_for(lambda: all_in(db, ids, {"succeeded"}), timeout=60, what="jobs done")
    rows = db.execute(
        "SELECT a.attempt, a.outcome, a.started_at, a.finished_at, j.started_at "
        "FROM tenantq_job_attempts a JOIN tenantq_jobs j ON j.id = a.job_id "
        "WHERE a.job_id = ANY(%s) ORDER BY a.job_id, a.attempt",
        (ids,),
    ).fetchall()
    assert [(attempt, outcome) for attempt, outcome, *_ in rows] == [
        (1, "retrying"),
        (2, "succeeded"),
    ] * 5
    for _, _, started, finished, first_started in rows:
        assert started is not None and first_started <= started <= finished


def test_worker_labels_the_busiest_tenants_first(
    make_settings: Any, db: psycopg.Connection[Any]
) -> None:
    # A queue of its own: the session's other tests leave jobs of their tenants in "default".
    queue = f"labels{uuid.uuid4().hex[:8]}"
    settings = make_settings(
        metrics_top_tenants=2, queues={queue: tenantq.QueueSettings(partitions=1)}
    )
    volumes = {"whale": 9, "dolphin": 5, "shrimp": 1}
    for tenant, count in volumes.items():
        for _ in range(count):
            db.execute(
                "INSERT INTO tenantq_jobs (id, deployment, queue, job_type, tenant_id,"
                " partition_key, state, max_attempts)"
                " VALUES (%s, %s, %s, 'x', %s, %s, 'runnable', 3)",
                (uuid.uuid4(), settings.topic_prefix, queue, tenant, tenant),
            )
    try:
        with running_worker(tenantq.App(settings), settings, queues=[queue]) as worker:
            # Labels are given as the worker starts, before it joins its group.
            wait_for(lambda: bool(worker.owned_partitions), timeout=30, what="worker started")
            assert worker.observability.metrics.tenants.labelled() == {"whale", "dolphin"}
    finally:
        db.execute(QUEUE_JOBS_DELETE, {"deployment": settings.topic_prefix, "queue": queue})
