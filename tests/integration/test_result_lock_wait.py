"""Guarantee: a batch of results never waits on a row another transaction holds for longer than
a moment. The batch is written without locking its rows first; when one of them is held, the
batch is written again with every row locked first (``SKIP LOCKED``): the held job's result
is set aside, unwritten, and the others are written exactly as the first way writes them."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from support import new_claim_requests

import tenantq
from tenantq.states import JobState
from tenantq.store.engine import psycopg_url
from tenantq.store.job_store import Completed, JobStore, Lease, Result

#: The row columns a result writes, read back to compare the two ways of writing a batch.
WRITTEN = (
    "state::text, attempts, lease_owner, finished_at IS NOT NULL, run_after > now(), "
    "last_error_class, last_error_message, success_worker_id, success_duration_ms"
)


@pytest.fixture
def store(database_settings: tenantq.Settings) -> Iterator[JobStore]:
    store = JobStore.open(database_settings, "worker-a")
    yield store
    store.close()


def claim(store: JobStore, count: int) -> list[Lease]:
    leases = store.claim_batch(new_claim_requests("acme", count), 30.0, 60.0, 3)
    return list(leases.values())


def mixed_results(leases: list[Lease]) -> list[Result]:
    """A success, a failure to retry later, and a result of an attempt that is not the
    lease's (stale), for the first three leases; successes for the rest."""
    success, failure, stale, *rest = leases
    return [
        Result(success.job_id, success.attempt, "succeeded", JobState.SUCCEEDED, duration_ms=5),
        Result(
            failure.job_id,
            failure.attempt,
            "retrying",
            JobState.RETRYING,
            "Boom",
            "try later",
            delay_seconds=60.0,
            duration_ms=6,
        ),  # fmt: skip
        Result(stale.job_id, stale.attempt + 1, "succeeded", JobState.SUCCEEDED, duration_ms=7),
        *(Result(lease.job_id, lease.attempt, "succeeded", JobState.SUCCEEDED) for lease in rest),
    ]


def written(db: psycopg.Connection[Any], job_ids: list[uuid.UUID]) -> list[tuple[Any, ...]]:
    """What the results wrote on each job's row and in its attempt log, in the given order."""
    rows = []
    for job_id in job_ids:
        row = db.execute(f"SELECT {WRITTEN} FROM tenantq_jobs WHERE id = %s", (job_id,)).fetchone()  # noqa: S608
        log = db.execute(
            "SELECT outcome, error_class, duration_ms FROM tenantq_attempt_log WHERE job_id = %s",
            (job_id,),
        ).fetchall()
        rows.append((row, log))
    return rows


def complete_in_thread(store: JobStore, results: list[Result]) -> Completed:
    """``complete_batch`` in a thread that must finish within 10 s: a batch that waited on the
    held row would wait as long as the test holds it."""
    answer: list[Completed] = []
    thread = threading.Thread(target=lambda: answer.append(store.complete_batch(results)))
    thread.start()
    thread.join(10)
    assert answer, "the batch waited on the held row"
    return answer[0]


def test_a_held_row_sets_its_result_aside_and_the_batch_is_written_as_without_one(
    store: JobStore, db: psycopg.Connection[Any], database_url: str
) -> None:
    free = claim(store, 4)
    assert store.complete_batch(mixed_results(free)).applied == {
        free[0].job_id, free[1].job_id, free[3].job_id
    }  # fmt: skip

    leases = claim(store, 5)
    held = leases[4]
    with psycopg.connect(psycopg_url(database_url)) as operator:
        operator.execute("SELECT id FROM tenantq_jobs WHERE id = %s FOR UPDATE", (held.job_id,))
        done = complete_in_thread(store, mixed_results(leases))
        assert done.locked == {held.job_id}
        assert done.applied == {leases[0].job_id, leases[1].job_id, leases[3].job_id}
        # Set aside: nothing written, the lease kept.
        assert written(db, [held.job_id]) == [
            (("leased", 1, "worker-a", False, False, None, None, None, None), [])
        ]
        operator.rollback()

    # The same results were written the same way, with and without a held row in the batch.
    assert written(db, [lease.job_id for lease in leases[:4]]) == written(
        db, [lease.job_id for lease in free]
    )
    assert written(db, [free[0].job_id, free[2].job_id]) == [
        (("succeeded", 1, None, True, False, None, None, "worker-a", 5), []),
        (("leased", 1, "worker-a", False, False, None, None, None, None), [("stale", None, 7)]),
    ]

    # Once the row is free again, the set-aside result goes through.
    again = Result(held.job_id, held.attempt, "succeeded", JobState.SUCCEEDED, duration_ms=1)
    assert store.complete_batch([again]) == Completed({held.job_id}, set())
