"""Guarantee: workers joining and leaving the group during a run (two, then three, then back
to one) lose no job, every job ends terminal, and graceful membership changes cause no
duplicate execution."""

from __future__ import annotations

from typing import Any

import psycopg
from support import all_in, counting_app, running_worker, wait_for

import tenantq


def test_members_join_and_leave_without_loss_or_duplicates(
    make_settings: Any, db: psycopg.Connection[Any]
) -> None:
    settings = make_settings(
        queues={"default": tenantq.QueueSettings(partitions=6, retry_delays_seconds=(1.0, 3.0))}
    )
    app, runs = counting_app(settings, "step", seconds=0.01, max_attempts=5)

    with tenantq.Producer(settings, app) as producer:
        futures = producer.enqueue_many(
            [{"job_type": "step", "tenant": f"t{i % 23}", "payload": {"i": i}} for i in range(900)]
        )
        job_ids = [future.result(30).job_id for future in futures]

    def succeeded() -> int:
        row = db.execute(
            "SELECT count(*) FROM tenantq_jobs WHERE id = ANY(%s) AND state = 'succeeded'",
            (job_ids,),
        ).fetchone()
        return int(row[0]) if row else 0

    with running_worker(app, settings, concurrency=4) as first:
        wait_for(lambda: succeeded() >= 100, timeout=60, what="first progress")
        with running_worker(app, settings, concurrency=4):
            wait_for(lambda: succeeded() >= 300, timeout=60, what="progress with two")
            with running_worker(app, settings, concurrency=4):
                wait_for(lambda: succeeded() >= 500, timeout=60, what="progress with three")
            # the third left gracefully
            wait_for(lambda: succeeded() >= 650, timeout=60, what="progress after a leave")
        # the second left gracefully; the first finishes the rest alone
        wait_for(lambda: all_in(db, job_ids, {"succeeded"}), timeout=120, what="all succeeded")
        assert first.stats["executed"] > 0
    duplicates = sum(count - 1 for count in runs.values() if count > 1)
    print(f"membership changes: {len(runs)} jobs, {duplicates} duplicate executions")
    assert set(runs) == set(job_ids)
    assert duplicates == 0
