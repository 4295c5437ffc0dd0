"""What ``tenantq demo`` reads from Kafka: per-partition consumer lag of the main topic, the
size of the dead-letter topic, and the dead letters themselves.

The lag probe is a consumer that never subscribes: it only asks the broker for the workers'
committed offsets and the partitions' end offsets, so it never joins (or disturbs) the group.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
from tenantq import headers
from tenantq.settings import Settings


class LagProbe:
    """Samples the consumer group's lag per partition and the DLQ's message count."""

    def __init__(self, settings: Settings, main_topic: str, dlq_topic: str, group: str) -> None:
        self._consumer = Consumer(
            settings.kafka_client_config(
                **{"group.id": group, "enable.auto.commit": False, "client.id": "tenantq-demo"}
            )
        )
        self._main = _partitions(self._consumer, main_topic)
        self._dlq = _partitions(self._consumer, dlq_topic)
        self._last_lag: dict[int, int] = {}
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


def read_dead_letters(
    settings: Settings, dlq_topic: str, timeout: float = 30.0
) -> DeadLetterReport:
    """Read the whole DLQ topic (start to end offset of every partition) without a group."""
    consumer = Consumer(
        settings.kafka_client_config(
            **{
                "group.id": f"tenantq-demo-dlq-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
            }
        )
    )
    report = DeadLetterReport()
    try:
        partitions = _partitions(consumer, dlq_topic)
        ends = {}
        for partition in partitions:
            low, high = consumer.get_watermark_offsets(partition, timeout=10, cached=False)
            if high > low:
                ends[partition.partition] = high
        if not ends:
            return report
        consumer.assign(
            [TopicPartition(dlq_topic, number, OFFSET_BEGINNING) for number in sorted(ends)]
        )
        deadline = time.monotonic() + timeout
        positions = dict.fromkeys(ends, -1)
        while any(positions[p] + 1 < ends[p] for p in ends):
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not read {dlq_topic} to its end in {timeout:.0f}s")
            for message in consumer.consume(num_messages=500, timeout=0.5):
                if message.error() is not None:
                    continue
                number, offset = message.partition(), message.offset()
                if number is None or offset is None:
                    continue
                positions[number] = offset
                listed = message.headers() or []
                pairs = listed.items() if isinstance(listed, dict) else listed
                _add(report, {k: v for k, v in pairs if isinstance(v, bytes)})
    finally:
        consumer.close()
    return report


def _add(report: DeadLetterReport, found: dict[str, bytes]) -> None:
    error_class = found.get(headers.ERROR_CLASS, b"?").decode(errors="replace")
    message = found.get(headers.ERROR_MESSAGE, b"").decode(errors="replace")
    report.total += 1
    report.by_error_class[error_class] += 1
    report.messages_by_error_class[error_class][message] += 1
    job_id = found.get(headers.JOB_ID)
    if job_id is not None:
        report.job_ids.append(uuid.UUID(job_id.decode()))


def _partitions(consumer: Consumer, topic: str) -> list[TopicPartition]:
    metadata = consumer.list_topics(topic, timeout=10)
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        raise RuntimeError(f"topic {topic!r} does not exist")
    return [TopicPartition(topic, number) for number in sorted(found.partitions)]
