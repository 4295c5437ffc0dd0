"""OpenTelemetry tracing of jobs: a span where jobs are published, one per attempt where they
run, and the W3C trace context carried between the two in the envelope's ``trace_context``.

Off unless the process traces. ``job_tracer()`` answers None, after one dictionary lookup,
while nothing in the process has imported ``opentelemetry.trace``; once something has, it
answers a ``JobTracer`` if a tracer provider is configured (the global one, or the one given
to ``use_provider``), else None. Nothing here imports ``opentelemetry`` before that, so with
the ``tenantq[otel]`` extra absent, or present and unconfigured, the hot paths pay for one
call and a None check per batch. ``configure_from_environment`` is what ``tenantq worker``
runs: the SDK from the standard ``OTEL_*`` variables, when ``OTEL_TRACES_EXPORTER`` names an
exporter.

The spans (messaging semantic conventions, ``messaging.system`` = ``kafka``):

| span                | kind     | made                                  | parent             |
| ------------------- | -------- | ------------------------------------- | ------------------ |
| ``send <topic>``    | producer | per ``Producer`` publishing call      | the caller's span  |
| ``create <topic>``  | producer | per ``Outbox.enqueue`` (relay sends)  | the caller's span  |
| ``process <topic>`` | consumer | per attempt, where its handler runs   | the job's send or  |
|                     |          |                                       | create span        |
| ``settle <topic>``  | consumer | when the store refuses a result       | the same           |
|                     |          | (``stale``)                           |                    |
| ``replay <topic>``  | producer | per record ``tenantq dlq replay``     | the caller's span; |
|                     |          | publishes again                       | links to the job's |

A job's envelope keeps the context it was published with, through retry tiers, the hot lane,
the DLQ and replays (their bytes are the original's), so every attempt of a job is a child of
the span that published it. A replay also writes its own span's context into the Kafka headers
(``traceparent``), and the attempts that follow link to it.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, cast

from tenantq.errors import ConfigurationError

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Link, Span, TracerProvider

#: The instrumentation scope of every span.
SCOPE = "tenantq"
#: ``service.name`` of ``tenantq worker`` unless ``OTEL_SERVICE_NAME`` (or
#: ``OTEL_RESOURCE_ATTRIBUTES``) names one.
WORKER_SERVICE_NAME = "tenantq-worker"
#: Parent contexts remembered by their carrier: the jobs of one publishing call share one.
PARENTS_REMEMBERED = 4_096
#: Entries of a propagator's output that fit the envelope's ``trace_context`` limits.
CONTEXT_MAX_ENTRIES = 32
CONTEXT_MAX_CHARS = 1_024

# Attribute names: the messaging semantic conventions', then tenantq's own. No
# ``messaging.message.id``: a job is several messages (its retries, its replays), and its id
# is ``tenantq.job.id``.
SYSTEM = "messaging.system"
OPERATION_TYPE = "messaging.operation.type"
OPERATION_NAME = "messaging.operation.name"
DESTINATION = "messaging.destination.name"
PARTITION = "messaging.destination.partition.id"
OFFSET = "messaging.kafka.offset"
BATCH_COUNT = "messaging.batch.message_count"
ERROR_TYPE = "error.type"
JOB_ID = "tenantq.job.id"
JOB_TYPE = "tenantq.job.type"
TENANT = "tenantq.job.tenant"
QUEUE = "tenantq.job.queue"
ATTEMPT = "tenantq.job.attempt"
MAX_ATTEMPTS = "tenantq.job.max_attempts"
REPLAYS = "tenantq.job.replays"
#: How the attempt ended: one of ``tenantq.states.Outcome``'s values.
OUTCOME = "tenantq.attempt.outcome"
RETRY_DELAY = "tenantq.attempt.retry_delay_seconds"
#: Why an attempt that did not fail did not succeed either (snoozed, released, canceled).
REASON = "tenantq.attempt.reason"

#: Outcomes of an attempt that are failures (span status ERROR).
FAILED_OUTCOMES = frozenset({"retrying", "dead", "timeout", "crashed", "stale"})


class TracingUnavailable(ConfigurationError):
    """``OTEL_TRACES_EXPORTER`` asks for tracing that cannot be set up here (the SDK or the
    named exporter is not installed)."""


_lock = threading.Lock()
#: The tracer once tracing was found on (a provider set once stays set).
_found: JobTracer | None = None
#: Given by ``use_provider``: wins over the global provider.
_override: TracerProvider | None = None
#: What ``configure_from_environment`` set up (``shutdown`` flushes it).
_configured: SdkTracerProvider | None = None


def job_tracer() -> JobTracer | None:
    """The process's ``JobTracer`` when it traces, else None (nothing imported)."""
    found = _found
    if found is not None:
        return found
    if "opentelemetry.trace" not in sys.modules:
        return None
    return _look_for_provider()


def use_provider(provider: TracerProvider | None) -> None:
    """Trace with ``provider`` instead of the global provider (tests, or a process that keeps
    its own); None: back to the global one."""
    global _found, _override
    with _lock:
        _override = provider
        _found = None


def _look_for_provider() -> JobTracer | None:
    global _found
    from opentelemetry import trace

    with _lock:
        if _found is not None:
            return _found
        provider = _override if _override is not None else trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
            return None  # the API without an SDK: every span would be a no-op
        _found = JobTracer(provider)
        return _found


def configure_from_environment(default_service_name: str = WORKER_SERVICE_NAME) -> bool:
    """Set up the OpenTelemetry SDK from the standard variables when ``OTEL_TRACES_EXPORTER``
    names exporters (comma-separated; ``none`` or unset: no tracing). Returns whether it did.

    ``console`` writes one span per line, as JSON, to standard output (each line one write,
    so the lines of a worker's processes never interleave); ``otlp`` is OTLP over HTTP, or
    over gRPC with ``OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL=grpc`` (and its package); any other
    name is looked up among the installed ``opentelemetry_traces_exporter`` entry points. The
    exporters read their own variables (``OTEL_EXPORTER_OTLP_ENDPOINT``, ...), the sampler
    ``OTEL_TRACES_SAMPLER``, the batch processor ``OTEL_BSP_*``; the resource is
    ``OTEL_RESOURCE_ATTRIBUTES`` with ``service.name`` from ``OTEL_SERVICE_NAME``, else
    ``default_service_name``. Nothing is done under ``OTEL_SDK_DISABLED=true``, or when a
    tracer provider is set already (the app's own, set when it was imported: it is used).
    Raises ``TracingUnavailable`` when the SDK or an exporter is not installed.
    """
    global _configured
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    names = [name.strip() for name in os.environ.get("OTEL_TRACES_EXPORTER", "").split(",") if name]
    names = [name for name in names if name and name.lower() != "none"]
    if not names:
        return False
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider as SdkProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise TracingUnavailable(
            "OTEL_TRACES_EXPORTER is set but the OpenTelemetry SDK is not installed "
            "(pip install 'tenantq[otel]')"
        ) from None
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return False  # the app set up its own provider (at import): it is the one used
    exporters = [_exporter(name) for name in names]
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: default_service_name}))
    provider = SdkProvider(resource=resource)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _configured = provider
    return True


def shutdown(timeout_seconds: float = 5.0) -> None:
    """Export what ``configure_from_environment``'s provider still holds, then stop it."""
    global _configured
    provider, _configured = _configured, None
    if provider is None:
        return
    provider.force_flush(int(timeout_seconds * 1000))
    provider.shutdown()


def flush(timeout_seconds: float = 1.0) -> None:
    """Export what ``configure_from_environment``'s provider holds now (a process about to
    exit without ``shutdown``)."""
    provider = _configured
    if provider is not None:
        provider.force_flush(int(timeout_seconds * 1000))


def _exporter(name: str) -> SpanExporter:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        # The exporter only calls ``write`` and ``flush``, which is all _LineWriter has.
        out = cast("IO[str]", _LineWriter(sys.stdout))
        return ConsoleSpanExporter(out=out, formatter=_one_line)
    entry = name
    if name == "otlp":
        protocol = (
            os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or "http/protobuf"
        ).strip()
        by_protocol = {"http/protobuf": "otlp_proto_http", "grpc": "otlp_proto_grpc"}
        if protocol not in by_protocol:
            raise TracingUnavailable(
                f"OTLP protocol {protocol!r} is not one of {', '.join(sorted(by_protocol))}"
            )
        entry = by_protocol[protocol]
    from importlib.metadata import entry_points

    found = entry_points(group="opentelemetry_traces_exporter", name=entry)
    if not found:
        raise TracingUnavailable(
            f"OTEL_TRACES_EXPORTER names {name!r}, but no installed package provides the "
            f"{entry!r} trace exporter"
        )
    exporter: SpanExporter = next(iter(found)).load()()
    return exporter


def _one_line(span: Any) -> str:
    text: str = span.to_json(indent=None)
    return text + "\n"


class _LineWriter:
    """A text stream whose every ``write`` is one system call on the stream's descriptor: a
    line written by one process is never cut by another's (a pipe takes up to 4 KiB whole, a
    file any size)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            descriptor = self._stream.fileno()
        except (AttributeError, OSError, ValueError):  # not a file (a test's capture)
            self._stream.write(text)
            self._stream.flush()
            return len(text)
        self._stream.flush()
        data = text.encode()
        written = 0
        while written < len(data):
            written += os.write(descriptor, data[written:])
        return len(text)

    def flush(self) -> None:
        pass


class JobTracer:
    """Makes the spans of jobs with one tracer provider (``job_tracer()`` gives it out)."""

    def __init__(self, provider: TracerProvider) -> None:
        from opentelemetry import context, propagate, trace

        self._trace = trace
        self._context = context
        self._tracer = trace.get_tracer(SCOPE, _version(), tracer_provider=provider)
        self._producer = trace.SpanKind.PRODUCER
        self._consumer = trace.SpanKind.CONSUMER
        self._inject = propagate.inject
        self._extract = propagate.extract
        #: The header names the propagator writes (``traceparent``, ...).
        self.header_names = frozenset(propagate.get_global_textmap().fields)
        self._parents: dict[tuple[tuple[str, str], ...], Context] = {}

    # -- publishing ---------------------------------------------------------------------------

    def publication(self, operation: str = "send") -> Publication:
        """The span of one publishing call, started now as a child of the caller's span; its
        ``trace_context`` goes into every envelope of the call."""
        span = self._tracer.start_span(
            operation,
            kind=self._producer,
            attributes={SYSTEM: "kafka", OPERATION_TYPE: operation, OPERATION_NAME: operation},
        )
        return Publication(self, span, operation, self.context_of(span))

    def context_of(self, span: Span) -> dict[str, str]:
        """``span``'s context as the propagator writes it, cut to what an envelope takes."""
        carrier: dict[str, str] = {}
        self._inject(carrier, context=self._trace.set_span_in_context(span))
        return _fitted(carrier)

    def replay(
        self,
        original: Mapping[str, str],
        *,
        topic: str,
        partition: int | None,
        job_id: str,
        job_type: str | None,
        tenant: str | None,
        queue: str,
        replays: int,
    ) -> tuple[Span, dict[str, str]]:
        """The span of replaying one dead letter, linked to the job's original context, and
        its own context for the replayed message's headers. The caller ends the span."""
        links = self._links(original)
        attributes: dict[str, Any] = {
            SYSTEM: "kafka",
            OPERATION_TYPE: "send",
            OPERATION_NAME: "replay",
            DESTINATION: topic,
            JOB_ID: job_id,
            QUEUE: queue,
            REPLAYS: replays,
        }
        if partition is not None:
            attributes[PARTITION] = str(partition)
        if job_type is not None:
            attributes[JOB_TYPE] = job_type
        if tenant is not None:
            attributes[TENANT] = tenant
        span = self._tracer.start_span(
            f"replay {topic}", kind=self._producer, attributes=attributes, links=links
        )
        return span, self.context_of(span)

    # -- attempts -----------------------------------------------------------------------------

    def attempt(
        self,
        trace_context: Mapping[str, str],
        headers: Iterable[tuple[str, bytes]] | None,
        *,
        topic: str,
        partition: int,
        offset: int,
        job_id: str,
        job_type: str,
        tenant: str,
        queue: str,
        attempt: int,
        max_attempts: int,
        replays: int,
    ) -> AttemptSpan:
        """The span of one attempt (not started yet: ``AttemptSpan.begin`` where the handler
        runs). Its parent is the envelope's context; a context in the Kafka ``headers`` (what
        sent this copy: a replay) is a link."""
        attributes: dict[str, Any] = {
            SYSTEM: "kafka",
            OPERATION_TYPE: "process",
            OPERATION_NAME: "process",
            DESTINATION: topic,
            PARTITION: str(partition),
            OFFSET: offset,
            JOB_ID: job_id,
            JOB_TYPE: job_type,
            TENANT: tenant,
            QUEUE: queue,
            ATTEMPT: attempt,
            MAX_ATTEMPTS: max_attempts,
        }
        if replays:
            attributes[REPLAYS] = replays
        return AttemptSpan(
            self,
            f"process {topic}",
            self.parent(trace_context),
            attributes,
            self._header_links(headers),
        )

    def settled_stale(
        self, trace_context: Mapping[str, str], *, topic: str, job_id: str, attempt: int
    ) -> None:
        """A span saying the store refused an attempt's result: it no longer held the lease."""
        span = self._tracer.start_span(
            f"settle {topic}",
            context=self.parent(trace_context),
            kind=self._consumer,
            attributes={
                SYSTEM: "kafka",
                OPERATION_TYPE: "settle",
                OPERATION_NAME: "settle",
                DESTINATION: topic,
                JOB_ID: job_id,
                ATTEMPT: attempt,
                OUTCOME: "stale",
                ERROR_TYPE: "StaleResult",
            },
        )
        span.set_status(
            self._trace.Status(self._trace.StatusCode.ERROR, "the attempt no longer held the lease")
        )
        span.end()

    def parent(self, trace_context: Mapping[str, str]) -> Context | None:
        """The context an envelope's ``trace_context`` names (None: a root span follows)."""
        if not trace_context:
            return None
        key = tuple(trace_context.items())
        found = self._parents.get(key)
        if found is None:
            found = self._extract(trace_context)
            if len(self._parents) >= PARENTS_REMEMBERED:
                self._parents.clear()
            self._parents[key] = found
        return found

    def _links(self, carrier: Mapping[str, str]) -> list[Link]:
        linked = self._trace.get_current_span(self.parent(carrier)).get_span_context()
        return [self._trace.Link(linked)] if linked.is_valid else []

    def _header_links(self, headers: Iterable[tuple[str, bytes]] | None) -> list[Link]:
        names = self.header_names
        carrier = {
            name: value.decode("utf-8", "replace")
            for name, value in headers or ()
            if name in names and value is not None
        }
        return self._links(carrier) if carrier else []

    def _start(
        self,
        name: str,
        parent: Context | None,
        attributes: dict[str, Any],
        links: list[Link],
        start_time: int | None = None,
    ) -> Span:
        return self._tracer.start_span(
            name,
            context=parent,
            kind=self._consumer,
            attributes=attributes,
            links=links,
            start_time=start_time,
        )

    def _fail(self, span: Span, error_class: str | None, message: str | None) -> None:
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, message))
        if error_class:
            span.set_attribute(ERROR_TYPE, error_class)


class Publication:
    """The span of one publishing call: ``describe`` once its jobs are placed, ``fail`` if it
    raises, ``end`` in any case."""

    __slots__ = ("_operation", "_span", "_tracer", "trace_context")

    def __init__(
        self, tracer: JobTracer, span: Span, operation: str, trace_context: dict[str, str]
    ) -> None:
        self._tracer = tracer
        self._span = span
        self._operation = operation
        #: The context every envelope of the call carries.
        self.trace_context = trace_context

    @property
    def recording(self) -> bool:
        """The span is sampled: what ``describe`` says is kept."""
        return bool(self._span.is_recording())

    def describe(
        self,
        *,
        count: int,
        topics: Iterable[str],
        partitions: Iterable[int],
        queues: Iterable[str],
        tenants: Iterable[str],
        job_types: Iterable[str],
        job_id: str | None = None,
    ) -> None:
        """What the call published: each of the job attributes that all its jobs share, the
        job id of a call of one, the count of a batch."""
        span = self._span
        if not span.is_recording():
            return
        attributes: dict[str, Any] = {}
        if count != 1:
            attributes[BATCH_COUNT] = count
        if job_id is not None:
            attributes[JOB_ID] = job_id
        for name, values in (
            (DESTINATION, topics),
            (PARTITION, partitions),
            (QUEUE, queues),
            (TENANT, tenants),
            (JOB_TYPE, job_types),
        ):
            single = _single(values)
            if single is not None and not (name == PARTITION and single < 0):
                attributes[name] = str(single) if name == PARTITION else single
        span.set_attributes(attributes)
        topic = attributes.get(DESTINATION)
        if topic is not None:
            span.update_name(f"{self._operation} {topic}")

    def fail(self, error: BaseException) -> None:
        """The call raised ``error``: nothing (more) of it was published."""
        self._span.record_exception(error)
        self._tracer._fail(self._span, type(error).__name__, str(error) or type(error).__name__)

    def end(self) -> None:
        self._span.end()


class PublicationScope:
    """``with PublicationScope(publication) as publication:`` the span of a publishing call
    (None when the process does not trace) fails with what the block raises and ends with
    it, after ``ended`` is told the call is over. A class, not a generator: it runs on every
    enqueue."""

    __slots__ = ("_ended", "_publication")

    def __init__(
        self, publication: Publication | None, ended: Callable[[], None] | None = None
    ) -> None:
        self._publication = publication
        self._ended = ended

    def __enter__(self) -> Publication | None:
        return self._publication

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._ended is not None:
            self._ended()
        publication = self._publication
        if publication is None:
            return
        if error is not None:
            publication.fail(error)
        publication.end()


@dataclass(eq=False, repr=False, slots=True)
class AttemptSpan:
    """The span of one attempt. ``begin`` where the handler runs (it is the current span
    there, so the handler's own spans are its children), ``leave`` when the handler is done,
    ``end`` when the attempt is judged; ``end`` without ``begin`` (a timeout or crash before
    the handler ran) makes the span then. Whatever thread ends it first wins."""

    tracer: JobTracer
    #: What the span is started with, whichever thread starts it.
    name: str
    parent: Context | None
    attributes: dict[str, Any]
    links: list[Link]
    _span: Span | None = field(init=False, default=None)
    _token: object = field(init=False, default=None)
    _ended: bool = field(init=False, default=False)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    @property
    def span(self) -> Span | None:
        """The span, once begun (or ended)."""
        return self._span

    def begin(self) -> None:
        """Start the span in this thread (or asyncio task) and make it the current one."""
        with self._lock:
            if self._ended or self._span is not None:
                return
            self._span = span = self.tracer._start(
                self.name, self.parent, self.attributes, self.links
            )
        context = self.tracer._context
        self._token = context.attach(self.tracer._trace.set_span_in_context(span))

    def leave(self) -> None:
        """The handler is done in this thread: its span is no longer the current one."""
        token, self._token = self._token, None
        if token is not None:
            self.tracer._context.detach(token)  # type: ignore[arg-type]

    def end(
        self,
        outcome: str,
        *,
        error_class: str | None = None,
        error_message: str | None = None,
        error: BaseException | None = None,
        delay_seconds: float | None = None,
        started_seconds_ago: float | None = None,
    ) -> None:
        """End the attempt with its ``outcome`` (``Outcome``'s values); a failure's error
        class and message, and the exception when there is one. ``started_seconds_ago``:
        when a span made only now began."""
        with self._lock:
            if self._ended:
                return
            self._ended = True
            span = self._span
            if span is None:
                start = None
                if started_seconds_ago is not None:
                    start = time.time_ns() - int(started_seconds_ago * 1e9)
                self._span = span = self.tracer._start(
                    self.name, self.parent, self.attributes, self.links, start
                )
        attributes: dict[str, Any] = {OUTCOME: outcome}
        if delay_seconds is not None and outcome in ("retrying", "snoozed", "timeout"):
            attributes[RETRY_DELAY] = delay_seconds
        span.set_attributes(attributes)
        if outcome in FAILED_OUTCOMES:
            if error is not None and isinstance(error, Exception):
                span.record_exception(error)
            self.tracer._fail(span, error_class, error_message)
        elif error_message:
            # Not a failure (snoozed, released, canceled): why, without an error status.
            span.set_attribute(REASON, error_message)
        span.end()


def _single(values: Iterable[Any]) -> Any:
    """The one value ``values`` holds (repeated or not), else None."""
    found: Any = None
    for value in values:
        if found is None:
            found = value
        elif value != found:
            return None
    return found


def _fitted(carrier: dict[str, str]) -> dict[str, str]:
    """The propagator's output within the envelope's limits (checked as a caller's own
    ``trace_context`` is): entries past them are left out, never the enqueue refused."""
    if len(carrier) <= CONTEXT_MAX_ENTRIES and all(
        len(key) + len(value) <= CONTEXT_MAX_CHARS for key, value in carrier.items()
    ):
        return carrier
    fitted = {
        key: value for key, value in carrier.items() if len(key) + len(value) <= CONTEXT_MAX_CHARS
    }
    return dict(list(fitted.items())[:CONTEXT_MAX_ENTRIES])


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tenantq")
    except PackageNotFoundError:
        return "0"
