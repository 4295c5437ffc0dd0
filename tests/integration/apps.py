"""Job types the integration scenarios run, importable by worker subprocesses as
``apps:APP``. Handlers record each execution in ``test_executions`` so tests can count
duplicate runs across processes."""

from __future__ import annotations

import os
import time
from typing import Any

import psycopg
from pydantic import BaseModel

import tenantq

APP = tenantq.App()
#: Where executions are recorded when the worker runs in the test's own process.
RECORD_URL: str | None = None


class Work(BaseModel):
    seconds: float = 0.0
    n: int = 0


def record(ctx: tenantq.JobContext, note: str = "") -> None:
    # A worker in the test's process records where its settings point (the environment may
    # name the server's own database); a worker process is given its database by variable.
    # ``TEST_RECORD_DATABASE_URL``: the database itself, for a worker whose own connections
    # go through a proxy that holds or cuts them.
    url = (
        os.environ.get("TEST_RECORD_DATABASE_URL")
        or RECORD_URL
        or os.environ.get("TENANTQ_DATABASE_URL")
    )
    assert url, "no database to record executions in"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO test_executions (job_id, attempt, pid, note) VALUES (%s, %s, %s, %s)",
            (ctx.job_id, ctx.attempt, os.getpid(), note),
        )


@APP.job("sleepy", max_attempts=5, timeout=120)
def sleepy(ctx: tenantq.JobContext, payload: Work) -> None:
    """Sleeps ``seconds`` in small steps (cooperating with cancellation), then records."""
    end = time.monotonic() + payload.seconds
    while time.monotonic() < end:
        if ctx.cancelled:
            ctx.raise_if_cancelled()
        time.sleep(min(0.05, max(0.0, end - time.monotonic())))
    record(ctx, "done")


@APP.job("uncooperative", max_attempts=5, timeout=120)
def uncooperative(ctx: tenantq.JobContext, payload: Work) -> None:
    """Sleeps without looking at cancellation, then records."""
    time.sleep(payload.seconds)
    record(ctx, "done")


def _unused(_: Any) -> None:  # keeps the module importable without side effects
    return None


@APP.job("poison_exit", max_attempts=3, timeout=30)
def poison_exit(ctx: tenantq.JobContext, payload: Work) -> None:
    """Kills its own process, as a segfaulting extension or an OOM kill would."""
    record(ctx, "exit")
    os._exit(1)


@APP.job("poison_hang", max_attempts=2, timeout=1.5)
def poison_hang(ctx: tenantq.JobContext, payload: Work) -> None:
    """Never returns (and ignores cancellation): only the timeout can end the attempt."""
    record(ctx, "hang")
    time.sleep(3600)


@APP.job("flaky", max_attempts=5, timeout=30)
def flaky(ctx: tenantq.JobContext, payload: Work) -> None:
    """Fails its first attempt (a retry through the tiers), succeeds on the next."""
    if ctx.attempt == 1:
        record(ctx, "failed")
        raise tenantq.RetryableError("first attempt fails", delay=0.5)
    record(ctx, "done")


@APP.job("marker", max_attempts=5, timeout=120)
def marker(ctx: tenantq.JobContext, payload: Work) -> None:
    """Records when it starts (``start``, database clock) and when it is done: the start rows
    tell how long a job waited behind a crash."""
    record(ctx, "start")
    end = time.monotonic() + payload.seconds
    while time.monotonic() < end:
        ctx.raise_if_cancelled()
        time.sleep(min(0.05, max(0.0, end - time.monotonic())))
    record(ctx, "done")


@APP.job("poison_after", max_attempts=3, timeout=30)
def poison_after(ctx: tenantq.JobContext, payload: Work) -> None:
    """Kills its own process ``seconds`` after starting, so that other jobs are running in
    that process when it dies; the ``exit`` row carries the time of the crash."""
    time.sleep(payload.seconds)
    record(ctx, "exit")
    os._exit(1)


@APP.job("refused", max_attempts=3, timeout=30)
def refused(ctx: tenantq.JobContext, payload: Work) -> None:
    """Fails permanently: dead at its first attempt, in the DLQ with this reason."""
    record(ctx, "refused")
    raise tenantq.PermanentError("refused on purpose")


#: A downstream dependency whose breaker opens after two failed calls, for one second.
APP.dependency("ledger-api", failure_rate=0.5, minimum_calls=2, window=2, open_seconds=1.0)


@APP.job("ledger_call", max_attempts=1, timeout=30, dependencies=["ledger-api"])
def ledger_call(ctx: tenantq.JobContext, payload: Work) -> None:
    """A call to ``ledger-api``: ``n`` 0 succeeds, 1 fails, 2 kills the handler's process."""
    if payload.n == 1:
        record(ctx, "failed")
        raise ConnectionError("ledger-api 503")
    if payload.n == 2:
        record(ctx, "exit")
        os._exit(1)
    record(ctx, "done")
