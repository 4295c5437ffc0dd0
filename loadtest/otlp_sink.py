"""A stand-in OpenTelemetry collector for the benchmarks' tracing runs: it takes OTLP/HTTP
trace exports (``POST /v1/traces``, protobuf), counts their spans and answers 200.

With it the traced runs pay what a deployment pays (each span made, batched, encoded as
protobuf and posted by the SDK's batch processor), and nothing for a collector: the sink is a
process of its own, whose CPU is not the worker's or the producer's.

    with OtlpSink() as sink:
        environment.update(sink.environment())   # OTEL_* for a worker process
        ...
        sink.spans()                              # spans received so far
"""

from __future__ import annotations

import multiprocessing
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _serve(port: Any, spans: Any) -> None:
    """The sink process: serve until killed; ``port`` and ``spans`` are shared values."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            request = ExportTraceServiceRequest.FromString(body)
            count = sum(
                len(scope.spans)
                for resource in request.resource_spans
                for scope in resource.scope_spans
            )
            with lock:
                spans.value += count
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port.value = server.server_address[1]
    server.serve_forever()


class OtlpSink:
    """An OTLP/HTTP trace receiver on a free local port, in a process of its own."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self._port = context.Value("i", 0)
        self._spans = context.Value("q", 0)
        self._process = context.Process(
            target=_serve, args=(self._port, self._spans), name="otlp-sink", daemon=True
        )

    def spans(self) -> int:
        """Spans received so far."""
        return int(self._spans.value)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._port.value}/v1/traces"

    def environment(self, service_name: str | None = None) -> dict[str, str]:
        """The ``OTEL_*`` variables that make a ``tenantq worker`` export here."""
        variables = {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": self.endpoint,
        }
        if service_name is not None:
            variables["OTEL_SERVICE_NAME"] = service_name
        return variables

    def tracer_provider(self) -> Any:
        """An SDK tracer provider exporting here (batched), for the benchmark's producer."""
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=self.endpoint)))
        return provider

    def __enter__(self) -> OtlpSink:
        import time

        self._process.start()
        deadline = time.monotonic() + 30
        while not self._port.value:
            if time.monotonic() > deadline or not self._process.is_alive():
                raise RuntimeError("the OTLP sink did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._process.kill()
        self._process.join(5)
