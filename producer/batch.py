"""``BatchFuture``: one future for a whole batch of jobs, resolved when the last is settled.

Per-job futures cost a future, a lock and two lists per job, and the cyclic GC scans each of
them until it resolves; for a bulk producer that was half the cost of a job. A batch records
deliveries in preallocated lists instead, with one ``on_delivery`` callable for the batch.

confluent-kafka gives the callback no per-message opaque, so the callback finds the job from
the message itself: the envelope bytes (``message.value()``) are unique per job (they start
with the job id) and index a dict built before the first ``produce``. This does not rely on
delivery order, which librdkafka only promises per partition.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator, Mapping
from concurrent.futures import InvalidStateError
from dataclasses import dataclass
from typing import Any, overload

from confluent_kafka import KafkaError

from tenantq.errors import BatchEnqueueFailed, EnqueueFailed
from tenantq.job_ids import uuid_of_int
from tenantq.producer.delivery import (
    JobRef,
    Resender,
    Resends,
    enqueue_failure,
    unconfirmed_failure,
)
from tenantq.producer.job_future import JobFuture
from tenantq.producer.job_futures import index_by_value
from tenantq.producer.request import PreparedJobs
from tenantq.producer.rows import Rows

logger = logging.getLogger("tenantq.producer")


@dataclass(eq=False, repr=False, slots=True)
class JobRefs(Rows[JobRef]):
    """The ``JobRef`` of every job of a batch, in request order: a read-only sequence that
    makes each ``JobRef`` when it is read.

    Making them all up front (a tuple and a ``UUID`` per job, both tracked by the cyclic GC)
    cost about as much as preparing the jobs; a caller that only checks the batch succeeded
    never pays it. ``list(refs)`` gives a plain list.
    """

    #: The columns, a row per job: its id as an integer, its topic, partition and offset.
    job_ints: list[int]
    topics: list[str]
    partitions: list[int]
    offsets: list[int]
    #: Indexes whose idempotency key named an existing job (``created=False``).
    existing: frozenset[int] = frozenset()

    def __len__(self) -> int:
        return len(self.job_ints)

    @overload
    def __getitem__(self, index: int) -> JobRef: ...

    @overload
    def __getitem__(self, index: slice) -> list[JobRef]: ...

    def __getitem__(self, index: int | slice) -> JobRef | list[JobRef]:
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(len(self)))]
        position = range(len(self.job_ints))[index]
        return JobRef(
            uuid_of_int(self.job_ints[position]),
            self.topics[position],
            self.partitions[position],
            self.offsets[position],
            position not in self.existing,
        )

    def __iter__(self) -> Iterator[JobRef]:
        make = uuid_of_int
        existing = self.existing
        for position, (job_int, topic, partition, offset) in enumerate(
            zip(self.job_ints, self.topics, self.partitions, self.offsets, strict=True)
        ):
            yield JobRef(make(job_int), topic, partition, offset, position not in existing)


class BatchFuture(JobFuture[JobRefs]):
    """Resolves to the ``JobRefs`` of every job of the batch, in request order, once Kafka has
    acknowledged them all; or fails with ``BatchEnqueueFailed`` once every job is settled and
    at least one was not acknowledged (``failures`` by request index, ``refs`` of the rest).

    It never resolves before every job is settled, so a failure always comes with the full
    picture. ``len()`` is the number of jobs.
    """

    def __init__(
        self,
        outgoing: PreparedJobs,
        existing: Mapping[int, JobRef] | None = None,
        resender: Resender | None = None,
    ) -> None:
        super().__init__()
        # Kept until the batch settles, to send again a job acknowledged without an offset
        # (``tenantq.producer.delivery``).
        self._resends = Resends(outgoing, resender) if resender is not None else None
        # Columns rather than the messages: the envelopes can go once delivered.
        self._job_ints = list(outgoing.job_ints)
        destinations = outgoing.destinations
        self._topics = [destination.topic for destination in destinations]
        self._partitions = [destination.partition for destination in destinations]
        values = outgoing.values
        self._size = len(outgoing)
        self._offsets: list[int] = [-1] * self._size
        self._failures: dict[int, EnqueueFailed] = {}
        # Jobs whose idempotency key named an existing job are settled from the start.
        existing = existing or {}
        self._existing = frozenset(existing)
        for index, ref in existing.items():
            self._job_ints[index] = ref.job_id.int
            self._topics[index] = ref.topic
            self._partitions[index] = ref.partition
            self._offsets[index] = ref.offset
        # next() on itertools.count is atomic under the GIL: deliveries are served by the
        # poller thread and by the enqueuing thread, and exactly one of them sees the last.
        self._settle = itertools.count(1 + len(existing)).__next__
        self._by_value = index_by_value(
            values,
            range(self._size)
            if not existing
            else [index for index in range(self._size) if index not in existing],
        )
        if len(existing) == self._size:
            self.set_result(
                JobRefs(
                    self._job_ints, self._topics, self._partitions, self._offsets, self._existing
                )
            )

    def __len__(self) -> int:
        return self._size

    def on_delivery(self, error: KafkaError | None, message: Any) -> None:
        """The ``on_delivery`` callback of every message of the batch."""
        try:
            index = self._by_value[message.value()]
        except (KeyError, AttributeError):
            # Not one of ours, or no message at all: nothing to record, and raising here
            # would surface in whichever thread happens to be polling.
            logger.error("delivery report for an unknown message of a batch: %r", error)
            return
        if type(index) is list:
            entry, index = index, index.pop()
        else:
            entry = None
        if error is None:
            offset = message.offset()
            if offset is None:
                resends = self._resends
                if resends is not None and resends.again(index, entry, self.on_delivery):
                    return
                self._failures[index] = unconfirmed_failure(
                    uuid_of_int(self._job_ints[index]), self._topics[index]
                )
            else:
                self._offsets[index] = offset
        else:
            self._failures[index] = enqueue_failure(
                error, uuid_of_int(self._job_ints[index]), self._topics[index]
            )
        if self._settle() == self._size:
            self._finish()

    def fail(self, index: int, failure: EnqueueFailed) -> None:
        """Settle a job that never reached Kafka's queue (refused by ``produce``)."""
        self._failures[index] = failure
        if self._settle() == self._size:
            self._finish()

    def _finish(self) -> None:
        self._by_value = {}
        self._resends = None
        refs = JobRefs(
            self._job_ints, self._topics, self._partitions, self._offsets, self._existing
        )
        failures = self._failures
        try:
            if not failures:
                self.set_result(refs)
                return
            self.set_exception(
                BatchEnqueueFailed(
                    dict(sorted(failures.items())),
                    [None if index in failures else ref for index, ref in enumerate(refs)],
                )
            )
        except InvalidStateError:
            pass  # cancelled by its owner: the first outcome stands
