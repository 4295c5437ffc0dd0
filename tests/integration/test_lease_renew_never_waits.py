"""Guarantee: the heartbeat's lease renewal never waits for a row lock.

It used to wait, and then deadlocked with the worker's own result batch, which locks the same
rows in another order: Postgres failed one of them after ``deadlock_timeout`` and the jobs
behind it waited a second. A renewal now renews what is free at once, skips a row someone
is writing, and still reports every job that is ours (none is taken for lost).
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import psycopg

import tenantq
from tenantq.store.engine import psycopg_url
from tenantq.store.job_store import JobStore

OWNER = "w-renew-test"


def _leased(db: psycopg.Connection[Any], owner: str, state: str = "leased") -> uuid.UUID:
    job_id = uuid.uuid4()
    leased = state == "leased"
    db.execute(
        "INSERT INTO tenantq_jobs (id, deployment, queue, job_type, tenant_id, partition_key, "
        "state, max_attempts, attempts, lease_owner, lease_until, finished_at) VALUES (%s, "
        "'tenantq', 'default', 'noop', 'acme', 'acme', %s, 3, 1, %s, CASE WHEN %s THEN now() "
        "+ interval '10 seconds' END, CASE WHEN %s THEN NULL ELSE now() END)",
        (job_id, state, owner if leased else None, leased, leased),
    )
    return job_id


def _lease_left(db: psycopg.Connection[Any], job_id: uuid.UUID) -> float:
    row = db.execute(
        "SELECT extract(epoch FROM lease_until - now()) FROM tenantq_jobs WHERE id = %s",
        (job_id,),
    ).fetchone()
    assert row is not None
    return float(row[0])


def test_a_renewal_skips_a_locked_row_and_still_reports_it_ours(
    db: psycopg.Connection[Any], database_url: str
) -> None:
    free, written, other = _leased(db, OWNER), _leased(db, OWNER), _leased(db, OWNER)
    someone_elses = _leased(db, "w-other")
    finished = _leased(db, OWNER, state="succeeded")
    db.execute("UPDATE tenantq_jobs SET cancel_requested = true WHERE id = %s", (other,))
    store = JobStore.open(tenantq.Settings(database_url=database_url), OWNER)
    answers: list[dict[uuid.UUID, bool]] = []
    # Another transaction holds one of the rows, as a result batch being written does.
    with psycopg.connect(psycopg_url(database_url)) as writer:
        writer.execute("UPDATE tenantq_jobs SET heartbeat_at = now() WHERE id = %s", (written,))
        renewal = threading.Thread(
            target=lambda: answers.append(
                store.renew_leases([free, written, other, someone_elses, finished], 60, 1, 4)
            ),
            daemon=True,
        )
        try:
            renewal.start()
            renewal.join(5.0)
            assert not renewal.is_alive(), "the renewal waited for the locked row"
        finally:
            writer.rollback()  # releases a renewal that waits, so the thread ends either way
    renewal.join(10.0)
    assert answers == [{free: False, written: False, other: True}]
    assert _lease_left(db, free) > 50 and _lease_left(db, other) > 50
    assert _lease_left(db, written) < 11  # skipped: kept its time until the next beat
    # The next beat, with the row free again, renews it.
    assert store.renew_leases([written], 60, None, None) == {written: False}
    assert _lease_left(db, written) > 50
    store.close()
