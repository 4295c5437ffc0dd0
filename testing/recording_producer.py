"""``RecordingProducer``: a stand-in for ``tenantq.Producer`` that records jobs instead of
publishing them, for handler tests without Kafka.

It validates, encodes and places every request with the producer's own ``RequestPreparer``,
so what it refuses and the errors it raises are the producer's; what it records is the
envelope a worker would read. An idempotency key behaves as it does with database access: a
second job with the key of a recorded one names that job (``created=False``, nothing new
recorded) when job type, tenant and payload are the same, and is a ``JobConflict`` otherwise.
"""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from tenantq.app import App
from tenantq.enqueue_request import EnqueueRequest
from tenantq.errors import ConfigurationError
from tenantq.job_ids import new_job_id_block, new_job_id_ints
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.producer.delivery import JobRef
from tenantq.producer.request import RequestPreparer
from tenantq.producer.unique import KeyedJob, check_same_job
from tenantq.schemas.envelope import Envelope, decode_envelope
from tenantq.settings import Settings
from tenantq.topic_admin import declared_topics

__all__ = ["EnqueuedJob", "RecordingProducer"]


@dataclass(frozen=True)
class EnqueuedJob:
    """One recorded job: its envelope as a worker would read it, and where it would go."""

    envelope: Envelope
    topic: str
    partition: int

    @property
    def job_id(self) -> uuid.UUID:
        """The job's id (a worker's ``ctx.job_id``)."""
        return self.envelope.job_id

    @property
    def job_type(self) -> str:
        """The job type's name."""
        return self.envelope.job_type

    @property
    def tenant(self) -> str:
        """The tenant id."""
        return self.envelope.tenant_id

    @property
    def queue(self) -> str:
        """The queue the job goes to."""
        return self.envelope.queue

    def payload_json(self) -> Any:
        """The payload as JSON (a registered model's payload is its JSON dump)."""
        return self.envelope.payload_json()


class RecordingProducer:
    """Records the jobs enqueued through it (``jobs``), with ``tenantq.Producer``'s
    validation and enqueue methods, so code under test can be handed it instead of a
    producer (and a typed handle enqueues through it: ``send_email.enqueue(recording,
    ...)``). Futures are resolved at once. Safe to share between threads."""

    def __init__(self, app: App | None = None, *, settings: Settings | None = None) -> None:
        """``settings`` default to ``app.settings`` (``TENANTQ_*``): the queues a job may name
        and their partition counts, the size limits and the topic prefix come from them."""
        if settings is None:
            if app is None:
                raise ConfigurationError("a RecordingProducer needs an app or settings")
            settings = app.settings
        self.settings = settings
        self.app = app
        counts = {spec.name: spec.partitions for spec in declared_topics(settings)}
        self._preparer = RequestPreparer(
            settings,
            app,
            PlacementBook(None, 60.0),
            lambda topic: counts.get(topic, 1),
            new_job_id_ints,
            new_job_id_block,
        )
        self._lock = threading.Lock()
        self._jobs: list[EnqueuedJob] = []
        self._keys: dict[tuple[str, str], EnqueuedJob] = {}

    @property
    def jobs(self) -> list[EnqueuedJob]:
        """Every job recorded so far, in order."""
        with self._lock:
            return list(self._jobs)

    def of_type(self, job_type: str) -> list[EnqueuedJob]:
        """The recorded jobs of ``job_type``, in order."""
        return [job for job in self.jobs if job.job_type == job_type]

    def clear(self) -> None:
        """Forget every recorded job (and idempotency key)."""
        with self._lock:
            self._jobs.clear()
            self._keys.clear()

    def enqueue(self, job_type: str, **arguments: Any) -> Future[JobRef]:
        """``Producer.enqueue``: the future is resolved at once."""
        return self.enqueue_many([EnqueueRequest(job_type=job_type, **arguments)])[0]

    def enqueue_many(
        self, requests: Iterable[EnqueueRequest | Mapping[str, Any]]
    ) -> list[Future[JobRef]]:
        """``Producer.enqueue_many``: every request is checked before any is recorded."""
        return [_resolved(ref) for ref in self._record(requests)]

    def enqueue_batch(self, requests: Iterable[EnqueueRequest | Mapping[str, Any]]) -> Future[Any]:
        """``Producer.enqueue_batch``: one future, resolved at once to the list of refs."""
        return _resolved(self._record(requests))

    async def enqueue_async(self, job_type: str, **arguments: Any) -> JobRef:
        """``Producer.enqueue_async``."""
        return self.enqueue(job_type, **arguments).result()

    def _record(self, requests: Iterable[EnqueueRequest | Mapping[str, Any]]) -> list[JobRef]:
        prepared = self._preparer.prepare_all(list(requests), dt.datetime.now(dt.UTC))
        max_bytes = self.settings.max_message_bytes
        jobs = [
            EnqueuedJob(decode_envelope(job.value, max_bytes=max_bytes), job.topic, job.partition)
            for job in prepared
        ]
        with self._lock:
            # Keys are checked for the whole batch before any job is recorded, as the
            # producer refuses a batch before publishing any of it.
            keys = dict(self._keys)
            holders = [self._holder(job, keys) for job in jobs]
            refs = []
            for job, holder in zip(jobs, holders, strict=True):
                if holder is None:
                    self._jobs.append(job)
                    offset, kept = len(self._jobs) - 1, job
                else:
                    offset, kept = self._jobs.index(holder), holder
                refs.append(JobRef(kept.job_id, kept.topic, kept.partition, offset, holder is None))
            self._keys = keys
        return refs

    @staticmethod
    def _holder(job: EnqueuedJob, keys: dict[tuple[str, str], EnqueuedJob]) -> EnqueuedJob | None:
        """The job that ``job``'s idempotency key already names (None: a new job, whose key
        ``keys`` now holds), or ``JobConflict`` when it differs in job type, tenant or
        payload."""
        key = job.envelope.idempotency_key
        if key is None:
            return None
        holder = keys.setdefault((job.queue, key), job)
        if holder is job:
            return None
        check_same_job(
            key,
            job.queue,
            holder.job_id,
            KeyedJob.of(holder.envelope),
            KeyedJob.of(job.envelope),
            "the original is kept",
        )
        return holder


def _resolved(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future
