"""What ``tenantq demo`` reads from Kafka: per-partition consumer lag of the main topic, the
size of the dead-letter topic, and a summary of the dead letters themselves.

The lag probe is a consumer that never subscribes: it only asks the broker for the workers'
committed offsets and the partitions' end offsets, so it never joins (or disturbs) the group.
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaException, TopicPartition

from tenantq.dlq.reader import DeadLetterReader
from tenantq.dlq.records import DeadLetter
from tenantq.group_reader import group_reader
from tenantq.settings import Settings


class LagProbe:
    """Samples the consumer group's lag per partition and the DLQ's message count."""

    def __init__(self, settings: Settings, main_topic: str, dlq_topic: str, group: str) -> None:
        self._consumer = group_reader(settings, group, "tenantq-demo")
        self._main = _partitions(self._consumer, main_topic)
        self._dlq = _partitions(self._consumer, dlq_topic)
        self._last_lag: dict[int, int] = {}
        #: The group's committed offset per partition of the main topic, at the last ``lag``.
        self.committed: dict[int, int] = {}
        self._last_dlq: dict[int, int] = {}

    def lag(self) -> dict[int, int]:
        """End offset minus committed offset, per partition of the main topic. A partition the
        broker cannot answer for right now (a new topic's leader moving) keeps its last value."""
        try:
            committed = self._consumer.committed(self._main, timeout=10)
        except KafkaException:
            return dict(self._last_lag)
        for partition in committed:
            high = self._end_offset(partition)
            if high is not None:
                done = partition.offset if partition.offset >= 0 else 0
                self._last_lag[partition.partition] = max(0, high - done)
                self.committed[partition.partition] = done
        return dict(self._last_lag)

    def dead_letters(self) -> int:
        """Messages in the DLQ (nothing is ever deleted from it during a demo)."""
        for partition in self._dlq:
            high = self._end_offset(partition)
            if high is not None:
                self._last_dlq[partition.partition] = high
        return sum(self._last_dlq.values())

    def _end_offset(self, partition: TopicPartition) -> int | None:
        try:
            _, high = self._consumer.get_watermark_offsets(partition, timeout=10, cached=False)
        except KafkaException:
            return None
        return int(high)

    def close(self) -> None:
        self._consumer.close()


@dataclass
class DeadLetterReport:
    """The DLQ's content grouped by error class, with the job ids it names."""

    total: int = 0
    by_error_class: Counter[str] = field(default_factory=Counter)
    messages_by_error_class: dict[str, Counter[str]] = field(
        default_factory=lambda: defaultdict(Counter)
    )
    job_ids: list[uuid.UUID] = field(default_factory=list)

    @property
    def distinct_job_ids(self) -> set[uuid.UUID]:
        return set(self.job_ids)

    def add(self, letter: DeadLetter) -> None:
        """Count one dead letter."""
        self.total += 1
        self.by_error_class[letter.error_class] += 1
        self.messages_by_error_class[letter.error_class][letter.error_message] += 1
        if letter.job_id is not None:
            self.job_ids.append(letter.job_id)


def read_dead_letters(settings: Settings, queue: str) -> DeadLetterReport:
    """Read the whole DLQ of ``queue`` (start to end offset of every partition) without a
    group, with the reader of the DLQ tools."""
    report = DeadLetterReport()
    with DeadLetterReader(settings, queue) as reader:
        for letter in reader.records():
            report.add(letter)
    return report


def _partitions(consumer: Consumer, topic: str) -> list[TopicPartition]:
    metadata = consumer.list_topics(topic, timeout=10)
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        raise RuntimeError(f"topic {topic!r} does not exist")
    return [TopicPartition(topic, number) for number in sorted(found.partitions)]
