"""The worker's read from its consumer returns with the first message that arrives: it never
waits for a full batch (``consume(n, timeout)`` does, so at a light load every job would wait
out the loop's idle timeout before it was seen). It reads no more than what is left of the
main-topic partitions' read-ahead budget, and with the budget full only one message now and
then (the client's events are served there)."""

from __future__ import annotations

from confluent_kafka import TopicPartition
from fakes import FakeClock, FakeConsumer, FakeMessage

from tenantq.consumer.partitions import Partitions
from tenantq.consumer.reader import READ_WHEN_FULL_SECONDS, Reader


def reader(
    held: list[FakeMessage],
    poll_batch: int = 500,
    partitions: Partitions | None = None,
    clock: FakeClock | None = None,
) -> tuple[Reader, FakeConsumer]:
    consumer = FakeConsumer(held)
    budget = partitions or Partitions(1_000)
    waits: list[float] = []
    made = Reader(
        consumer,  # type: ignore[arg-type]
        poll_batch,
        budget.read_room,
        waits.append,
        clock or FakeClock(1_000.0),
    )
    return made, consumer


def messages(count: int) -> list[FakeMessage]:
    return [FakeMessage("unit.default", 0, offset, b"") for offset in range(count)]


def test_idle_read_returns_the_first_message_and_what_is_already_fetched() -> None:
    held = messages(3)
    read, consumer = reader(held)
    assert read.read(0.1) == held
    assert consumer.calls == [("poll", 0.1), ("consume", 0)]


def test_idle_read_with_nothing_fetched_is_empty() -> None:
    read, _ = reader([])
    assert read.read(0.1) == []


def test_busy_read_takes_a_batch_without_waiting() -> None:
    held = messages(700)
    read, consumer = reader(held)
    assert read.read(0.0) == held[:500]
    assert consumer.calls == [("consume", 0)]


def test_a_batch_of_one_polls_only() -> None:
    held = messages(2)
    read, consumer = reader(held, poll_batch=1)
    assert read.read(0.05) == held[:1]
    assert consumer.calls == [("poll", 0.05)]


def test_a_read_takes_no_more_than_the_budget_leaves() -> None:
    """Two main-topic partitions of window 100: a budget of 200. With 150 taken and not done,
    a read takes 50 of the 700 fetched; with 200, one message at most every
    ``READ_WHEN_FULL_SECONDS``, and nothing in between."""
    partitions = Partitions(100, main_topics=frozenset({"unit.default"}))
    partitions.assigned([TopicPartition("unit.default", 0), TopicPartition("unit.default", 1)])
    for offset in range(150):
        partitions.take("unit.default", offset % 2, offset // 2)
    flow = FakeConsumer()
    partitions.apply_flow_control(flow)  # type: ignore[arg-type]
    assert partitions.read_room() == 50
    held = messages(700)
    clock = FakeClock(1_000.0)
    read, consumer = reader(held, partitions=partitions, clock=clock)
    assert read.read(0.0) == held[:50]
    for offset in range(75, 100):
        partitions.take("unit.default", 0, offset)
        partitions.take("unit.default", 1, offset)
    partitions.apply_flow_control(flow)  # type: ignore[arg-type]
    assert partitions.read_room() == 0
    clock.now += READ_WHEN_FULL_SECONDS  # the last read was that long ago
    assert read.read(0.0) == held[50:51]
    calls = len(consumer.calls)
    assert read.read(0.0) == []  # just asked: not again before READ_WHEN_FULL_SECONDS
    assert len(consumer.calls) == calls
    clock.now += READ_WHEN_FULL_SECONDS
    assert read.read(0.0) == held[51:52]
