"""Guarantee: a supervised pool counts every worker process it had to start again on its own
/metrics (``tenantq_worker_restarts_total``, which the crash-loop alert reads), beside the
children's aggregated families."""

from __future__ import annotations

from typing import Any

import psycopg
import tenantq
from support import WorkerProcess, all_in, free_port, sample_value, scrape, wait_for


def restarts(text: str) -> float:
    value = sample_value(text, "tenantq_worker_restarts_total")
    assert value is not None, "tenantq_worker_restarts_total is not exported"
    return value


def test_supervisor_counts_restarts_of_crashed_members(
    make_settings: Any, db: psycopg.Connection[Any]
) -> None:
    port = free_port()
    settings = make_settings(
        metrics_port=port,
        worker={"lease_seconds": 2.0, "heartbeat_interval_seconds": 0.5},
    )
    pool = WorkerProcess(settings, "apps:APP", "--processes", "2")
    try:
        wait_for(lambda: _answers(port), timeout=60, what="the supervisor's /metrics")
        assert restarts(scrape(port)) == 0
        with tenantq.Producer(settings) as producer:
            poison = producer.enqueue("poison_exit", tenant="bad", payload={}).result(30).job_id
            good = producer.enqueue("sleepy", tenant="good", payload={}).result(30).job_id
        wait_for(lambda: all_in(db, [poison], {"dead"}), timeout=120, what="the poison dead")
        wait_for(lambda: all_in(db, [good], {"succeeded"}), timeout=60, what="the good job")
        crashes = db.execute(
            "SELECT count(*) FROM test_executions WHERE job_id = %s", (poison,)
        ).fetchone()
        assert crashes is not None and crashes[0] >= 1
        wait_for(lambda: restarts(scrape(port)) >= crashes[0], timeout=30, what="restarts counted")
        # The children's families reach the same scrape (those with samples: multiprocess).
        wait_for(
            lambda: 'outcome="succeeded"' in scrape(port), timeout=30, what="children's samples"
        )
        assert "# TYPE tenantq_jobs_finished_total counter" in scrape(port)
    finally:
        assert pool.terminate(90) == 0


def _answers(port: int) -> bool:
    try:
        return "tenantq_worker_restarts_total" in scrape(port)
    except OSError:
        return False
