"""The spans of a DLQ replay, when the replaying process traces
(``tenantq.observability.tracing``): one per record, linked to the trace its job was first
published in, and carried in the replayed message's headers (``traceparent``), so the
attempts that follow link back to the replay. The envelope, and so the job's own context,
is published as it was: those attempts stay children of the job's first publication.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tenantq import headers
from tenantq.dlq.records import DeadLetter
from tenantq.observability.tracing import job_tracer
from tenantq.producer.publisher import Outgoing

if TYPE_CHECKING:
    from opentelemetry.trace import Span


class ReplaySpans:
    """The spans of one publish round of a replay, and the messages carrying them."""

    def __init__(self, spans: list[Span], messages: list[Outgoing]) -> None:
        self._spans = spans
        #: The round's messages, each with its replay span's context in its headers.
        self.messages = messages

    @classmethod
    def start(cls, queue: str, chosen: Sequence[tuple[DeadLetter, Outgoing]]) -> ReplaySpans | None:
        """Start a span per record about to be published again; None when not traced."""
        tracer = job_tracer()
        if tracer is None or not chosen:
            return None
        spans: list[Span] = []
        messages: list[Outgoing] = []
        names = tracer.header_names
        for letter, message in chosen:
            envelope = letter.envelope
            assert envelope is not None  # only a decodable record is replayed
            span, carrier = tracer.replay(
                envelope.trace_context,
                topic=message.topic,
                partition=message.partition,
                job_id=str(envelope.job_id),
                job_type=envelope.job_type,
                tenant=envelope.tenant_id,
                queue=queue,
                replays=_replays(message),
            )
            kept = [(name, value) for name, value in message.headers if name not in names]
            kept += [(name, value.encode()) for name, value in carrier.items()]
            spans.append(span)
            messages.append(dataclasses.replace(message, headers=kept))
        return cls(spans, messages)

    def end(self, acknowledged: Sequence[bool]) -> None:
        """End each span: published, or not acknowledged by Kafka."""
        from opentelemetry.trace import Status, StatusCode

        for span, ok in zip(self._spans, acknowledged, strict=True):
            if not ok:
                span.set_status(Status(StatusCode.ERROR, "Kafka did not acknowledge the publish"))
            span.end()


def _replays(message: Outgoing) -> int:
    for name, value in message.headers:
        if name == headers.REPLAY_COUNT:
            try:
                return int(value)
            except ValueError:
                return 0
    return 0
