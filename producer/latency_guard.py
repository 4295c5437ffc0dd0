"""The optional latency guard: refuse new jobs while a queue is past its latency budget.

"Age" is how long the message at the workers' committed offset has been waiting, the oldest
unfinished job of each partition, read straight from Kafka every few seconds. It fails open: if
the probe cannot answer, jobs are admitted (and the failure logged).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_INVALID, Consumer, TopicPartition

from tenantq.errors import LatencyBudgetExceeded
from tenantq.group_reader import group_reader
from tenantq.settings import Settings
from tenantq.topics import consumer_group, main_topic

logger = logging.getLogger("tenantq.producer")

AgeProbe = Callable[[str], float | None]


@dataclass(eq=False)
class LatencyGuard:
    """Raises ``LatencyBudgetExceeded`` when ``probe(queue)`` exceeds ``budget_seconds``.

    Probe results are kept ``cache_seconds`` so the hot path pays a dictionary lookup.
    """

    budget_seconds: float
    probe: AgeProbe
    cache_seconds: float = 5.0
    clock: Callable[[], float] = time.monotonic
    #: Queue -> (until when it holds, the age read).
    _ages: dict[str, tuple[float, float | None]] = field(default_factory=dict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def oldest_age(self, queue: str) -> float | None:
        cached = self._ages.get(queue)
        if cached is not None and self.clock() < cached[0]:
            return cached[1]
        with self._lock:
            cached = self._ages.get(queue)
            if cached is not None and self.clock() < cached[0]:
                return cached[1]
            try:
                age = self.probe(queue)
            except Exception as error:
                logger.warning("latency guard cannot read the age of %r: %s", queue, error)
                age = None
            self._ages[queue] = (self.clock() + self.cache_seconds, age)
            return age

    def check(self, queue: str) -> None:
        age = self.oldest_age(queue)
        if age is not None and age > self.budget_seconds:
            raise LatencyBudgetExceeded(
                f"queue {queue!r} is past its latency budget: its oldest waiting job is "
                f"{age:.1f}s old, the budget is {self.budget_seconds:g}s",
                retry_after=self.cache_seconds,
            )


class CommittedOffsetAgeProbe:
    """Reads, per partition of a queue's main topic, the timestamp of the message at the
    workers' committed offset. Assign-only: it never joins the group nor commits."""

    def __init__(self, settings: Settings, timeout_seconds: float = 2.0) -> None:
        self._settings = settings
        self._timeout = timeout_seconds
        self._consumers: dict[str, Consumer] = {}

    def _consumer(self, queue: str) -> Consumer:
        consumer = self._consumers.get(queue)
        if consumer is None:
            consumer = group_reader(
                self._settings,
                consumer_group(self._settings.topic_prefix, queue),
                f"tenantq-latency-probe-{uuid.uuid4().hex[:8]}",
            )
            self._consumers[queue] = consumer
        return consumer

    def __call__(self, queue: str) -> float | None:
        consumer = self._consumer(queue)
        topic = main_topic(self._settings.topic_prefix, queue)
        metadata = consumer.list_topics(topic, timeout=self._timeout)
        partitions = [TopicPartition(topic, p) for p in metadata.topics[topic].partitions]
        committed = consumer.committed(partitions, timeout=self._timeout)
        waiting = []
        for position in committed:
            low, high = consumer.get_watermark_offsets(position, timeout=self._timeout)
            offset = low if position.offset == OFFSET_INVALID else max(position.offset, low)
            if offset < high:
                waiting.append(TopicPartition(topic, position.partition, offset))
        if not waiting:
            return 0.0
        consumer.assign(waiting)
        try:
            oldest_ms: int | None = None
            deadline = time.monotonic() + self._timeout
            seen: set[int] = set()
            while len(seen) < len(waiting) and time.monotonic() < deadline:
                for message in consumer.consume(len(waiting), timeout=0.2):
                    partition = message.partition()
                    if message.error() is not None or partition is None or partition in seen:
                        continue
                    seen.add(partition)
                    timestamp = message.timestamp()[1]
                    oldest_ms = timestamp if oldest_ms is None else min(oldest_ms, timestamp)
        finally:
            consumer.unassign()
        if oldest_ms is None:
            return None
        return max(0.0, time.time() - oldest_ms / 1000.0)

    def close(self) -> None:
        for consumer in self._consumers.values():
            consumer.close()
        self._consumers.clear()
