"""The producer SDK on the real broker and database: every acknowledged job is readable where
the partitioner said, placement changes apply within their TTL, admission refuses as specified,
and invalid jobs never reach Kafka."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
from confluent_kafka import Producer as KafkaProducer

import tenantq
from tenantq import headers as header_names
from tenantq.errors import (
    AdmissionRejected,
    InvalidJobError,
    InvalidTenantId,
    LatencyBudgetExceeded,
    PayloadValidationError,
    QueueFull,
)
from tenantq.partitioner.placement import Placement, key_partition
from tenantq.producer.producer import EnqueueRequest, JobRef, Producer
from tenantq.schemas.envelope import decode_envelope
from tenantq.store.engine import connect
from tenantq.store.placement import placement_delete, placement_upsert

pytestmark = pytest.mark.integration


def read_all(settings: tenantq.Settings, topic: str, expected: int) -> dict[tuple[int, int], Any]:
    """Every message of ``topic`` by (partition, offset), read with a plain consumer."""
    consumer = Consumer(
        settings.kafka_client_config(
            **{"group.id": f"reader-{uuid.uuid4().hex}", "enable.auto.commit": False}
        )
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        consumer.assign(
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p in metadata.topics[topic].partitions]
        )
        found: dict[tuple[int, int], Any] = {}
        deadline = time.monotonic() + 30
        while len(found) < expected and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=0.5):
                if message.error() is None:
                    found[(message.partition(), message.offset())] = message
        return found
    finally:
        consumer.close()


def total_messages(settings: tenantq.Settings, topic: str) -> int:
    consumer = Consumer(settings.kafka_client_config(**{"group.id": f"count-{uuid.uuid4().hex}"}))
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        total = 0
        for partition in metadata.topics[topic].partitions:
            low, high = _watermarks(consumer, TopicPartition(topic, partition))
            total += high - low
        return total
    finally:
        consumer.close()


def _watermarks(consumer: Consumer, partition: TopicPartition) -> tuple[int, int]:
    """The partition's offsets; a topic made a moment ago may answer "not leader" first."""
    deadline = time.monotonic() + 20
    while True:
        try:
            low, high = consumer.get_watermark_offsets(partition, timeout=10)
            return int(low), int(high)
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def assert_each_job_where_its_ref_says(
    settings: tenantq.Settings,
    topic: str,
    requests: list[EnqueueRequest],
    refs: list[JobRef],
    messages: dict[tuple[int, int], Any],
) -> None:
    """Each request's job is in ``topic`` (4 partitions) at the partition the partitioner
    gives its tenant and at the offset its ref names, with its job id header and envelope."""
    for request, ref in zip(requests, refs, strict=True):
        assert ref.topic == topic
        assert ref.partition == key_partition(request.tenant, 4)
        message = messages[(ref.partition, ref.offset)]
        assert dict(message.headers())[header_names.JOB_ID] == str(ref.job_id).encode()
        envelope = decode_envelope(message.value(), max_bytes=settings.max_message_bytes)
        assert envelope.job_id == ref.job_id
        assert envelope.tenant_id == request.tenant
        assert envelope.payload_json() == request.payload


def test_every_acknowledged_job_is_where_the_partitioner_said(settings: tenantq.Settings) -> None:
    requests = [
        EnqueueRequest("resize", f"tenant-{index % 17}", {"index": index}) for index in range(300)
    ]
    with Producer(settings) as producer:
        refs = [future.result(30) for future in producer.enqueue_many(requests)]
    topic = f"{settings.topic_prefix}.default"
    messages = read_all(settings, topic, len(refs))
    assert_each_job_where_its_ref_says(settings, topic, requests, refs, messages)


def test_every_job_of_a_batch_is_in_the_partition_its_ref_names(
    settings: tenantq.Settings,
) -> None:
    requests = [
        EnqueueRequest("resize", f"tenant-{index % 13}", {"index": index}) for index in range(500)
    ]
    with Producer(settings) as producer:
        first = producer.enqueue_batch(requests[:250])
        second = producer.enqueue_batch(requests[250:])
        refs = [*first.result(30), *second.result(30)]
    assert len({ref.job_id for ref in refs}) == len(requests)
    topic = f"{settings.topic_prefix}.default"
    messages = read_all(settings, topic, len(refs))
    assert len(messages) == len(refs) == total_messages(settings, topic)
    assert_each_job_where_its_ref_says(settings, topic, requests, refs, messages)


def hot_partition_now(producer: Producer) -> int:
    """The partition the next job of tenant ``hot`` lands on."""
    return producer.enqueue("resize", tenant="hot", payload={}).result(30).partition


def hot_lands_on(producer: Producer, partition: int, within: float) -> None:
    """Fails unless tenant ``hot``'s jobs land on ``partition`` within ``within`` seconds."""
    changed_at = time.monotonic()
    while hot_partition_now(producer) != partition:
        assert time.monotonic() - changed_at < within, f"placement not followed in {within}s"
        time.sleep(0.02)


def test_placement_changes_apply_within_the_ttl(
    make_settings: Callable[..., tenantq.Settings], db: psycopg.Connection[Any]
) -> None:
    # Not listening for changes: the TTL is what applies them.
    settings = make_settings(producer={"placement_ttl_seconds": 1.0, "placement_watch": False})
    hashed = key_partition("hot", 4)
    pinned = (hashed + 1) % 4
    with Producer(settings) as producer, connect(settings, autocommit=True) as operator:
        assert hot_partition_now(producer) == hashed
        pin = Placement.pinned([pinned])
        placement_upsert(operator, queue="default", tenant_id="hot", placement=pin)
        hot_lands_on(producer, pinned, within=1.0 + 0.5)
        placement_upsert(operator, queue="default", tenant_id="hot", placement=Placement.spread(4))
        time.sleep(1.1)
        futures = producer.enqueue_many([EnqueueRequest("resize", "hot", {}) for _ in range(200)])
        spread = {future.result(30).partition for future in futures}
        assert spread == {key_partition(f"hot#{shard}", 4) for shard in range(4)}
        placement_delete(operator, queue="default", tenant_id="hot")
        time.sleep(1.1)
        assert hot_partition_now(producer) == hashed


def test_a_watching_producer_follows_a_placement_change_at_once(
    make_settings: Callable[..., tenantq.Settings], db: psycopg.Connection[Any]
) -> None:
    # A TTL of a minute: only the notification can make the change show within a second.
    settings = make_settings(producer={"placement_ttl_seconds": 60.0})
    hashed = key_partition("hot", 4)
    pinned = (hashed + 1) % 4
    with Producer(settings) as producer, connect(settings, autocommit=True) as operator:
        assert hot_partition_now(producer) == hashed
        watcher = producer._placement_watcher  # connects in the background
        assert watcher is not None and watcher.listening.wait(10)
        pin = Placement.pinned([pinned])
        placement_upsert(operator, queue="default", tenant_id="hot", placement=pin)
        hot_lands_on(producer, pinned, within=1.0)
        assert placement_delete(operator, queue="default", tenant_id="hot")
        hot_lands_on(producer, hashed, within=1.0)


def test_tenant_rate_limit_rejects_with_retry_after(
    make_settings: Callable[..., tenantq.Settings],
) -> None:
    settings = make_settings(producer={"tenant_rate_per_second": 1, "tenant_burst": 3})
    with Producer(settings) as producer:
        # Admission happens at enqueue: the burst is spent before any acknowledgement is
        # awaited, since a slow first acknowledgement (over 1 s) would refill a token.
        admitted = [producer.enqueue("resize", tenant="acme", payload={}) for _ in range(3)]
        with pytest.raises(AdmissionRejected) as raised:
            producer.enqueue("resize", tenant="acme", payload={})
        assert raised.value.retry_after is not None and 0 < raised.value.retry_after <= 1.0
        for future in admitted:
            assert isinstance(future.result(30), JobRef)
        producer.enqueue("resize", tenant="globex", payload={}).result(30)


def test_full_local_buffer_raises_queue_full(
    make_settings: Callable[..., tenantq.Settings],
) -> None:
    settings = make_settings(producer={"buffer_timeout_seconds": 0.3, "linger_ms": 5000})
    with Producer(settings, queue_buffering_max_messages=1) as producer:
        first = producer.enqueue("resize", tenant="acme", payload={})
        started = time.monotonic()
        with pytest.raises(QueueFull):
            producer.enqueue("resize", tenant="acme", payload={})
        assert time.monotonic() - started >= 0.3
        producer.flush(30)
        assert isinstance(first.result(30), JobRef)


def test_latency_guard_rejects_when_the_oldest_job_is_too_old(
    make_settings: Callable[..., tenantq.Settings],
) -> None:
    settings = make_settings(producer={"latency_budget_seconds": 1.0})
    raw = KafkaProducer(settings.kafka_client_config())
    raw.produce(f"{settings.topic_prefix}.default", b"waiting", partition=0)
    assert raw.flush(30) == 0
    time.sleep(1.5)
    with Producer(settings) as producer:
        with pytest.raises(LatencyBudgetExceeded, match="budget is 1s"):
            producer.enqueue("resize", tenant="acme", payload={})


def test_invalid_jobs_never_reach_kafka(settings: tenantq.Settings) -> None:
    app = tenantq.App(settings)

    from pydantic import BaseModel

    class Resize(BaseModel):
        width: int

    app.job("resize", model=Resize)(lambda ctx, payload: None)
    with Producer(settings, app) as producer:
        with pytest.raises(InvalidTenantId):
            producer.enqueue("resize", tenant="bad tenant", payload={"width": 1})
        with pytest.raises(PayloadValidationError, match="width"):
            producer.enqueue("resize", tenant="acme", payload={"width": "wide"})
        with pytest.raises(InvalidJobError):
            producer.enqueue("resize", tenant="acme", payload={"width": 1}, max_attempts=0)
        with pytest.raises(InvalidJobError):
            producer.enqueue_many(
                [EnqueueRequest("resize", "acme", {"width": 1})] * 5
                + [EnqueueRequest("resize", "acme", {"width": 1}, delay=float("nan"))]
            )
        producer.flush(30)
    assert total_messages(settings, f"{settings.topic_prefix}.default") == 0


def test_scheduled_job_lands_in_its_retry_tier(settings: tenantq.Settings) -> None:
    before = time.time()
    with Producer(settings) as producer:
        ref = asyncio.run(
            producer.enqueue_async("resize", tenant="acme", payload={"a": 1}, delay=2.0)
        )
    after = time.time()
    # Test tiers are 1 s, 3 s, 10 s: a 2 s wait rides the 3 s tier.
    assert ref.topic == f"{settings.topic_prefix}.default.retry.1"
    [message] = read_all(settings, ref.topic, 1).values()
    headers = dict(message.headers())
    assert headers[header_names.DELAY_REASON] == b"scheduled"
    due_at = int(headers[header_names.DUE_AT_MS]) / 1000
    # Two seconds after the enqueue, whenever the message is read back.
    assert before + 2.0 - 0.01 <= due_at <= after + 2.0 + 0.01


def test_cli_enqueue_and_placement(
    settings: tenantq.Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from tenantq.cli import app

    monkeypatch.setenv("TENANTQ_KAFKA_BOOTSTRAP_SERVERS", settings.require_bootstrap_servers())
    monkeypatch.setenv("TENANTQ_DATABASE_URL", settings.require_database_url())
    monkeypatch.setenv("TENANTQ_TOPIC_PREFIX", settings.topic_prefix)
    monkeypatch.setenv("TENANTQ_QUEUES", '{"default": {"partitions": 4}}')
    runner = CliRunner()
    pinned = (key_partition("cli-tenant", 4) + 2) % 4
    result = runner.invoke(app, ["placement", "set", "cli-tenant", "--pinned", str(pinned)])
    assert result.exit_code == 0, result.output
    assert "pinned to" in runner.invoke(app, ["placement", "show"]).output
    result = runner.invoke(
        app, ["enqueue", "resize", "--tenant", "cli-tenant", "--payload", '{"a": 1}', "-n", "3"]
    )
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 3
    assert all(f"{settings.topic_prefix}.default[{pinned}]@" in line for line in lines)
    result = runner.invoke(app, ["placement", "clear", "cli-tenant"])
    assert result.exit_code == 0 and "back to hashed" in result.output
    result = runner.invoke(app, ["placement", "set", "cli-tenant", "--pinned", "9"])
    # An operator's mistake is one line and status 2, not a traceback.
    assert result.exit_code == 2 and result.output.startswith("tenantq: "), result.output
    assert "pinned partitions [9] do not exist" in result.output
    assert len(result.output.strip().splitlines()) == 1
