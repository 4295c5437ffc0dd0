"""HandlerRunner: what it opens, its stop closes; async attempts handed to its loop in
batches, timed out and abandoned as sync ones are; an attempt canceled before it starts never
starts."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import uuid
import warnings
from typing import Any

from tenantq.app import JobType
from tenantq.consumer.context import JobContext
from tenantq.consumer.runner import HandlerRunner, Task
from tenantq.states import Outcome


def test_a_stopped_runner_leaves_no_event_loop_for_the_collector() -> None:
    # A loop left to the collector is closed in its ``__del__``, where its self-pipe may
    # already be gone: an error pytest reports at exit, after every test has passed.
    gc.collect()  # what earlier tests left is theirs, not this runner's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runner = HandlerRunner(2, lambda task: None)
        runner.stop(timeout=2)
        runner.stop(timeout=2)  # a second stop is harmless
        del runner
        gc.collect()
    unclosed = [w for w in caught if "unclosed event loop" in str(w.message)]
    assert unclosed == []


def _task(job_type: JobType, deadline: float = 1e12) -> Task:
    context = JobContext(uuid.uuid4(), "default", job_type.name, "t", 1, 3, deadline=deadline)
    return Task(job_type, b"{}", context, deadline=deadline)


def test_async_attempts_of_one_call_all_run_on_the_loop_and_finish_once_each() -> None:
    loop_threads: set[str] = set()

    async def handler(ctx: JobContext, payload: Any) -> None:
        loop_threads.add(threading.current_thread().name)
        await asyncio.sleep(0.01)

    finished: list[Task] = []
    done = threading.Event()

    def on_finished(task: Task) -> None:
        finished.append(task)
        if len(finished) == 200:
            done.set()

    runner = HandlerRunner(4, on_finished)
    try:
        tasks = [_task(JobType("a", "default", handler, None)) for _ in range(200)]
        runner.submit_many(tasks)
        assert done.wait(10)
        assert sorted(map(id, finished)) == sorted(map(id, tasks))
        assert loop_threads == {"tenantq-async-handlers"}
        assert all(task.error is None and task.verdict is not None for task in tasks)
        assert runner.busy == 0
    finally:
        runner.stop(timeout=2)


def test_an_async_attempt_past_its_deadline_is_cancelled_in_its_coroutine() -> None:
    started, cancelled = threading.Event(), threading.Event()

    async def hangs(ctx: JobContext, payload: Any) -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    finished: list[Task] = []
    runner = HandlerRunner(1, finished.append)
    try:
        task = _task(JobType("hangs", "default", hangs, None), deadline=time.monotonic() + 0.2)
        runner.submit_many([task])
        assert started.wait(5)
        wait_until = time.monotonic() + 5
        while not runner.expire() and time.monotonic() < wait_until:
            time.sleep(0.02)
        assert cancelled.wait(5)
        assert finished == [task] and task.timed_out  # finished once, as timed out
    finally:
        runner.stop(timeout=2)


def test_an_async_attempt_abandoned_before_the_loop_reaches_it_never_starts() -> None:
    ran: list[uuid.UUID] = []

    async def handler(ctx: JobContext, payload: Any) -> None:
        ran.append(ctx.job_id)

    runner = HandlerRunner(1, lambda task: None)
    try:
        # The loop is kept busy so that the abandon comes before the loop starts the task.
        gate = threading.Event()
        runner._loop.call_soon_threadsafe(gate.wait, 5)
        abandoned, kept = (_task(JobType("a", "default", handler, None)) for _ in range(2))
        runner.submit_many([abandoned, kept])
        assert runner.abandon(abandoned)
        gate.set()
        deadline = time.monotonic() + 5
        while runner.busy and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ran == [kept.context.job_id]
    finally:
        runner.stop(timeout=2)


def test_an_attempt_canceled_while_it_waits_for_a_thread_never_starts() -> None:
    ran: list[uuid.UUID] = []
    release = threading.Event()

    def handler(ctx: JobContext, payload: Any) -> None:
        ran.append(ctx.job_id)
        release.wait(5)

    finished: list[Task] = []
    runner = HandlerRunner(1, finished.append)
    try:
        job_type = JobType("a", "default", handler, None)
        first, operator, revoked = _task(job_type), _task(job_type), _task(job_type)
        runner.submit_many([first, operator, revoked])
        operator.context.signal_cancel("operator")
        revoked.context.signal_cancel("revoked")
        release.set()
        deadline = time.monotonic() + 5
        while len(finished) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ran == [first.context.job_id]
        assert first.verdict is not None and first.verdict.outcome == Outcome.SUCCEEDED
        # An operator's cancel ends the job; a revoke gives it back, its attempt returned.
        assert operator.verdict is not None and operator.verdict.outcome == Outcome.CANCELED
        assert revoked.verdict is not None and revoked.verdict.outcome == Outcome.RELEASED
    finally:
        runner.stop(timeout=2)
