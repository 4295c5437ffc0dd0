"""The spans of a DLQ replay: one per record, linked to the job's first trace, its context
carried in the replayed message's headers (replacing a previous replay's), the envelope
untouched."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator

import pytest
from opentelemetry.trace import SpanKind, StatusCode
from span_recorder import SpanRecorder, recording_spans, traceparent_of

from tenantq import headers
from tenantq.dlq.records import DeadLetter, decode_dead_letter
from tenantq.dlq.replay_trace import ReplaySpans
from tenantq.observability.tracing import job_tracer
from tenantq.producer.publisher import Outgoing
from tenantq.schemas.envelope import Envelope, encode_envelope


@pytest.fixture
def spans() -> Iterator[SpanRecorder]:
    with recording_spans() as recorder:
        yield recorder


def _letter(
    trace_context: dict[str, str], extra: list[tuple[str, bytes]]
) -> tuple[DeadLetter, Outgoing]:
    envelope = Envelope(
        uuid.uuid4(), "default", "work", "acme", "acme", b"{}", dt.datetime.now(dt.UTC),
        trace_context=trace_context,
    )  # fmt: skip
    value = encode_envelope(envelope)
    letter = decode_dead_letter(
        topic="unit.default.dlq", partition=0, offset=7, timestamp_ms=0, key=b"acme",
        value=value,
        raw_headers=[(headers.ERROR_CLASS, b"Boom"), *extra], max_bytes=1 << 20,
    )  # fmt: skip
    kept = [*extra, (headers.REPLAY_COUNT, b"2")]
    return letter, Outgoing("unit.default", b"acme", value, kept, 3)


def test_each_replayed_record_gets_a_span_linked_to_its_jobs_trace(spans: SpanRecorder) -> None:
    tracer = job_tracer()
    assert tracer is not None
    publication = tracer.publication()
    original = publication.trace_context
    publication.end()
    send = spans.only("send")
    stale = [("traceparent", b"00-11111111111111111111111111111111-2222222222222222-01")]
    first, second = _letter(original, stale), _letter({}, [])
    replay = ReplaySpans.start("default", [first, second])
    assert replay is not None
    replay.end([True, False])
    linked, unlinked = spans.named("replay")
    assert linked.kind is SpanKind.PRODUCER and linked.name == "replay unit.default"
    assert [link.context.span_id for link in linked.links] == [send.context.span_id]
    assert linked.attributes is not None
    assert linked.attributes["tenantq.job.replays"] == 2
    assert linked.attributes["messaging.operation.name"] == "replay"
    assert linked.status.status_code is StatusCode.UNSET
    assert not unlinked.links  # a job published untraced has no trace to link to
    assert unlinked.status.status_code is StatusCode.ERROR
    message = replay.messages[0]
    # The envelope is published as it was; the replay's own context rides in the headers,
    # replacing the earlier replay's.
    assert message.value == first[1].value
    assert [value for name, value in message.headers if name == "traceparent"] == [
        traceparent_of(linked).encode()
    ]
    assert (headers.REPLAY_COUNT, b"2") in message.headers


def test_an_untraced_replay_changes_nothing() -> None:
    assert ReplaySpans.start("default", [_letter({}, [])]) is None
