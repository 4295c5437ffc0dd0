"""``Outbox.prepare`` writes what the producer would publish, with the worker's payload hash;
``Outbox.enqueue`` refuses connections it cannot run in; a key held by another job is a
conflict, the same job is a duplicate."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path
from typing import Any

import fakes
import pytest
from pydantic import BaseModel

import tenantq
from tenantq.outbox.outbox import Outbox, _existing, declared_partition_counts
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.producer.request import EnqueueRequest
from tenantq.schemas.envelope import decode_envelope
from tenantq.store.outbox import ExistingJob


class Receipt(BaseModel):
    order: int


def app_with_models(settings: tenantq.Settings) -> tenantq.App:
    app = tenantq.App(settings)
    app.job("receipt", queue="mail", model=Receipt, max_attempts=4)(lambda ctx, payload: None)
    return app


def test_prepare_is_the_producers_record_with_the_workers_hash(tmp_path: Path) -> None:
    settings = fakes.make_settings(tmp_path)
    app = app_with_models(settings)
    kafka = fakes.FakeKafkaProducer()
    with tenantq.Producer(
        settings, app, kafka_client=kafka, placement_book=PlacementBook(None, 60.0)
    ) as producer:
        producer.enqueue("receipt", tenant="acme", payload={"order": 7}).result(5)
    published = kafka.produced[0]
    with Outbox(app, settings=settings) as outbox:
        row = outbox.prepare(EnqueueRequest("receipt", "acme", {"order": 7}, idempotency_key=None))
    assert (row.topic, row.partition, row.key) == (
        published["topic"],
        published["partition"],
        published["key"],
    )
    mine, theirs = (
        decode_envelope(row.value, max_bytes=10**6),
        decode_envelope(published["value"], max_bytes=10**6),
    )
    assert (mine.queue, mine.job_type, mine.tenant_id, mine.partition_key, mine.payload) == (
        theirs.queue,
        theirs.job_type,
        theirs.tenant_id,
        theirs.partition_key,
        theirs.payload,
    )
    assert row.payload_sha256 == hashlib.sha256(mine.payload).digest()
    assert row.max_attempts == 4 and row.queue == "mail" and row.main_topic == "unit.mail"
    assert str(mine.job_id) == row.id


def test_prepare_validates_like_the_producer(tmp_path: Path) -> None:
    settings = fakes.make_settings(tmp_path)
    with Outbox(app_with_models(settings), settings=settings) as outbox:
        with pytest.raises(tenantq.PayloadValidationError, match="order"):
            outbox.enqueue(object(), "receipt", tenant="acme", payload={"order": "x"})
        with pytest.raises(tenantq.InvalidTenantId):
            outbox.enqueue(object(), "receipt", tenant="", payload={"order": 1})
        with pytest.raises(tenantq.ConfigurationError, match="psycopg Connection"):
            outbox.enqueue(object(), "receipt", tenant="acme", payload={"order": 1})


def test_a_delayed_job_goes_to_a_retry_tier_with_its_due_time(tmp_path: Path) -> None:
    settings = fakes.make_settings(tmp_path)
    with Outbox(settings=settings) as outbox:
        row = outbox.prepare(EnqueueRequest("later", "acme", {}, delay=120))
    assert row.topic.startswith("unit.default.retry.") and 0 <= row.partition < 3
    assert row.run_after is not None and row.main_topic == "unit.default"


def test_declared_partition_counts_cover_every_topic_of_every_queue(tmp_path: Path) -> None:
    count = declared_partition_counts(fakes.make_settings(tmp_path))
    assert count("unit.default") == 12 and count("unit.mail.retry.3") == 2
    assert count("unit.default.lane") == 12  # a tenant in the hot lane is enqueued there
    with pytest.raises(tenantq.ConfigurationError, match="no declared queue"):
        count("elsewhere")


def test_the_same_job_is_a_duplicate_and_anything_else_a_conflict(tmp_path: Path) -> None:
    settings = fakes.make_settings(tmp_path)
    with Outbox(settings=settings) as outbox:
        row = outbox.prepare(EnqueueRequest("t", "acme", {"a": 1}, idempotency_key="k"))
    held = uuid.uuid4()
    same = ExistingJob(held, "t", "acme", row.payload_sha256)
    assert _existing(row, same) == (held, False, "default")
    changes: list[dict[str, Any]] = [
        {"job_type": "other"},
        {"tenant_id": "beta"},
        {"payload_sha256": b"\0" * 32},
    ]
    for change in changes:
        other = ExistingJob(
            held,
            change.get("job_type", "t"),
            change.get("tenant_id", "acme"),
            change.get("payload_sha256", row.payload_sha256),
        )
        with pytest.raises(tenantq.JobConflict, match="'k'"):
            _existing(row, other)


def test_a_traced_outbox_enqueue_keeps_its_create_spans_context_in_the_entry(
    tmp_path: Path,
) -> None:
    from opentelemetry.trace import SpanKind
    from span_recorder import recording_spans, traceparent_of

    from tenantq.outbox.outbox import _start_creation

    settings = fakes.make_settings(tmp_path)
    app = app_with_models(settings)
    request = EnqueueRequest("receipt", "acme", {"order": 7})
    with recording_spans() as spans, Outbox(app, settings=settings) as outbox:
        with spans.provider.get_tracer("shop").start_as_current_span("checkout") as checkout:
            creation = _start_creation(request)
            assert creation is not None
            row = outbox._prepare_in(creation, request)
            creation.end()
        # A context the request names is kept as given: no span of ours.
        assert _start_creation(EnqueueRequest("receipt", "acme", {}, trace_context={})) is None
    create = spans.only("create")
    assert create.kind is SpanKind.PRODUCER and create.name == f"create {row.topic}"
    assert create.parent is not None
    assert create.parent.span_id == checkout.get_span_context().span_id
    assert create.attributes is not None
    assert create.attributes["tenantq.job.id"] == row.id
    assert create.attributes["messaging.destination.partition.id"] == str(row.partition)
    # The entry is the Kafka record byte for byte: the relay publishes this context as it is.
    envelope = decode_envelope(row.value, max_bytes=10**6)
    assert envelope.trace_context == {"traceparent": traceparent_of(create)}
