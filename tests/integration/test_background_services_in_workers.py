"""Guarantee: the background services run inside every `tenantq worker`. With two worker
processes of one app: a 2-second schedule makes exactly one job per tick, each run once, and
a job enqueued through the outbox (no relay of its own) is published by a worker's relay and
runs once."""

from __future__ import annotations

import datetime as dt
import uuid
from collections import Counter
from typing import Any

import psycopg
from support import WorkerProcess, all_in, wait_for

import tenantq
from tenantq.store.engine import psycopg_url

#: Ticks (2 s apart) the two workers' schedulers make before the workers stop.
TICKS = 5


def _ticks_succeeded(db: psycopg.Connection[Any], name: str) -> int:
    row = db.execute(
        "SELECT count(*) FROM tenantq_jobs WHERE idempotency_key LIKE %s AND state = 'succeeded'",
        (f"periodic:{name}:%",),
    ).fetchone()
    return int(row[0]) if row else 0


def test_two_workers_schedule_and_relay(
    settings: tenantq.Settings, db: psycopg.Connection[Any]
) -> None:
    name = f"beat-{uuid.uuid4().hex[:8]}"
    environment = {"TEST_PERIODIC_NAME": name}
    workers = [WorkerProcess(settings, "periodic_apps:APP", env=environment) for _ in range(2)]
    try:
        app = tenantq.App(settings)
        app.job("beat", max_attempts=3)(lambda ctx, payload: None)
        with (
            tenantq.Outbox(app) as outbox,
            psycopg.connect(psycopg_url(settings.require_database_url())) as conn,
        ):
            sent = outbox.enqueue(conn, "beat", tenant="acme", payload={"source": "outbox"})
        wait_for(lambda: all_in(db, [sent.job_id], {"succeeded"}), timeout=60, what="outbox job")
        # Ticks enough for the two schedulers to race on several of them.
        wait_for(lambda: _ticks_succeeded(db, name) >= TICKS, timeout=60, what=f"{TICKS} ticks run")
    finally:
        codes = [worker.terminate(60) for worker in workers]
    assert codes == [0, 0], [worker.output()[-3000:] for worker in workers]

    prefix = f"periodic:{name}:"
    rows = db.execute(
        "SELECT id, idempotency_key, state::text FROM tenantq_jobs WHERE idempotency_key LIKE %s",
        (prefix + "%",),
    ).fetchall()
    ticks = sorted(
        dt.datetime.fromisoformat(key[len(prefix) :].replace("Z", "+00:00")) for _, key, _ in rows
    )
    assert len(ticks) >= TICKS, ticks
    assert all((b - a) == dt.timedelta(seconds=2) for a, b in zip(ticks, ticks[1:], strict=False))
    finished = [job_id for job_id, _, state in rows if state == "succeeded"]
    assert len(finished) >= len(rows) - 1  # the last tick may be cut by the shutdown
    runs = Counter(
        row[0]
        for row in db.execute(
            "SELECT job_id FROM test_executions WHERE job_id = ANY(%s)",
            ([job_id for job_id, _, _ in rows] + [sent.job_id],),
        ).fetchall()
    )
    assert runs[sent.job_id] == 1
    assert all(runs[job_id] == 1 for job_id in finished), runs
