"""The job types of the fault-scenario suite (``loadtest/faults.py``), importable by worker
processes as ``fault_app:APP``.

Every handler run that completes writes one row to ``fault_executions`` in the scenario's own
database before it returns: the ledger lives in Postgres, not in a process, so it survives
every crash the suite injects, and a job whose side effect happened twice has two rows (the
duplicate executions the suite counts). The row is keyed by a token minted per run, so a
handler that retries its own insert across a database restart writes it once. The ledger is
written over ``FAULT_LEDGER_URL`` when the suite sets it: the database itself, while the
worker's own connections go through the proxy the faults are injected on.

A failover to a standby that lagged takes the last rows of that ledger with it (they were
committed on the old primary only). Where the suite sets ``FAULT_EXECUTIONS_DIR``, every run
that wrote its row also appends a line to a file of its process there (JSON: run, note, job,
attempt, pid, started, at), which no database fault can take back.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
import uuid

import psycopg
from pydantic import BaseModel, Field

import tenantq

APP = tenantq.App()

#: The ledger, created in each scenario's database by the suite.
LEDGER_TABLE = """
CREATE TABLE IF NOT EXISTS fault_executions (
    run uuid NOT NULL,
    note text NOT NULL,
    job_id uuid NOT NULL,
    attempt int NOT NULL,
    pid int NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (run, note)
)
"""
#: How long a handler keeps trying to write its row while the database is away: longer than
#: any outage the suite injects, so an outage shows up in the worker, not as a failed job.
LEDGER_PATIENCE_SECONDS = 90.0

#: Ledger connections per handler process, shared by its handler threads: one per thread
#: (32 by default, and a worker of several members has a handler process each) would take
#: the database's ``max_connections`` from the workers themselves, and the suite would be
#: measuring that rather than its faults.
LEDGER_CONNECTIONS = 4

_idle: queue.LifoQueue[psycopg.Connection[tuple[object, ...]]] = queue.LifoQueue()
_slots = threading.BoundedSemaphore(LEDGER_CONNECTIONS)


class Work(BaseModel):
    seq: int = Field(ge=0)
    work_ms: float = Field(0.0, ge=0, le=10_000)


def _insert(row: tuple[object, ...]) -> None:
    """One ledger insert on one of this process's few connections (a broken one is closed
    and not given back, so the next insert connects afresh)."""
    with _slots:
        try:
            conn = _idle.get_nowait()
        except queue.Empty:
            url = os.environ.get("FAULT_LEDGER_URL") or os.environ["TENANTQ_DATABASE_URL"]
            conn = psycopg.connect(url, autocommit=True, connect_timeout=3)
        try:
            conn.execute(
                "INSERT INTO fault_executions (run, note, job_id, attempt, pid) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                row,
            )
        except BaseException:
            conn.close()
            raise
        _idle.put(conn)


def record(ctx: tenantq.JobContext, note: str, started: float | None = None) -> None:
    """Write this run's ``note`` row, riding out a database restart (and its line in the
    executions file, when the suite keeps one); ``started``: when the run began (epoch)."""
    run = uuid.uuid4()  # minted once per run: the retries below insert the same row
    deadline = time.monotonic() + LEDGER_PATIENCE_SECONDS
    delay = 0.05
    while True:
        try:
            _insert((run, note, ctx.job_id, ctx.attempt, os.getpid()))
            _append_execution(run, note, ctx, started)
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def _append_execution(
    run: uuid.UUID, note: str, ctx: tenantq.JobContext, started: float | None
) -> None:
    directory = os.environ.get("FAULT_EXECUTIONS_DIR")
    if not directory:
        return
    line = json.dumps(
        {
            "run": str(run),
            "note": note,
            "job": str(ctx.job_id),
            "attempt": ctx.attempt,
            "pid": os.getpid(),
            "started": started,
            "at": time.time(),
        }
    )
    # One write of one short line in append mode: lines of concurrent threads never mix.
    with open(os.path.join(directory, f"executions-{os.getpid()}.jsonl"), "a") as out:
        out.write(line + "\n")


@APP.job("work", max_attempts=8, timeout=120)
def work(ctx: tenantq.JobContext, payload: Work) -> None:
    """Simulated work of the planned duration, then the ledger row."""
    started = time.time()
    time.sleep(payload.work_ms / 1000)
    record(ctx, "done", started)


@APP.job("flaky", max_attempts=8, timeout=120)
def flaky(ctx: tenantq.JobContext, payload: Work) -> None:
    """Fails its first attempt (retried from the second tier, 3 s later), then works: a job
    that is 'retrying', with a retry message on its way, for long enough that the suite can
    act on it."""
    if ctx.attempt == 1:
        raise tenantq.RetryableError("the first attempt fails by design", delay=3.0)
    started = time.time()
    time.sleep(payload.work_ms / 1000)
    record(ctx, "done", started)


@APP.job("poison", max_attempts=3, timeout=30)
def poison(ctx: tenantq.JobContext, payload: Work) -> None:
    """Kills its process, as a segfaulting extension or an OOM kill would; the ``exit`` row
    is the time of the crash."""
    record(ctx, "exit")
    os._exit(1)
