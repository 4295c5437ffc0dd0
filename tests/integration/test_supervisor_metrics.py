"""Guarantee: a worker counts every process it had to start again on its /metrics — handler
processes a handler killed (``tenantq_handler_process_restarts_total``) and member processes
that died (``tenantq_worker_restarts_total``), both read by the crash-loop alert — beside the
members' aggregated families; and a member that dies has its leases freed at once."""

from __future__ import annotations

import os
import signal
from typing import Any

import psycopg
from support import (
    WorkerProcess,
    all_in,
    descendants,
    free_port,
    sample_value,
    scrape,
    wait_for,
)

import tenantq


def counted(port: int, name: str) -> float:
    value = sample_value(scrape(port), name)
    return value or 0.0


def test_restarts_are_counted_and_a_dead_members_leases_freed(
    make_settings: Any, db: psycopg.Connection[Any]
) -> None:
    port = free_port()
    settings = make_settings(
        metrics_port=port, worker={"lease_seconds": 30.0, "heartbeat_interval_seconds": 0.5}
    )
    pool = WorkerProcess(settings, "apps:APP", members=2)
    try:
        wait_for(lambda: _answers(port), timeout=60, what="the supervisor's /metrics")
        assert counted(port, "tenantq_worker_restarts_total") == 0
        with tenantq.Producer(settings) as producer:
            poison = producer.enqueue("poison_exit", tenant="bad", payload={}).result(30).job_id
            good = producer.enqueue("sleepy", tenant="good", payload={}).result(30).job_id
        wait_for(lambda: all_in(db, [poison], {"dead"}), timeout=120, what="the poison dead")
        wait_for(lambda: all_in(db, [good], {"succeeded"}), timeout=60, what="the good job")
        wait_for(
            lambda: counted(port, "tenantq_handler_process_restarts_total") >= 3,
            timeout=30,
            what="three handler process restarts counted",
        )
        assert counted(port, "tenantq_worker_restarts_total") == 0  # no member died
        # A member dies while it holds a lease (a long job): the supervisor frees it at once.
        with tenantq.Producer(settings) as producer:
            long_job = (
                producer.enqueue("uncooperative", tenant="slow", payload={"seconds": 60})
                .result(30)
                .job_id
            )
        wait_for(lambda: all_in(db, [long_job], {"leased"}), timeout=60, what="the long job")
        row = db.execute(
            "SELECT lease_owner FROM tenantq_jobs WHERE id = %s", (long_job,)
        ).fetchone()
        assert row is not None
        member = _member_of(pool.pid, row[0])
        os.kill(member, signal.SIGKILL)
        wait_for(
            lambda: counted(port, "tenantq_worker_restarts_total") >= 1,
            timeout=30,
            what="the member restart counted",
        )
        freed = db.execute(
            "SELECT state::text, attempts, crashes FROM tenantq_jobs WHERE id = %s", (long_job,)
        ).fetchone()
        # Freed (and maybe leased again by the other member): the crash counted, not the
        # attempt.
        assert freed is not None and freed[2] == 1 and freed[1] in (0, 1), freed
        # The children's families reach the same scrape (those with samples: multiprocess).
        assert "# TYPE tenantq_jobs_finished_total counter" in scrape(port)
    finally:
        assert pool.terminate(90) == 0


def _member_of(supervisor: int, worker_id: str) -> int:
    """The pid of the member process whose worker id is ``worker_id``."""
    for pid in descendants(supervisor):
        try:
            command = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if worker_id.encode() in command:
            return pid
    raise AssertionError(f"no member process runs as {worker_id}")


def _answers(port: int) -> bool:
    try:
        return "tenantq_worker_restarts_total" in scrape(port)
    except OSError:
        return False
