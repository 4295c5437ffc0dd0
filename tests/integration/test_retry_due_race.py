"""Guarantee: retries that come due almost at once (within tens of milliseconds, racing their own
row's update) are each claimed and run again: every job that fails once ends succeeded, with
exactly two attempts."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import psycopg
from support import all_in, running_worker, wait_for

import tenantq


def test_short_retries_all_run_again(
    settings: tenantq.Settings, db: psycopg.Connection[Any]
) -> None:
    app = tenantq.App(settings)
    attempts: Counter[Any] = Counter()
    lock = threading.Lock()

    @app.job("blip", max_attempts=3)
    def blip(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        with lock:
            attempts[ctx.job_id] += 1
        if ctx.attempt == 1:
            # Due almost at once: the retry message and its row race each other.
            raise tenantq.RetryableError("blip", delay=0.02 * (payload["i"] % 5))

    with tenantq.Producer(settings, app) as producer:
        futures = producer.enqueue_many(
            [{"job_type": "blip", "tenant": f"t{i % 7}", "payload": {"i": i}} for i in range(300)]
        )
        ids = [future.result(30).job_id for future in futures]
    with running_worker(app, settings, concurrency=16):
        wait_for(lambda: all_in(db, ids, {"succeeded"}), timeout=90, what="every job succeeded")
    assert set(attempts.values()) == {2}
