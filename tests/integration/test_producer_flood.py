"""One producer, one tenant flooding it beside others, on the real broker: the flooding
tenant's jobs go through a Kafka client of its own, every job is acknowledged where its ref
says, and each tenant's jobs lie in their partition in the order they were enqueued, across
the move from the shared client to the flood client."""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

import tenantq
from tenantq.partitioner.placement import key_partition
from tenantq.producer.producer import EnqueueRequest, JobRef, Producer
from tenantq.schemas.envelope import decode_envelope

pytestmark = pytest.mark.integration

COLD = [f"cold-{index}" for index in range(6)]


def read_partition(settings: tenantq.Settings, topic: str, partition: int, count: int) -> list[Any]:
    """The first ``count`` messages of ``topic``'s ``partition``, in the log's order."""
    consumer = Consumer(
        settings.kafka_client_config(
            **{"group.id": f"reader-{uuid.uuid4().hex}", "enable.auto.commit": False}
        )
    )
    try:
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        found: list[Any] = []
        deadline = time.monotonic() + 30
        while len(found) < count and time.monotonic() < deadline:
            found += [m for m in consumer.consume(500, timeout=0.5) if m.error() is None]
        return found
    finally:
        consumer.close()


def test_a_flooding_tenant_gets_its_own_client_and_every_tenant_keeps_its_order(
    settings: tenantq.Settings, caplog: pytest.LogCaptureFixture
) -> None:
    sent: dict[str, int] = {tenant: 0 for tenant in ["whale", *COLD]}
    batches: list[tuple[list[EnqueueRequest], Any]] = []

    def request(tenant: str) -> EnqueueRequest:
        sent[tenant] += 1
        return EnqueueRequest("resize", tenant, {"n": sent[tenant]})

    caplog.set_level(logging.INFO, logger="tenantq.producer")
    with Producer(settings) as producer:
        # 200 whale jobs and one cold job every 10 ms (20,000 and 100 jobs/s) for 1.5 s, in
        # publications of one kind and of both.
        started = time.monotonic()
        tick = 0
        while time.monotonic() - started < 1.5:
            whale = [request("whale") for _ in range(200)]
            cold = [request(COLD[tick % len(COLD)])]
            for requests in ([*whale, *cold],) if tick % 3 == 0 else (whale, cold):
                batches.append((requests, producer.enqueue_batch(requests)))
            tick += 1
            time.sleep(0.01)
        refs: list[tuple[EnqueueRequest, JobRef]] = []
        for requests, batch in batches:
            refs += zip(requests, batch.result(30), strict=True)
    assert any("whale" in r.getMessage() and "of their own" in r.getMessage()
               for r in caplog.records)  # fmt: skip
    assert not any(
        tenant in r.getMessage() and "of their own" in r.getMessage()
        for r in caplog.records
        for tenant in COLD
    )
    topic = f"{settings.topic_prefix}.default"
    # Each partition read once, as far as the last job of any of its tenants.
    lengths: dict[int, int] = {}
    for _, ref in refs:
        lengths[ref.partition] = max(lengths.get(ref.partition, 0), ref.offset + 1)
    logs = {p: read_partition(settings, topic, p, length) for p, length in lengths.items()}
    for tenant, count in sent.items():
        partition = key_partition(tenant, 4)
        ours = [ref for request, ref in refs if request.tenant == tenant]
        assert len(ours) == count and {ref.partition for ref in ours} == {partition}
        messages = logs[partition]
        numbers = [
            decode_envelope(m.value(), max_bytes=settings.max_message_bytes).payload_json()["n"]
            for m in messages
            if m.key() == tenant.encode()
        ]
        # Written once each, in the order enqueued, at the offsets their refs name.
        assert numbers == list(range(1, count + 1)), tenant
        offsets = {m.offset() for m in messages if m.key() == tenant.encode()}
        assert offsets == {ref.offset for ref in ours}
