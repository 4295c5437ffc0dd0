"""DeliveryFuture: the future of one enqueued job, resolved by its delivery report."""

from __future__ import annotations

import _thread
import gc
import threading
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, wait
from typing import Any

import pytest
from confluent_kafka import KafkaError
from tenantq.errors import EnqueueFailed
from tenantq.producer.delivery import DeliveryFuture, JobRef


class Report:
    """What a delivery report's message answers."""

    def __init__(self, offset: int | None, topic: str = "q.main") -> None:
        self._offset = offset
        self._topic = topic

    def offset(self) -> int | None:
        return self._offset

    def topic(self) -> str:
        return self._topic


JOB = uuid.UUID("01890a5d-ac96-7abc-8def-0123456789ab")


def test_result_is_the_job_ref_of_the_delivery() -> None:
    future = DeliveryFuture(JOB.int, topic="q.main", partition=7)
    future(None, Report(41))
    ref = future.result(0)
    assert ref == JobRef(JOB, "q.main", 7, 41)
    assert ref.job_id == JOB and type(ref.job_id) is uuid.UUID
    assert future.result(0) is ref  # made once
    assert future.exception(0) is None and future.done()
    assert "returned JobRef" in repr(future)


def test_a_delivered_future_keeps_no_job_ref_until_read() -> None:
    future = DeliveryFuture(JOB.int, topic="q.main", partition=0)
    future(None, Report(3))
    # Until result() is called it refers to no tuple or UUID the GC would track.
    tracked = {type(p).__name__ for p in gc.get_referents(future) if gc.is_tracked(p)}
    assert "JobRef" not in tracked and "UUID" not in tracked
    future.result(0)
    assert any(type(p) is JobRef for p in gc.get_referents(future))


def test_a_failed_delivery_raises_enqueue_failed() -> None:
    future = DeliveryFuture(JOB.int, topic="q.main", partition=0)
    future(KafkaError(KafkaError._MSG_TIMED_OUT, "timed out"), Report(None))
    with pytest.raises(EnqueueFailed, match=str(JOB)) as raised:
        future.result(0)
    assert raised.value.possibly_persisted and raised.value.retriable


def test_the_first_outcome_stands() -> None:
    cancelled = DeliveryFuture(JOB.int, topic="q.main", partition=0)
    assert cancelled.cancel()
    cancelled(None, Report(5))
    assert cancelled.cancelled()
    delivered = DeliveryFuture(JOB.int, topic="q.main", partition=0)
    delivered(None, Report(5))
    delivered(KafkaError(KafkaError._PURGE_INFLIGHT, "purged"), Report(None))
    assert delivered.result(0).offset == 5


def test_futures_sharing_a_lock_are_waited_for_from_several_threads() -> None:
    lock = _thread.RLock()
    futures = [
        DeliveryFuture(JOB.int + n, topic="q.main", partition=n, lock=lock) for n in range(4)
    ]
    seen: dict[int, Any] = {}

    def waiter(index: int) -> None:
        seen[index] = futures[index].result(10)

    threads = [threading.Thread(target=waiter, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(0.05)  # every thread asleep on the shared lock's futures
    called: list[int] = []
    futures[3].add_done_callback(lambda f: called.append(f.result().partition))
    # Resolved in reverse order, from a thread that is none of the waiters.
    for n in reversed(range(4)):
        futures[n](None, Report(100 + n))
        done, _ = wait(futures, timeout=0, return_when=FIRST_COMPLETED)
        assert futures[n] in done
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive()
    assert {n: ref.offset for n, ref in seen.items()} == {n: 100 + n for n in range(4)}
    assert called == [3]
