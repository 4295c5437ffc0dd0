"""Guarantee: a job canceled before any worker sees it never runs; a running job sees the
cancellation through its context and ends canceled."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from support import all_in, running_worker, wait_for

import tenantq
from tenantq.store.engine import connect
from tenantq.store.job_admin import cancel_job


def test_cancel_before_and_during_a_run(make_settings: Any, db: psycopg.Connection[Any]) -> None:
    settings = make_settings()
    app = tenantq.App(settings)
    ran: list[uuid.UUID] = []

    @app.job("cooperative", max_attempts=3, timeout=60)
    def cooperative(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        ran.append(ctx.job_id)
        while not ctx.wait_cancelled(0.05):
            pass

    with tenantq.Producer(settings, app) as producer:
        early = producer.enqueue("cooperative", tenant="acme", payload={}).result(30).job_id
        with connect(settings, autocommit=True) as connection:
            assert cancel_job(connection, early, "default") == "canceled"
        late = producer.enqueue("cooperative", tenant="acme", payload={}).result(30).job_id
    with running_worker(app, settings):
        wait_for(lambda: all_in(db, [late], {"leased"}), timeout=60, what="late job running")
        with connect(settings, autocommit=True) as connection:
            assert cancel_job(connection, late, "default") == "leased"
        wait_for(lambda: all_in(db, [late], {"canceled"}), timeout=30, what="late canceled")
    assert ran == [late]
    assert all_in(db, [early], {"canceled"})
    row = db.execute(
        "SELECT outcome FROM tenantq_job_attempts WHERE job_id = %s", (late,)
    ).fetchall()
    assert row == [("canceled",)]
