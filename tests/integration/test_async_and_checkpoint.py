"""Guarantee: `async def` handlers run on the worker's event loop; progress saved with
ctx.checkpoint() is what the next attempt reads as ctx.progress; a deadlock raised by a
handler is retried in place and does not spend an attempt."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from support import all_in, running_worker, wait_for

import tenantq


class Deadlock(Exception):
    """What psycopg raises for SQLSTATE 40P01."""

    sqlstate = "40P01"


def test_async_checkpoint_and_transient_retry(
    settings: tenantq.Settings, db: psycopg.Connection[Any]
) -> None:
    app = tenantq.App(settings)
    seen_progress: list[Any] = []
    deadlocks = {"left": 2}

    @app.job("async_export", max_attempts=3)
    async def async_export(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        await asyncio.sleep(0.01)
        seen_progress.append(ctx.progress)
        if ctx.attempt == 1:
            assert ctx.checkpoint({"page": 7})
            raise tenantq.RetryableError("upstream hiccup", delay=0.5)

    @app.job("db_writer", max_attempts=2)
    def db_writer(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        if deadlocks["left"]:
            deadlocks["left"] -= 1
            raise Deadlock("deadlock detected")

    with tenantq.Producer(settings, app) as producer:
        export = producer.enqueue("async_export", tenant="acme", payload={}).result(30).job_id
        writer = producer.enqueue("db_writer", tenant="acme", payload={}).result(30).job_id
    with running_worker(app, settings):
        wait_for(lambda: all_in(db, [export, writer], {"succeeded"}), timeout=60, what="done")
    assert seen_progress == [None, {"page": 7}]
    rows = dict(
        db.execute(
            "SELECT job_type, attempts FROM tenantq_jobs WHERE id = ANY(%s)", ([export, writer],)
        ).fetchall()
    )
    assert rows == {"async_export": 2, "db_writer": 1}
    assert deadlocks["left"] == 0
