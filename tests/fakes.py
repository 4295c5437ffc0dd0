"""The test doubles of the unit tests: the one place for them.

A unit test that needs a stand-in for a collaborator imports it from here (``import fakes``:
pytest puts this folder on ``sys.path``, see ``conftest.py``) and never writes its own, so
there is one fake of each thing and it behaves the same in every test. The builders that go
with them, and any builder that more than one test module uses, are here too.

- ``FakeClock``: a clock that moves only when a test moves it, and sleeps without waiting.
- ``FakeKafkaProducer`` (with ``FakeMessage``): an in-memory ``confluent_kafka.Producer``.
- ``make_settings`` and ``UNIT_TOPICS``: the settings of a producer without servers, and the
  partition counts of their topics, which ``FakeKafkaProducer`` reports by default.
- ``FakePlacementTable``: the placement table, in memory, for a ``PlacementBook``.
- ``FakeIntakeWorker``: the settings, ledger and partitions that ``Intake`` uses.
- ``seeded_retry_policy``: a retry policy with round numbers and a seeded jitter.

Integration tests use none of this: they run against the real Kafka broker and PostgreSQL,
never a mock of either.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from confluent_kafka import KafkaError

import tenantq
from tenantq.consumer.retry_policy import RetryPolicy
from tenantq.store.placement import PlacementRecord


class FakeClock:
    """Stands in for ``time.monotonic`` (call it) and ``time.sleep`` (``sleep``): the time is
    ``now``, which a test sets or moves; ``sleep`` records the wait in ``slept`` and moves
    ``now`` by it instead of waiting."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


#: Partition counts of every topic of ``make_settings``: a ``default`` queue of 12 partitions
#: (3 per retry tier) and a ``mail`` queue of 4 (2 per retry tier), four retry tiers each.
UNIT_TOPICS: dict[str, int] = {
    "unit.default": 12,
    "unit.mail": 4,
    **{f"unit.default.retry.{tier}": 3 for tier in range(4)},
    **{f"unit.mail.retry.{tier}": 2 for tier in range(4)},
}


def make_settings(tmp_path: Path, **overrides: Any) -> tenantq.Settings:
    """Settings for a producer without servers: topic prefix ``unit``, the queues of
    ``UNIT_TOPICS``, an unreachable broker and ``tmp_path`` as the dev home. ``overrides``
    replace whole top-level fields."""
    fields: dict[str, Any] = {
        "kafka_bootstrap_servers": "127.0.0.1:1",
        "dev_home": tmp_path,
        "topic_prefix": "unit",
        "queues": {
            "default": {"partitions": 12, "retry_partitions": 3},
            "mail": {"partitions": 4, "retry_partitions": 2},
        },
    }
    fields.update(overrides)
    return tenantq.Settings(**fields)


class FakeMessage:
    """What confluent-kafka hands to ``on_delivery``."""

    def __init__(self, topic: str, partition: int, offset: int | None, value: bytes) -> None:
        self._topic, self._partition, self._offset, self._value = topic, partition, offset, value

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int | None:
        return self._offset

    def value(self) -> bytes:
        return self._value


class FakeKafkaProducer:
    """Stands in for ``confluent_kafka.Producer`` (the ``kafka_client`` of ``Producer``).

    ``produce`` records each message in ``produced`` (a dict of its arguments) and gives it
    the next offset, counted over all topics. ``poll`` and ``flush`` deliver what is pending,
    newest first so that nothing relies on the delivery order, which librdkafka only keeps per
    partition. What a test can change:

    - ``partitions``: the topics that exist and their partition counts (``UNIT_TOPICS``
      unless given); ``list_topics`` of any other topic reports it unknown.
    - ``acknowledge = False``: nothing is delivered; ``flush`` returns how many are pending,
      and ``purge`` fails them as purged.
    - ``fail``: offset -> ``KafkaError`` code that the delivery of that message reports.
    - ``unconfirmed``: offsets whose delivery reports no error and no offset (as librdkafka
      did for messages that were then missing from their partition).
    - ``room``: how many more messages ``produce`` accepts before its buffer is full and it
      raises ``BufferError``; ``None`` (the default) is unlimited, ``0`` is full.
    """

    def __init__(self, partitions: Mapping[str, int] | None = None) -> None:
        self.partitions = dict(UNIT_TOPICS if partitions is None else partitions)
        self.produced: list[dict[str, Any]] = []
        self.pending: list[tuple[Any, FakeMessage]] = []
        self.fail: dict[int, int] = {}
        self.unconfirmed: set[int] = set()
        self.acknowledge = True
        self.room: int | None = None
        self.lock = threading.Lock()

    def produce(self, topic: str, value: bytes, key: bytes, **options: Any) -> None:
        with self.lock:
            if self.room is not None:
                if self.room == 0:
                    raise BufferError("Local: Queue full")
                self.room -= 1
            message = FakeMessage(topic, options["partition"], len(self.produced), bytes(value))
            self.produced.append({"topic": topic, "value": value, "key": key, **options})
            self.pending.append((options["on_delivery"], message))

    def _deliver(self) -> int:
        if not self.acknowledge:
            return len(self.pending)
        with self.lock:
            pending, self.pending = self.pending, []
        for callback, message in reversed(pending):
            offset = message.offset()
            code = None if offset is None else self.fail.get(offset)
            if offset in self.unconfirmed:
                message = FakeMessage(message.topic(), message.partition(), None, message.value())
            callback(None if code is None else KafkaError(code), message)
        return 0

    def poll(self, timeout: float) -> int:
        time.sleep(min(timeout, 0.01))
        self._deliver()
        return 0

    def flush(self, timeout: float) -> int:
        return self._deliver()

    def purge(self, in_queue: bool, in_flight: bool, blocking: bool) -> None:
        with self.lock:
            pending, self.pending = self.pending, []
        for callback, message in pending:
            callback(KafkaError(KafkaError._PURGE_QUEUE), message)

    def list_topics(self, topic: str, timeout: float) -> SimpleNamespace:
        count = self.partitions.get(topic)
        if count is None:
            error = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
            return SimpleNamespace(topics={topic: SimpleNamespace(error=error, partitions={})})
        partitions = {index: None for index in range(count)}
        return SimpleNamespace(topics={topic: SimpleNamespace(error=None, partitions=partitions)})


class FakePlacementTable:
    """The placement table in memory, standing in for the database as the loader of a
    ``PlacementBook``: ``rows`` by tenant, ``loads`` counts the reads, and ``failing = True``
    makes a read raise as an unreachable database would."""

    def __init__(self) -> None:
        self.rows: dict[str, PlacementRecord] = {}
        self.loads = 0
        self.failing = False

    def __call__(self, queue: str) -> list[PlacementRecord]:
        self.loads += 1
        if self.failing:
            raise OSError("database unavailable")
        return [row for row in self.rows.values() if row.queue == queue]


class FakeIntakeWorker:
    """Stands in for the worker as ``Intake`` sees it: settings, a ledger whose claims lane
    records the operations handed to it (``submitted``), and ``partitions``, which record in
    ``done_offsets`` the offsets the intake marks done."""

    worker_id = "this-worker"

    def __init__(self) -> None:
        import tenantq

        self.settings = tenantq.Settings(
            kafka_bootstrap_servers="127.0.0.1:1", database_url="postgresql://u@127.0.0.1/x"
        )
        self.partitions = self
        self.ledger = self
        self.claims = self
        self.done_offsets: list[tuple[str, int, int]] = []
        self.submitted: list[Any] = []
        from tenantq.consumer.events import WorkerEvents

        self.events = WorkerEvents()

    def done(self, topic: str, partition: int, offset: int, epoch: int) -> None:
        self.done_offsets.append((topic, partition, offset))

    def mark_done(self, item: Any) -> None:
        self.done(item.topic, item.partition, item.offset, item.record.epoch)

    def submit(self, operation: Any) -> None:
        self.submitted.append(operation)


def seeded_retry_policy(jitter: float = 0.5) -> RetryPolicy:
    """Ceilings of 2 s times 3 per attempt (2, 6, 18, 54), capped at 60 s; up to a ``jitter``
    fraction of each is taken off, drawn from a seeded random source."""
    return RetryPolicy(
        base_delay=2, multiplier=3, max_delay=60, jitter=jitter, random_source=random.Random(1)
    )
