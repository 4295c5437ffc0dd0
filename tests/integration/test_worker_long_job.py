"""Guarantee: a job that runs longer than max.poll.interval.ms does not cost the worker its
partitions: the poll loop never waits on a handler, heartbeats keep the lease, and the job
completes in its first attempt."""

from __future__ import annotations

import time
from typing import Any

import psycopg
from support import all_in, running_worker, wait_for

import tenantq


def test_job_longer_than_max_poll_interval_completes(
    make_settings: Any, db: psycopg.Connection[Any]
) -> None:
    settings = make_settings(
        worker={"lease_seconds": 2.0, "heartbeat_interval_seconds": 0.5},
        kafka_config={"max.poll.interval.ms": "7000"},
    )
    app = tenantq.App(settings)

    @app.job("long", max_attempts=3, timeout=60)
    def long_job(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        time.sleep(10)  # longer than max.poll.interval.ms and five leases

    with tenantq.Producer(settings, app) as producer:
        job_id = producer.enqueue("long", tenant="acme", payload={}).result(30).job_id
    with running_worker(app, settings) as worker:
        wait_for(lambda: all_in(db, [job_id], {"succeeded"}), timeout=60, what="long job")
        assert worker.stats["executed"] == 1
    row = db.execute("SELECT attempts FROM tenantq_jobs WHERE id = %s", (job_id,)).fetchone()
    assert row == (1,)
