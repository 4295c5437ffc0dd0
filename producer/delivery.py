"""Delivery reports: the ``JobRef`` of an acknowledged job, or an ``EnqueueFailed``.

A report without an error is not yet proof: librdkafka's idempotent producer can report a
message delivered without the offset a broker gives to what it wrote (after a retried request,
it takes some broker answers for "already written"), and such a message was seen missing from
its partition afterwards (2 of 300 jobs, on a busy machine, topics a second old). So a
delivery counts only with its offset; one without is sent again (``Resender``), the same
bytes and job id, which the worker's claim deduplicates should both copies exist.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from confluent_kafka import KafkaError, KafkaException

from tenantq.errors import EnqueueFailed
from tenantq.producer.request import EncodedJob

logger = logging.getLogger("tenantq.producer")

Callback = Callable[[Any, Any], None]

#: How often a job acknowledged without an offset is sent again before its future fails (as
#: possibly persisted, retriable).
UNCONFIRMED_RESENDS = 3


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


def confirmed(error: KafkaError | None, message: Any) -> bool:
    """Kafka holds the message: a delivery report without an error, and with an offset."""
    return error is None and message.offset() is not None


def unconfirmed_failure(job_id: uuid.UUID | str, topic: str) -> EnqueueFailed:
    return EnqueueFailed(
        f"job {job_id} was acknowledged by {topic} without an offset "
        f"{1 + UNCONFIRMED_RESENDS} times; it may or may not have been written",
        retriable=True,
        possibly_persisted=True,
    )


#: What a wrapping callback hands on when the resends of an unconfirmed job are used up.
UNCONFIRMED_ERROR = KafkaError(
    KafkaError._MSG_TIMED_OUT,
    f"acknowledged without an offset {1 + UNCONFIRMED_RESENDS} times",
    retriable=True,
)


class Resender:
    """Produces a job again whose delivery report came without an offset."""

    __slots__ = ("_kafka",)

    def __init__(self, kafka: Any) -> None:
        self._kafka = kafka

    def again(self, job: EncodedJob, on_delivery: Callback, sent_again: int) -> bool:
        """Send ``job`` once more, reported to ``on_delivery``; False when it was sent again
        ``UNCONFIRMED_RESENDS`` times already, or the client refuses it now (the caller
        fails the job as possibly persisted)."""
        if sent_again >= UNCONFIRMED_RESENDS:
            return False
        try:
            self._kafka.produce(
                job.topic,
                job.value,
                job.key,
                partition=job.partition,
                on_delivery=on_delivery,
                headers=job.kafka_headers(),
            )
        except (BufferError, KafkaException) as error:
            logger.warning("job %s could not be sent again: %s", job.job_id, error)
            return False
        logger.warning(
            "job %s: %s[%d] acknowledged it without an offset; sent again (%d of %d)",
            job.job_id,
            job.topic,
            job.partition,
            sent_again + 1,
            UNCONFIRMED_RESENDS,
        )
        return True


#: How long a full local queue is served before a produce is tried again.
FULL_QUEUE_POLL_SECONDS = 0.05


def produce_when_room(producer: Any, topic: str, **arguments: Any) -> None:
    """``producer.produce(topic, **arguments)``; while the client's local queue is full
    (``BufferError``), serve its delivery reports, which make room, and try again."""
    while True:
        try:
            producer.produce(topic, **arguments)
            return
        except BufferError:
            producer.poll(FULL_QUEUE_POLL_SECONDS)


class Resends:
    """The jobs of one call (``enqueue_many``, ``enqueue_batch``), for its delivery callback
    to send again one acknowledged without an offset: how often each was sent again so far,
    and the index put back on its envelope's stack when the same envelope is there twice
    (its next report may stand for either job)."""

    __slots__ = ("_counts", "_jobs", "_resender")

    def __init__(self, jobs: Sequence[EncodedJob], resender: Resender) -> None:
        self._jobs = jobs
        self._resender = resender
        self._counts: dict[int, int] = {}

    def again(self, index: int, entry: list[int] | None, on_delivery: Callback) -> bool:
        """Produce the job at ``index`` again, reported to ``on_delivery``; False when its
        resends are used up or the client refuses it. ``entry``: the stack of indexes of
        its envelope, when the call has that envelope twice."""
        sent_again = self._counts.get(index, 0)
        self._counts[index] = sent_again + 1
        if entry is not None:
            entry.append(index)
        if self._resender.again(self._jobs[index], on_delivery, sent_again):
            return True
        if entry is not None:
            entry.remove(index)
        return False
