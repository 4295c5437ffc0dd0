"""Read a queue's dead-letter topic from a point to its current end, one record at a time.

A plain consumer with ``assign``: it joins no group and commits nothing, so reading the DLQ
never moves anyone's offsets. The end is the high watermark of each partition taken when the
read starts; records written later (for example by jobs that die again during a replay) are
left for the next read, so a replay can never chase its own tail. Memory stays bounded: the
records are yielded as they arrive, never collected.

No record raises out of ``records()``: whatever is on the topic is yielded, a record that
does not parse as an unreadable ``DeadLetter`` (``tenantq.dlq.records``). Only the topic
itself (missing, unreachable, refusing this client) is a ``DeadLetterReadError``, one line
naming the cluster and why.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from confluent_kafka import (
    OFFSET_END,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from tenantq.dlq.kafka_client import ClientReport, error_text
from tenantq.dlq.records import DeadLetter, decode_dead_letter, unreadable_letter
from tenantq.errors import TenantqError
from tenantq.headers import header_pairs
from tenantq.settings import Settings
from tenantq.topics import dlq_topic

log = logging.getLogger(__name__)

#: A read that gets nothing for this long while records should remain is stuck, not slow.
STALL_SECONDS = 30.0
METADATA_TIMEOUT = 10.0
#: Each metadata request waits this long, so that a refusal is noticed between them.
METADATA_STEP = 1.0


class DeadLetterReadError(TenantqError, RuntimeError):
    """The DLQ could not be read to its end (topic missing, broker gone or refusing this
    client, read stalled). The message is one line naming the cluster and why."""


class DeadLetterReader:
    """The records of ``<prefix>.<queue>.dlq`` from ``since`` (or the start) to the end.

    Use as a context manager; ``total`` is the number of records in range (an upper bound of
    what ``records()`` yields, for progress bars) once ``open()`` has run.
    """

    def __init__(
        self,
        settings: Settings,
        queue: str,
        *,
        since: dt.datetime | None = None,
        positions: Iterable[tuple[int, int]] = (),
        stall_seconds: float = STALL_SECONDS,
    ) -> None:
        settings.queue(queue)  # a clear error for an undeclared queue
        self.settings = settings
        self.topic = dlq_topic(settings.topic_prefix, queue)
        self.since = since
        #: (partition, offset) of the only records wanted, if given (`tenantq dlq show 2@17`).
        self.positions = frozenset(positions)
        self.stall_seconds = stall_seconds
        self.total = 0
        #: partition -> [first offset to read, end offset (exclusive)]
        self.ranges: dict[int, tuple[int, int]] = {}
        #: Where the consumer's librdkafka output goes (see ``tenantq.dlq.kafka_client``).
        self.client = ClientReport(settings.require_bootstrap_servers())
        self._consumer: Consumer | None = None

    def __enter__(self) -> DeadLetterReader:
        self.open()
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def open(self) -> None:
        """Connect and work out the offset range of each partition."""
        try:
            self._consumer = Consumer(
                self.settings.kafka_client_config(
                    **{
                        # librdkafka wants a group id; nothing is ever committed under it.
                        "group.id": f"tenantq-dlq-reader-{uuid.uuid4().hex}",
                        "enable.auto.commit": False,
                        "enable.auto.offset.store": False,
                        "enable.partition.eof": True,
                        "fetch.message.max.bytes": self.settings.max_message_bytes + 256 * 1024,
                        **self.client.config(),
                    }
                )
            )
        except KafkaException as error:  # a client setting librdkafka refuses
            raise DeadLetterReadError(
                self.client.describe(f"the client settings: {error_text(error)}")
            ) from None
        try:
            self.ranges = self._offset_ranges(self._consumer)
        except BaseException:
            self.close()
            raise
        if self.positions:
            self.ranges = _only(self.ranges, self.positions)
        self.total = sum(end - start for start, end in self.ranges.values())

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def partition_count(self, topic: str) -> int:
        """Partitions of any topic (replay needs the main topic's), from broker metadata."""
        consumer = self._require()
        deadline = time.monotonic() + METADATA_TIMEOUT
        while True:
            try:
                metadata = consumer.list_topics(topic, timeout=METADATA_STEP)
                break
            except KafkaException as error:
                consumer.poll(0)  # serve the client's error events: is it refused?
                if self.client.refused is not None or time.monotonic() >= deadline:
                    failure = f"reading the metadata of {topic}: {error_text(error)}"
                    raise DeadLetterReadError(self.client.describe(failure)) from None
        found = metadata.topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            raise DeadLetterReadError(f"topic {topic} not found; run `tenantq topics ensure`")
        return len(found.partitions)

    def records(self, on_scanned: Callable[[int], None] | None = None) -> Iterator[DeadLetter]:
        """Every record in range, in partition order of arrival; ``on_scanned(n)`` after each."""
        consumer = self._require()
        remaining = {p: r for p, r in self.ranges.items() if r[0] < r[1]}
        if not remaining:
            return
        consumer.assign([TopicPartition(self.topic, p, r[0]) for p, r in remaining.items()])
        scanned = 0
        last_progress = time.monotonic()
        try:
            while remaining:
                message = consumer.poll(0.5)
                if message is None:
                    if time.monotonic() - last_progress > self.stall_seconds:
                        raise DeadLetterReadError(
                            self.client.describe(
                                f"no record from {self.topic} for {self.stall_seconds:.0f}s "
                                f"with partitions {sorted(remaining)} unfinished"
                            )
                        )
                    continue
                last_progress = time.monotonic()
                partition, offset = message.partition(), message.offset()
                assert partition is not None and offset is not None
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        # At the end of what the broker has: nothing further can come below
                        # the watermark we stopped at (compaction or aborted transactions can
                        # leave holes, so the last offset itself may never arrive).
                        if partition in remaining and offset >= remaining[partition][1]:
                            del remaining[partition]
                        continue
                    raise DeadLetterReadError(
                        self.client.describe(f"reading {self.topic}: {error.str()}")
                    )
                end = remaining.get(partition, (0, 0))[1]
                if partition not in remaining or offset >= end:
                    continue
                if offset + 1 >= end:
                    del remaining[partition]
                scanned += 1
                if self.positions and (partition, offset) not in self.positions:
                    continue
                yield _decode(
                    message, self.topic, partition, offset, self.settings.max_message_bytes
                )
                if on_scanned is not None:
                    on_scanned(scanned)
        finally:
            # A caller that stops early (--limit) may leave this generator to the garbage
            # collector after close(): a closed consumer must not be touched.
            if self._consumer is consumer:
                consumer.unassign()

    # -- internals -------------------------------------------------------------------------

    def _require(self) -> Consumer:
        if self._consumer is None:
            raise RuntimeError("DeadLetterReader is not open")
        return self._consumer

    def _offset_ranges(self, consumer: Consumer) -> dict[int, tuple[int, int]]:
        partitions = range(self.partition_count(self.topic))
        ranges: dict[int, tuple[int, int]] = {}
        try:
            for partition in partitions:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(self.topic, partition), timeout=METADATA_TIMEOUT
                )
                ranges[partition] = (low, high)
            if self.since is not None:
                # Kafka reads a negative time as "latest" or "earliest": before 1970 is 0.
                since_ms = max(0, int(self.since.timestamp() * 1000))
                asked = [TopicPartition(self.topic, p, since_ms) for p in partitions]
                for found in consumer.offsets_for_times(asked, timeout=METADATA_TIMEOUT):
                    low, high = ranges[found.partition]
                    # No record at or after the time: the range is empty.
                    start = high if found.offset in (OFFSET_END, -1) else found.offset
                    ranges[found.partition] = (max(low, start), high)
        except KafkaException as error:
            raise DeadLetterReadError(
                self.client.describe(f"reading the offsets of {self.topic}: {error_text(error)}")
            ) from None
        return ranges


def _only(
    ranges: dict[int, tuple[int, int]], positions: frozenset[tuple[int, int]]
) -> dict[int, tuple[int, int]]:
    """Each partition's range narrowed to the wanted offsets in it (empty when none is)."""
    narrowed = {}
    for partition, (low, high) in ranges.items():
        wanted = [offset for p, offset in positions if p == partition and low <= offset < high]
        narrowed[partition] = (min(wanted), max(wanted) + 1) if wanted else (high, high)
    return narrowed


def _decode(message: Any, topic: str, partition: int, offset: int, max_bytes: int) -> DeadLetter:
    """The record as a ``DeadLetter``; whatever it holds, never an exception."""
    kind, stamp = message.timestamp()
    timestamp_ms = None if kind == TIMESTAMP_NOT_AVAILABLE else stamp
    raw_headers: list[tuple[str, bytes]] = []
    try:
        raw_headers = header_pairs(message.headers())
        return decode_dead_letter(
            topic=topic,
            partition=partition,
            offset=offset,
            timestamp_ms=timestamp_ms,
            key=message.key(),
            value=message.value(),
            raw_headers=raw_headers,
            max_bytes=max_bytes,
        )
    except Exception as error:  # a header name that is not UTF-8, or a bug of tenantq's
        log.exception("could not read the DLQ record %s[%d]@%d", topic, partition, offset)
        return unreadable_letter(
            topic=topic,
            partition=partition,
            offset=offset,
            timestamp_ms=timestamp_ms,
            raw_headers=raw_headers,
            reason=f"{INTERNAL_FAILURE}: {type(error).__name__}: {error}",
        )


#: How an unreadable record's reason starts when tenantq itself failed to read it.
INTERNAL_FAILURE = "tenantq could not read it"
