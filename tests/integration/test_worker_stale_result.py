"""Guarantee: a stale worker (frozen with SIGSTOP past its lease, then resumed) has its result
refused: the job's state comes from the member that took the lease over, and the stale
attempt is recorded as such."""

from __future__ import annotations

from typing import Any

import psycopg
from apps import APP
from support import (
    attempt_outcomes,
    leased_by_a_worker_process,
    running_worker,
    short_leases,
    take_over_from_frozen_owner,
)


def test_result_of_a_frozen_worker_is_refused(
    make_settings: Any, db: psycopg.Connection[Any]
) -> None:
    settings = make_settings(worker=short_leases())
    with leased_by_a_worker_process(settings, db) as (job_id, frozen):
        successor_running = running_worker(APP, settings, concurrency=2)
        refused = "the stale result to be refused"
        owner, successor = take_over_from_frozen_owner(
            db, job_id, frozen, successor_running, refused
        )
    job = db.execute(
        "SELECT state::text, attempts, lease_owner FROM tenantq_jobs WHERE id = %s", (job_id,)
    ).fetchone()
    assert job == ("succeeded", 2, None)
    attempts = attempt_outcomes(db, job_id)
    assert (2, successor.worker_id, "succeeded") in attempts
    assert (1, owner, "stale") in attempts
