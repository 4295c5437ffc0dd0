"""Delivery reports: the ``JobRef`` of an acknowledged job, or an ``EnqueueFailed``.

A report without an error is not yet proof: librdkafka's idempotent producer can report a
message delivered without the offset a broker gives to what it wrote (after a retried request,
it takes some broker answers for "already written"), and such a message was seen missing from
its partition afterwards (2 of 300 jobs, on a busy machine, topics a second old). So a
delivery counts only with its offset; one without is sent again (``Resender``), the same
bytes and job id, which the worker's claim deduplicates should both copies exist.
"""

from __future__ import annotations

import _thread
import logging
import uuid
from collections.abc import Callable
from concurrent.futures import InvalidStateError
from concurrent.futures._base import FINISHED
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from confluent_kafka import KafkaError, KafkaException
from tenantq.errors import EnqueueFailed
from tenantq.job_ids import uuid_of_int
from tenantq.producer.job_future import JobFuture

if TYPE_CHECKING:
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


class DeliveryFuture(JobFuture[JobRef]):
    """The future of one job, and its own ``on_delivery`` callback: one object per job
    instead of a future plus a callback object (the cyclic GC counts every one).

    A delivery records only the offset; the ``JobRef`` (a tuple and a ``UUID``, two more
    objects the GC would track for as long as the future lives) is made when ``result`` is
    first called, so a caller that only checks for errors never pays for it. Topic and
    partition are the ones the job was produced to (the producer always names the
    partition). The futures of one ``enqueue_many`` call share one lock (``JobFuture``).

    With a ``resender``, a delivery without an offset sends the job again (module docstring).
    """

    __slots__ = ("_job_int", "_job", "_partition", "_ref", "_resender", "_sent_again", "_topic")

    def __init__(
        self,
        job_int: int,
        job: EncodedJob | None = None,
        resender: Resender | None = None,
        lock: _thread.RLock | None = None,
        *,
        topic: str | None = None,
        partition: int = -1,
    ) -> None:
        super().__init__(lock)
        self._job_int = job_int
        self._job = job if resender is not None else None
        self._resender = resender
        #: Resends so far.
        self._sent_again = 0
        self._topic = job.topic if job is not None else topic
        self._partition = job.partition if job is not None else partition
        self._ref: JobRef | None = None

    @property
    def job_id(self) -> uuid.UUID:
        return uuid_of_int(self._job_int)

    def result(self, timeout: float | None = None) -> JobRef:
        """The ``JobRef`` of the acknowledged job (``Future.result``)."""
        offset = cast(int, super().result(timeout))
        ref = self._ref
        if ref is None:
            # Two threads may both make it: equal values, and either may be kept.
            ref = self._ref = JobRef(self.job_id, cast(str, self._topic), self._partition, offset)
        return ref

    def __repr__(self) -> str:
        state = self._state
        if state == FINISHED and self._exception is None:
            return f"<DeliveryFuture at {id(self):#x} state=finished returned JobRef>"
        return f"<DeliveryFuture at {id(self):#x} state={state.lower()}>"

    def __call__(self, error: KafkaError | None, message: Any) -> None:
        if error is None:
            offset = message.offset()
            if offset is not None:
                self._job = None
                try:
                    # Future keeps its result in ``_result``: here the offset (``result``).
                    self._resolve(offset, None, "add_result")  # type: ignore[arg-type]
                except InvalidStateError:
                    pass  # cancelled by its owner, or failed by close(): the first outcome stands
                return
            job, resender = self._job, self._resender
            if job is not None and resender is not None:
                self._sent_again += 1
                if resender.again(job, self, self._sent_again - 1):
                    return
            failure = unconfirmed_failure(self.job_id, message.topic())
        else:
            topic = message.topic() if message is not None else "?"
            failure = enqueue_failure(error, self.job_id, topic)
        try:
            self.set_exception(failure)
        except InvalidStateError:
            pass  # cancelled by its owner, or already failed by close(): the first outcome stands
