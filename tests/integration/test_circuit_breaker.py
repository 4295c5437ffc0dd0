"""Guarantee: once a dependency's breaker opens, jobs that need it are moved to a retry tier
without running and without consuming an attempt; after the open period a half-open probe
that succeeds closes the breaker and the held-back jobs run."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
from support import all_in, running_worker, wait_for

import tenantq


def test_open_breaker_defers_then_probe_closes(
    settings: tenantq.Settings, db: psycopg.Connection[Any]
) -> None:
    app = tenantq.App(settings)
    app.dependency("billing-api", failure_rate=0.5, minimum_calls=4, window=4, open_seconds=3.0)
    healthy = threading.Event()
    calls: list[tuple[float, int]] = []

    @app.job("charge", max_attempts=6, dependencies=["billing-api"], concurrency=1)
    def charge(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        calls.append((time.time(), ctx.attempt))
        if not healthy.is_set():
            raise ConnectionError("billing-api 503")

    with tenantq.Producer(settings, app) as producer:
        ids = [
            producer.enqueue("charge", tenant=f"t{i}", payload={}).result(30).job_id
            for i in range(12)
        ]
    with running_worker(app, settings, concurrency=1) as worker:
        wait_for(
            lambda: worker.guard.breaker("billing-api").state == "open",
            timeout=30,
            what="breaker open",
        )
        opened_calls = len(calls)
        healthy.set()
        time.sleep(1.0)
        # open: nothing ran, the rest were deferred
        assert len(calls) == opened_calls
        deferred = db.execute(
            "SELECT count(*) FROM tenantq_job_attempts WHERE job_id = ANY(%s) "
            "AND error_class = 'CircuitOpen'",
            (ids,),
        ).fetchone()
        assert deferred is not None and deferred[0] >= 1
        wait_for(lambda: all_in(db, ids, {"succeeded"}), timeout=60, what="all succeeded")
        assert worker.guard.breaker("billing-api").state == "closed"
    # a deferral gave its attempt back: attempts count only real runs
    attempts = db.execute(
        "SELECT sum(attempts) FROM tenantq_jobs WHERE id = ANY(%s)", (ids,)
    ).fetchone()
    assert attempts is not None and attempts[0] == len(calls)
