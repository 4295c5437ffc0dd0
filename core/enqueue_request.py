"""One job to enqueue, as a value: what every enqueue path (``Producer``, ``Outbox``, a job
handle, ``tenantq.testing``) is given, checked only when it is prepared for publication."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

__all__ = ["EnqueueOptions", "EnqueueRequest"]


@dataclass(frozen=True, slots=True)
class EnqueueRequest:
    """One job to enqueue; the arguments of ``Producer.enqueue`` as a value."""

    job_type: str
    tenant: str
    payload: Any
    queue: str | None = None
    job_id: uuid.UUID | str | None = None
    run_after: dt.datetime | None = None
    delay: float | dt.timedelta | None = None
    max_attempts: int | None = None
    idempotency_key: str | None = None
    trace_context: Mapping[str, str] | None = None


class EnqueueOptions(TypedDict, total=False):
    """The optional fields of an ``EnqueueRequest``, as keyword arguments of a job handle's
    enqueue methods (each is checked as ``Producer.enqueue`` checks it)."""

    #: The queue to publish to (default: the job type's).
    queue: str | None
    #: The job's id (default: a fresh UUIDv7); enqueueing the same id twice runs it once.
    job_id: uuid.UUID | str | None
    #: Not before this time (timezone-aware).
    run_after: dt.datetime | None
    #: Not before this many seconds from now.
    delay: float | dt.timedelta | None
    #: Attempts before the job is dead (default: the job type's, else the worker's).
    max_attempts: int | None
    #: A key naming the job within its queue: a second enqueue with it names the first job.
    idempotency_key: str | None
    #: Trace headers (``traceparent``, ...) carried to the handler's logs.
    trace_context: Mapping[str, str] | None
