"""Guarantee: a job enqueued with a future run_after is `pending` (with its due time) as soon as
Kafka holds it, runs no earlier than due through the retry tiers, and a pending job canceled
before it is due never runs."""

from __future__ import annotations

import time
import uuid
from typing import Any

import psycopg
from support import all_in, running_worker, wait_for

import tenantq
from tenantq.store.engine import connect
from tenantq.store.job_admin import cancel_job


def test_scheduled_job_is_pending_then_runs_when_due(
    settings: tenantq.Settings, db: psycopg.Connection[Any]
) -> None:
    app = tenantq.App(settings)
    started: dict[uuid.UUID, float] = {}

    @app.job("reminder", max_attempts=4)
    def reminder(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        started[ctx.job_id] = time.time()

    with tenantq.Producer(settings, app) as producer:
        enqueued = time.time()
        soon = producer.enqueue("reminder", tenant="acme", payload={}, delay=2.5).result(30)
        later = producer.enqueue("reminder", tenant="acme", payload={}, delay=60).result(30)
        batch = producer.enqueue_batch(
            [{"job_type": "reminder", "tenant": "beta", "payload": {}, "delay": 2.5}]
        ).result(30)
    ids = [soon.job_id, later.job_id, batch[0].job_id]
    wait_for(lambda: all_in(db, ids, {"pending"}), timeout=10, what="pending rows")
    row = db.execute(
        "SELECT max_attempts, run_after FROM tenantq_jobs WHERE id = %s", (later.job_id,)
    ).fetchone()
    assert row is not None and row[0] == 4
    assert abs(row[1].timestamp() - (enqueued + 60)) < 5
    with connect(settings, autocommit=True) as connection:
        assert cancel_job(connection, later.job_id, "default") == "canceled"
    with running_worker(app, settings):
        wait_for(
            lambda: all_in(db, [soon.job_id, batch[0].job_id], {"succeeded"}),
            timeout=30,
            what="due jobs ran",
        )
    assert started[soon.job_id] >= enqueued + 2.5
    assert later.job_id not in started
    assert all_in(db, [later.job_id], {"canceled"})
