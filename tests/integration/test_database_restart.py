"""Guarantee: a Postgres restart is weather, not death. Postgres killed with -9 and started
again while jobs flow through ``tenantq worker`` processes: no worker process exits, and every
acknowledged job ends succeeded without anything restarted by hand.

Runs on a private stack (``private_stack`` marker): killing the shared dev stack's Postgres
would break every other test running against it."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from private_stack import PrivateStack
from support import (
    LoggedWorkerProcess,
    assert_alive,
    caught_up,
    settings_environment,
    states,
    wait_for,
    while_alive,
)

import tenantq
from tenantq.settings import QueueSettings
from tenantq.topic_admin import ensure_topics
from tenantq.topics import consumer_group

pytestmark = pytest.mark.private_stack

JOBS = 400
WORKERS = 2


def test_workers_ride_out_a_postgres_kill_9(private_stack: PrivateStack, tmp_path: Path) -> None:
    settings = private_stack.settings(
        "restart",
        queues={"default": QueueSettings(partitions=4, retry_delays_seconds=(1.0, 3.0, 10.0))},
    )
    database_url = settings.require_database_url()
    ensure_topics(settings)
    workers = [
        LoggedWorkerProcess(
            settings_environment(settings),
            "apps:APP",
            "--concurrency",
            "8",
            log_path=tmp_path / f"worker{n}.log",
        )
        for n in range(WORKERS)
    ]
    acknowledged: list[uuid.UUID] = []
    producing = threading.Thread(
        target=_produce, args=(settings, acknowledged), name="producer", daemon=True
    )
    try:
        with psycopg.connect(database_url, autocommit=True) as probe:
            count = _counter(probe)
            producing.start()
            wait_for(
                while_alive(lambda: count("succeeded") >= 40, *workers),
                timeout=90,
                what="jobs flowing before the kill",
            )
        private_stack.kill_postgres()
        killed = time.monotonic()
        private_stack.restart()
        back = time.monotonic() - killed
        producing.join(120)
        assert not producing.is_alive(), "the producer did not finish"
        assert len(acknowledged) == JOBS
        with psycopg.connect(database_url, autocommit=True) as db:
            count = _counter(db)
            try:
                wait_for(
                    while_alive(lambda: count("succeeded") == JOBS, *workers),
                    timeout=120,
                    what=f"all {JOBS} jobs succeeded after the restart",
                )
            except AssertionError as stuck:
                # Seen rarely (the kill during the group's first rebalance): keep what the
                # next occurrence needs to be understood; pytest removes the workers' logs.
                by_state = db.execute(
                    "SELECT state::text, count(*) FROM tenantq_jobs GROUP BY 1"
                ).fetchall()
                logs = "\n".join(worker.output()[-6000:] for worker in workers)
                raise AssertionError(f"{stuck}; job states {by_state}\n{logs}") from None
            recovered = time.monotonic() - killed
            assert_alive(*workers)
            leased = count("leased")
            wrong = [item for item in states(db, acknowledged).items() if item[1] != "succeeded"]
            ran = db.execute(
                "SELECT count(DISTINCT job_id) FROM test_executions WHERE job_id = ANY(%s) "
                "AND note = 'done'",
                (acknowledged,),
            ).fetchone()
        group = consumer_group(settings.topic_prefix, "default")
        wait_for(
            while_alive(
                lambda: caught_up(settings, group, f"{settings.topic_prefix}.default"), *workers
            ),
            timeout=30,
            what="offsets committed to the end",
        )
    finally:
        statuses = [worker.terminate(60) for worker in workers]
    assert statuses == [0] * WORKERS, "\n".join(w.output()[-3000:] for w in workers)
    assert not wrong, f"acknowledged jobs not succeeded: {wrong[:10]}"
    assert leased == 0
    assert ran is not None and ran[0] == JOBS
    print(
        f"postgres kill -9: back in {back:.1f}s; all {JOBS} jobs succeeded {recovered:.1f}s "
        f"after the kill; no worker restarted"
    )


def _counter(db: psycopg.Connection[Any]) -> Any:
    def count(state: str) -> int:
        row = db.execute(
            "SELECT count(*) FROM tenantq_jobs WHERE state = %s::job_state", (state,)
        ).fetchone()
        return int(row[0]) if row else 0

    return count


def _produce(settings: tenantq.Settings, acknowledged: list[uuid.UUID]) -> None:
    """``JOBS`` jobs of 17 tenants at about 80 a second, so some arrive during the outage."""
    with tenantq.Producer(settings) as producer:
        for start in range(0, JOBS, 20):
            futures = producer.enqueue_many(
                [
                    {"job_type": "sleepy", "tenant": f"t{n % 17}", "payload": {"seconds": 0.02}}
                    for n in range(start, start + 20)
                ]
            )
            acknowledged.extend(future.result(60).job_id for future in futures)
            time.sleep(0.25)


def test_a_worker_past_its_outage_limit_exits_with_status_3(
    private_stack: PrivateStack, tmp_path: Path
) -> None:
    """``database_outage_limit_seconds``: past it, the worker gives up (status 3, one log line
    saying how long the database was away) instead of waiting on."""
    settings = private_stack.settings(
        "limit",
        queues={"default": QueueSettings(partitions=2)},
        worker={"database_outage_limit_seconds": 3},
    )
    ensure_topics(settings)
    worker = LoggedWorkerProcess(
        settings_environment(settings), "apps:APP", log_path=tmp_path / "worker.log"
    )
    try:
        with tenantq.Producer(settings) as producer:
            job = producer.enqueue("sleepy", tenant="acme", payload={"seconds": 0.01}).result(60)
        with psycopg.connect(settings.require_database_url(), autocommit=True) as db:
            wait_for(
                while_alive(lambda: _counter(db)("succeeded") == 1, worker),
                timeout=60,
                what=f"job {job.job_id} done before the kill",
            )
        private_stack.kill_postgres()
        status = worker.process.wait(90)
    finally:
        private_stack.restart()
        if worker.alive():
            worker.kill()
    assert status == 3, worker.output()[-3000:]
    assert "database unreachable for" in worker.output()
