"""The job type of the hot-partition load test (``loadtest/hot_partition.py``), importable by
``tenantq worker hot_partition_app:APP``.

One job type, ``nap``: the handler sleeps for the payload's ``ms`` (50 by default) and records
nothing. Every time the tool reports comes from the job's row (``enqueued_at``, ``started_at``),
so the handler adds no database load of its own next to the claims being measured.

The queue is the run's own (``HOT_PARTITION_QUEUE``, set by the tool for its workers): a queue
name per run keeps the run's job rows and placement rows (the hot lane's) apart from every
other user of a shared database.
"""

from __future__ import annotations

import os
import time

import tenantq
from pydantic import BaseModel, Field

#: The environment variable naming the run's queue (not ``TENANTQ_*``: not a tenantq setting).
QUEUE_VARIABLE = "HOT_PARTITION_QUEUE"
QUEUE = os.environ.get(QUEUE_VARIABLE, "default")
JOB_TYPE = "nap"

APP = tenantq.App()


class Nap(BaseModel):
    ms: float = Field(50.0, ge=0, le=10_000, description="How long the handler sleeps.")


@APP.job(JOB_TYPE, queue=QUEUE)
def nap(ctx: tenantq.JobContext, payload: Nap) -> None:
    """Stand-in for I/O-bound work (a call downstream): a sleep, holding one slot."""
    time.sleep(payload.ms / 1000)
