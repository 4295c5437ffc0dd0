"""Spans recorded in memory (the OpenTelemetry SDK's ``InMemorySpanExporter``) for the
tests of tracing: ``recording_spans()`` makes tenantq trace with a provider of its own
(``tenantq.observability.tracing.use_provider``), never the global one, so the process's
other tests stay untraced."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tenantq.observability import tracing


class SpanRecorder:
    """The provider tenantq traces with, and the spans it finished."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        """The finished spans whose name starts with ``prefix`` (``send``, ``process``...)."""
        return [span for span in self.spans() if span.name.startswith(prefix)]

    def only(self, prefix: str) -> ReadableSpan:
        found = self.named(prefix)
        assert len(found) == 1, [span.name for span in self.spans()]
        return found[0]


@contextmanager
def recording_spans() -> Iterator[SpanRecorder]:
    recorder = SpanRecorder()
    tracing.use_provider(recorder.provider)
    try:
        yield recorder
    finally:
        tracing.use_provider(None)
        recorder.provider.shutdown()


def traceparent_of(span: ReadableSpan) -> str:
    """The W3C ``traceparent`` a sampled ``span`` is propagated as."""
    context = span.get_span_context()
    assert context is not None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
