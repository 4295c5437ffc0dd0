"""``JobHarness``: run a job type's handler as a worker runs it, in memory.

The attempt goes through the worker's own parts, not a copy of them: the payload is
validated and encoded by the producer's checks (``encode_payload``: a payload the producer
would refuse raises the same error here), decoded for the handler by the worker's
(``decode_payload``: a payload that does not fit its model is dead at once), run by the
worker's ``HandlerRunner`` (sync handlers in a thread, async ones on an event loop, the job
type's timeout enforced from outside, deadlocks retried in place) and judged by the worker's
classification (``tenantq.consumer.outcomes``: the retry policy, ``max_attempts`` and the
retry budgets, ``RetryableError``, ``PermanentError``, ``RateLimited``, ``Snooze``,
``never_retry_on``). Checkpoints and heartbeats are kept in memory; a checkpoint goes through
JSON as the database's would. Nothing waits for a retry's delay: it is reported.
"""

from __future__ import annotations

import json
import queue
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypedDict, TypeVar, Unpack

from tenantq.app import App, JobType, resolve_max_attempts
from tenantq.closing import ClosedOnExit
from tenantq.consumer.context import JobContext
from tenantq.consumer.retry_policy import RetryPolicy
from tenantq.consumer.runner import HandlerRunner, Task
from tenantq.errors import ConfigurationError
from tenantq.handles import JobHandle
from tenantq.job_ids import new_job_id
from tenantq.producer.validation import encode_payload
from tenantq.settings import Settings
from tenantq.states import Outcome
from tenantq.testing.recording_producer import EnqueuedJob, RecordingProducer
from tenantq.testing.results import Attempt, JobRun

__all__ = ["JobHarness"]

PayloadT = TypeVar("PayloadT")

#: How often the harness looks for an attempt past its timeout while it waits.
EXPIRY_CHECK_SECONDS = 0.01
#: Snoozes a ``run_to_end`` follows before it stops and reports the job still waiting.
MAX_SNOOZES = 100


class AttemptOptions(TypedDict, total=False):
    """The options of one attempt, as keyword arguments of ``JobHarness.run`` (which hands
    them to ``run_encoded``, where their defaults are)."""

    tenant: str
    attempt: int
    max_attempts: int | None
    progress: Any
    timeout: float | None
    job_id: uuid.UUID | None
    idempotency_key: str | None
    cancel: str | None
    cancel_after: float


class JobHarness(ClosedOnExit):
    """Runs handlers of ``app`` as a worker would, without Kafka or Postgres.

    >>> with JobHarness(app) as harness:
    ...     attempt = harness.run(send_email, tenant="acme", payload=SendEmail(to="a@x"))
    ...     assert attempt.succeeded
    ...     run = harness.run_to_end(flaky, tenant="acme", payload=Flaky())
    ...     assert [a.outcome for a in run.attempts] == ["retrying", "succeeded"]

    ``settings`` default to ``app.settings``: the worker's default timeout and max attempts
    and the payload size limit come from them. ``retry_policy`` is the worker's
    (``RetryPolicy()`` by default; ``RetryPolicy(jitter=0)`` gives exact delays).
    ``producer`` is a ``RecordingProducer`` of the same app: hand it to the code under test,
    and each attempt reports what its handler enqueued (``Attempt.enqueued``);
    ``run_enqueued`` runs those jobs in turn. Close the harness (or use it as a context
    manager) to stop the handler threads.
    """

    def __init__(
        self,
        app: App,
        *,
        settings: Settings | None = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        self.app = app
        self.settings = settings or app.settings
        self.retry_policy = retry_policy or RetryPolicy()
        self.producer = RecordingProducer(app, settings=self.settings)
        #: Jobs of ``producer`` already run by ``run_enqueued`` (by position).
        self._jobs_run = 0
        self._finished: queue.SimpleQueue[Task] = queue.SimpleQueue()
        self._runner: HandlerRunner | None = None
        #: Starts the attempt's cancel timer once its handler has started (a handler asked
        #: to stop before it starts never starts, as in the worker).
        self._on_handler_start: Callable[[], None] | None = None

    # -- running one attempt ------------------------------------------------------------

    def run(
        self,
        job: JobHandle[PayloadT, Any] | str,
        *,
        payload: PayloadT,
        **options: Unpack[AttemptOptions],
    ) -> Attempt:
        """Run one attempt of ``job`` (its handle or its name) with ``payload`` and report
        how it ended.

        ``payload`` is checked and encoded as ``Producer.enqueue`` would (a payload it would
        refuse raises the same error here, and nothing runs). The ``options`` are
        ``run_encoded``'s: ``tenant``; ``attempt``, the attempt's number (default 1), and
        ``progress``, what an earlier attempt saved; ``max_attempts`` and ``timeout``
        default to the job type's, then the worker's. ``cancel`` asks the handler to stop
        ``cancel_after`` seconds into the attempt, as the worker would for that reason
        (``operator``, ``shutdown``, ``revoked``; or ``lease_lost``, after which
        ``ctx.heartbeat()`` and ``ctx.checkpoint()`` answer False: the store would refuse the
        attempt's result, whatever its verdict).
        """
        job_type = self._job_type(job)
        data = self._encoded(job_type, payload)
        return self.run_encoded(job_type.name, data, **options)

    def run_encoded(
        self,
        job: JobHandle[Any, Any] | str,
        data: bytes,
        *,
        tenant: str = "tenant",
        attempt: int = 1,
        max_attempts: int | None = None,
        progress: Any = None,
        timeout: float | None = None,
        job_id: uuid.UUID | None = None,
        idempotency_key: str | None = None,
        cancel: str | None = None,
        cancel_after: float = 0.0,
    ) -> Attempt:
        """``run`` with the payload's bytes as a worker reads them from its envelope,
        unchecked: what a worker does with a payload that no longer fits its model (an old
        producer, another language's) is dead at once."""
        job_type = self._job_type(job)
        if attempt < 1:
            raise ConfigurationError("attempt must be >= 1")
        keeper = InMemoryLeases()
        context = JobContext(
            job_id=job_id or new_job_id(),
            queue=job_type.queue,
            job_type=job_type.name,
            tenant=tenant,
            attempt=attempt,
            max_attempts=resolve_max_attempts(
                max_attempts, job_type, self.settings.worker.default_max_attempts
            ),
            deadline=time.monotonic()
            + (timeout or job_type.timeout or self.settings.worker.default_timeout_seconds),
            progress=progress,
            idempotency_key=idempotency_key,
            _leases=keeper,
        )
        enqueued_before = len(self.producer.jobs)

        def stop_it(reason: str) -> None:
            if reason == "lease_lost":
                keeper.lease_lost = True
            context.signal_cancel(reason)

        task = self._attempt(
            Task(job_type, data, context, context.deadline),
            None if cancel is None else (lambda: stop_it(cancel)),
            cancel_after,
        )
        verdict = task.verdict
        assert verdict is not None  # judged by the runner before it is handed over
        return Attempt(
            job_type=job_type.name,
            job_id=context.job_id,
            tenant=tenant,
            attempt=attempt,
            max_attempts=context.max_attempts,
            outcome=verdict.outcome,
            state=verdict.state,
            error_class=verdict.error_class,
            error_message=verdict.error_message,
            delay_seconds=verdict.delay_seconds,
            attempt_given_back=verdict.give_back,
            error=task.error,
            duration=task.duration,
            progress=keeper.checkpoints[-1] if keeper.checkpoints else progress,
            checkpoints=keeper.checkpoints,
            heartbeats=keeper.heartbeats,
            enqueued=self.producer.jobs[enqueued_before:],
        )

    # -- following a job ------------------------------------------------------------------

    def run_to_end(
        self,
        job: JobHandle[PayloadT, Any] | str,
        *,
        payload: PayloadT,
        tenant: str = "tenant",
        max_attempts: int | None = None,
        progress: Any = None,
        timeout: float | None = None,
    ) -> JobRun:
        """Run ``job`` attempt after attempt, as the worker would after each verdict, until
        it settles: a terminal state (succeeded, dead, canceled), a release (given back by
        a stopping worker), or ``MAX_SNOOZES`` snoozes. Each attempt starts with the
        progress the one before saved; a snooze keeps the attempt's number. No delay is
        waited for: each is reported (``Attempt.delay_seconds``)."""
        job_type = self._job_type(job)
        data = self._encoded(job_type, payload)
        return self._follow(job_type, data, tenant, max_attempts, progress, timeout, None)

    def run_enqueued(self, job_type: str | None = None) -> list[JobRun]:
        """Run to its end every job recorded by ``producer`` and not run yet (of
        ``job_type`` only, if given), oldest first, including those their handlers enqueue
        meanwhile; from the envelope a worker would read (payload bytes, tenant, id,
        ``max_attempts``, idempotency key)."""
        runs: list[JobRun] = []
        while True:
            pending = self.producer.jobs[self._jobs_run :]
            chosen = next(
                (job for job in pending if job_type is None or job.job_type == job_type), None
            )
            if chosen is None:
                return runs
            self._jobs_run = self.producer.jobs.index(chosen) + 1
            runs.append(self._run_recorded(chosen))

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the handler threads and the event loop (a handler still running past its
        timeout keeps its thread until it returns, as in the worker)."""
        if self._runner is not None:
            self._runner.stop(timeout=5.0)
            self._runner = None

    # -- internals -------------------------------------------------------------------------

    def _job_type(self, job: JobHandle[Any, Any] | str) -> JobType:
        job_type = self.app.job_type(job if isinstance(job, str) else job.name)
        if job_type.handler is None:
            raise ConfigurationError(f"job type {job_type.name!r} has no handler in this app")
        return job_type

    def _encoded(self, job_type: JobType, payload: Any) -> bytes:
        """``payload`` checked and encoded as ``Producer.enqueue`` would."""
        return encode_payload(
            job_type.name, payload, job_type.model, self.settings.max_payload_bytes
        )

    def _attempt(self, task: Task, cancel: Callable[[], None] | None, cancel_after: float) -> Task:
        """``task`` run by the runner until it is judged (finished, or past its timeout);
        ``cancel`` is called ``cancel_after`` seconds into it."""
        if self._runner is None:
            self._runner = HandlerRunner(
                1, self._finished.put, self.retry_policy, on_start=self._handler_started
            )
        runner = self._runner
        canceller = None
        if cancel is not None:
            canceller = threading.Timer(cancel_after, cancel)
            canceller.daemon = True
            self._on_handler_start = canceller.start
        runner.submit(task)
        try:
            while True:
                try:
                    finished = self._finished.get(timeout=EXPIRY_CHECK_SECONDS)
                except queue.Empty:
                    runner.expire()
                    continue
                if finished is task:
                    return task
        finally:
            self._on_handler_start = None
            if canceller is not None:
                canceller.cancel()

    def _handler_started(self, job_id: uuid.UUID | None) -> None:
        """The runner's ``on_start``, in the handler's thread (None: it returned)."""
        start, self._on_handler_start = self._on_handler_start, None
        if job_id is not None and start is not None:
            start()

    def _follow(
        self,
        job_type: JobType,
        data: bytes,
        tenant: str,
        max_attempts: int | None,
        progress: Any,
        timeout: float | None,
        recorded: EnqueuedJob | None,
    ) -> JobRun:
        attempts: list[Attempt] = []
        number, snoozes = 1, 0
        job_id = recorded.job_id if recorded is not None else new_job_id()
        key = recorded.envelope.idempotency_key if recorded is not None else None
        while True:
            attempt = self.run_encoded(
                job_type.name,
                data,
                tenant=tenant,
                attempt=number,
                max_attempts=max_attempts,
                progress=progress,
                timeout=timeout,
                job_id=job_id,
                idempotency_key=key,
            )
            attempts.append(attempt)
            if attempt.state.terminal or attempt.outcome is Outcome.RELEASED:
                return JobRun(attempts)
            if attempt.attempt_given_back:
                snoozes += 1
                if snoozes >= MAX_SNOOZES:
                    return JobRun(attempts)
            else:
                number += 1
            progress = attempt.progress

    def _run_recorded(self, job: EnqueuedJob) -> JobRun:
        job_type = self._job_type(job.job_type)
        envelope = job.envelope
        return self._follow(
            job_type, envelope.payload, envelope.tenant_id, envelope.max_attempts, None, None, job
        )


class InMemoryLeases:
    """The lease keeper of a harness's attempt (``tenantq.consumer.context.LeaseKeeper``):
    heartbeats are counted, checkpoints kept as the database would return them (through
    JSON: a value it cannot store raises ``TypeError`` in the handler, as it would there).
    With ``lease_lost`` both answer that the lease is no longer the attempt's."""

    def __init__(self, *, lease_lost: bool = False) -> None:
        self.lease_lost = lease_lost
        self.heartbeats = 0
        self.checkpoints: list[Any] = []

    def renew_one(self, job_id: uuid.UUID) -> bool:
        self.heartbeats += 1
        return not self.lease_lost

    def checkpoint(self, job_id: uuid.UUID, attempt: int, progress: Any) -> bool:
        stored = json.loads(json.dumps(progress))
        if self.lease_lost:
            return False
        self.checkpoints.append(stored)
        return True
