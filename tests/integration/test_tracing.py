"""Guarantee: one trace from the enqueue to every attempt, across processes. Jobs enqueued in
this process (its spans recorded in memory) run in a real ``tenantq worker`` whose handler
process exports its spans with the console exporter: each attempt's ``process`` span has the
trace id of the ``send`` span that published the job and that span as its parent, a retried
job's attempts as well, and a dead job replayed from the DLQ runs again in the same trace,
linked to the replay's span (which links back to the job's trace); a job written through the
outbox in a traced transaction runs as a child of its ``create`` span. With OpenTelemetry
unimportable, the same worker runs the jobs and prints no span."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import psycopg
from span_recorder import recording_spans
from support import (
    LoggedWorkerProcess,
    all_in,
    settings_environment,
    wait_for,
    wait_for_states,
    while_alive,
)

import tenantq
from tenantq.dlq.actions import replay_dead_letters
from tenantq.dlq.filter import DeadLetterFilter
from tenantq.producer.producer import EnqueueRequest
from tenantq.store.engine import psycopg_url

#: Export within a tenth of a second, and name the process in each span's resource.
TRACING = {
    "OTEL_TRACES_EXPORTER": "console",
    "OTEL_BSP_SCHEDULE_DELAY": "100",
    "OTEL_EXPERIMENTAL_RESOURCE_DETECTORS": "process",
}


def exported_spans(output: str) -> list[dict[str, Any]]:
    """The spans the console exporter printed (one JSON object per line) among the log lines
    (JSON too, of another shape)."""
    spans = []
    for line in output.splitlines():
        if line.startswith("{") and '"context"' in line:
            found = json.loads(line)
            if "kind" in found and "resource" in found:
                spans.append(found)
    return spans


def hex_id(value: int) -> str:
    return f"0x{value:0{32 if value >> 64 else 16}x}"


def test_one_trace_from_the_enqueue_to_every_attempt_in_the_worker(
    settings: tenantq.Settings, db: psycopg.Connection[Any], tmp_path: Path
) -> None:
    worker = LoggedWorkerProcess(
        {**settings_environment(settings), **TRACING},
        "traced_apps:APP",
        log_path=tmp_path / "worker.log",
    )
    try:
        with recording_spans() as recorded:
            request = recorded.provider.get_tracer("shop").start_span("POST /checkout")
            with tenantq.Producer(settings) as producer:
                from opentelemetry import trace

                with trace.use_span(request, end_on_exit=True):
                    refs = [
                        future.result(30)
                        for future in producer.enqueue_many(
                            [
                                EnqueueRequest("charge", "acme", {"order": 1}),
                                EnqueueRequest("flaky", "acme", {"order": 1}),
                            ]
                        )
                    ]
                    doomed = producer.enqueue("doomed", tenant="umbrella", payload={}).result(30)
                    # In the same request, a job written in the service's own transaction:
                    # the relay (in the worker) publishes the entry, context and all.
                    url = psycopg_url(settings.require_database_url())
                    with tenantq.Outbox(settings=settings) as outbox, psycopg.connect(url) as conn:
                        receipt = outbox.enqueue(conn, "charge", tenant="beta", payload={"n": 2})
            charge, flaky = refs
            wait_for_states(
                db, [doomed.job_id], {"dead"}, worker, timeout=90, what="the doomed job dead"
            )
            wait_for(lambda: _dlq_has(settings), timeout=30, what="the doomed job's dead letter")
            report, _ = replay_dead_letters(
                settings, "default", DeadLetterFilter(), actor="tracing-test"
            )
            assert dict(report.actions) == {"replayed": 1}, report
            wait_for(
                while_alive(
                    lambda: all_in(
                        db,
                        [charge.job_id, flaky.job_id, doomed.job_id, receipt.job_id],
                        {"succeeded"},
                    ),
                    worker,
                ),
                timeout=90,
                what="every job succeeded",
            )
            batch_send, doomed_send = recorded.named("send")
            replay = recorded.only("replay")
            create = recorded.only("create")
    finally:
        status = worker.terminate(60)
    output = worker.output()
    assert status == 0, output[-4000:]
    spans = exported_spans(output)
    processes = [span for span in spans if span["name"].startswith("process ")]
    by_job: dict[str, list[dict[str, Any]]] = {}
    for span in processes:
        by_job.setdefault(span["attributes"]["tenantq.job.id"], []).append(span)

    batch_trace = hex_id(batch_send.context.trace_id)
    assert batch_send.parent is not None
    assert batch_trace == hex_id(request.get_span_context().trace_id)
    # The charge: one attempt, in another process, child of the batch's send span; the
    # handler's own span is a child of the attempt's.
    (attempt,) = by_job[str(charge.job_id)]
    assert attempt["kind"] == "SpanKind.CONSUMER"
    assert attempt["context"]["trace_id"] == batch_trace
    assert attempt["parent_id"] == hex_id(batch_send.context.span_id)
    assert attempt["attributes"]["tenantq.attempt.outcome"] == "succeeded"
    assert attempt["attributes"]["messaging.system"] == "kafka"
    assert attempt["resource"]["attributes"]["service.name"] == "tenantq-worker"
    assert attempt["resource"]["attributes"]["process.pid"] != os.getpid()
    (own,) = [
        span
        for span in spans
        if span["name"] == "card network call"
        and span["parent_id"] == attempt["context"]["span_id"]
    ]
    assert own["context"]["trace_id"] == batch_trace

    # The outbox's job: its attempt is a child of the ``create`` span of the transaction.
    (outboxed,) = by_job[str(receipt.job_id)]
    assert outboxed["context"]["trace_id"] == batch_trace
    assert outboxed["parent_id"] == hex_id(create.context.span_id)
    assert create.parent is not None and create.parent.span_id == request.get_span_context().span_id

    # The retried job: both attempts in the trace, children of the same send span (the copy
    # in the retry tier carries the envelope's context).
    attempts = sorted(
        by_job[str(flaky.job_id)], key=lambda s: s["attributes"]["tenantq.job.attempt"]
    )
    assert [s["attributes"]["tenantq.attempt.outcome"] for s in attempts] == [
        "retrying",
        "succeeded",
    ]
    assert {s["context"]["trace_id"] for s in attempts} == {batch_trace}
    assert {s["parent_id"] for s in attempts} == {hex_id(batch_send.context.span_id)}
    assert attempts[0]["status"]["status_code"] == "ERROR"
    assert attempts[0]["attributes"]["error.type"] == "ConnectionError"
    assert attempts[1]["attributes"]["messaging.destination.name"].startswith(
        f"{settings.topic_prefix}.default.retry."
    )

    # The replayed job: dead, then replayed; its run after the replay is in its first trace
    # and links to the replay's span, which links to that trace.
    doomed_trace = hex_id(doomed_send.context.trace_id)
    runs = sorted(by_job[str(doomed.job_id)], key=lambda s: s["start_time"])
    assert [s["attributes"]["tenantq.attempt.outcome"] for s in runs] == ["dead", "succeeded"]
    assert {s["context"]["trace_id"] for s in runs} == {doomed_trace}
    assert {s["parent_id"] for s in runs} == {hex_id(doomed_send.context.span_id)}
    assert runs[1]["attributes"]["tenantq.job.replays"] == 1
    assert [link["context"]["span_id"] for link in runs[1]["links"]] == [
        hex_id(replay.context.span_id)
    ]
    assert [link.context.span_id for link in replay.links] == [doomed_send.context.span_id]


def _dlq_has(settings: tenantq.Settings) -> bool:
    from support import end_offsets

    from tenantq.topics import dlq_topic

    return sum(end_offsets(settings, dlq_topic(settings.topic_prefix, "default")).values()) > 0


def test_with_opentelemetry_unimportable_the_worker_runs_jobs_and_prints_no_span(
    settings: tenantq.Settings, db: psycopg.Connection[Any], tmp_path: Path
) -> None:
    blocked = tmp_path / "blocked"
    (blocked / "opentelemetry").mkdir(parents=True)
    (blocked / "opentelemetry" / "__init__.py").write_text(
        "raise ImportError('opentelemetry is not installed (simulated)')\n"
    )
    environment = {**settings_environment(settings), **TRACING}
    environment["PYTHONPATH"] = f"{blocked}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    worker = LoggedWorkerProcess(environment, "apps:APP", log_path=tmp_path / "worker.log")
    try:
        with tenantq.Producer(settings) as producer:
            job_ids = [
                producer.enqueue("flaky", tenant=f"t{n}", payload={}).result(30).job_id
                for n in range(3)
            ]
        wait_for_states(
            db, job_ids, {"succeeded"}, worker, timeout=90, what="the jobs run without tracing"
        )
        time.sleep(0.5)  # an exporter would have written by now
    finally:
        status = worker.terminate(60)
    output = worker.output()
    assert status == 0, output[-4000:]
    assert "tracing is off" in output
    assert exported_spans(output) == []
