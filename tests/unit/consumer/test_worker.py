"""The worker's read from its consumer returns with the first message that arrives: it never
waits for a full batch (``consume(n, timeout)`` does, so at a light load every job used to
wait out the loop's idle timeout before it was seen). It reads no more than what is left of
the main-topic partitions' read-ahead budget, and with the budget full only one message now
and then (the client's events are served there)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from confluent_kafka import TopicPartition
from fakes import FakeMessage, make_settings

from tenantq.consumer.partitions import Partitions
from tenantq.consumer.worker import READ_WHEN_FULL_SECONDS, Worker


class BatchingConsumer:
    """Holds fetched messages like librdkafka's queue; a ``consume`` with a timeout would block
    until it had ``num_messages`` of them (here: fails, since only a few are there)."""

    def __init__(self, held: list[FakeMessage]) -> None:
        self.held = held
        self.calls: list[tuple[str, float]] = []

    def poll(self, timeout: float) -> FakeMessage | None:
        self.calls.append(("poll", timeout))
        return self.held.pop(0) if self.held else None

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        self.calls.append(("consume", timeout))
        if timeout > 0 and len(self.held) < num_messages:
            raise AssertionError("consume would wait the whole timeout for a full batch")
        taken, self.held = self.held[:num_messages], self.held[num_messages:]
        return taken


def reader(
    tmp_path: Path,
    held: list[FakeMessage],
    poll_batch: int = 500,
    partitions: Partitions | None = None,
) -> Any:
    worker: Any = Worker.__new__(Worker)
    worker.settings = make_settings(tmp_path, worker={"poll_batch": poll_batch})
    worker.consumer = BatchingConsumer(held)
    worker.partitions = partitions or Partitions(1_000)
    worker._last_read = 0.0
    worker._wake = threading.Event()
    return worker


def messages(count: int) -> list[FakeMessage]:
    return [FakeMessage("unit.default", 0, offset, b"") for offset in range(count)]


def test_idle_read_returns_the_first_message_and_what_is_already_fetched(tmp_path: Path) -> None:
    held = messages(3)
    worker = reader(tmp_path, list(held))
    assert worker._read(0.1) == held
    assert worker.consumer.calls == [("poll", 0.1), ("consume", 0)]


def test_idle_read_with_nothing_fetched_is_empty(tmp_path: Path) -> None:
    worker = reader(tmp_path, [])
    assert worker._read(0.1) == []


def test_busy_read_takes_a_batch_without_waiting(tmp_path: Path) -> None:
    held = messages(700)
    worker = reader(tmp_path, list(held))
    assert worker._read(0.0) == held[:500]
    assert worker.consumer.calls == [("consume", 0)]


def test_a_batch_of_one_polls_only(tmp_path: Path) -> None:
    held = messages(2)
    worker = reader(tmp_path, list(held), poll_batch=1)
    assert worker._read(0.05) == held[:1]
    assert worker.consumer.calls == [("poll", 0.05)]


class Unpausable:
    def pause(self, partitions: list[TopicPartition]) -> None:
        pass

    def resume(self, partitions: list[TopicPartition]) -> None:
        pass


def test_a_read_takes_no_more_than_the_budget_leaves(tmp_path: Path) -> None:
    """Two main-topic partitions of window 100: a budget of 200. With 150 taken and not done,
    a read takes 50 of the 700 fetched; with 200, one message at most every
    ``READ_WHEN_FULL_SECONDS``, and nothing in between."""
    partitions = Partitions(100, main_topics=frozenset({"unit.default"}))
    partitions.assigned([TopicPartition("unit.default", 0), TopicPartition("unit.default", 1)])
    for offset in range(150):
        partitions.take("unit.default", offset % 2, offset // 2)
    partitions.apply_flow_control(Unpausable())  # type: ignore[arg-type]
    assert partitions.read_room() == 50
    held = messages(700)
    worker = reader(tmp_path, list(held), partitions=partitions)
    assert worker._read(0.0) == held[:50]
    for offset in range(75, 100):
        partitions.take("unit.default", 0, offset)
        partitions.take("unit.default", 1, offset)
    partitions.apply_flow_control(Unpausable())  # type: ignore[arg-type]
    assert partitions.read_room() == 0
    worker._last_read = 0.0  # long ago
    assert worker._read(0.0) == held[50:51]
    calls = len(worker.consumer.calls)
    assert worker._read(0.0) == []  # just asked: not again before READ_WHEN_FULL_SECONDS
    assert len(worker.consumer.calls) == calls
    worker._last_read -= READ_WHEN_FULL_SECONDS
    assert worker._read(0.0) == held[51:52]
