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
import uuid
from collections.abc import Sequence
from concurrent.futures import InvalidStateError
from typing import Any

from confluent_kafka import KafkaError
from tenantq.errors import BatchEnqueueFailed, EnqueueFailed
from tenantq.producer.delivery import JobRef, enqueue_failure
from tenantq.producer.job_future import JobFuture
from tenantq.producer.request import Outgoing

logger = logging.getLogger("tenantq.producer")


class BatchFuture(JobFuture[list[JobRef]]):
    """Resolves to the ``JobRef`` of every job of the batch, in request order, once Kafka has
    acknowledged them all; or fails with ``BatchEnqueueFailed`` once every job is settled and
    at least one was not acknowledged (``failures`` by request index, ``refs`` of the rest).

    It never resolves before every job is settled, so a failure always comes with the full
    picture. ``len()`` is the number of jobs.
    """

    def __init__(self, outgoing: Sequence[Outgoing]) -> None:
        super().__init__()
        self._outgoing = outgoing
        self._size = len(outgoing)
        self._offsets: list[int] = [-1] * self._size
        self._failures: dict[int, EnqueueFailed] = {}
        # next() on itertools.count is atomic under the GIL: deliveries are served by the
        # poller thread and by the enqueuing thread, and exactly one of them sees the last.
        self._settle = itertools.count(1).__next__
        by_value: dict[bytes, Any] = {}
        for index, message in enumerate(outgoing):
            if by_value.setdefault(message.value, index) != index:
                # The same envelope twice (the same explicit job id and content): either
                # delivery may stand for either job, so keep a stack of their indexes.
                earlier = by_value[message.value]
                by_value[message.value] = (
                    [*earlier, index] if type(earlier) is list else [earlier, index]
                )
        self._by_value = by_value
        if not outgoing:
            self.set_result([])

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
            index = index.pop()
        if error is None:
            self._offsets[index] = message.offset()
        else:
            self._failures[index] = enqueue_failure(
                error, self._outgoing[index].job_uuid(), self._outgoing[index].topic
            )
        if self._settle() == self._size:
            self._finish()

    def fail(self, index: int, failure: EnqueueFailed) -> None:
        """Settle a job that never reached Kafka's queue (refused by ``produce``)."""
        self._failures[index] = failure
        if self._settle() == self._size:
            self._finish()

    def _finish(self) -> None:
        outgoing, offsets, failures = self._outgoing, self._offsets, self._failures
        self._by_value = {}
        make_uuid = uuid.UUID
        try:
            if not failures:
                self.set_result(
                    [
                        JobRef(
                            make_uuid(int=message.job_int), message.topic, message.partition, offset
                        )
                        for message, offset in zip(outgoing, offsets, strict=True)
                    ]
                )
                return
            refs: list[JobRef | None] = [
                None
                if index in failures
                else JobRef(
                    make_uuid(int=message.job_int), message.topic, message.partition, offsets[index]
                )
                for index, message in enumerate(outgoing)
            ]
            self.set_exception(BatchEnqueueFailed(dict(sorted(failures.items())), refs))
        except InvalidStateError:
            pass  # cancelled by its owner: the first outcome stands
