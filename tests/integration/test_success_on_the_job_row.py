"""Guarantee: a succeeded attempt is recorded on its job row (migration 0008), in the same
fenced statement that ends the job, and the attempt history reads as before: the view
``tenantq_job_attempts`` shows every attempt once (the log's rows and the success on the
row), ``tenantq jobs show`` lists it last, a result written again after a dropped connection
is recognised by that record, writes through the view (a previous release's worker during a
rolling upgrade) go to the log, and a downgrade puts the successes back as rows."""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from typing import Any

import psycopg
import pytest
from support import attempt_outcomes, count_of, migrate_to

import tenantq
from tenantq.states import JobState
from tenantq.store.engine import connect, psycopg_url
from tenantq.store.job_admin import list_attempts
from tenantq.store.job_store import ClaimRequest, JobStore, Lease, Result

PAYLOAD = b'{"n": 1}'


def _claim(store: JobStore, job_id: uuid.UUID, max_attempts: int = 3) -> Lease:
    request = ClaimRequest(
        job_id, "default", "noop", "tenant-a", "tenant-a", PAYLOAD,
        hashlib.sha256(PAYLOAD).digest(), max_attempts, None, "topic", 0, 0,
        dt.datetime.now(dt.UTC),
    )  # fmt: skip
    return store.claim_batch([request], 30.0, 15.0, 3)[job_id]


def _succeed(store: JobStore, lease: Lease, *, again: bool = False) -> set[uuid.UUID]:
    result = Result(
        lease.job_id, lease.attempt, "succeeded", JobState.SUCCEEDED,
        duration_ms=7, started_at=lease.claimed_at,
    )  # fmt: skip
    return store.complete_batch([result], again=again).applied


def _fail_then_succeed(url: str, worker_id: str) -> uuid.UUID:
    """A new job whose attempt 1 fails (retrying, ``Boom``) and attempt 2 succeeds, both run
    by ``worker_id``."""
    job_id = uuid.uuid4()
    store = JobStore.open(tenantq.Settings(database_url=url), worker_id)
    try:
        first = _claim(store, job_id)
        failed = Result(
            job_id, first.attempt, "retrying", JobState.RETRYING, "Boom", "first try",
            delay_seconds=0.0, duration_ms=3, started_at=first.claimed_at,
        )  # fmt: skip
        assert store.complete_batch([failed]).applied == {job_id}
        second = _claim(store, job_id)
        assert second.attempt == 2
        assert _succeed(store, second) == {job_id}
    finally:
        store.close()
    return job_id


def _log_rows(db: psycopg.Connection[Any], job_id: uuid.UUID) -> int:
    return count_of(
        db,
        "SELECT count(*) FROM tenantq_attempt_log WHERE job_id = %s",
        (job_id,),
    )


def test_a_success_is_written_on_its_job_row_and_read_through_the_view(fresh_database: str) -> None:
    settings = tenantq.Settings(database_url=fresh_database)
    store = JobStore.open(settings, "w-success")
    try:
        job_id = uuid.uuid4()
        lease = _claim(store, job_id)
        assert _succeed(store, lease) == {job_id}
        with connect(settings, autocommit=True) as db:
            row = db.execute(
                "SELECT state::text, success_worker_id, success_started_at, "
                "success_duration_ms, finished_at FROM tenantq_jobs WHERE id = %s",
                (job_id,),
            ).fetchone()
            assert row is not None
            state, worker, started, duration, finished = row
            assert (state, worker, duration) == ("succeeded", "w-success", 7)
            assert started == lease.claimed_at and started <= finished
            assert _log_rows(db, job_id) == 0
            assert attempt_outcomes(db, job_id) == [(1, "w-success", "succeeded")]
            (listed,) = list_attempts(db, job_id)
            assert listed["outcome"] == "succeeded"
            assert (listed["started_at"], listed["finished_at"]) == (started, finished)
            assert listed["duration_ms"] == 7
    finally:
        store.close()


def test_a_failed_attempt_is_a_log_row_and_the_success_comes_last(fresh_database: str) -> None:
    job_id = _fail_then_succeed(fresh_database, "w-retry")
    with connect(tenantq.Settings(database_url=fresh_database), autocommit=True) as db:
        assert _log_rows(db, job_id) == 1
        assert attempt_outcomes(db, job_id) == [
            (1, "w-retry", "retrying"),
            (2, "w-retry", "succeeded"),
        ]
        assert [a["outcome"] for a in list_attempts(db, job_id)] == ["retrying", "succeeded"]
        last_error = db.execute(
            "SELECT last_error_class FROM tenantq_jobs WHERE id = %s", (job_id,)
        ).fetchone()
        assert last_error == ("Boom",)


def test_a_success_written_again_is_recognised_by_its_record_on_the_row(
    fresh_database: str,
) -> None:
    """The results lane writes a batch again when its connection dropped mid-way: a success
    applied by the first try is reported applied, and recorded once."""
    settings = tenantq.Settings(database_url=fresh_database)
    store = JobStore.open(settings, "w-again")
    other = JobStore.open(settings, "w-other")
    try:
        job_id = uuid.uuid4()
        lease = _claim(store, job_id)
        assert _succeed(store, lease) == {job_id}
        assert _succeed(store, lease, again=True) == {job_id}
        # Another owner's result for the same attempt is stale, again or not.
        assert _succeed(other, lease, again=True) == set()
        with psycopg.connect(psycopg_url(fresh_database), autocommit=True) as db:
            assert attempt_outcomes(db, job_id) == [
                (1, "w-other", "stale"),
                (1, "w-again", "succeeded"),
            ]
    finally:
        store.close()
        other.close()


def test_the_record_is_only_for_succeeded_jobs(fresh_database: str) -> None:
    with psycopg.connect(psycopg_url(fresh_database), autocommit=True) as db:
        with pytest.raises(psycopg.errors.CheckViolation):
            db.execute(
                "INSERT INTO tenantq_jobs (id, deployment, queue, job_type, tenant_id,"
                " partition_key, state, max_attempts, success_worker_id) "
                "VALUES (%s, 'tenantq', 'default', 'noop', 'a', 'a', 'runnable', 3, 'w')",
                (uuid.uuid4(),),
            )


def test_writes_through_the_view_go_to_the_log(fresh_database: str) -> None:
    """A worker of the previous release writes its attempt rows into
    ``tenantq_job_attempts``: during a rolling upgrade they land in the log, and its success
    (the job's ``success_*`` left empty) shows once."""
    settings = tenantq.Settings(database_url=fresh_database)
    store = JobStore.open(settings, "w-new")
    try:
        job_id = uuid.uuid4()
        lease = _claim(store, job_id)
        with psycopg.connect(psycopg_url(fresh_database), autocommit=True) as db:
            # What the previous release's result statement did: the update, then the row.
            db.execute(
                "UPDATE tenantq_jobs SET state = 'succeeded', lease_owner = NULL, "
                "lease_until = NULL, finished_at = now() WHERE id = %s",
                (job_id,),
            )
            inserted = db.execute(
                "INSERT INTO tenantq_job_attempts (job_id, attempt, worker_id, outcome, "
                "started_at, duration_ms) VALUES (%s, %s, 'w-old', 'succeeded', %s, 5) "
                "RETURNING id, finished_at",
                (job_id, lease.attempt, lease.claimed_at),
            ).fetchone()
            assert inserted is not None and inserted[0] is not None and inserted[1] is not None
            assert _log_rows(db, job_id) == 1
            assert attempt_outcomes(db, job_id) == [(1, "w-old", "succeeded")]
            # A delete through the view removes a log row; a success on a job row has none.
            done = uuid.uuid4()
            assert _succeed(store, _claim(store, done)) == {done}
            assert db.execute(
                "DELETE FROM tenantq_job_attempts WHERE job_id = ANY(%s)", ([job_id, done],)
            ).rowcount == 1  # fmt: skip
            assert attempt_outcomes(db, job_id) == []
            assert attempt_outcomes(db, done) == [(1, "w-new", "succeeded")]
    finally:
        store.close()


def test_a_downgrade_turns_recorded_successes_back_into_rows(fresh_database: str) -> None:
    job_id = _fail_then_succeed(fresh_database, "w-down")
    wanted = [(1, "w-down", "retrying"), (2, "w-down", "succeeded")]
    migrate_to(fresh_database, "0007", down=True)
    with psycopg.connect(psycopg_url(fresh_database), autocommit=True) as db:
        kind = db.execute(
            "SELECT relkind::text FROM pg_class WHERE relname = 'tenantq_job_attempts'"
        ).fetchone()
        assert kind == ("r",)  # a table again
        assert attempt_outcomes(db, job_id) == wanted
    migrate_to(fresh_database, "head")
    with psycopg.connect(psycopg_url(fresh_database), autocommit=True) as db:
        assert attempt_outcomes(db, job_id) == wanted
        assert _log_rows(db, job_id) == 2
