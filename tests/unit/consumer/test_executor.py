"""What the member sends a handler process for one attempt: a plain tuple that reads back as
the ``TaskSpec`` it stands for, field by field."""

from __future__ import annotations

import time
import uuid

from fakes import FakeLeaseKeeper

import tenantq
from tenantq.consumer import handler_process
from tenantq.consumer.context import JobContext
from tenantq.consumer.executor import _spec
from tenantq.consumer.handler_process import TaskOutcome, TaskSpec
from tenantq.consumer.outcomes import Verdict
from tenantq.consumer.runner import Task
from tenantq.states import JobState


def test_a_task_travels_as_its_task_spec() -> None:
    app = tenantq.App(tenantq.Settings())

    @app.job("export")
    def export(ctx: tenantq.JobContext, payload: dict[str, object]) -> None: ...

    job_id = uuid.uuid4()
    deadline = time.monotonic() + 30
    context = JobContext(
        job_id=job_id,
        queue="default",
        job_type="export",
        tenant="acme",
        attempt=2,
        max_attempts=5,
        deadline=deadline,
        progress={"page": 3},
        replays=1,
        idempotency_key="key-1",
    )
    spec = TaskSpec._make(_spec(Task(app.job_type("export"), b'{"a": 1}', context, deadline)))
    assert spec._replace(timeout=0.0) == TaskSpec(
        job_id=job_id.bytes,
        job_type="export",
        queue="default",
        tenant="acme",
        payload=b'{"a": 1}',
        attempt=2,
        max_attempts=5,
        timeout=0.0,
        progress={"page": 3},
        replays=1,
        idempotency_key="key-1",
    )
    assert 29 < spec.timeout <= 30


def test_the_handler_process_reads_the_spec_back_into_its_task_and_answers_in_field_order() -> None:
    # The child builds the task's context and its outcome by position: a field out of place
    # fails here.
    app = tenantq.App(tenantq.Settings())

    @app.job("export")
    def export(ctx: tenantq.JobContext, payload: dict[str, object]) -> None: ...

    job_id = uuid.uuid4()
    spec = TaskSpec(job_id.bytes, "export", "q", "acme", b"{}", 2, 5, 30.0, {"p": 1}, 1, "key-1")
    leases = FakeLeaseKeeper()
    task = handler_process._task(app, spec, leases)
    context = task.context
    assert (context.job_id, context.queue, context.job_type, context.tenant) == (
        job_id, "q", "export", "acme"
    )  # fmt: skip
    assert (context.attempt, context.max_attempts, context.progress, context.replays) == (
        2, 5, {"p": 1}, 1
    )  # fmt: skip
    assert context.idempotency_key == "key-1" and not context.cancelled
    assert 29 < context.time_left <= 30 and task.deadline == context.deadline
    assert task.payload == b"{}" and task.item == job_id.bytes
    assert context.heartbeat() and leases.renewed == [job_id]
    assert context.checkpoint({"p": 2}) and leases.checkpoints == [(job_id, 2, {"p": 2})]

    task.finished = task.started + 0.5
    task.verdict = Verdict.retrying("Boom", "it broke", 2.0)
    task.breaker = "failure"
    assert TaskOutcome._make(handler_process._outcome(task))._asdict() == {
        "job_id": job_id.bytes,
        "outcome": task.verdict.outcome.value,
        "state": JobState.RETRYING.value,
        "error_class": "Boom",
        "error_message": "it broke",
        "delay_seconds": 2.0,
        "give_back": False,
        "delay_reason": task.verdict.delay_reason.value if task.verdict.delay_reason else None,
        "breaker": "failure",
        "duration": 0.5,
    }
