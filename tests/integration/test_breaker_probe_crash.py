"""Guarantee: a job that ends without its handler's answer gives its dependency's permit
back. Here the half-open breaker's only probe kills the handler process: the crash counts
as the probe's failure, the breaker opens again, and once the open period has passed the
next job probes and closes it. Before, the probe's permit stayed out for good and every
later job of the dependency was deferred as "dependency busy" until the worker restarted."""

from __future__ import annotations

from typing import Any

import psycopg
from support import WorkerProcess, all_in, wait_for

import tenantq


def test_a_probe_that_kills_its_process_leaves_the_breaker_usable(
    settings: tenantq.Settings, db: psycopg.Connection[Any]
) -> None:
    pool = WorkerProcess(settings, "apps:APP", "--concurrency", "1")
    try:
        with tenantq.Producer(settings) as producer:
            failing = [
                producer.enqueue("ledger_call", tenant=f"f{i}", payload={"n": 1}).result(30).job_id
                for i in range(2)
            ]
        wait_for(lambda: all_in(db, failing, {"dead"}), timeout=60, what="failing calls dead")
        # Two of two calls failed: the breaker is open. The next call to run is its probe.
        with tenantq.Producer(settings) as producer:
            probe = producer.enqueue("ledger_call", tenant="p", payload={"n": 2}).result(30).job_id
        wait_for(lambda: all_in(db, [probe], {"dead"}), timeout=90, what="crashing probe dead")
        with tenantq.Producer(settings) as producer:
            healthy = [
                producer.enqueue("ledger_call", tenant=f"h{i}", payload={"n": 0}).result(30).job_id
                for i in range(3)
            ]
        wait_for(lambda: all_in(db, healthy, {"succeeded"}), timeout=60, what="healthy calls")
    finally:
        assert pool.terminate(90) == 0
    notes = dict(
        db.execute(
            "SELECT note, count(*) FROM test_executions WHERE job_id = ANY(%s) GROUP BY note",
            (failing + [probe] + healthy,),
        ).fetchall()
    )
    assert notes["failed"] == 2 and notes["done"] == 3 and notes["exit"] >= 1
    # Opened by two failures, the breaker closes only on a success: the crashing job was
    # the half-open probe, and its crash is what it died of.
    reasons = {
        error_class
        for (error_class,) in db.execute(
            "SELECT error_class FROM tenantq_job_attempts WHERE job_id = %s", (probe,)
        ).fetchall()
    }
    assert reasons & {"ProcessCrashed", "PoisonJob"}, reasons
