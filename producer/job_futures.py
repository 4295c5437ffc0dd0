"""``JobFutures``: the futures of one ``enqueue_many`` call, each made when it is first read.

A future per job, made at enqueue and kept until its delivery report, is an object the cyclic
GC tracks; a producer with 200,000 jobs in flight had every full collection walk all of them
(and, because they outlived the young generations, set off more full collections), which
cost a bulk ``enqueue_many`` about a fifth of its rate (``loadtest/producer_bench.py
--tune-gc`` shows it). So the call keeps per job only what the GC does not track:

* the outcome of each job in one list: None while it waits, the offset of its delivery, the
  ``JobRef`` of the job its idempotency key named, or the exception it failed with;
* the job ids as integers and the (shared) ``Destination`` of each job, which the preparation
  made anyway (``PreparedJobs``);
* one ``on_delivery`` callable (``JobFutures.on_delivery``) for every message of the call,
  instead of one per message, which finds its job from the message's envelope as
  ``BatchFuture`` does (the envelope starts with the job id, so it is unique per job).

The ``Future`` of a job (``DeliveryFuture``) is made the first time the caller reads it
(``futures[i]``, iteration), already settled when its report came first, else settled by the
call's ``on_delivery``; reading it again gives the same object. A caller that reads its
futures once the jobs are acknowledged (after ``flush``, say) never holds a pending one; one
that reads them all as the call returns pays what a future per job always cost, plus the
lookup of each report's job before it settles its future (a few tenths of a microsecond per
job: ``loadtest/producer_bench.py --eager``).

A future made while the report arrives: the reader lists the new future before it reads the
job's outcome, and ``on_delivery`` writes the outcome before it looks for a future, so one of
the two settles it, or both (settling is idempotent). Both run Python bytecode, so the GIL
orders them.
"""

from __future__ import annotations

import _thread
import itertools
import logging
import uuid
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future
from itertools import repeat
from typing import Any, cast, overload

from confluent_kafka import KafkaError

from tenantq.job_ids import uuid_of_int
from tenantq.producer.delivery import (
    JobRef,
    Resender,
    Resends,
    enqueue_failure,
    unconfirmed_failure,
)
from tenantq.producer.job_future import FINISHED, PENDING, SETTLED, JobFuture
from tenantq.producer.request import Destination, PreparedJobs

__all__ = ["DeliveryFuture", "JobFutures", "Outcome"]

logger = logging.getLogger("tenantq.producer")

#: What a job of the call came to: its offset, the ``JobRef`` of the job its idempotency key
#: named, or why it failed; None while it waits for its delivery report.
Outcome = int | JobRef | BaseException | None


class DeliveryFuture(JobFuture[JobRef]):
    """The future of one job of an ``enqueue_many`` call, made by its ``JobFutures`` and
    settled by it: one tracked object per job only once the caller reads it.

    A delivery leaves the offset in place of the result; the ``JobRef`` (a tuple and a
    ``UUID``, two more tracked objects) is made when ``result`` is first called, then kept,
    so a caller that only checks for errors never pays for it. The futures of one call share
    its lock (``JobFuture``)."""

    __slots__ = ("_destination", "_job_int")

    def __init__(self, job_int: int, destination: Destination, lock: _thread.RLock) -> None:
        """``destination``: where the job was produced to (only its topic and partition are
        read).

        ``JobFuture.__init__`` written out: a call that reads every future at once makes
        them by ``map`` (``JobFutures.__iter__``), and a second constructor call would cost
        about as much as all the assignments."""
        self._lock = lock
        self._state = PENDING
        self._result = None
        self._exception = None
        self._waiter_list = None
        self._callback_list = None
        self._sleepers = None
        self._job_int = job_int
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

    def settle(self, outcome: int | JobRef | BaseException) -> None:
        """Finish with ``outcome`` (an offset, a ``JobRef`` or an exception), unless already
        settled (cancelled by its owner, or settled by the other thread): the first outcome
        stands. ``Future.set_result``'s steps, reading the slots (``JobFuture``)."""
        lock = self._lock
        lock.acquire()
        try:
            state = self._state
            if state is not PENDING and state in SETTLED:
                return
            if isinstance(outcome, BaseException):
                self._exception = outcome
                failed = True
            else:
                self._result = outcome  # type: ignore[assignment]
                failed = False
            self._state = FINISHED
            waiters = self._waiter_list
            if waiters:
                for waiter in waiters:
                    (waiter.add_exception if failed else waiter.add_result)(self)
            if self._sleepers:
                self.notify_all()
        finally:
            lock.release()
        if self._callback_list:
            self._invoke_callbacks()

    def __repr__(self) -> str:
        state = self._state
        if state == FINISHED and self._exception is None:
            return f"<DeliveryFuture at {id(self):#x} state=finished returned JobRef>"
        return f"<DeliveryFuture at {id(self):#x} state={state.lower()}>"


class JobFutures(Sequence[Future[JobRef]]):
    """The futures of the jobs of one ``enqueue_many`` call, in request order: a read-only
    sequence whose ``i``-th future is made when it is first read (module docstring).

    ``on_delivery`` is the delivery callback of every message of the call; ``fail`` settles
    a job that never reached the client's queue. ``outgoing``: the call's jobs; ``existing``:
    {index: the ``JobRef`` of the job its idempotency key named}, settled from the start
    and not published; ``resender``: sends again a job acknowledged without an offset
    (``tenantq.producer.delivery``; None: such a job fails at once).
    """

    __slots__ = (
        "_by_value", "_destinations", "_futures", "_job_ints", "_lock", "_outcomes",
        "_resends", "_settled", "_size",
    )  # fmt: skip

    def __init__(
        self,
        outgoing: PreparedJobs,
        existing: Mapping[int, JobRef] | None = None,
        resender: Resender | None = None,
    ) -> None:
        size = self._size = len(outgoing)
        self._job_ints = outgoing.job_ints
        self._destinations = outgoing.destinations
        self._outcomes: list[Outcome] = [None] * size
        #: The futures read so far, by index (None until the first is read).
        self._futures: list[DeliveryFuture | None] | None = None
        self._lock = _thread.RLock()
        # Kept until every job is settled, to send again one acknowledged without an offset.
        self._resends = Resends(outgoing, resender) if resender is not None else None
        published: Sequence[int] = range(size)
        if existing:
            for index, ref in existing.items():
                self._outcomes[index] = ref
            published = [index for index in range(size) if index not in existing]
        # next() on itertools.count is atomic under the GIL: reports are served by the
        # delivery thread and by the publishing thread, and exactly one sees the last.
        self._settled = itertools.count(1 + size - len(published)).__next__
        #: {envelope: its job's index} (``index_by_value``), until every job is settled.
        self._by_value = index_by_value(outgoing.values, published)

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> Future[JobRef]: ...

    @overload
    def __getitem__(self, index: slice) -> list[Future[JobRef]]: ...

    def __getitem__(self, index: int | slice) -> Future[JobRef] | list[Future[JobRef]]:
        futures = self._futures
        if futures is not None and type(index) is int:
            # The futures list raises the IndexError and counts from the end as this would.
            future = futures[index]
            if future is not None:
                return future
        if isinstance(index, slice):
            return [self[position] for position in range(self._size)[index]]
        return self._made(range(self._size)[index])

    def __iter__(self) -> Iterator[Future[JobRef]]:
        futures = self._futures
        if futures is None or None in futures:
            futures = self._made_all()
        # Every entry is a future now; only list invariance objects.
        return iter(cast("list[Future[JobRef]]", futures))

    def __repr__(self) -> str:
        waiting = self._outcomes.count(None)
        return f"<JobFutures of {self._size} jobs, {waiting} waiting for Kafka>"

    def _made(self, position: int) -> DeliveryFuture:
        """The future of the job at ``position``, made now: listed first, then settled if
        the job's outcome is known (module docstring)."""
        with self._lock:
            futures = self._futures
            if futures is None:
                futures = self._futures = [None] * self._size
            future = futures[position]
            if future is None:
                future = futures[position] = DeliveryFuture(
                    self._job_ints[position], self._destinations[position], self._lock
                )
                outcome = self._outcomes[position]
                if outcome is not None:
                    future.settle(outcome)
        return future

    def _made_all(self) -> list[DeliveryFuture | None]:
        """Every future of the call, those not read yet made now (by ``map``, in C, as the
        futures made at enqueue were). Listed first, then settled where the job's outcome is
        known, as ``_made`` does; made and settled without holding the call's lock, which
        the delivery thread takes to settle a future."""
        made = list(
            map(DeliveryFuture, self._job_ints, self._destinations, repeat(self._lock, self._size))
        )
        with self._lock:
            futures = self._futures
            if futures is None:
                futures = self._futures = cast("list[DeliveryFuture | None]", made)
            else:
                for index in [i for i, future in enumerate(futures) if future is None]:
                    self._made(index)
                return futures
        for future, outcome in zip(made, self._outcomes, strict=True):
            if outcome is not None:
                future.settle(outcome)
        return futures

    def on_delivery(self, error: KafkaError | None, message: Any) -> None:
        """The ``on_delivery`` callback of every message of the call."""
        try:
            index = self._by_value[message.value()]
            if type(index) is list:
                entry: list[int] | None = index
                index = index.pop()
            else:
                entry = None
        except (KeyError, AttributeError, IndexError):
            # Not one of ours, or no message at all: nothing to record, and raising here
            # would surface in whichever thread happens to be polling.
            logger.error("delivery report for an unknown message of a call: %r", error)
            return
        outcome: int | BaseException
        if error is None:
            offset = message.offset()
            if offset is None:
                resends = self._resends
                if resends is not None and resends.again(index, entry, self.on_delivery):
                    return
                outcome = unconfirmed_failure(
                    uuid_of_int(self._job_ints[index]), self._destinations[index].topic
                )
            else:
                outcome = offset
        else:
            outcome = enqueue_failure(
                error, uuid_of_int(self._job_ints[index]), self._destinations[index].topic
            )
        self._settle(index, outcome)

    def fail(self, index: int, failure: BaseException) -> None:
        """Settle the job at ``index``, which never reached the client's queue."""
        self._settle(index, failure)

    def _settle(self, index: int, outcome: int | JobRef | BaseException) -> None:
        """Record the job's outcome, then settle its future if it was read already (in this
        order: see the module's note on a future made while the report arrives)."""
        self._outcomes[index] = outcome
        futures = self._futures
        if futures is not None:
            future = futures[index]
            if future is not None:
                future.settle(outcome)
        if self._settled() == self._size:
            self._release()

    def _release(self) -> None:
        """Every job is settled: the envelopes may go."""
        self._by_value = {}
        self._resends = None


def index_by_value(values: Sequence[bytes], positions: Sequence[int]) -> dict[bytes, Any]:
    """{envelope: its index} of the jobs at ``positions``; an envelope that is there twice
    (the same explicit job id and content) maps to the list of its indexes, as either
    delivery may stand for either job."""
    if len(positions) == 1:  # ``enqueue``: a dict built from an iterable costs more
        return {values[positions[0]]: positions[0]}
    if type(positions) is range and len(positions) == len(values):
        by_value: dict[bytes, Any] = dict(zip(values, positions, strict=True))
    else:
        by_value = {values[index]: index for index in positions}
    if len(by_value) == len(positions):
        return by_value
    by_value = {}
    for index in positions:
        value = values[index]
        earlier = by_value.setdefault(value, index)
        if earlier != index:
            by_value[value] = [*earlier, index] if type(earlier) is list else [earlier, index]
    return by_value
