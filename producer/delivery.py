"""Delivery reports: the ``JobRef`` of an acknowledged job, or an ``EnqueueFailed``."""

from __future__ import annotations

import uuid
from concurrent.futures import InvalidStateError
from typing import Any, NamedTuple

from confluent_kafka import KafkaError
from tenantq.errors import EnqueueFailed
from tenantq.producer.job_future import JobFuture


class JobRef(NamedTuple):
    """Where an acknowledged job was written (a named tuple: cheap to make per delivery).

    ``created`` is False when the request's idempotency key already named this job: nothing
    was published, and topic, partition and offset are where that job was first read (or
    -1 while no worker has claimed it)."""

    job_id: uuid.UUID
    topic: str
    partition: int
    offset: int
    created: bool = True


#: Errors raised before the message could have been sent to a broker: certainly not persisted.
_NOT_SENT = frozenset(
    {
        KafkaError._PURGE_QUEUE,
        KafkaError._QUEUE_FULL,
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.INVALID_RECORD,
        KafkaError.RECORD_LIST_TOO_LARGE,
        KafkaError.INVALID_MSG,
    }
)


def enqueue_failure(error: KafkaError, job_id: uuid.UUID | str, topic: str) -> EnqueueFailed:
    """An ``EnqueueFailed`` for a failed delivery. Anything that may have reached a broker
    (timeouts, purged in flight, network errors) is ``possibly_persisted``: the caller should
    retry with the same job id, which the worker deduplicates."""
    code = error.code()
    possibly_persisted = code not in _NOT_SENT
    retriable = bool(error.retriable()) or code in (
        KafkaError._MSG_TIMED_OUT,
        KafkaError._TIMED_OUT,
        KafkaError._PURGE_INFLIGHT,
        KafkaError._PURGE_QUEUE,
        KafkaError._QUEUE_FULL,
    )
    return EnqueueFailed(
        f"job {job_id} was not acknowledged by {topic}: {error.name()}: {error.str()}",
        retriable=retriable,
        possibly_persisted=possibly_persisted,
    )


class DeliveryFuture(JobFuture[JobRef]):
    """The future of one job, and its own ``on_delivery`` callback: one object per job
    instead of a future plus a callback object (the cyclic GC counts every one)."""

    def __init__(self, job_id: uuid.UUID) -> None:
        super().__init__()
        self.job_id = job_id

    def __call__(self, error: KafkaError | None, message: Any) -> None:
        try:
            if error is None:
                self.set_result(
                    JobRef(self.job_id, message.topic(), message.partition(), message.offset())
                )
            else:
                topic = message.topic() if message is not None else "?"
                self.set_exception(enqueue_failure(error, self.job_id, topic))
        except InvalidStateError:
            pass  # cancelled by its owner, or already failed by close(): the first outcome stands
