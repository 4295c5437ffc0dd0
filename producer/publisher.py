"""Writes of the worker to Kafka: delayed copies into the retry tiers, dead letters into the
DLQ, hot-lane copies. The caller marks a message's source done only once Kafka acknowledged
what it wrote for it: a job moves on only once Kafka holds its next step. ``publish`` waits
for the acknowledgements; ``send`` returns at once and hands them over later, when the poll
thread calls ``serve`` (a hot-lane move sends a thousand copies, and the poll loop must not
stop for them)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, Producer

from tenantq import headers
from tenantq.producer.delivery import confirmed, produce_when_room
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
    """An idempotent producer: ``publish`` waits for a batch's acknowledgements, ``send`` has
    them handed back by ``serve``."""

    def __init__(
        self,
        settings: Settings,
        client_id: str,
        producer_factory: Callable[[dict[str, Any]], Any] = Producer,
    ) -> None:
        config: dict[str, Any] = {
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
            "compression.type": "lz4",
            "client.id": client_id,
            "message.max.bytes": settings.max_message_bytes + 256 * 1024,
        }
        self._producer = producer_factory(settings.kafka_client_config(**config))
        #: Batches given to ``send`` whose every message is settled: (acknowledged, done).
        self._settled: list[tuple[list[bool], Callable[[list[bool]], None]]] = []
        self._sending = 0

    @property
    def sending(self) -> int:
        """Messages given to ``send`` whose batch is not handed back yet."""
        return self._sending

    def publish(self, messages: Sequence[Outgoing], timeout: float = 30.0) -> list[bool]:
        """Send and wait; returns, per message, whether Kafka acknowledged it."""
        if not messages:
            return []
        acknowledged = [False] * len(messages)
        self._produce(messages, acknowledged, lambda: None)
        self._producer.flush(timeout)
        return acknowledged

    def send(self, messages: Sequence[Outgoing], done: Callable[[list[bool]], None]) -> None:
        """Send without waiting. Once Kafka has settled every message, a later ``serve`` calls
        ``done`` with, per message, whether Kafka acknowledged it (on the thread that called
        ``serve``, never from inside ``publish``)."""
        if not messages:
            return
        acknowledged = [False] * len(messages)
        left = [len(messages)]
        self._sending += len(messages)

        def one_settled() -> None:
            left[0] -= 1
            if left[0] == 0:
                self._settled.append((acknowledged, done))

        self._produce(messages, acknowledged, one_settled)

    def serve(self) -> None:
        """Take delivery reports without waiting, then hand each batch of ``send`` that is
        settled to its ``done``."""
        if not self._sending:
            return
        self._producer.poll(0)
        settled, self._settled = self._settled, []
        for acknowledged, done in settled:
            self._sending -= len(acknowledged)
            done(acknowledged)

    def settle(self, timeout: float) -> None:
        """Wait up to ``timeout`` for what ``send`` sent, then ``serve`` (a revoke, a stop)."""
        if self._sending:
            self._producer.flush(timeout)
            self.serve()

    def _produce(
        self, messages: Sequence[Outgoing], acknowledged: list[bool], settled: Callable[[], None]
    ) -> None:
        def report(index: int) -> Any:
            def on_delivery(error: KafkaError | None, message: Any) -> None:
                # Not confirmed (no offset): not acknowledged, so the caller sends it again.
                acknowledged[index] = confirmed(error, message)
                settled()

            return on_delivery

        for index, message in enumerate(messages):
            keywords: dict[str, Any] = {}
            if message.partition is not None:
                keywords["partition"] = message.partition
            produce_when_room(
                self._producer,
                message.topic,
                value=message.value,
                key=message.key,
                headers=list[tuple[str, str | bytes | None]](message.headers),
                on_delivery=report(index),
                **keywords,
            )

    def close(self, timeout: float = 10.0) -> None:
        self._producer.flush(timeout)
