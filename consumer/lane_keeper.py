"""Brings tenants back from the hot lane once it is drained (``tenantq.consumer.hot_lane``).

A background service of every ``tenantq worker`` (several may run: releasing is idempotent).
Each round it asks Kafka how far the workers' group is behind on each queue's lane topic —
the group's committed offsets against the end offsets, with a consumer that never joins the
group. A lane that has been drained (nothing behind) for ``release_after_seconds`` gives its
tenants back to their partitions if a worker moved them there at least that long ago; an
operator's placement stays. Hysteresis both ways: a tenant stays in the lane that long at
least, and a tenant still flooding is moved again by the worker that sees it.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence

from confluent_kafka import Consumer, KafkaException, TopicPartition

from tenantq.background import ServiceLoop
from tenantq.group_reader import group_reader
from tenantq.settings import Settings
from tenantq.store.engine import LazyConnection
from tenantq.store.placement import lane_release
from tenantq.topic_admin import queue_topics
from tenantq.topics import consumer_group

log = logging.getLogger("tenantq.worker")

#: How often the lanes are looked at.
ROUND_SECONDS = 2.0


class LaneKeeper(ServiceLoop):
    """Releases the tenants of drained hot lanes of ``queues`` (served by one worker group)."""

    def __init__(self, settings: Settings, queues: Sequence[str]) -> None:
        super().__init__("lane-keeper")
        self._settings = settings
        self._queues = list(queues)
        self._group = consumer_group(settings.topic_prefix, "+".join(sorted(self._queues)))
        self._lanes = {queue: queue_topics(settings, queue).lane for queue in self._queues}
        self._consumer: Consumer | None = None
        self._database = LazyConnection(settings, "tenantq-lane-keeper", autocommit=True)
        #: Per queue, since when (monotonic) its lane has had nothing behind.
        self._drained_since: dict[str, float] = {}

    def run_round(self) -> float:
        hold = self._settings.tenant_isolation.release_after_seconds
        now = time.monotonic()
        for queue, topic in self._lanes.items():
            if self.stopping:
                break
            behind = self._behind(topic)
            if behind is None or behind > 0:
                self._drained_since.pop(queue, None)
                continue
            since = self._drained_since.setdefault(queue, now)
            if now - since < hold:
                continue
            released = lane_release(self._database.get(), queue=queue, seconds=hold)
            for tenant in released:
                log.warning(
                    "tenant %s of queue %s leaves the hot lane: drained for %.0fs",
                    tenant,
                    queue,
                    now - since,
                )
        return ROUND_SECONDS

    def _behind(self, topic: str) -> int | None:
        """Messages of the lane the group has not committed past (None: no such topic)."""
        consumer = self._kafka()
        metadata = consumer.list_topics(topic, timeout=5)
        found = metadata.topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            return None
        partitions = [TopicPartition(topic, number) for number in found.partitions]
        committed = consumer.committed(partitions, timeout=5)
        behind = 0
        for partition in committed:
            low, high = consumer.get_watermark_offsets(partition, timeout=5, cached=False)
            done = partition.offset if partition.offset >= 0 else low
            behind += max(0, high - done)
        return behind

    def _kafka(self) -> Consumer:
        if self._consumer is None:
            self._consumer = group_reader(
                self._settings, self._group, f"tenantq-lane-keeper-{uuid.uuid4().hex[:6]}"
            )
        return self._consumer

    def reset(self) -> None:
        self._drained_since.clear()
        self._database.close()

    def close(self) -> None:
        self.reset()
        if self._consumer is not None:
            try:
                self._consumer.close()
            except KafkaException:
                pass
            self._consumer = None
