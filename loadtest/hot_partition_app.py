"""The job type of the hot-partition load test (``loadtest/hot_partition.py``), importable by
``tenantq worker hot_partition_app:APP``.

One job type, ``nap``: the handler sleeps for the payload's ``ms`` (50 by default) and records
nothing. Every time the tool reports comes from the job's row (``enqueued_at``, ``started_at``),
so the handler adds no database load of its own next to the claims being measured.

Only when the tool cross-checks that ``started_at`` (the claim) is when the handler really
starts (``--handler-starts``) does the handler note its start: one line per job in a file of
its own process (``HOT_PARTITION_STARTS_DIR``), never the database.

The queue is the run's own (``HOT_PARTITION_QUEUE``, set by the tool for its workers): a queue
name per run keeps the run's job rows and placement rows (the hot lane's) apart from every
other user of a shared database.
"""

from __future__ import annotations

import os
import threading
import time
from typing import IO

from pydantic import BaseModel, Field

import tenantq

#: Environment variables set by the tool (not ``TENANTQ_*``: they are not tenantq settings).
QUEUE_VARIABLE = "HOT_PARTITION_QUEUE"
STARTS_VARIABLE = "HOT_PARTITION_STARTS_DIR"
QUEUE = os.environ.get(QUEUE_VARIABLE, "default")
JOB_TYPE = "nap"

APP = tenantq.App()

_starts_dir = os.environ.get(STARTS_VARIABLE)
_starts_lock = threading.Lock()
_starts_file: IO[str] | None = None


class Nap(BaseModel):
    ms: float = Field(50.0, ge=0, le=10_000, description="How long the handler sleeps.")


def _note_start(job_id: object, at: float) -> None:
    """``<job id> <epoch seconds>`` in this process's file, a line at a time (so a crash
    loses at most the line being written)."""
    global _starts_file
    assert _starts_dir is not None
    with _starts_lock:
        if _starts_file is None:
            path = os.path.join(_starts_dir, f"{os.getpid()}.txt")
            _starts_file = open(path, "a", buffering=1)  # noqa: SIM115 - open for the process
        _starts_file.write(f"{job_id} {at:.6f}\n")


@APP.job(JOB_TYPE, queue=QUEUE)
def nap(ctx: tenantq.JobContext, payload: Nap) -> None:
    """Stand-in for I/O-bound work (a call downstream): a sleep, holding one slot."""
    if _starts_dir is not None:
        _note_start(ctx.job_id, time.time())
    time.sleep(payload.ms / 1000)
