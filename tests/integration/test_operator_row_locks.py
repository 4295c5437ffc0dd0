"""Guarantee: an operator's transaction that holds row locks on some jobs (``SELECT ... FOR
UPDATE`` left open) holds up nothing else. While it lasts the worker claims, runs and
finishes the other jobs; the running job it locked keeps its lease with its result set
aside, and a message of a job it locked (a finished job read again) is settled without
waiting; once the transaction ends, the locked job's result goes through. Every job ends in
one terminal state and none runs twice."""

from __future__ import annotations

import time
import uuid
from typing import Any

import psycopg
from apps import APP
from support import all_in, running_worker, states, wait_for

import tenantq
from tenantq.store.engine import psycopg_url

#: How long the operator's transaction stays open: the other jobs (about a second's work) must
#: all finish inside it, with room for a loaded machine, and the locked job's 3 s run too.
LOCK_SECONDS = 10.0
#: The other jobs enqueued while the lock is held.
OTHERS = 20


def enqueue(
    producer: tenantq.Producer, seconds: float, job_id: uuid.UUID | None = None
) -> uuid.UUID:
    future = producer.enqueue("sleepy", tenant="acme", payload={"seconds": seconds}, job_id=job_id)
    return future.result(30).job_id


def done_count(db: psycopg.Connection[Any], job_id: uuid.UUID) -> int:
    row = db.execute(
        "SELECT count(*) FROM test_executions WHERE job_id = %s AND note = 'done'", (job_id,)
    ).fetchone()
    return int(row[0]) if row else 0


def test_locked_jobs_wait_alone_while_the_others_are_served(
    settings: tenantq.Settings, db: psycopg.Connection[Any], database_url: str
) -> None:
    with running_worker(APP, settings, concurrency=8), tenantq.Producer(settings) as producer:
        finished = enqueue(producer, 0.0)
        wait_for(lambda: all_in(db, [finished], {"succeeded"}), timeout=60, what="first job")
        running = enqueue(producer, 3.0)
        wait_for(lambda: all_in(db, [running], {"leased"}), timeout=60, what="a running job")

        with psycopg.connect(psycopg_url(database_url)) as operator:
            operator.execute(
                "SELECT id FROM tenantq_jobs WHERE id = ANY(%s) FOR UPDATE",
                ([finished, running],),
            )
            locked_at = time.monotonic()
            # The finished job's message read again (a producer's retry): its claim meets the
            # lock. Then work for the rest of the lock.
            enqueue(producer, 0.0, job_id=finished)
            others = [enqueue(producer, 0.05) for _ in range(OTHERS)]
            wait_for(
                lambda: all_in(db, others, {"succeeded"}),
                timeout=LOCK_SECONDS - 2,
                what="the other jobs to finish while the lock is held",
            )
            # The locked running job has run; its result waits for the lock, its lease kept.
            wait_for(lambda: done_count(db, running) == 1, timeout=10, what="the job to run")
            assert states(db, [running]) == {running: "leased"}
            assert time.monotonic() - locked_at < LOCK_SECONDS
            time.sleep(max(0.0, locked_at + LOCK_SECONDS - time.monotonic()))
            operator.rollback()

        wait_for(
            lambda: all_in(db, [running], {"succeeded"}), timeout=30, what="the set-aside result"
        )
    jobs = [finished, running, *others]
    assert all_in(db, jobs, {"succeeded"})
    assert {job_id: done_count(db, job_id) for job_id in jobs} == dict.fromkeys(jobs, 1)
    outcomes = db.execute(
        "SELECT outcome, count(*) FROM tenantq_job_attempts WHERE job_id = ANY(%s) "
        "GROUP BY outcome",
        (jobs,),
    ).fetchall()
    assert dict(outcomes) == {"succeeded": len(jobs)}
