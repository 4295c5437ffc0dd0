"""The benchmarks' stand-in collector counts the spans an SDK exports to it over OTLP/HTTP,
as a worker configured by its ``environment()`` would."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "loadtest"))

from otlp_sink import OtlpSink  # noqa: E402


def test_the_sink_counts_the_spans_exported_to_it() -> None:
    with OtlpSink() as sink:
        environment = sink.environment("bench-worker")
        assert environment["OTEL_TRACES_EXPORTER"] == "otlp"
        assert environment["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] == sink.endpoint
        provider = sink.tracer_provider()
        tracer = provider.get_tracer("bench")
        for _ in range(7):
            tracer.start_span("job").end()
        assert provider.force_flush(10_000)
        provider.shutdown()
        assert sink.spans() == 7
