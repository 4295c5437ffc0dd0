"""The worker's read from its consumer returns with the first message that arrives: it never
waits for a full batch (``consume(n, timeout)`` does, so at a light load every job used to
wait out the loop's idle timeout before it was seen)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fakes import FakeMessage, make_settings
from tenantq.consumer.worker import Worker


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


def reader(tmp_path: Path, held: list[FakeMessage], poll_batch: int = 500) -> Any:
    worker: Any = Worker.__new__(Worker)
    worker.settings = make_settings(tmp_path, worker={"poll_batch": poll_batch})
    worker.consumer = BatchingConsumer(held)
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
