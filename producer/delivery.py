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
from collections.abc import Callable, Sequence
from concurrent.futures import InvalidStateError
from itertools import repeat
from typing import Any, NamedTuple

from confluent_kafka import KafkaError, KafkaException

from tenantq.errors import EnqueueFailed
from tenantq.job_ids import uuid_of_int
from tenantq.producer.job_future import FINISHED, PENDING, SETTLED, JobFuture
from tenantq.producer.request import Destination, EncodedJob, PreparedJobs

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


class Resends:
    """The jobs of one publication, for their futures to send again one acknowledged without
    an offset (module docstring): one object for all of them, where a reference to its job
    in each future was one more object per job for the cyclic GC to count."""

    __slots__ = ("_counts", "_jobs", "_resender", "_values")

    def __init__(self, jobs: Sequence[EncodedJob], resender: Resender) -> None:
        self._jobs = jobs
        self._resender = resender
        #: The envelopes of ``jobs``, in order.
        self._values: list[bytes] | None = None
        #: Resends so far, by the callback of the job (one delivery outstanding at a time).
        self._counts: dict[Callback, int] = {}

    def again(self, envelope: bytes, on_delivery: Callback) -> bool:
        """``Resender.again`` of the job whose envelope is ``envelope`` (the message of its
        delivery report): rare, so found by a search rather than an index kept per job.
        The same envelope twice in a publication is the same message either way."""
        values = self._values
        if values is None:
            jobs = self._jobs
            values = self._values = (
                jobs.values if isinstance(jobs, PreparedJobs) else [job.value for job in self._jobs]
            )
        try:
            index = values.index(envelope)
        except ValueError:
            return False
        sent_again = self._counts.get(on_delivery, 0)
        self._counts[on_delivery] = sent_again + 1
        return self._resender.again(self._jobs[index], on_delivery, sent_again)


class DeliveryFuture(JobFuture[JobRef]):
    """The future of one job, and its own ``on_delivery`` callback: one object per job
    instead of a future plus a callback object (the cyclic GC counts every one).

    A delivery records only the offset; the ``JobRef`` (a tuple and a ``UUID``, two more
    objects the GC would track for as long as the future lives) is made when ``result`` is
    first called, and then kept in place of the offset, so a caller that only checks for
    errors never pays for it. Topic and partition are the ones the job was produced to (the
    producer always names the partition). The futures of one ``enqueue_many`` call share
    one lock (``JobFuture``); the producer makes them with ``delivery_futures``.

    With ``resends``, a delivery without an offset sends the job again (module docstring).
    """

    __slots__ = ("_destination", "_job_int", "_resends")

    def __init__(
        self,
        job_int: int,
        destination: Destination,
        resends: Resends | None = None,
        lock: _thread.RLock | None = None,
    ) -> None:
        """``destination``: where the job was produced to (only its topic and partition are
        read); ``resends``: its publication's, to send it again when acknowledged without
        an offset (None: it fails at once); ``lock``: shared with the futures of the same
        publication (``JobFuture``).

        ``JobFuture.__init__`` written out, as ``delivery_futures`` makes one per job and a
        second constructor call costs about as much as all the assignments."""
        self._lock = _thread.RLock() if lock is None else lock
        self._state = PENDING
        self._result = None
        self._exception = None
        self._waiter_list = None
        self._callback_list = None
        self._sleepers = None
        self._job_int = job_int
        self._resends = resends
        self._destination = destination

    @property
    def job_id(self) -> uuid.UUID:
        return uuid_of_int(self._job_int)

    def result(self, timeout: float | None = None) -> JobRef:
        """The ``JobRef`` of the acknowledged job (``Future.result``)."""
        value: Any = super().result(timeout)
        if type(value) is not JobRef:
            # The offset of the delivery, until now. Two threads may both make the ref:
            # equal values, and either may be kept.
            destination = self._destination
            value = self._result = JobRef(
                self.job_id, destination.topic, destination.partition, value
            )
        return value  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        state = self._state
        if state == FINISHED and self._exception is None:
            return f"<DeliveryFuture at {id(self):#x} state=finished returned JobRef>"
        return f"<DeliveryFuture at {id(self):#x} state={state.lower()}>"

    def __call__(self, error: KafkaError | None, message: Any) -> None:
        if error is None:
            offset = message.offset()
            if offset is not None:
                # The publication's envelopes may go once all its jobs are acknowledged.
                self._resends = None
                # ``_resolve`` written out, as this runs once per job: its calls, the lookup
                # of the waiters' method by name and ``with`` on the lock (slower than its
                # acquire and release) add half again to these steps.
                # Future keeps its result in ``_result``: here the offset (``result``).
                lock = self._lock
                lock.acquire()
                try:
                    state = self._state
                    if state is not PENDING and state in SETTLED:
                        # Cancelled by its owner, or failed by close(): the first outcome
                        # stands.
                        return
                    self._result = offset
                    self._state = FINISHED
                    waiters = self._waiter_list
                    if waiters:
                        for waiter in waiters:
                            waiter.add_result(self)
                    if self._sleepers:
                        self.notify_all()
                finally:
                    lock.release()
                if self._callback_list:
                    self._invoke_callbacks()
                return
            resends = self._resends
            if resends is not None and resends.again(message.value(), self):
                return
            failure = unconfirmed_failure(self.job_id, message.topic())
        else:
            topic = message.topic() if message is not None else "?"
            failure = enqueue_failure(error, self.job_id, topic)
        try:
            self.set_exception(failure)
        except InvalidStateError:
            pass  # cancelled by its owner, or already failed by close(): the first outcome stands


def delivery_futures(
    job_ints: Sequence[int], destinations: Sequence[Destination], resends: Resends | None
) -> list[DeliveryFuture]:
    """The futures of one publication, sharing one lock, the ``i``-th for the ``i``-th job.

    Made by ``map``, which calls the constructor from C: a loop of Python statements
    around it costs more per job than the constructor's own assignments."""
    count = len(job_ints)
    if len(destinations) != count:
        raise ValueError(f"{count} job ids for {len(destinations)} destinations")
    return list(
        map(
            DeliveryFuture,
            job_ints,
            destinations,
            repeat(resends, count),
            repeat(_thread.RLock(), count),
        )
    )


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
