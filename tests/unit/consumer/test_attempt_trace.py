"""The span of every attempt, where its handler runs: a consumer ``process`` span, child of the
span that published the job, current while the handler runs, ended with the attempt's outcome;
and the spans the member makes itself (a crashed handler process, a stale result)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import pickle
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode
from span_recorder import SpanRecorder, recording_spans

import tenantq
from tenantq.app import JobType
from tenantq.consumer import handler_process
from tenantq.consumer.attempt_trace import trace_crashed, trace_stale
from tenantq.consumer.context import JobContext
from tenantq.consumer.executor import ThreadExecutor, _spec
from tenantq.consumer.handler_process import TaskSpec
from tenantq.consumer.intake import Polled
from tenantq.consumer.retry_policy import RetryPolicy
from tenantq.consumer.runner import HandlerRunner, Task
from tenantq.consumer.work import WorkItem
from tenantq.errors import PermanentError, Snooze
from tenantq.observability.tracing import job_tracer
from tenantq.schemas.envelope import Envelope
from tenantq.store.job_store import Lease

TOPIC = "unit.default"


@pytest.fixture
def spans() -> Iterator[SpanRecorder]:
    with recording_spans() as recorder:
        yield recorder


def _published(spans: SpanRecorder) -> tuple[ReadableSpan, dict[str, str]]:
    """A finished ``send`` span and the context its jobs' envelopes carry."""
    tracer = job_tracer()
    assert tracer is not None
    publication = tracer.publication()
    context = publication.trace_context
    publication.end()
    return spans.only("send"), context


def _item(
    trace_context: dict[str, str],
    *,
    attempt: int = 1,
    max_attempts: int = 3,
    headers: list[tuple[str, bytes]] | None = None,
) -> WorkItem:
    job_id = uuid.uuid4()
    envelope = Envelope(
        job_id, "default", "work", "acme", "acme", b"{}", dt.datetime.now(dt.UTC),
        trace_context=trace_context,
    )  # fmt: skip
    record = Polled(TOPIC, 4, 1234, b"acme", b"", headers or [], 0)
    item = WorkItem(TOPIC, 4, 1234, b"acme", b"", record, 0, "default", envelope, max_attempts)
    now = dt.datetime.now(dt.UTC)
    item.lease = Lease(job_id, attempt, max_attempts, None, 0, True, now, now)
    return item


def _task(item: WorkItem, handler: Callable[..., Any], timeout: float = 30.0) -> Task:
    """The task the worker starts for ``item`` (as its ``_task`` makes it)."""
    assert item.lease is not None
    job_type = JobType("work", "default", handler, None)
    deadline = time.monotonic() + timeout
    context = JobContext(
        item.job_id, "default", "work", "acme", item.lease.attempt, item.lease.max_attempts,
        deadline, None, 0, None,
    )  # fmt: skip
    return Task(job_type, b"{}", context, deadline, item)


def _run(tasks: list[Task], *, expire_after: float | None = None) -> list[Task]:
    """Run ``tasks`` through a ``ThreadExecutor`` until each has finished."""
    finished: list[Task] = []
    done = threading.Event()

    def on_finished(task: Task) -> None:
        finished.append(task)
        if len(finished) == len(tasks):
            done.set()

    executor = ThreadExecutor(2, on_finished, RetryPolicy(jitter=0.0))
    try:
        executor.submit(tasks)
        if expire_after is not None:
            time.sleep(expire_after)
            executor.expire()
        assert done.wait(10)
    finally:
        executor.stop(2)
    return finished


def test_an_attempt_is_a_process_span_child_of_the_send_span_and_current_in_its_handler(
    spans: SpanRecorder,
) -> None:
    send, context = _published(spans)
    seen: list[trace.Span] = []
    item = _item(context, attempt=2)
    _run([_task(item, lambda ctx, payload: seen.append(trace.get_current_span()))])
    process = spans.only("process")
    assert process.name == f"process {TOPIC}"
    assert process.kind is SpanKind.CONSUMER
    assert process.parent is not None and process.parent.span_id == send.context.span_id
    assert process.context.trace_id == send.context.trace_id
    assert seen[0].get_span_context() == process.context
    assert dict(process.attributes or {}) == {
        "messaging.system": "kafka",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": TOPIC,
        "messaging.destination.partition.id": "4",
        "messaging.kafka.offset": 1234,
        "tenantq.job.id": str(item.job_id),
        "tenantq.job.type": "work",
        "tenantq.job.tenant": "acme",
        "tenantq.job.queue": "default",
        "tenantq.job.attempt": 2,
        "tenantq.job.max_attempts": 3,
        "tenantq.attempt.outcome": "succeeded",
    }
    assert process.status.status_code is StatusCode.UNSET


def fails(ctx: JobContext, payload: Any) -> None:
    raise ConnectionError("smtp down")


def test_failed_attempts_end_with_their_outcome_error_and_exception(
    spans: SpanRecorder,
) -> None:
    _, context = _published(spans)

    def snoozes(ctx: JobContext, payload: Any) -> None:
        raise Snooze(60)

    def refuses(ctx: JobContext, payload: Any) -> None:
        raise PermanentError("no such account")

    tasks = [
        _task(_item(context, attempt=1), fails),
        _task(_item(context, attempt=3, max_attempts=3), fails),
        _task(_item(context), snoozes),
        _task(_item(context), refuses),
    ]
    _run(tasks)
    by_job = {span.attributes["tenantq.job.id"]: span for span in spans.named("process")}  # type: ignore[index]
    retrying, last, snoozed, refused = (by_job[str(task.context.job_id)] for task in tasks)
    assert retrying.attributes is not None
    assert retrying.attributes["tenantq.attempt.outcome"] == "retrying"
    assert retrying.attributes["error.type"] == "ConnectionError"
    assert retrying.attributes["tenantq.attempt.retry_delay_seconds"] > 0
    assert retrying.status.status_code is StatusCode.ERROR
    assert retrying.status.description == "smtp down"
    assert [event.name for event in retrying.events] == ["exception"]
    assert last.attributes is not None and last.attributes["tenantq.attempt.outcome"] == "dead"
    assert last.status.status_code is StatusCode.ERROR
    assert snoozed.attributes is not None
    assert snoozed.attributes["tenantq.attempt.outcome"] == "snoozed"
    assert snoozed.status.status_code is StatusCode.UNSET
    assert "error.type" not in snoozed.attributes
    assert snoozed.attributes["tenantq.attempt.reason"]
    assert (
        refused.attributes is not None and refused.attributes["tenantq.attempt.outcome"] == "dead"
    )
    assert refused.attributes["error.type"] == "tenantq.errors.PermanentError"


def test_a_timed_out_attempt_ends_timeout_and_an_abandoned_one_released(
    spans: SpanRecorder,
) -> None:
    _, context = _published(spans)
    release = threading.Event()

    def hangs(ctx: JobContext, payload: Any) -> None:
        release.wait(10)

    timed_out = _task(_item(context), hangs, timeout=0.05)
    try:
        _run([timed_out], expire_after=0.2)
        span = spans.only("process")
        assert span.attributes is not None
        assert span.attributes["tenantq.attempt.outcome"] == "timeout"
        assert span.status.status_code is StatusCode.ERROR

        runner = HandlerRunner(1, lambda task: None)
        abandoned = _task(_item(context), hangs)
        ThreadExecutor.submit(SimpleNamespace(_runner=runner), [abandoned])  # type: ignore[arg-type]
        time.sleep(0.1)
        assert runner.abandon(abandoned)
        released = [s for s in spans.named("process") if s is not span]
        assert len(released) == 1 and released[0].attributes is not None
        assert released[0].attributes["tenantq.attempt.outcome"] == "released"
    finally:
        release.set()
    runner.stop(timeout=2)
    # The late return of the abandoned handler ends nothing twice.
    assert len(spans.named("process")) == 2


def test_an_async_handler_runs_inside_its_attempt_span(spans: SpanRecorder) -> None:
    send, context = _published(spans)
    seen: list[trace.Span] = []

    async def handler(ctx: JobContext, payload: Any) -> None:
        await asyncio.sleep(0.01)
        seen.append(trace.get_current_span())

    _run([_task(_item(context), handler) for _ in range(3)])
    processes = spans.named("process")
    assert len(processes) == 3
    assert {span.parent.span_id for span in processes if span.parent} == {send.context.span_id}
    assert sorted(s.get_span_context().span_id for s in seen) == sorted(
        span.context.span_id for span in processes
    )


def test_a_replayed_copy_links_to_the_replay_and_stays_in_the_jobs_trace(
    spans: SpanRecorder,
) -> None:
    send, context = _published(spans)
    tracer = job_tracer()
    assert tracer is not None
    replay, replay_context = tracer.replay(
        context, topic=TOPIC, partition=4, job_id="j", job_type="work", tenant="acme",
        queue="default", replays=1,
    )  # fmt: skip
    replay.end()
    headers = [("tenantq-job-id", b"j"), *((k, v.encode()) for k, v in replay_context.items())]
    _run([_task(_item(context, headers=headers), lambda ctx, payload: None)])
    replay_span, process = spans.only("replay"), spans.only("process")
    assert [link.context.span_id for link in replay_span.links] == [send.context.span_id]
    assert process.parent is not None and process.parent.span_id == send.context.span_id
    assert [link.context.span_id for link in process.links] == [replay_span.context.span_id]


@contextlib.contextmanager
def _run_in_handler_process(
    app: tenantq.App, spec: TaskSpec
) -> Iterator[tuple[Task, threading.Event]]:
    """The handler process's task of ``spec`` (leases always renewed) run by a runner of one
    slot: yields the task and an event set when it finished; the runner stops on exit."""
    leases = SimpleNamespace(renew_one=lambda job_id: True, checkpoint=lambda *a: True)
    task = handler_process._task(app, spec, leases)  # type: ignore[arg-type]
    finished = threading.Event()
    runner = HandlerRunner(1, lambda done: finished.set())
    try:
        runner.submit_many([task])
        yield task, finished
    finally:
        runner.stop(timeout=2)


def test_the_handler_process_gets_the_origin_and_makes_the_span(spans: SpanRecorder) -> None:
    send, context = _published(spans)
    app = tenantq.App(tenantq.Settings())
    ran = threading.Event()

    @app.job("work")
    def work(ctx: tenantq.JobContext, payload: dict[str, object]) -> None:
        ran.set()

    item = _item(context, attempt=2)
    member_task = _task(item, work)
    row = pickle.loads(pickle.dumps(_spec(member_task, job_tracer())))
    spec = TaskSpec._make(row)
    assert spec.trace is not None and spec.trace[0] == context
    with _run_in_handler_process(app, spec) as (_, finished):
        assert finished.wait(10)
    process = spans.only("process")
    assert process.parent is not None and process.parent.span_id == send.context.span_id
    assert process.attributes is not None
    assert process.attributes["tenantq.job.id"] == str(item.job_id)
    assert process.attributes["tenantq.job.attempt"] == 2
    assert process.attributes["tenantq.attempt.outcome"] == "succeeded"
    # Untraced members send no origin: the spec's last field is None.
    assert TaskSpec._make(_spec(member_task, None)).trace is None


def test_a_handler_process_attempt_the_member_timed_out_ends_timeout_there(
    spans: SpanRecorder,
) -> None:
    _, context = _published(spans)
    app = tenantq.App(tenantq.Settings())

    @app.job("work")
    def work(ctx: tenantq.JobContext, payload: dict[str, object]) -> None:
        ctx.wait_cancelled(10)
        ctx.raise_if_cancelled()

    spec = TaskSpec._make(_spec(_task(_item(context), work), job_tracer()))
    with _run_in_handler_process(app, spec) as (task, finished):
        time.sleep(0.05)
        handler_process._cancel(task, "timeout")
        assert finished.wait(10)
    process = spans.only("process")
    assert process.attributes is not None
    # Judged here as released (the handler stopped when asked), but the member applied a
    # timeout: the span says what happened to the job.
    assert task.verdict is not None and task.verdict.outcome.value == "released"
    assert process.attributes["tenantq.attempt.outcome"] == "timeout"


def test_the_member_ends_crashed_attempts_and_reports_stale_results(spans: SpanRecorder) -> None:
    send, context = _published(spans)
    crashed = _task(_item(context), fails)
    crashed.started = time.monotonic() - 2.0
    trace_crashed([crashed], "the handler process was killed by SIGKILL")
    stale_item = _item(context, attempt=4)
    trace_stale(stale_item)
    process, settle = spans.only("process"), spans.only("settle")
    assert process.attributes is not None
    assert process.attributes["tenantq.attempt.outcome"] == "crashed"
    assert process.status.description == "the handler process was killed by SIGKILL"
    assert process.end_time is not None and process.start_time is not None
    assert process.end_time - process.start_time > 1.5e9
    assert settle.parent is not None and settle.parent.span_id == send.context.span_id
    assert settle.attributes is not None
    assert settle.attributes["tenantq.attempt.outcome"] == "stale"
    assert settle.attributes["tenantq.job.attempt"] == 4


def test_untraced_attempts_get_no_span_and_run_as_before() -> None:
    ran: list[object] = []
    task = _task(_item({}), lambda ctx, payload: ran.append(trace.get_current_span()))
    _run([task])
    assert task.trace is None
    assert ran == [trace.INVALID_SPAN]
