"""Guarantee: attempt rows only ever belong to jobs that exist, without a foreign key
(migration 0007). A result for a job that is not there writes nothing, and a stale result
for a job that retention is deleting is set aside while the deletion holds the row (never
waiting for it) and then writes nothing either, instead of leaving an attempt row behind."""

from __future__ import annotations

import datetime as dt
import hashlib
import time
import uuid
from typing import Any

import psycopg
from support import attempt_outcomes

import tenantq
from tenantq.states import JobState
from tenantq.store.engine import psycopg_url
from tenantq.store.job_store import ClaimRequest, JobStore, Result
from tenantq.store.statements import QUEUE_JOBS_DELETE

PAYLOAD = b'{"n": 1}'


def _finished_job(store: JobStore, queue: str) -> uuid.UUID:
    """A job claimed and succeeded through the store, as a worker leaves it."""
    job_id = uuid.uuid4()
    request = ClaimRequest(
        job_id, queue, "noop", "tenant-a", "tenant-a", PAYLOAD,
        hashlib.sha256(PAYLOAD).digest(), 3, None, "topic", 0, 0, dt.datetime.now(dt.UTC),
    )  # fmt: skip
    lease = store.claim_batch([request], 30.0, 15.0, 3)[job_id]
    applied = store.complete_batch(
        [Result(job_id, lease.attempt, "succeeded", JobState.SUCCEEDED, duration_ms=1)]
    )
    assert applied.applied == {job_id}
    return job_id


def test_a_result_for_a_job_that_is_not_there_writes_no_attempt_row(
    settings: tenantq.Settings, db: psycopg.Connection[Any]
) -> None:
    store = JobStore.open(settings, f"w-{uuid.uuid4().hex[:8]}")
    try:
        missing = uuid.uuid4()
        applied = store.complete_batch([Result(missing, 1, "succeeded", JobState.SUCCEEDED)])
        assert applied == (set(), set())
        assert attempt_outcomes(db, missing) == []
    finally:
        store.close()


def test_a_stale_result_is_set_aside_while_a_prune_deletes_its_job_and_writes_nothing(
    settings: tenantq.Settings, db: psycopg.Connection[Any], database_url: str
) -> None:
    queue = f"q{uuid.uuid4().hex[:10]}"
    store = JobStore.open(settings, f"w-{uuid.uuid4().hex[:8]}")
    try:
        job_id = _finished_job(store, queue)
        assert attempt_outcomes(db, job_id) == [(1, store.owner, "succeeded")]
        stale = Result(job_id, 1, "succeeded", JobState.SUCCEEDED, duration_ms=1)
        with psycopg.connect(psycopg_url(database_url)) as prune:
            # What retention's JOB_PRUNE_BATCH does, held open mid-way: the job is locked
            # FOR UPDATE and its attempt rows are gone.
            prune.execute("SELECT id FROM tenantq_jobs WHERE id = %s FOR UPDATE", (job_id,))
            prune.execute("DELETE FROM tenantq_job_attempts WHERE job_id = %s", (job_id,))
            # The result does not wait for the lock: it is set aside, with nothing written.
            started = time.monotonic()
            assert store.complete_batch([stale]) == (set(), {job_id})
            assert time.monotonic() - started < 5
            prune.execute("DELETE FROM tenantq_jobs WHERE id = %s", (job_id,))
            prune.commit()
        # Written again once the prune is done: its job is gone, so it is refused.
        assert store.complete_batch([stale]) == (set(), set())
        assert attempt_outcomes(db, job_id) == []
    finally:
        store.close()
        db.execute(QUEUE_JOBS_DELETE, {"deployment": settings.topic_prefix, "queue": queue})
