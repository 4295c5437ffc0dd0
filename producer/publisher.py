"""Writes of the worker to Kafka: delayed copies into the retry tiers and dead letters into the
DLQ. Each batch is flushed and its acknowledgements checked before the caller marks anything
done: a job moves on only once Kafka holds its next step."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, Producer
from tenantq import headers
from tenantq.producer.delivery import confirmed
from tenantq.settings import Settings
from tenantq.topics import QueueTopics, tier_for_wait


@dataclass(frozen=True)
class Outgoing:
    """One message the worker must get acknowledged."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    partition: int | None = None


def retry_message(
    topics: QueueTopics,
    delays: Sequence[float],
    *,
    key: bytes | None,
    value: bytes,
    base_headers: list[tuple[str, bytes]],
    wait_seconds: float,
    reason: str,
    partition: int | None,
    now: float | None = None,
) -> Outgoing:
    due_ms = int(((time.time() if now is None else now) + max(0.0, wait_seconds)) * 1000)
    kept = [(k, v) for k, v in base_headers if k not in (headers.DUE_AT_MS, headers.DELAY_REASON)]
    kept += [(headers.DUE_AT_MS, str(due_ms).encode()), (headers.DELAY_REASON, reason.encode())]
    tier = topics.retries[tier_for_wait(wait_seconds, delays)]
    return Outgoing(tier, key, value, kept, partition)


def dead_letter(
    topics: QueueTopics,
    *,
    key: bytes | None,
    value: bytes | None,
    base_headers: list[tuple[str, bytes]],
    error_class: str,
    error_message: str,
    attempts: int,
    worker: str,
    source: tuple[str, int, int],
    max_body_bytes: int | None = None,
) -> Outgoing:
    """A DLQ record: the original bytes (truncated past ``max_body_bytes``, with the hash of
    the whole) plus why it died."""
    body = value
    extra: list[tuple[str, bytes]] = []
    if value is not None and max_body_bytes is not None and len(value) > max_body_bytes:
        extra.append((headers.PAYLOAD_SHA256, hashlib.sha256(value).hexdigest().encode()))
        body = value[:max_body_bytes]
    topic, partition, offset = source
    meta = [
        (headers.ERROR_CLASS, error_class.encode()),
        (headers.ERROR_MESSAGE, error_message.encode()[:4000]),
        (headers.ATTEMPTS, str(attempts).encode()),
        (headers.WORKER, worker.encode()),
        (headers.SOURCE_TOPIC, topic.encode()),
        (headers.SOURCE_PARTITION, str(partition).encode()),
        (headers.SOURCE_OFFSET, str(offset).encode()),
        (headers.DEAD_AT_MS, str(int(time.time() * 1000)).encode()),
    ]
    drop = {name for name, _ in meta} | {headers.DUE_AT_MS, headers.DELAY_REASON}
    kept = [(k, v) for k, v in base_headers if k not in drop]
    return Outgoing(topics.dlq, key, body, kept + meta + extra, partition)


class Publisher:
    """An idempotent producer whose batches are acknowledged before ``publish`` returns."""

    def __init__(self, settings: Settings, client_id: str) -> None:
        config: dict[str, Any] = {
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
            "compression.type": "lz4",
            "client.id": client_id,
            "message.max.bytes": settings.max_message_bytes + 256 * 1024,
        }
        self._producer = Producer(settings.kafka_client_config(**config))

    def publish(self, messages: Sequence[Outgoing], timeout: float = 30.0) -> list[bool]:
        """Send and wait; returns, per message, whether Kafka acknowledged it."""
        if not messages:
            return []
        acknowledged = [False] * len(messages)

        def report(index: int) -> Any:
            def on_delivery(error: KafkaError | None, message: Any) -> None:
                # Not confirmed (no offset): not acknowledged, so the caller sends it again.
                acknowledged[index] = confirmed(error, message)

            return on_delivery

        for index, message in enumerate(messages):
            keywords: dict[str, Any] = {}
            if message.partition is not None:
                keywords["partition"] = message.partition
            while True:
                try:
                    self._producer.produce(
                        message.topic,
                        value=message.value,
                        key=message.key,
                        headers=list[tuple[str, str | bytes | None]](message.headers),
                        on_delivery=report(index),
                        **keywords,
                    )
                    break
                except BufferError:
                    self._producer.poll(0.05)
        self._producer.flush(timeout)
        return acknowledged

    def close(self, timeout: float = 10.0) -> None:
        self._producer.flush(timeout)
