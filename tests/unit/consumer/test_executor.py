"""What the member sends a handler process for one attempt: a plain tuple that reads back as
the ``TaskSpec`` it stands for, field by field."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest
from fakes import FakeLeaseKeeper

import tenantq
from tenantq.consumer import handler_process
from tenantq.consumer.context import JobContext
from tenantq.consumer.executor import ProcessExecutor, _spec
from tenantq.consumer.handler_process import HandlerProcessSpec, TaskOutcome, TaskSpec
from tenantq.consumer.outcomes import Verdict
from tenantq.consumer.retry_policy import RetryPolicy
from tenantq.consumer.runner import Task
from tenantq.states import JobState, Outcome


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


#: The app of the handler processes below (spawned: they import it by this module's name).
NAPS = tenantq.App(tenantq.Settings())


@NAPS.job("nap")
def nap(ctx: tenantq.JobContext, payload: dict[str, float]) -> None:
    time.sleep(payload["seconds"])


@NAPS.job("quick_nap")
async def quick_nap(ctx: tenantq.JobContext, payload: dict[str, float]) -> None:
    await asyncio.sleep(payload["seconds"])


def _nap_task(job_type: str, seconds: float, timeout: float) -> Task:
    deadline = time.monotonic() + timeout
    context = JobContext(uuid.uuid4(), "default", job_type, "acme", 1, 5, deadline)
    payload = json.dumps({"seconds": seconds}).encode()
    return Task(NAPS.job_type(job_type), payload, context, deadline)


def _naps_process(slots: int) -> HandlerProcessSpec:
    """A handler process of ``slots`` slots running the handlers of ``NAPS``."""
    settings = tenantq.Settings()
    return HandlerProcessSpec(
        f"{__name__}:NAPS", slots, settings, "worker-test", RetryPolicy(), settings.log_level
    )


def _run_in_handler_process(naps: list[tuple[str, float, float]], slots: int) -> list[Task]:
    """Tasks of ``naps`` (job type, seconds, timeout) handed to a real handler process of
    ``slots`` slots in one batch, with the member's timeout checks every 10 ms; the tasks as
    they finished."""
    finished: list[Task] = []
    crashes: list[str] = []
    executor = ProcessExecutor(
        _naps_process(slots),
        on_finished=finished.extend,
        on_crash=lambda running, culprit, how: crashes.append(how),
    )
    executor.start()

    def run(tasks: list[Task]) -> None:
        executor.submit(tasks)
        deadline = time.monotonic() + 20
        while len(finished) < len(tasks) and time.monotonic() < deadline:
            executor.expire()
            time.sleep(0.01)

    try:
        run([_nap_task("nap", 0.0, 60)])  # the handler process is up: no start-up in timeouts
        finished.clear()
        run([_nap_task(*nap) for nap in naps])
    finally:
        executor.stop(5)
    assert not crashes
    return finished


def test_a_task_waiting_for_a_slot_in_the_handler_process_times_out_from_its_start() -> None:
    # One slot: the second job waits 0.6 s behind the first, longer than its own timeout;
    # it runs 0.05 s, so only a timeout counted from when it was sent would end it.
    long, short = _run_in_handler_process([("nap", 0.6, 10), ("nap", 0.05, 0.4)], slots=1)
    assert long.verdict == short.verdict == Verdict.succeeded()
    assert short.started >= long.started + 0.55
    assert short.deadline == pytest.approx(short.started + 0.4, abs=0.01)


def test_a_task_waiting_behind_a_hung_handler_runs_once_that_one_times_out() -> None:
    hung, waiting = _run_in_handler_process([("nap", 3.0, 0.3), ("nap", 0.0, 0.5)], slots=1)
    assert hung.timed_out and waiting.verdict == Verdict.succeeded()
    assert waiting.started == pytest.approx(hung.deadline, abs=0.2)


def test_async_attempts_sent_beyond_the_slots_run_no_more_than_the_slots_at_once() -> None:
    finished = _run_in_handler_process([("quick_nap", 0.3, 10)] * 4, slots=2)
    assert len(finished) == 4
    assert all(task.verdict == Verdict.succeeded() for task in finished)
    starts = sorted(task.started for task in finished)
    # Two start at once, the other two 0.3 s later, when the first two have ended.
    assert starts[1] - starts[0] < 0.1
    assert starts[2] - starts[0] >= 0.25


def test_a_task_canceled_while_it_waits_in_the_handler_process_never_starts() -> None:
    finished: list[Task] = []
    executor = ProcessExecutor(
        _naps_process(1),
        on_finished=finished.extend,
        on_crash=lambda running, culprit, how: None,
    )
    executor.start()
    try:
        busy, waiting = _nap_task("nap", 0.5, 10), _nap_task("nap", 0.0, 10)
        executor.submit([busy, waiting])
        # Revoked while it waits behind the busy slot: the member gives its lease back, so
        # it must not run here afterwards.
        executor.cancel(waiting, "revoked")
        deadline = time.monotonic() + 20
        while len(finished) < 2 and time.monotonic() < deadline:
            executor.expire()
            time.sleep(0.01)
    finally:
        executor.stop(5)
    assert busy.verdict == Verdict.succeeded()
    # A started no-op would have succeeded (it returns before looking at the cancel).
    assert waiting.verdict is not None and waiting.verdict.outcome == Outcome.RELEASED
