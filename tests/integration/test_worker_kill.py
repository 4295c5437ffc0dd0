"""Guarantee: a worker killed with SIGKILL in the middle of a batch loses nothing: every job
still ends succeeded once another member takes over, and the recovery time is measured."""

from __future__ import annotations

import signal
import time
from typing import Any

import psycopg
from support import WorkerProcess, all_in, count_of, short_leases, wait_for

import tenantq


def _succeeded(db: psycopg.Connection[Any], job_ids: list[Any]) -> int:
    return count_of(
        db,
        "SELECT count(*) FROM tenantq_jobs WHERE id = ANY(%s) AND state = 'succeeded'",
        (job_ids,),
    )


def test_kill_9_mid_batch_every_job_still_succeeds(
    make_settings: Any, db: psycopg.Connection[Any]
) -> None:
    settings = make_settings(worker=short_leases(3.0, concurrency=8))
    with tenantq.Producer(settings) as producer:
        futures = producer.enqueue_many(
            [
                {"job_type": "sleepy", "tenant": f"t{i % 11}", "payload": {"seconds": 0.2}}
                for i in range(120)
            ]
        )
        job_ids = [future.result(30).job_id for future in futures]
    victim = WorkerProcess(settings, "apps:APP")
    try:
        wait_for(lambda: _succeeded(db, job_ids) >= 20, timeout=60, what="victim progress")
        running = db.execute(
            "SELECT count(*) FROM tenantq_jobs WHERE id = ANY(%s) AND state = 'leased'", (job_ids,)
        ).fetchone()
        victim.signal(signal.SIGKILL)
        killed_at = time.monotonic()
        victim.kill()
        successor = WorkerProcess(settings, "apps:APP")
        try:
            wait_for(lambda: all_in(db, job_ids, {"succeeded"}), timeout=120, what="recovery")
            recovery = time.monotonic() - killed_at
        finally:
            assert successor.terminate() == 0, successor.output()
    finally:
        victim.kill()
    retried = db.execute(
        "SELECT count(*) FROM tenantq_jobs WHERE id = ANY(%s) AND attempts > 1", (job_ids,)
    ).fetchone()
    print(
        f"kill -9: {running[0] if running else 0} jobs leased at the kill, "
        f"{retried[0] if retried else 0} took a second attempt, "
        f"all {len(job_ids)} succeeded {recovery:.1f}s after the kill"
    )
    assert _succeeded(db, job_ids) == len(job_ids)
