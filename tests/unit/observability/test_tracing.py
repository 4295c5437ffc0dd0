"""Tracing costs nothing until a process traces: no import of ``opentelemetry`` before then,
the extra may be absent; ``configure_from_environment`` sets up the SDK from ``OTEL_*``.

The checks of what a process imports, and of the global provider (which OpenTelemetry lets a
process set only once), run in subprocesses of their own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tenantq.observability import tracing

TESTS = Path(__file__).resolve().parents[2]

#: A producer (a fake Kafka client), an outbox's preparation and a handler run: the hot
#: paths, in a process that has not configured tracing.
HOT_PATHS = """
import sys, threading, time, uuid, datetime as dt
from fakes import FakeKafkaProducer, make_settings
import tenantq
from tenantq.app import JobType
from tenantq.consumer.context import JobContext
from tenantq.consumer.runner import HandlerRunner, Task
from tenantq.observability.tracing import job_tracer
from tenantq.outbox.outbox import Outbox
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.producer.producer import EnqueueRequest, Producer
from tenantq.schemas.envelope import decode_envelope
import pathlib, tempfile

settings = make_settings(pathlib.Path(tempfile.mkdtemp()))
kafka = FakeKafkaProducer()
with Producer(settings, placement_book=PlacementBook(None, 5.0), kafka_client=kafka) as producer:
    producer.enqueue("report", tenant="acme", payload={}).result(5)
    many = [EnqueueRequest("report", "t", {"n": n}) for n in range(5)]
    for future in producer.enqueue_many(many):
        future.result(5)
    producer.enqueue_batch([EnqueueRequest("report", "t", {}, delay=60)]).result(5)
contexts = [decode_envelope(m["value"], max_bytes=1 << 20).trace_context for m in kafka.produced]
assert contexts == [{}] * 7, contexts
with Outbox(settings=settings) as outbox:
    row = outbox.prepare(EnqueueRequest("report", "acme", {}))
assert decode_envelope(row.value, max_bytes=1 << 20).trace_context == {}
done = threading.Event()
runner = HandlerRunner(1, lambda task: done.set())
context = JobContext(uuid.uuid4(), "default", "report", "acme", 1, 3, time.monotonic() + 5)
runner.submit(Task(JobType("report", "default", lambda ctx, payload: None, None), b"{}",
                   context, time.monotonic() + 5))
assert done.wait(5)
runner.stop(2)
assert job_tracer() is None
"""


def _python(script: str, *, env: dict[str, str] | None = None, path: list[Path] = ()) -> str:
    """Run ``script`` in a fresh interpreter (the tests folder and ``path`` first on its
    path); returns its standard output, failing with its standard error."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    environment.update(env or {})
    environment["PYTHONPATH"] = os.pathsep.join(str(p) for p in [*path, TESTS])
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_an_untraced_process_never_imports_opentelemetry() -> None:
    _python(
        HOT_PATHS + "\nassert not [m for m in sys.modules if m.startswith('opentelemetry')], "
        "sorted(m for m in sys.modules if m.startswith('opentelemetry'))\n"
    )


@pytest.fixture
def without_opentelemetry(tmp_path: Path) -> Path:
    """A folder that, first on the path, makes ``opentelemetry`` unimportable."""
    package = tmp_path / "opentelemetry"
    package.mkdir()
    (package / "__init__.py").write_text(
        "raise ImportError('opentelemetry is not installed (simulated)')\n"
    )
    return tmp_path


def test_with_the_extra_absent_everything_works_and_nothing_is_traced(
    without_opentelemetry: Path,
) -> None:
    # The worker's setup says why tracing is off and goes on; the hot paths run untraced.
    script = (
        HOT_PATHS
        + """
import logging, io
try:
    import opentelemetry.trace
except ImportError:
    pass
else:
    raise AssertionError("opentelemetry should be unimportable here")
from tenantq.observability import tracing
try:
    tracing.configure_from_environment()
except tracing.TracingUnavailable as error:
    assert "pip install 'tenantq[otel]'" in str(error), error
else:
    raise AssertionError("configured without the SDK")
stream = io.StringIO()
logging.getLogger("tenantq").addHandler(logging.StreamHandler(stream))
from tenantq.cli.otel import trace_from_environment
assert trace_from_environment("tenantq-worker") is False
assert "tracing is off" in stream.getvalue(), stream.getvalue()
assert tracing.job_tracer() is None
print("untraced")
"""
    )
    output = _python(script, env={"OTEL_TRACES_EXPORTER": "console"}, path=[without_opentelemetry])
    assert output.strip() == "untraced"


def test_the_global_provider_is_found_once_one_is_set() -> None:
    _python(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from tenantq.observability.tracing import job_tracer
        assert job_tracer() is None  # the API alone: nothing would be recorded
        trace.set_tracer_provider(TracerProvider())
        found = job_tracer()
        assert found is not None and job_tracer() is found
        """
    )


def test_the_console_exporter_writes_one_span_per_line_as_the_worker_service() -> None:
    script = """
        from tenantq.observability import tracing
        assert tracing.configure_from_environment()
        tracer = tracing.job_tracer()
        for _ in range(3):
            publication = tracer.publication()
            publication.end()
        tracing.shutdown()
        """
    lines = _python(script, env={"OTEL_TRACES_EXPORTER": "console"}).splitlines()
    spans = [json.loads(line) for line in lines]
    assert [span["name"] for span in spans] == ["send"] * 3
    assert {span["resource"]["attributes"]["service.name"] for span in spans} == {"tenantq-worker"}
    named = _python(
        script,
        env={"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "billing-jobs"},
    ).splitlines()
    assert json.loads(named[0])["resource"]["attributes"]["service.name"] == "billing-jobs"


def test_an_apps_own_provider_is_kept_and_a_disabled_sdk_is_left_off() -> None:
    _python(
        """
        import os
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from tenantq.observability import tracing
        os.environ["OTEL_SDK_DISABLED"] = "true"
        assert tracing.configure_from_environment() is False
        del os.environ["OTEL_SDK_DISABLED"]
        own = TracerProvider()
        trace.set_tracer_provider(own)  # as an app may at import
        assert tracing.configure_from_environment() is False
        assert trace.get_tracer_provider() is own
        assert tracing.job_tracer() is not None
        """,
        env={"OTEL_TRACES_EXPORTER": "console"},
    )


def test_no_exporter_named_is_no_tracing_and_an_unknown_one_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    assert tracing.configure_from_environment() is False
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert tracing.configure_from_environment() is False
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "carrier-pigeon")
    with pytest.raises(tracing.TracingUnavailable, match="carrier-pigeon"):
        tracing.configure_from_environment()
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "smoke-signals")
    with pytest.raises(tracing.TracingUnavailable, match="smoke-signals"):
        tracing.configure_from_environment()


def test_a_propagators_output_past_the_envelopes_limits_is_cut_not_refused() -> None:
    carrier = {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01", "baggage": "x" * 5000}
    carrier.update({f"extra-{n}": "v" for n in range(40)})
    fitted = tracing._fitted(carrier)
    assert fitted["traceparent"] == carrier["traceparent"]
    assert "baggage" not in fitted
    assert len(fitted) == tracing.CONTEXT_MAX_ENTRIES
