"""The producer's span per publishing call: one for ``enqueue`` with the job's attributes, one
for a whole batch, and its context in every envelope the call publishes."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeClock, FakeKafkaProducer, make_settings
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode
from span_recorder import SpanRecorder, recording_spans, traceparent_of

from tenantq.errors import InvalidJobError
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.producer.producer import EnqueueRequest, Producer
from tenantq.schemas.envelope import decode_envelope


@pytest.fixture
def spans() -> Iterator[SpanRecorder]:
    with recording_spans() as recorder:
        yield recorder


@pytest.fixture
def kafka() -> FakeKafkaProducer:
    return FakeKafkaProducer()


@pytest.fixture
def producer(tmp_path: Path, kafka: FakeKafkaProducer) -> Iterator[Producer]:
    clock = FakeClock(100.0)
    settings = make_settings(tmp_path)
    book = PlacementBook(None, 5.0, clock)
    with Producer(settings, placement_book=book, kafka_client=kafka, clock=clock) as made:
        yield made


def _envelopes(kafka: FakeKafkaProducer) -> list[Any]:
    return [decode_envelope(sent["value"], max_bytes=1 << 20) for sent in kafka.produced]


def test_an_enqueue_is_one_send_span_whose_context_its_envelope_carries(
    spans: SpanRecorder, producer: Producer, kafka: FakeKafkaProducer
) -> None:
    ref = producer.enqueue("report", tenant="acme", payload={"n": 1}).result(5)
    span = spans.only("send")
    assert span.name == f"send {ref.topic}"
    assert span.kind is SpanKind.PRODUCER
    assert dict(span.attributes or {}) == {
        "messaging.system": "kafka",
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.destination.name": ref.topic,
        "messaging.destination.partition.id": str(ref.partition),
        "tenantq.job.id": str(ref.job_id),
        "tenantq.job.type": "report",
        "tenantq.job.tenant": "acme",
        "tenantq.job.queue": "default",
    }
    (envelope,) = _envelopes(kafka)
    assert envelope.trace_context == {"traceparent": traceparent_of(span)}


def test_the_send_span_is_a_child_of_the_callers_span(
    spans: SpanRecorder, producer: Producer
) -> None:
    caller = spans.provider.get_tracer("the-service")
    with caller.start_as_current_span("request") as request:
        producer.enqueue("report", tenant="acme", payload={}).result(5)
    send = spans.only("send")
    assert send.parent is not None
    assert send.parent.span_id == request.get_span_context().span_id
    assert send.context.trace_id == request.get_span_context().trace_id


def test_a_batch_is_one_span_and_every_envelope_carries_its_context(
    spans: SpanRecorder, producer: Producer, kafka: FakeKafkaProducer
) -> None:
    later = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)
    requests = [EnqueueRequest("report", f"tenant-{n % 3}", {"n": n}) for n in range(50)]
    # Jobs with options take ``prepare``'s own path: they carry the same context.
    requests += [
        EnqueueRequest("report", "acme", {"n": 50}, max_attempts=3),
        EnqueueRequest("report", "acme", {"n": 51}, run_after=later),
    ]
    for future in producer.enqueue_many(requests):
        future.result(5)
    producer.enqueue_batch(requests[:10]).result(5)
    many, batch = spans.named("send")
    assert many.attributes is not None and batch.attributes is not None
    assert many.attributes["messaging.batch.message_count"] == 52
    assert batch.attributes["messaging.batch.message_count"] == 10
    # Shared by every job: the job type and queue; not the tenant, topic or partition.
    assert many.attributes["tenantq.job.type"] == "report"
    assert many.attributes["tenantq.job.queue"] == "default"
    for name in ("tenantq.job.tenant", "tenantq.job.id", "messaging.destination.partition.id"):
        assert name not in many.attributes
    assert many.name == "send"  # the main topic and a retry tier
    envelopes = _envelopes(kafka)
    assert {e.trace_context["traceparent"] for e in envelopes[:52]} == {traceparent_of(many)}
    assert {e.trace_context["traceparent"] for e in envelopes[52:]} == {traceparent_of(batch)}


def test_a_context_the_request_names_is_kept_as_given(
    spans: SpanRecorder, producer: Producer, kafka: FakeKafkaProducer
) -> None:
    own = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    producer.enqueue_many(
        [
            EnqueueRequest("report", "acme", {}, trace_context=own),
            EnqueueRequest("report", "acme", {}),
        ]
    )[1].result(5)
    first, second = _envelopes(kafka)
    assert first.trace_context == own
    assert second.trace_context == {"traceparent": traceparent_of(spans.only("send"))}


def test_a_refused_call_ends_its_span_as_an_error(
    spans: SpanRecorder, producer: Producer, kafka: FakeKafkaProducer
) -> None:
    with pytest.raises(InvalidJobError):
        producer.enqueue("report", tenant="not a tenant!", payload={})
    span = spans.only("send")
    assert span.status.status_code is StatusCode.ERROR
    assert [event.name for event in span.events] == ["exception"]
    assert kafka.produced == []


def test_an_unsampled_call_still_propagates_its_decision(
    tmp_path: Path, kafka: FakeKafkaProducer
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    from tenantq.observability import tracing

    tracing.use_provider(TracerProvider(sampler=ALWAYS_OFF))
    try:
        settings = make_settings(tmp_path)
        book = PlacementBook(None, 5.0)
        with Producer(settings, placement_book=book, kafka_client=kafka) as producer:
            producer.enqueue("report", tenant="acme", payload={}).result(5)
    finally:
        tracing.use_provider(None)
    (envelope,) = _envelopes(kafka)
    # The sampled flag is off: the worker's attempt spans follow the same decision.
    flags = envelope.trace_context["traceparent"].rsplit("-", 1)[1]
    assert int(flags, 16) & 1 == 0


def test_without_a_provider_nothing_is_traced_and_envelopes_carry_no_context(
    producer: Producer, kafka: FakeKafkaProducer
) -> None:
    # opentelemetry is imported (by this module) but no SDK provider is configured.
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    producer.enqueue_many([EnqueueRequest("report", "acme", {}) for _ in range(3)])
    producer.flush(5)
    assert [envelope.trace_context for envelope in _envelopes(kafka)] == [{}, {}, {}]


def test_a_traced_batch_is_byte_for_byte_each_job_with_the_context_as_its_own(
    tmp_path: Path,
) -> None:
    """The fast path writes the publication's context into the tail it shares across the
    batch: the same bytes as ``prepare`` of each request naming that context itself (and
    fastavro's reading of them), options or not."""
    context = {
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "tracestate": "vendor=é",
    }
    with Producer(
        make_settings(tmp_path),
        placement_book=PlacementBook(None, 5.0),
        kafka_client=FakeKafkaProducer(),
    ) as made:
        preparer = made._preparer
        now = dt.datetime.now(dt.UTC)
        requests: list[Any] = [EnqueueRequest("resize", f"t{n}", {"n": n}) for n in range(20)]
        requests += [
            {"job_type": "resize", "tenant": "acme", "payload": [1, 2]},
            EnqueueRequest("resize", "acme", {}, delay=30),
            EnqueueRequest("resize", "acme", {}, idempotency_key="k"),
        ]
        batched = preparer.prepare_all(requests, now, context)
        for index, request in enumerate(requests):
            if isinstance(request, dict):
                request = EnqueueRequest(**request)
            named = dataclasses.replace(request, trace_context=context)
            alone = preparer.prepare(named, now, batched.job_ints[index])
            assert batched[index] == alone
            envelope = decode_envelope(batched[index].value, max_bytes=1 << 20)
            assert envelope.trace_context == context
