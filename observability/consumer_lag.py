"""What Kafka still holds for a queue: consumer lag of the main topic, the depth of each retry
tier, the size of the dead-letter topic, and whether the broker answers at all.

Partition ends and starts come from an ``AdminClient`` (``list_offsets``: one request serves
every topic of a queue). Committed offsets of the workers' group come from a ``Consumer`` of
that group that never subscribes (``committed``), so the probe never joins (or disturbs) the
group. Not the admin client's ``list_consumer_group_offsets``: in librdkafka 2.16 a broker
that restarts while that request is in flight can abort the whole process (an assertion in
``rd_kafka_enq_once_del_source_return``), and a console must outlive its broker. A tier's
depth is its lag: messages written to it that the group has not committed past yet (waiting
for their due time, or not read yet). Every read is bounded by ``timeout`` seconds: a broker
that is down makes the numbers ``None`` with a reason, never a hang.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from tenantq.group_reader import group_reader
from tenantq.settings import Settings
from tenantq.topics import QueueTopics, consumer_group

_LATEST = OffsetSpec.latest()  # type: ignore[no-untyped-call]
_EARLIEST = OffsetSpec.earliest()  # type: ignore[no-untyped-call]


@dataclass(frozen=True)
class TopicBacklog:
    """One topic of a queue: records held (end - start) and the group's lag (end - committed)."""

    topic: str
    partitions: int
    records: int
    lag: int
    #: Lag per partition, for the busiest-partition view.
    lag_by_partition: dict[int, int]


@dataclass(frozen=True)
class QueueBacklog:
    """Kafka's side of one queue. ``error`` says why the numbers are missing (broker down,
    topics not created); then the topic fields are None."""

    queue: str
    main: TopicBacklog | None = None
    tiers: tuple[TopicBacklog, ...] = ()
    dlq: TopicBacklog | None = None
    error: str | None = None

    @property
    def tier_depth(self) -> int | None:
        """Messages waiting in all retry tiers together."""
        return None if self.main is None else sum(tier.lag for tier in self.tiers)

    def as_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return {
            "consumer_lag": None if self.main is None else self.main.lag,
            "retry_tiers": [{"topic": tier.topic, "depth": tier.lag} for tier in self.tiers],
            "retry_tier_depth": self.tier_depth,
            "dlq_records": None if self.dlq is None else self.dlq.records,
            "kafka_error": self.error,
        }


@dataclass(frozen=True)
class BrokerHealth:
    """Whether the cluster answered a metadata request, how fast, and how many brokers."""

    up: bool
    brokers: int = 0
    latency_ms: float | None = None
    error: str | None = None


class BacklogProbe:
    """Reads ``QueueBacklog`` and ``BrokerHealth``; one admin client and one group reader per
    queue, safe across threads.

    ``close()`` when done. The clients are created lazily so a console can start while the
    broker is down and show that, instead of failing to start.
    """

    def __init__(self, settings: Settings, *, timeout: float = 3.0) -> None:
        self.settings = settings
        self.timeout = timeout
        self._lock = threading.Lock()
        self._admin: AdminClient | None = None
        #: Per consumer group, a consumer that only reads the group's committed offsets.
        self._readers: dict[str, Consumer] = {}

    def health(self) -> BrokerHealth:
        """One metadata round trip."""
        started = time.perf_counter()
        try:
            metadata = self._client().list_topics(timeout=self.timeout)
        except (KafkaException, ValueError, TimeoutError) as error:
            return BrokerHealth(up=False, error=_reason(error))
        latency = (time.perf_counter() - started) * 1000
        return BrokerHealth(up=True, brokers=len(metadata.brokers), latency_ms=latency)

    def queue_backlog(self, queue: str) -> QueueBacklog:
        """Lag, tier depths and DLQ size of ``queue``; never raises for Kafka trouble."""
        definition = self.settings.queue(queue)
        topics = QueueTopics.of(
            self.settings.topic_prefix, queue, len(definition.retry_delays_seconds)
        )
        group = consumer_group(self.settings.topic_prefix, queue)
        shown = [topics.main, *topics.retries, topics.dlq]
        try:
            admin = self._client()
            partitions = self._partitions(admin, topics.all)
            # One request of each kind for every topic of the queue, not one per topic.
            everything = [TopicPartition(topic, p) for topic in shown for p in partitions[topic]]
            ends = self._offsets(admin, everything, _LATEST)
            starts = self._offsets(admin, everything, _EARLIEST)
            # The DLQ has no consumer group: all of it is its backlog.
            committed = self._committed(group, [tp for tp in everything if tp.topic != topics.dlq])
        except (KafkaException, ValueError, LookupError, TimeoutError) as error:
            return QueueBacklog(queue, error=_reason(error))

        def backlog(topic: str) -> TopicBacklog:
            return _topic_backlog(topic, partitions[topic], starts, ends, committed)

        return QueueBacklog(
            queue,
            main=backlog(topics.main),
            tiers=tuple(backlog(tier) for tier in topics.retries),
            dlq=backlog(topics.dlq),
        )

    def close(self) -> None:
        """Close the group readers and drop the admin client (it has no close; its threads
        end when it is collected)."""
        with self._lock:
            self._admin = None
            readers, self._readers = list(self._readers.values()), {}
        for reader in readers:
            reader.close()  # never subscribed: no group to leave, nothing to commit

    # -- internals ---------------------------------------------------------------------------

    def _client(self) -> AdminClient:
        with self._lock:
            if self._admin is None:
                self._admin = AdminClient(
                    self.settings.kafka_client_config(**{"client.id": "tenantq-web"})
                )
            return self._admin

    def _partitions(self, admin: AdminClient, names: Sequence[str]) -> dict[str, list[int]]:
        metadata = admin.list_topics(timeout=self.timeout)
        found: dict[str, list[int]] = {}
        for name in names:
            topic = metadata.topics.get(name)
            if topic is None or topic.error is not None or not topic.partitions:
                raise LookupError(f"topic {name} not found (run `tenantq topics ensure`)")
            found[name] = sorted(topic.partitions)
        return found

    def _offsets(
        self, admin: AdminClient, partitions: list[TopicPartition], spec: OffsetSpec
    ) -> dict[tuple[str, int], int]:
        futures = admin.list_offsets(
            {TopicPartition(tp.topic, tp.partition): spec for tp in partitions},
            request_timeout=self.timeout,
        )
        return {
            (tp.topic, tp.partition): int(future.result(timeout=self.timeout).offset)
            for tp, future in futures.items()
        }

    def _reader(self, group: str) -> Consumer:
        with self._lock:
            reader = self._readers.get(group)
            if reader is None:
                reader = group_reader(self.settings, group, "tenantq-web")
                self._readers[group] = reader
            return reader

    def _committed(
        self, group: str, partitions: list[TopicPartition]
    ) -> dict[tuple[str, int], int]:
        """The group's committed offsets (partitions without one are left out). An offset the
        broker could not give for a partition fails the whole read, rather than counting
        that partition as if nothing of it were committed."""
        answer = self._reader(group).committed(partitions, timeout=self.timeout)
        committed: dict[tuple[str, int], int] = {}
        for tp in answer:
            if tp.error is not None:
                raise KafkaException(tp.error)
            if tp.offset >= 0:
                committed[(tp.topic, tp.partition)] = int(tp.offset)
        return committed


def _topic_backlog(
    topic: str,
    partitions: list[int],
    starts: dict[tuple[str, int], int],
    ends: dict[tuple[str, int], int],
    committed: dict[tuple[str, int], int],
) -> TopicBacklog:
    lag: dict[int, int] = {}
    records = 0
    for partition in partitions:
        key = (topic, partition)
        start, end = starts.get(key, 0), ends.get(key, 0)
        # Nothing committed yet: everything still held is lag (a new group starts at the
        # beginning); a committed offset below the start (retention) counts from the start.
        done = max(committed.get(key, start), start)
        lag[partition] = max(0, end - done)
        records += max(0, end - start)
    return TopicBacklog(topic, len(partitions), records, sum(lag.values()), lag)


def _reason(error: BaseException) -> str:
    """The first line of a client error (a ``KafkaError`` in ``args[0]`` says it best)."""
    if isinstance(error, TimeoutError):
        return "the broker did not answer in time"
    text = str(error.args[0]) if error.args else type(error).__name__
    return (text.splitlines() or [type(error).__name__])[0][:300]
