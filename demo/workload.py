"""The job types of ``tenantq demo``: email, export and webhook handlers with failures injected
from the payload, as ``tenantq.demo.workload:APP`` (importable by worker subprocesses).

Every failure is decided when the workload is planned (``tenantq.demo.plan``) and written into
the payload, so a job fails the same way on every machine and the demo knows in advance which
jobs must end dead:

* ``timeouts``: the first N attempts raise ``RetryableError`` (a network timeout);
* ``throttles``: the next N attempts raise ``RateLimited(retry_after)`` (an HTTP 429);
* ``permanent``: the job raises ``PermanentError`` (dead at once, dead-lettered);
* ``poison``: the handler kills its process with ``os._exit(1)``. That is the worker's handler
  process, never the group member: the member starts another, pins the crash on the poison
  job (it spends an attempt, ``ProcessCrashed``) and runs the jobs beside it again without
  spending theirs. The poison is dead after ``max_attempts`` crashes.
"""

from __future__ import annotations

import os
import time

from pydantic import BaseModel, Field

from tenantq.app import App
from tenantq.consumer.context import JobContext
from tenantq.errors import PermanentError, RateLimited, RetryableError

#: Exit status of a worker process killed by the poison job (anything but 0 is a crash).
POISON_EXIT_STATUS = 1


class DemoPayload(BaseModel):
    """What a demo job carries: its simulated work and the failures to inject."""

    seq: int = Field(ge=0, description="Position in the planned workload.")
    target: str = Field(description="Recipient, export name or webhook URL.")
    work_ms: float = Field(ge=0, le=10_000, description="Simulated time spent downstream.")
    timeouts: int = Field(0, ge=0, description="Leading attempts that time out.")
    throttles: int = Field(0, ge=0, description="Attempts after those that get a 429.")
    retry_after: float = Field(2.0, gt=0, description="Retry-After of the 429s, seconds.")
    permanent: str | None = Field(None, description="Reason of a permanent failure.")
    poison: bool = Field(False, description="Kill the worker process (a crashing native lib).")


APP = App()


def _run(payload: DemoPayload, attempt: int, downstream: str) -> None:
    if payload.poison:
        # Not an exception: the process vanishes mid-job, as with a segfault in native code.
        os._exit(POISON_EXIT_STATUS)
    if payload.permanent is not None:
        raise PermanentError(payload.permanent)
    if attempt <= payload.timeouts:
        raise RetryableError(f"{downstream}: network timeout after 10s")
    if attempt <= payload.timeouts + payload.throttles:
        raise RateLimited(payload.retry_after, f"{downstream}: HTTP 429 Too Many Requests")
    time.sleep(payload.work_ms / 1000)


@APP.job("email", max_attempts=8, timeout=30)
def send_email(ctx: JobContext, payload: DemoPayload) -> None:
    """Deliver one email through the (simulated) SMTP relay."""
    _run(payload, ctx.attempt, "smtp relay")


@APP.job("export", max_attempts=8, timeout=60, concurrency=8)
def build_export(ctx: JobContext, payload: DemoPayload) -> None:
    """Render one export and upload it to the (simulated) object store."""
    _run(payload, ctx.attempt, "object store")


@APP.job("webhook", max_attempts=8, timeout=30)
def deliver_webhook(ctx: JobContext, payload: DemoPayload) -> None:
    """POST one webhook to a (simulated) customer endpoint."""
    _run(payload, ctx.attempt, payload.target)
