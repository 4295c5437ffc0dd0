"""The span of a publishing call (``enqueue``, ``enqueue_many``, ``enqueue_batch``), when the
process traces (``tenantq.observability.tracing``).

One span per call, not one per job: a span costs the SDK about as much as ten jobs of
``enqueue_many`` (``loadtest/producer_bench.py --tracing``), so a span per job would make a
traced batch several times slower. The call's span context goes into every envelope of the
call, so each job's attempts are children of it; a call of one job (``enqueue``) names the
job's id, and a batch the attributes all its jobs share and their count. The job id, tenant
and type of each job are on its attempt spans.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tenantq.enqueue_request import EnqueueRequest
from tenantq.observability.tracing import Publication, PublicationScope, job_tracer
from tenantq.producer.request import PreparedJobs


def start_publication() -> Publication | None:
    """The span of a publishing call starting now, or None when the process does not trace."""
    tracer = job_tracer()
    return None if tracer is None else tracer.publication("send")


def publishing_call(
    publishing: Callable[[float], None], published: Callable[[], None], started: float
) -> PublicationScope:
    """One publishing call, ``with`` it: the delivery threads keep out of its way while it
    runs (``publishing``, then ``published`` at its end), and its span (``as``: None when the
    process does not trace) ends with it, failed by what the call raised."""
    publishing(started)
    return PublicationScope(start_publication(), published)


def describe_publication(
    publication: Publication, jobs: PreparedJobs, requests: Sequence[Any]
) -> None:
    """Tell the span what the call is about to publish (``jobs``, prepared from
    ``requests``)."""
    if not publication.recording:
        return
    # The few distinct destinations of a batch (shared objects, hashed by identity).
    destinations = set(jobs.destinations)
    publication.describe(
        count=len(jobs),
        topics=(destination.topic for destination in destinations),
        partitions=(destination.partition for destination in destinations),
        queues=(destination.queue for destination in destinations),
        tenants=(destination.tenant_id for destination in destinations),
        job_types=(_job_type(request) for request in requests),
        job_id=jobs.ids[0].decode() if len(jobs) == 1 else None,
    )


def _job_type(request: Any) -> Any:
    if type(request) is EnqueueRequest:
        return request.job_type
    return request.get("job_type") if isinstance(request, Mapping) else None
