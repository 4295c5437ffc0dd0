"""JobFutures: the futures of one enqueue_many call, made when read, settled by one callback."""

from __future__ import annotations

import gc
import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, as_completed, wait
from typing import Any

import pytest
from confluent_kafka import KafkaError
from fakes import FakeMessage

from tenantq.errors import EnqueueFailed, QueueFull
from tenantq.producer.delivery import UNCONFIRMED_RESENDS, JobRef, Resender
from tenantq.producer.job_futures import DeliveryFuture, JobFutures, Outcome, index_by_value
from tenantq.producer.request import Destination, PreparedJobs

JOB = uuid.UUID("01890a5d-ac96-7abc-8def-0123456789ab")
MAIN = Destination("q", "t", "q.main", 7, b"t", ())
OTHER = Destination("q", "u", "q.main", 3, b"u", ())


def jobs(count: int, values: list[bytes] | None = None) -> PreparedJobs:
    """``count`` jobs with ids JOB, JOB+1, ..., alternately bound for MAIN and OTHER."""
    ints = [JOB.int + n for n in range(count)]
    return PreparedJobs(
        ints,
        [str(uuid.UUID(int=value)).encode() for value in ints],
        values if values is not None else [b"envelope-%d" % n for n in range(count)],
        [MAIN if n % 2 == 0 else OTHER for n in range(count)],
        keyed=False,
    )


def report(futures: JobFutures, value: bytes, offset: int | None, error: Any = None) -> None:
    """A delivery report of the message whose envelope is ``value``."""
    futures.on_delivery(error, FakeMessage("q.main", 0, offset, value))


def test_a_future_read_after_its_report_is_settled_with_its_job_ref() -> None:
    futures = JobFutures(jobs(3))
    report(futures, b"envelope-0", 41)
    assert futures._futures is None  # nothing made until read
    ref = futures[0].result(0)
    assert ref == JobRef(JOB, "q.main", 7, 41) and type(ref.job_id) is uuid.UUID
    assert futures[0] is futures[0] and futures[0].result(0) is ref  # made once
    assert futures[0].exception(0) is None and futures[0].done()
    assert "returned JobRef" in repr(futures[0])
    assert not futures[1].done() and not futures[2].done()
    assert "2 waiting" in repr(futures)


def test_a_future_read_before_its_report_is_settled_by_it() -> None:
    futures = JobFutures(jobs(2))
    first, second = futures
    assert not first.done() and not wait([first], timeout=0).done
    report(futures, b"envelope-1", 9)
    report(futures, b"envelope-0", 8)
    assert first.result(0) == JobRef(JOB, "q.main", 7, 8)
    assert second.result(0) == JobRef(uuid.UUID(int=JOB.int + 1), "q.main", 3, 9)


def test_it_reads_as_the_list_it_stands_for() -> None:
    futures = JobFutures(jobs(4))
    for n in range(4):
        report(futures, b"envelope-%d" % n, 100 + n)
    assert len(futures) == 4
    assert [future.result(0).offset for future in futures] == [100, 101, 102, 103]
    assert futures[-1] is futures[3] and futures[1:3] == [futures[1], futures[2]]
    assert list(futures) == [futures[0], futures[1], futures[2], futures[3]]
    with pytest.raises(IndexError):
        futures[4]


def test_a_delivered_job_keeps_no_tracked_object_until_read() -> None:
    """What the cyclic GC counts per job while a call waits for Kafka: nothing, until a
    future is read (then the future, then its JobRef once ``result`` is called)."""

    def tracked_reachable(root: object) -> int:
        seen: set[int] = set()
        stack = [root]
        while stack:
            item = stack.pop()
            if id(item) in seen or not gc.is_tracked(item) or isinstance(item, Destination):
                continue
            seen.add(id(item))
            stack.extend(gc.get_referents(item))
        return len(seen)

    small, large = JobFutures(jobs(10)), JobFutures(jobs(1_000))
    assert tracked_reachable(small) == tracked_reachable(large)
    for n in range(1_000):
        report(large, b"envelope-%d" % n, n)
    for n in range(10):
        report(small, b"envelope-%d" % n, n)
    assert tracked_reachable(small) == tracked_reachable(large)
    future = large[5]
    assert tracked_reachable(large) > tracked_reachable(small)
    kinds = {type(p).__name__ for p in gc.get_referents(future) if gc.is_tracked(p)}
    assert "JobRef" not in kinds and "UUID" not in kinds
    future.result(0)
    assert any(type(p) is JobRef for p in gc.get_referents(future))


def test_a_failed_delivery_raises_enqueue_failed() -> None:
    futures = JobFutures(jobs(2))
    pending = futures[1]
    report(futures, b"envelope-0", None, KafkaError(KafkaError._MSG_TIMED_OUT, "timed out"))
    report(futures, b"envelope-1", None, KafkaError(KafkaError._PURGE_QUEUE, "purged"))
    with pytest.raises(EnqueueFailed, match=str(JOB)) as raised:
        futures[0].result(0)
    assert raised.value.possibly_persisted and raised.value.retriable
    failure = pending.exception(0)
    assert isinstance(failure, EnqueueFailed) and not failure.possibly_persisted


def test_a_job_that_never_reached_the_client_fails_as_told() -> None:
    futures = JobFutures(jobs(2))
    early = futures[0]
    futures.fail(0, QueueFull("full", retry_after=1.0))
    futures.fail(1, QueueFull("still full", retry_after=1.0))
    assert isinstance(early.exception(0), QueueFull)
    with pytest.raises(QueueFull, match="still full"):
        futures[1].result(0)


def test_the_first_outcome_stands() -> None:
    futures = JobFutures(jobs(2))
    assert futures[0].cancel()
    report(futures, b"envelope-0", 5)
    assert futures[0].cancelled()
    report(futures, b"envelope-1", 6)
    delivered = futures[1]
    assert isinstance(delivered, DeliveryFuture)
    delivered.settle(EnqueueFailed("late", retriable=True, possibly_persisted=True))
    assert delivered.result(0).offset == 6


def test_futures_of_one_call_are_waited_for_from_several_threads() -> None:
    futures = JobFutures(jobs(4))
    seen: dict[int, Any] = {}

    def waiter(index: int) -> None:
        seen[index] = futures[index].result(10)

    threads = [threading.Thread(target=waiter, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(0.05)  # every thread asleep on the call's shared lock
    called: list[int] = []
    futures[3].add_done_callback(lambda f: called.append(f.result().partition))
    # Settled in reverse order, from a thread that is none of the waiters.
    for n in reversed(range(4)):
        report(futures, b"envelope-%d" % n, 100 + n)
        done, _ = wait(list(futures), timeout=0, return_when=FIRST_COMPLETED)
        assert futures[n] in done
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive()
    assert {n: ref.offset for n, ref in seen.items()} == {n: 100 + n for n in range(4)}
    assert called == [3]
    assert sorted(f.result().offset for f in as_completed(futures, timeout=0)) == [
        100, 101, 102, 103
    ]  # fmt: skip


class Interleaved(list[Outcome]):
    """The outcomes of a call, running ``between`` once: right before the first outcome is
    written (``on_write``), or right after the first one is read (``on_read``). So another
    thread's step falls exactly between two steps of the one it races."""

    def __init__(self, outcomes: list[Outcome], between: Callable[[], object], when: str) -> None:
        super().__init__(outcomes)
        self.between: Callable[[], object] | None = between
        self.when = when

    def _once(self, when: str) -> None:
        between, self.between = self.between, None
        if between is not None and when == self.when:
            between()
        elif between is not None:
            self.between = between

    def __setitem__(self, index: Any, value: Any) -> None:
        self._once("on_write")
        super().__setitem__(index, value)

    def __getitem__(self, index: Any) -> Any:
        value = super().__getitem__(index)
        self._once("on_read")
        return value


def test_a_future_read_as_its_report_is_written_is_settled() -> None:
    """The future is read between the report's look for a future and its write of the
    outcome (were they in that order): the report writes first, then looks, and settles it."""
    futures = JobFutures(jobs(2))
    read: list[Any] = []
    futures._outcomes = Interleaved(futures._outcomes, lambda: read.append(futures[1]), "on_write")
    report(futures, b"envelope-1", 9)
    assert read[0].result(0).offset == 9


def test_a_report_that_comes_as_a_future_is_made_settles_it() -> None:
    """The report comes between the reader's read of the outcome and its listing of the
    future (were they in that order): the reader lists first, then reads, and the report
    finds the future."""
    futures = JobFutures(jobs(2))
    futures._outcomes = Interleaved(
        futures._outcomes, lambda: report(futures, b"envelope-0", 4), "on_read"
    )
    assert futures[0].result(0).offset == 4


def test_a_job_acknowledged_without_an_offset_is_sent_again_then_fails() -> None:
    sent: list[tuple[bytes, Any]] = []

    class Client:
        def produce(self, topic: str, value: bytes, key: bytes, **options: Any) -> None:
            sent.append((value, options["on_delivery"]))

    futures = JobFutures(jobs(2), resender=Resender(Client()))
    for round_number in range(UNCONFIRMED_RESENDS):
        report(futures, b"envelope-1", None)
        assert len(sent) == round_number + 1
        assert sent[-1] == (b"envelope-1", futures.on_delivery)
        assert not futures[1].done()
    report(futures, b"envelope-1", None)
    with pytest.raises(EnqueueFailed, match="without an offset") as raised:
        futures[1].result(0)
    assert raised.value.possibly_persisted
    report(futures, b"envelope-0", None)  # its own count
    assert sent[-1][0] == b"envelope-0" and not futures[0].done()
    report(futures, b"envelope-0", 12)
    assert futures[0].result(0) == JobRef(JOB, "q.main", 7, 12)


def test_without_a_resender_an_unconfirmed_job_fails_at_once() -> None:
    futures = JobFutures(jobs(1))
    report(futures, b"envelope-0", None)
    with pytest.raises(EnqueueFailed, match="without an offset"):
        futures[0].result(0)


def test_the_same_envelope_twice_settles_both_jobs() -> None:
    futures = JobFutures(jobs(3, [b"same", b"other", b"same"]))
    report(futures, b"same", 4)
    report(futures, b"other", 5)
    report(futures, b"same", 6)
    assert sorted(futures[n].result(0).offset for n in (0, 2)) == [4, 6]
    assert futures[1].result(0).offset == 5


def test_jobs_named_by_their_key_are_settled_from_the_start() -> None:
    known = JobRef(uuid.uuid4(), "q.main", 1, -1, created=False)
    futures = JobFutures(jobs(3), {0: known, 2: known})
    assert futures[0].result(0) is known and futures[2].result(0) is known
    assert not futures[1].done()
    report(futures, b"envelope-0", 8)  # not published: not one of its reports
    assert futures[0].result(0) is known
    report(futures, b"envelope-1", 3)
    assert futures[1].result(0) == JobRef(uuid.UUID(int=JOB.int + 1), "q.main", 3, 3)


def test_a_report_of_an_unknown_message_changes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    futures = JobFutures(jobs(2))
    with caplog.at_level(logging.ERROR, "tenantq.producer"):
        report(futures, b"not ours", 1)
        futures.on_delivery(None, None)
    assert "unknown message" in caplog.text
    assert not futures[0].done() and not futures[1].done()


def test_index_by_value_keeps_every_index_of_a_repeated_envelope() -> None:
    assert index_by_value([b"a", b"b"], range(2)) == {b"a": 0, b"b": 1}
    assert index_by_value([b"a", b"b", b"a"], [0, 2]) == {b"a": [0, 2]}
    assert index_by_value([b"a", b"b", b"c"], [1, 2]) == {b"b": 1, b"c": 2}
