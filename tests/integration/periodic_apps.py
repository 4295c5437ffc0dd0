"""The app of the background-service scenarios, importable by ``tenantq worker`` processes as
``periodic_apps:APP``: a job type that records each run in ``test_executions``, a 2-second
schedule whose name comes from ``TEST_PERIODIC_NAME`` (one per test run, the schedule table
being shared by the session)."""

from __future__ import annotations

import os
from typing import Any

import psycopg

import tenantq

APP = tenantq.App()


@APP.job("beat", max_attempts=3)
def beat(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
    with psycopg.connect(os.environ["TENANTQ_DATABASE_URL"], autocommit=True) as conn:
        conn.execute(
            "INSERT INTO test_executions (job_id, attempt, pid, note) VALUES (%s, %s, %s, %s)",
            (ctx.job_id, ctx.attempt, os.getpid(), str(payload.get("source", ""))),
        )


if os.environ.get("TEST_PERIODIC_NAME"):
    APP.periodic(
        os.environ["TEST_PERIODIC_NAME"],
        job_type="beat",
        tenant="ops",
        payload={"source": "periodic"},
        every=2,
    )
