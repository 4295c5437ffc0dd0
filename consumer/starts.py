"""From leased jobs to running handlers: start the jobs waiting for a slot, oldest first.

A job's type and dependencies are looked at as it starts, so a dependency's permission is
taken only for a job that runs now (one that waited and was given back took none):

| leased job about to start                      | what happens                                  |
| ---------------------------------------------- | --------------------------------------------- |
| its partition given up, or the worker stopping | lease given back, offset left for the owner   |
| no handler for its type here                   | retried within a budget, then dead            |
| a dependency's breaker open, or no permission  | snoozed into a retry tier, attempt returned   |
| otherwise                                      | a task starts in the executor                 |
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from tenantq.app import JobType
from tenantq.consumer.completer import Completion
from tenantq.consumer.context import JobContext, LeaseKeeper
from tenantq.consumer.dependencies import DependencyGuard
from tenantq.consumer.executor import Executor
from tenantq.consumer.outcomes import Verdict
from tenantq.consumer.retry_policy import RetryPolicy
from tenantq.consumer.runner import Task
from tenantq.consumer.slots import SlotBook
from tenantq.consumer.work import WorkItem
from tenantq.headers import DelayReason
from tenantq.observability.worker_events import WorkerEvents
from tenantq.settings import WorkerSettings

#: How much work, in seconds of the slots' recent finishing rate, an executor that queues
#: ahead (the handler process) is given beyond its free slots: more than the member's turn
#: between two hand-overs under load, and a wait a user does not see.
HANDLER_QUEUE_SECONDS = 0.05

#: Start events of a batch: (queue, job type, tenant, seconds since enqueue or None).
Started = list[tuple[str, str, str, float | None]]


class RunningTasks:
    """The attempts started and not ended, by job id. Written by the poll thread; ``cancel``
    is also called from the heartbeat thread (one dictionary lookup: no lock needed)."""

    def __init__(self, cancel: Callable[[Task, str], None]) -> None:
        self.by_job: dict[uuid.UUID, Task] = {}
        self._cancel = cancel

    def cancel(self, job_id: uuid.UUID, reason: str) -> None:
        """Ask the handler of the job to stop, if it runs here."""
        task = self.by_job.get(job_id)
        if task is not None:
            self._cancel(task, reason)


@dataclass(eq=False, kw_only=True)
class Starter:
    """Starts what ``SlotBook.ready`` holds (poll thread only)."""

    settings: WorkerSettings
    slots: SlotBook
    executor: Executor
    running: RunningTasks
    #: The partition is ours (``Partitions.owns``).
    owns: Callable[[str, int], bool]
    find_type: Callable[[str], JobType | None]
    guard: DependencyGuard
    #: Renews and saves the leases of running jobs (the heartbeat), for their contexts.
    leases: LeaseKeeper
    #: A verdict decided without running the job (``Completer.add``).
    complete: Callable[[Completion], None]
    #: Give leases back (``Completer.release``).
    release: Callable[[list[WorkItem], str], None]
    events: WorkerEvents
    retry_policy: RetryPolicy
    stats: dict[str, int]
    stopping: Callable[[], bool]

    def start_ready(self) -> None:
        """Start leased jobs in the slots that are free, oldest first."""
        ready = self.slots.ready
        if not ready:
            return
        stopping = self.stopping()
        executor = self.executor
        room = self.slots.size - executor.busy + self.queued_ahead()
        starting: list[Task] = []
        started: Started = []
        # One reading of the clocks for the jobs started together.
        monotonic, wall = time.monotonic(), time.time()
        # Looked up once per call: ownership and handlers do not change within it, and the
        # jobs of a batch share a few partitions and job types.
        owned: dict[tuple[str, int], bool] = {}
        types: dict[str, JobType | None] = {}
        owns = self.owns
        release_slot = self.slots.release
        while ready and (stopping or len(starting) < room):
            item = ready.popleft()
            key = (item.topic, item.partition)
            ours = owned.get(key)
            if ours is None:
                ours = owned[key] = owns(*key)
            if stopping or not ours:
                # Claimed as the partition went away or the worker began to stop: give the
                # lease back; the offset stays for the next owner.
                release_slot(item)
                self.complete(Completion(item, Verdict.released("not started"), 0.0))
                continue
            name = item.job_type
            if name in types:
                job_type = types[name]
            else:
                job_type = types[name] = self._job_type_of(name)
            verdict = (
                self._unknown_type_verdict(item)
                if job_type is None
                else self._dependency_deferral(job_type)
            )
            if verdict is not None:
                release_slot(item)
                self.complete(Completion(item, verdict, 0.0))
                continue
            assert job_type is not None
            starting.append(self._task(item, job_type, monotonic, wall, started))
        if starting:
            self._submit(starting, started)

    def queued_ahead(self) -> int:
        """Jobs the executor is given beyond its free slots. The handler process: what its
        slots end in a short while at the recent rate, so short jobs start without a round
        trip through the member between two, and a slow handler's jobs wait here, where a
        revoke or the stop gives them back. Threads: none."""
        if not self.executor.queues_ahead:
            return 0
        return self.slots.claim_ahead.finishing_within(HANDLER_QUEUE_SECONDS)

    def run_again(self, tasks: list[Task]) -> None:
        """Start crashed attempts again, same lease and attempt (their crash was not theirs)."""
        fresh = []
        monotonic, wall = time.monotonic(), time.time()
        started: Started = []
        for task in tasks:
            item: WorkItem = task.item
            self.running.by_job.pop(item.job_id, None)
            fresh.append(self._task(item, task.job_type, monotonic, wall, started))
        self._submit(fresh, started)

    def give_back_ready(self, which: Callable[[WorkItem], bool], reason: str) -> None:
        """Give back the leases of claimed-ahead jobs that have not started."""
        released = self.slots.give_back_ready(which)
        if released:
            self.release(released, reason)

    def _job_type_of(self, name: str) -> JobType | None:
        """The job type ``name`` if this worker has its handler."""
        job_type = self.find_type(name)
        return job_type if job_type is not None and job_type.handler is not None else None

    def _unknown_type_verdict(self, item: WorkItem) -> Verdict:
        """No handler here: maybe a deploy is rolling out. Retry within a budget, then dead."""
        assert item.lease is not None
        budget = min(item.lease.max_attempts, self.settings.unknown_type_attempts)
        message = f"unknown job type {item.job_type!r} (no handler in this worker group)"
        if item.lease.attempt >= budget:
            return Verdict.dead("UnknownJobType", message)
        delay = self.retry_policy.delay(item.lease.attempt)
        return Verdict.retrying("UnknownJobType", message, delay, reason=DelayReason.UNKNOWN_TYPE)

    def _submit(self, tasks: list[Task], started: Started) -> None:
        self.stats["executed"] += len(tasks)
        self.events.jobs_started(started)
        self.executor.submit(tasks)

    def _dependency_deferral(self, job_type: JobType) -> Verdict | None:
        """An open breaker (or no permission left) moves the job to a retry tier without
        running it and without consuming its attempt."""
        names = job_type.dependencies
        if not names:
            return None
        wait = self.guard.open_for(names)
        if wait is None and self.guard.acquire(names):
            return None
        reason = f"circuit open for {', '.join(names)}" if wait else "dependency busy"
        return Verdict.snoozed(
            "CircuitOpen" if wait else "DependencyBusy",
            reason,
            max(wait or 0.0, 0.5),
            reason=DelayReason.BREAKER,
        )

    def _task(
        self, item: WorkItem, job_type: JobType, monotonic: float, wall: float, started: Started
    ) -> Task:
        """The task of a leased job starting now (``monotonic`` and ``wall``: the clocks); its
        start event goes on ``started`` (reported for the batch, ``WorkerEvents.jobs_started``)."""
        lease = item.lease
        assert lease is not None
        timeout = job_type.timeout or self.settings.default_timeout_seconds
        job_id = item.job_id
        # By position, in the order of JobContext's fields: once per job, where a call by
        # keyword costs twice as much.
        context = JobContext(
            job_id,
            item.queue,
            item.job_type,
            item.tenant_id,
            lease.attempt,
            lease.max_attempts,
            monotonic + timeout,  # deadline
            lease.progress,
            lease.replays,
            item.envelope.idempotency_key,
            None,  # _cancel: made when a handler first waits for it
            None,  # _cancel_reason
            None,  # _cancelled_at
            self.leases,
        )
        task = Task(job_type, item.envelope.payload, context, context.deadline, item)
        self.running.by_job[job_id] = task
        wait = wall - item.envelope.created_at.timestamp() if lease.attempt == 1 else None
        started.append((item.queue, item.job_type, item.tenant_id, wait))
        return task
