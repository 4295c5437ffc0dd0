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
from fakes import FakeMessage

from tenantq.errors import EnqueueFailed
from tenantq.producer.delivery import (
    UNCONFIRMED_RESENDS,
    DeliveryFuture,
    JobRef,
    Resender,
    Resends,
    delivery_futures,
)
from tenantq.producer.request import Destination, EncodedJob


def report(offset: int | None, topic: str = "q.main", value: bytes = b"") -> FakeMessage:
    """What a delivery report's message answers."""
    return FakeMessage(topic, 0, offset, value)


JOB = uuid.UUID("01890a5d-ac96-7abc-8def-0123456789ab")


def at(topic: str, partition: int) -> Destination:
    """Where a job was produced to (a future reads only the topic and partition)."""
    return Destination("q", "t", topic, partition, b"t", ())


def test_result_is_the_job_ref_of_the_delivery() -> None:
    future = DeliveryFuture(JOB.int, at("q.main", 7))
    future(None, report(41))
    ref = future.result(0)
    assert ref == JobRef(JOB, "q.main", 7, 41)
    assert ref.job_id == JOB and type(ref.job_id) is uuid.UUID
    assert future.result(0) is ref  # made once
    assert future.exception(0) is None and future.done()
    assert "returned JobRef" in repr(future)


def test_a_delivered_future_keeps_no_job_ref_until_read() -> None:
    future = DeliveryFuture(JOB.int, at("q.main", 0))
    future(None, report(3))
    # Until result() is called it refers to no tuple or UUID the GC would track.
    tracked = {type(p).__name__ for p in gc.get_referents(future) if gc.is_tracked(p)}
    assert "JobRef" not in tracked and "UUID" not in tracked
    future.result(0)
    assert any(type(p) is JobRef for p in gc.get_referents(future))


def test_a_failed_delivery_raises_enqueue_failed() -> None:
    future = DeliveryFuture(JOB.int, at("q.main", 0))
    future(KafkaError(KafkaError._MSG_TIMED_OUT, "timed out"), report(None))
    with pytest.raises(EnqueueFailed, match=str(JOB)) as raised:
        future.result(0)
    assert raised.value.possibly_persisted and raised.value.retriable


def test_the_first_outcome_stands() -> None:
    cancelled = DeliveryFuture(JOB.int, at("q.main", 0))
    assert cancelled.cancel()
    cancelled(None, report(5))
    assert cancelled.cancelled()
    delivered = DeliveryFuture(JOB.int, at("q.main", 0))
    delivered(None, report(5))
    delivered(KafkaError(KafkaError._PURGE_INFLIGHT, "purged"), report(None))
    assert delivered.result(0).offset == 5


def test_futures_sharing_a_lock_are_waited_for_from_several_threads() -> None:
    lock = _thread.RLock()
    futures = [DeliveryFuture(JOB.int + n, at("q.main", n), lock=lock) for n in range(4)]
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
        futures[n](None, report(100 + n))
        done, _ = wait(futures, timeout=0, return_when=FIRST_COMPLETED)
        assert futures[n] in done
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive()
    assert {n: ref.offset for n, ref in seen.items()} == {n: 100 + n for n in range(4)}
    assert called == [3]


def test_futures_made_in_bulk_share_a_lock_and_resolve_apart() -> None:
    destinations = [at("q.main", 3), at("q.main", 5)]
    made = delivery_futures([JOB.int, JOB.int + 1], destinations, None)
    assert made[0]._lock is made[1]._lock
    built = DeliveryFuture(JOB.int + 1, at("q.main", 5))
    assert made[1]._lock is not built._lock
    assert vars(made[1]) == {}  # nothing set outside the slots
    for future, offset in zip(made, (7, 8), strict=True):
        waited = wait([future], timeout=0)
        assert not waited.done
        future(None, report(offset))
    built(None, report(8))
    assert (
        made[1].result(0) == built.result(0) == JobRef(uuid.UUID(int=JOB.int + 1), "q.main", 5, 8)
    )
    assert made[0].result(0) == JobRef(JOB, "q.main", 3, 7)


def test_futures_made_in_bulk_need_a_destination_per_job() -> None:
    with pytest.raises(ValueError, match="2 job ids for 1 destinations"):
        delivery_futures([JOB.int, JOB.int + 1], [at("q.main", 0)], None)


def test_a_job_acknowledged_without_an_offset_is_sent_again_then_fails() -> None:
    sent: list[tuple[Any, Any]] = []

    class Client:
        def produce(self, topic: str, value: bytes, key: bytes, **options: Any) -> None:
            sent.append((value, options["on_delivery"]))

    job = EncodedJob(str(JOB), JOB.int, "q", "t", "q.main", 2, b"t", b"envelope", ())
    other = EncodedJob(str(JOB), JOB.int + 1, "q", "t", "q.main", 2, b"t", b"other", ())
    resends = Resends([other, job], Resender(Client()))
    destination = Destination("q", "t", "q.main", 2, b"t", ())
    futures = delivery_futures([other.job_int, job.job_int], [destination] * 2, resends)
    for round_number in range(UNCONFIRMED_RESENDS):
        futures[1](None, report(None, value=b"envelope"))
        assert len(sent) == round_number + 1 and sent[-1] == (b"envelope", futures[1])
        assert not futures[1].done()
    futures[1](None, report(None, value=b"envelope"))
    with pytest.raises(EnqueueFailed, match="without an offset") as raised:
        futures[1].result(0)
    assert raised.value.possibly_persisted
    futures[0](None, report(None, value=b"other"))  # its own count
    assert sent[-1] == (b"other", futures[0]) and not futures[0].done()
    futures[0](None, report(12, value=b"other"))
    assert futures[0].result(0) == JobRef(uuid.UUID(int=JOB.int + 1), "q.main", 2, 12)
