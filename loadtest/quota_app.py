"""The job type of the quota load test (``loadtest/quotas.py``), importable by ``tenantq worker
quota_app:APP``.

One job type, ``work``: the handler notes when its attempt began, sleeps the payload's ``ms``,
and notes when it ended. The notes are the figures' only source (not tenantq's metrics, not
the job rows): one line per note in a file of the handler's own process, in the folder
``QUOTA_TEST_RECORDS`` names, written as it happens (an attempt whose process is killed has a
beginning and no end). No database write: the handler's work is the sleep alone.

    b <job id> <attempt> <tenant> <epoch seconds>     # began
    e <job id> <attempt> <tenant> <epoch seconds>     # ended
"""

from __future__ import annotations

import os
import threading
import time

from pydantic import BaseModel, Field

import tenantq

#: Environment variables the tool sets for its workers (not tenantq settings).
QUEUE_VARIABLE = "QUOTA_TEST_QUEUE"
RECORDS_VARIABLE = "QUOTA_TEST_RECORDS"
QUEUE = os.environ.get(QUEUE_VARIABLE, "default")
JOB_TYPE = "work"

APP = tenantq.App()

_lock = threading.Lock()
_descriptor: int | None = None


class Work(BaseModel):
    ms: float = Field(0.0, ge=0, le=600_000, description="How long the handler sleeps.")


def _note(kind: str, ctx: tenantq.JobContext) -> None:
    global _descriptor
    folder = os.environ.get(RECORDS_VARIABLE)
    if folder is None:
        return
    line = f"{kind} {ctx.job_id} {ctx.attempt} {ctx.tenant} {time.time():.6f}\n".encode()
    with _lock:
        if _descriptor is None:
            path = os.path.join(folder, f"{os.getpid()}.txt")
            _descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(_descriptor, line)


@APP.job(JOB_TYPE, queue=QUEUE, max_attempts=10, timeout=600)
def work(ctx: tenantq.JobContext, payload: Work) -> None:
    """Stand-in for work that holds a slot: a sleep, noted at both ends."""
    _note("b", ctx)
    if payload.ms:
        time.sleep(payload.ms / 1000)
    _note("e", ctx)
