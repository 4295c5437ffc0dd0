"""The worker's spans of attempts (``tenantq.observability.tracing``), made from what it knows
of a job: the context its envelope carries, the trace headers of the copy it read (a replay's),
where it read it, and the attempt's context.

Where the attempt runs (the member's threads, or its handler process) its span is begun and
ended by the runner; an attempt's ``Origin`` travels to the handler process with it. The
member itself ends the spans of attempts whose process died (``crashed``) and says when the
store refused a result (``stale``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tenantq.consumer.context import JobContext
from tenantq.consumer.work import WorkItem
from tenantq.observability.tracing import AttemptSpan, JobTracer, job_tracer
from tenantq.states import Outcome

if TYPE_CHECKING:
    from tenantq.consumer.runner import Task

#: What an attempt's span needs besides its context: (the envelope's trace context, the
#: record's trace headers, topic, partition, offset). A plain tuple: it is pickled per job.
Origin = tuple[dict[str, str], list[tuple[str, bytes]], str, int, int]


def origin_of(item: WorkItem, tracer: JobTracer) -> Origin:
    """Where ``item``'s attempt comes from, for its span."""
    names = tracer.header_names
    headers = [(name, value) for name, value in item.headers if name in names]
    return (item.envelope.trace_context, headers, item.topic, item.partition, item.offset)


def attempt_span(tracer: JobTracer, context: JobContext, origin: Origin) -> AttemptSpan:
    """The span of the attempt ``context`` describes (begun where its handler runs)."""
    trace_context, headers, topic, partition, offset = origin
    return tracer.attempt(
        trace_context,
        headers,
        topic=topic,
        partition=partition,
        offset=offset,
        job_id=str(context.job_id),
        job_type=context.job_type,
        tenant=context.tenant,
        queue=context.queue,
        attempt=context.attempt,
        max_attempts=context.max_attempts,
        replays=context.replays,
    )


def trace_attempts(tasks: Any) -> None:
    """Give each of ``tasks`` (attempts of the member's own ``WorkItem``) its span, when the
    process traces."""
    tracer = job_tracer()
    if tracer is None:
        return
    for task in tasks:
        task.trace = attempt_span(tracer, task.context, origin_of(task.item, tracer))


def trace_crashed(tasks: list[Task], how: str) -> None:
    """The process running ``tasks`` died (``how``): their spans end ``crashed`` here, since
    the process that held them is gone."""
    tracer = job_tracer()
    if tracer is None:
        return
    now = time.monotonic()
    for task in tasks:
        item = task.item
        if not isinstance(item, WorkItem):
            continue
        span = attempt_span(tracer, task.context, origin_of(item, tracer))
        span.end(
            Outcome.CRASHED.value,
            error_class="ProcessCrashed",
            error_message=how,
            started_seconds_ago=max(0.0, now - task.started),
        )


def trace_stale(item: WorkItem) -> None:
    """The store refused the result of ``item``'s attempt (it no longer held the lease)."""
    tracer = job_tracer()
    if tracer is None:
        return
    tracer.settled_stale(
        item.envelope.trace_context,
        topic=item.topic,
        job_id=str(item.job_id),
        attempt=item.lease.attempt if item.lease is not None else 0,
    )
