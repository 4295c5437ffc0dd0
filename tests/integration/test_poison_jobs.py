"""Guarantee: a handler that kills its process (os._exit) and a handler that hangs past its
timeout each end dead after max attempts (attempts are counted at lease time), and the
worker pool recovers and keeps running other jobs."""

from __future__ import annotations

from typing import Any

import psycopg
from support import WorkerProcess, all_in, short_leases, wait_for

import tenantq


def test_exit_and_hang_end_dead_and_the_pool_recovers(
    make_settings: Any, db: psycopg.Connection[Any]
) -> None:
    settings = make_settings(worker=short_leases())
    with tenantq.Producer(settings) as producer:
        exit_id = producer.enqueue("poison_exit", tenant="bad", payload={}).result(30).job_id
        hang_id = producer.enqueue("poison_hang", tenant="bad", payload={}).result(30).job_id
        good = [
            producer.enqueue("sleepy", tenant=f"good{i}", payload={"seconds": 0.01})
            .result(30)
            .job_id
            for i in range(20)
        ]
    pool = WorkerProcess(settings, "apps:APP", members=2)
    try:
        wait_for(lambda: all_in(db, [exit_id, hang_id], {"dead"}), timeout=150, what="poison dead")
        wait_for(lambda: all_in(db, good, {"succeeded"}), timeout=60, what="good jobs")
        with tenantq.Producer(settings) as producer:
            after = producer.enqueue("sleepy", tenant="later", payload={}).result(30).job_id
        wait_for(lambda: all_in(db, [after], {"succeeded"}), timeout=60, what="pool recovered")
    finally:
        assert pool.terminate(90) == 0
    rows = dict(
        db.execute(
            "SELECT job_type, attempts FROM tenantq_jobs WHERE id = ANY(%s)", ([exit_id, hang_id],)
        ).fetchall()
    )
    assert rows == {"poison_exit": 3, "poison_hang": 2}
    runs = dict(
        db.execute(
            "SELECT note, count(*) FROM test_executions WHERE job_id = ANY(%s) GROUP BY note",
            ([exit_id, hang_id],),
        ).fetchall()
    )
    # os._exit ran once per attempt: each death was pinned on it and spent its attempt.
    assert runs["exit"] == 3
    # The hang ran once per attempt, plus once more each time the other job killed the
    # handler process under it: those runs were not its fault and spent no attempt.
    assert 2 <= runs["hang"] <= 2 + runs["exit"]
