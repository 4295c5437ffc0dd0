"""Guarantee: a graceful shutdown finishes running jobs within the drain window; jobs still
running at its deadline are released without consuming an attempt and without going to the
DLQ, and the next worker runs them."""

from __future__ import annotations

import time
from typing import Any

import psycopg
from apps import APP
from support import all_in, running_worker, wait_for

import tenantq


def test_drain_finishes_running_jobs(make_settings: Any, db: psycopg.Connection[Any]) -> None:
    settings = make_settings(worker={"drain_seconds": 30.0})
    with tenantq.Producer(settings) as producer:
        futures = [
            producer.enqueue("sleepy", tenant=f"t{i}", payload={"seconds": 2.0}) for i in range(4)
        ]
        job_ids = [future.result(30).job_id for future in futures]
    with running_worker(APP, settings, concurrency=4) as worker:
        wait_for(lambda: all_in(db, job_ids, {"leased"}), timeout=60, what="all running")
        time.sleep(0.3)
        started = time.monotonic()
    # leaving the block stopped the worker gracefully
    assert time.monotonic() - started < 30
    assert worker.stats["succeeded"] == 4
    rows = db.execute(
        "SELECT state::text, attempts FROM tenantq_jobs WHERE id = ANY(%s)", (job_ids,)
    ).fetchall()
    assert rows == [("succeeded", 1)] * 4


def test_drain_deadline_releases_without_using_an_attempt(
    make_settings: Any, db: psycopg.Connection[Any]
) -> None:
    settings = make_settings(worker={"drain_seconds": 1.0})
    with tenantq.Producer(settings) as producer:
        futures = [
            producer.enqueue("uncooperative", tenant=f"t{i}", payload={"seconds": 4.0})
            for i in range(2)
        ]
        job_ids = [future.result(30).job_id for future in futures]
    with running_worker(APP, settings, concurrency=2):
        wait_for(lambda: all_in(db, job_ids, {"leased"}), timeout=60, what="all running")
    rows = db.execute(
        "SELECT state::text, attempts, lease_owner FROM tenantq_jobs WHERE id = ANY(%s)",
        (job_ids,),
    ).fetchall()
    assert rows == [("runnable", 0, None)] * 2
    outcomes = db.execute(
        "SELECT outcome FROM tenantq_job_attempts WHERE job_id = ANY(%s)", (job_ids,)
    ).fetchall()
    assert outcomes == [("released",)] * 2
    with running_worker(APP, settings, concurrency=2):
        wait_for(lambda: all_in(db, job_ids, {"succeeded"}), timeout=60, what="rerun")
    rows = db.execute("SELECT attempts FROM tenantq_jobs WHERE id = ANY(%s)", (job_ids,)).fetchall()
    assert rows == [(1,)] * 2
