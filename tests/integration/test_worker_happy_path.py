"""Guarantee: N jobs across many tenants each succeed exactly once, every attempt row says so,
and the group's committed offsets reach the end of every partition."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from typing import Any

import psycopg
from support import all_in, caught_up, running_worker, wait_for

import tenantq
from tenantq.topics import main_topic


def test_jobs_across_tenants_succeed_exactly_once(
    settings: tenantq.Settings, db: psycopg.Connection[Any]
) -> None:
    app = tenantq.App(settings)
    runs: Counter[uuid.UUID] = Counter()
    lock = threading.Lock()

    @app.job("noop", max_attempts=3)
    def noop(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        with lock:
            runs[ctx.job_id] += 1

    with tenantq.Producer(settings, app) as producer:
        futures = producer.enqueue_many(
            [
                {"job_type": "noop", "tenant": f"tenant-{i % 37}", "payload": {"i": i}}
                for i in range(400)
            ]
        )
        job_ids = [future.result(30).job_id for future in futures]

    with running_worker(app, settings, concurrency=16) as worker:
        wait_for(lambda: all_in(db, job_ids, {"succeeded"}), timeout=90, what="all succeeded")
        topic = main_topic(settings.topic_prefix, "default")
        wait_for(
            lambda: caught_up(settings, worker.group_id, topic),
            timeout=30,
            what="offsets committed to the end",
        )
    assert set(runs) == set(job_ids)
    assert max(runs.values()) == 1
    attempts = db.execute(
        "SELECT count(*), count(DISTINCT job_id), min(outcome), max(outcome) "
        "FROM tenantq_job_attempts WHERE job_id = ANY(%s)",
        (job_ids,),
    ).fetchone()
    assert attempts == (400, 400, "succeeded", "succeeded")
    rows = db.execute(
        "SELECT min(attempts), max(attempts), count(*) FILTER (WHERE finished_at IS NULL) "
        "FROM tenantq_jobs WHERE id = ANY(%s)",
        (job_ids,),
    ).fetchone()
    assert rows == (1, 1, 0)
