"""Guarantee: ``tenantq worker app:app`` without ``--processes`` (one member per CPU, at most
four) survives a handler that kills its process (``os._exit(1)``, as a segfault or an OOM
kill would): the process the user started stays up, the poison job ends dead after its
attempts, and the other jobs keep running, retries of other jobs included."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psycopg
from support import (
    LoggedWorkerProcess,
    assert_alive,
    count_of,
    settings_environment,
    short_leases,
    wait_for,
    wait_for_states,
)

import tenantq


def test_a_handler_that_exits_does_not_end_the_default_worker(
    make_settings: Any, db: psycopg.Connection[Any], tmp_path: Path
) -> None:
    settings = make_settings(worker=short_leases())
    worker = LoggedWorkerProcess(
        settings_environment(settings), "apps:APP", log_path=tmp_path / "worker.log", members=None
    )
    try:
        with tenantq.Producer(settings) as producer:
            poison = producer.enqueue("poison_exit", tenant="bad", payload={}).result(30).job_id
            flaky = [
                producer.enqueue("flaky", tenant=f"flaky{i}", payload={}).result(30).job_id
                for i in range(4)
            ]
            good = [
                producer.enqueue("sleepy", tenant=f"good{i}", payload={"seconds": 0.05})
                .result(30)
                .job_id
                for i in range(12)
            ]
        wait_for(
            lambda: _runs(db, poison, "exit") >= 1, timeout=60, what="the poison job's first crash"
        )
        wait_for_states(
            db,
            [poison],
            {"dead"},
            worker,
            timeout=120,
            what="the poison job dead after its attempts",
        )
        wait_for_states(
            db,
            [*flaky, *good],
            {"succeeded"},
            worker,
            timeout=60,
            what="the other jobs and their retries",
        )
        # Jobs enqueued after the crashes run too, a retry among them.
        with tenantq.Producer(settings) as producer:
            later = [
                producer.enqueue("sleepy", tenant="later", payload={}).result(30).job_id,
                producer.enqueue("flaky", tenant="later-flaky", payload={}).result(30).job_id,
            ]
        wait_for_states(
            db, later, {"succeeded"}, worker, timeout=60, what="jobs enqueued after the crashes"
        )
        assert_alive(worker)
        members = db.execute(
            "SELECT count(*) FROM tenantq_workers WHERE deployment = %s AND stopped_at IS NULL",
            (settings.topic_prefix,),
        ).fetchone()
        assert members == (min(len(os.sched_getaffinity(0)), 4),)
    finally:
        status = worker.terminate(90)
    assert status == 0, worker.output()[-4000:]
    crashes = _runs(db, poison, "exit")
    retried = db.execute(
        "SELECT count(*) FROM tenantq_jobs WHERE id = ANY(%s) AND attempts >= 2",
        ([*flaky, later[1]],),
    ).fetchone()
    print(f"default worker: survived {crashes} crashes of the poison job")
    assert crashes >= 1
    assert retried is not None and retried[0] == len(flaky) + 1


def _runs(db: psycopg.Connection[Any], job_id: Any, note: str) -> int:
    return count_of(
        db,
        "SELECT count(*) FROM test_executions WHERE job_id = %s AND note = %s",
        (job_id, note),
    )
