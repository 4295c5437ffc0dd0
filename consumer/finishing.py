"""Attempts that ended: finished ones become completions, crashed ones are judged or run again,
abandoned ones free their slots. Each frees its slot and tells its dependencies' breakers how
it went.

A crash of the handler process: the job that killed it, when it left a note, spends its
attempt (retried, or dead at its last); the others run again at once under their leases. When
nobody knows which job did it, each counts the crash (not an attempt) in the database, and a
job at its crash budget is dead as a poison job.

Everything here runs on the poll thread.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from tenantq.consumer.completer import Completion
from tenantq.consumer.dependencies import DependencyGuard
from tenantq.consumer.executor import Executor
from tenantq.consumer.inbox import Inbox
from tenantq.consumer.ledger import CountCrashes, Operation
from tenantq.consumer.outcomes import BreakerSignal, Verdict, crashed_too_often
from tenantq.consumer.retry_policy import RetryPolicy
from tenantq.consumer.runner import Task
from tenantq.consumer.slots import SlotBook
from tenantq.consumer.starts import RunningTasks
from tenantq.consumer.work import WorkItem
from tenantq.observability.worker_events import WorkerEvents

log = logging.getLogger("tenantq.worker")


@dataclass(eq=False, kw_only=True)
class Finisher:
    """Takes what the inbox holds of ended attempts (poll thread only)."""

    inbox: Inbox
    running: RunningTasks
    slots: SlotBook
    executor: Executor
    guard: DependencyGuard
    events: WorkerEvents
    #: A verdict to make durable (``Completer.add``).
    complete: Callable[[Completion], None]
    #: Forget leases held (``LeaseBook.release``).
    release_leases: Callable[[list[uuid.UUID]], AbstractSet[uuid.UUID]]
    #: Their messages are durably handled (``Partitions.done_items``).
    mark_done: Callable[[Iterable[WorkItem]], None]
    #: The claims lane, for counting crashes in the database.
    count_crashes: Callable[[Operation[Any, Any]], None]
    #: Start claimed-ahead jobs in the slots just freed (``Starter.start_ready``).
    start_ready: Callable[[], None]
    #: Start crashed attempts again under their leases (``Starter.run_again``).
    run_again: Callable[[list[Task]], None]
    retry_policy: RetryPolicy
    crash_budget: int

    def collect(self) -> None:
        """Finished attempts become completions; their slots take claimed-ahead jobs now, not
        a loop turn later."""
        count = 0
        # Looked up once per call, not once per job (the loop runs for every job).
        complete = self.complete
        forget_task = self.running.by_job.pop
        release_slot = self.slots.release
        record_dependencies = self._record_dependencies
        next_finished = self.inbox.next_finished
        while (tasks := next_finished()) is not None:
            count += len(tasks)
            for task in tasks:
                item: WorkItem = task.item
                forget_task(item.job_id, None)
                release_slot(item)
                record_dependencies(task)
                verdict = task.verdict
                assert verdict is not None
                complete(Completion(item, verdict, task.duration))
        self.slots.attempts_finished(count, time.monotonic())
        self.start_ready()

    def abandon(self, tasks: list[Task]) -> list[WorkItem]:
        """Leave behind the handlers of ``tasks`` still running (revoked, or shutting down):
        their slots and dependency permits are free again. Returns their items, whose leases
        the caller gives back."""
        abandoned: list[WorkItem] = []
        for task in tasks:
            if self.executor.abandon(task):
                self._ended_unheard(task, "neutral")
                abandoned.append(task.item)
        return abandoned

    def handle_crashes(self) -> None:
        """Judge the attempts that were running when the handler process died."""
        for tasks, culprit, how in self.inbox.take_crashes():
            self.events.handler_process_restarted()
            innocent = [task for task in tasks if task is not culprit]
            if culprit is not None:
                self._ended_unheard(culprit, "failure")
                verdict = self._crash_verdict(culprit, how)
                self.complete(Completion(culprit.item, verdict, culprit.duration))
                self.run_again(innocent)
            elif innocent:
                crashed = [
                    (
                        t.context.job_id,
                        t.context.attempt,
                        t.item.lease.claimed_at,
                        int(t.duration * 1000),
                    )
                    for t in innocent
                ]
                self.count_crashes(CountCrashes(crashed, context=innocent, reason=how))

    def crashes_counted(self, operation: CountCrashes) -> None:
        """The database counted the crash of each job: past its budget it is dead, otherwise
        it runs again."""
        if operation.answer is None:
            # Never ran (stopping, or a fault it logged): the jobs keep their leases until
            # these run out, and their offsets stay unfinished, so they run again.
            for task in operation.context:
                self._ended_unheard(task, "neutral")
                self.release_leases([task.context.job_id])
            return
        crashes = operation.answer
        budget = self.crash_budget
        again: list[Task] = []
        for task in operation.context:
            count = crashes.get(task.context.job_id)
            if count is None:
                # No longer ours (the lease moved on meanwhile): nothing to run or write.
                self._ended_unheard(task, "neutral")
                self.release_leases([task.context.job_id])
                self.mark_done([task.item])
            elif count >= budget:
                self._ended_unheard(task, "failure")
                verdict = Verdict.dead("PoisonJob", crashed_too_often(count, budget))
                self.complete(Completion(task.item, verdict, task.duration))
            else:
                again.append(task)
        self.run_again(again)

    def _crash_verdict(self, task: Task, how: str) -> Verdict:
        attempt, max_attempts = task.context.attempt, task.context.max_attempts
        message = f"{how} while running this job (attempt {attempt})"
        if attempt >= max_attempts:
            return Verdict.dead("ProcessCrashed", f"{message}; max attempts reached")
        return Verdict.retrying("ProcessCrashed", message, self.retry_policy.delay(attempt))

    def _ended_unheard(self, task: Task, signal: BreakerSignal) -> None:
        """A task that ended without its handler's answer (it crashed its process, or was
        abandoned): its slot is free, and its dependencies hear ``signal`` in its place.
        Unheard, a half-open breaker's probe permit stayed out for good, and every later job
        of the dependency was deferred as "dependency busy", in this worker, until it
        restarted."""
        self.running.by_job.pop(task.item.job_id, None)
        self.slots.release(task.item)
        task.breaker = signal
        self._record_dependencies(task)

    def _record_dependencies(self, task: Task) -> None:
        names = task.job_type.dependencies
        if not names:
            return
        if task.breaker in ("throttled", "neutral"):
            for name in names:
                self.guard.breaker(name).return_permit()
                if task.breaker == "throttled":
                    self.events.dependency_throttled(name)
            return
        states = self.guard.record(names, task.breaker == "success")
        for name, state in states.items():
            self.events.dependency_call(name, task.duration)
            self.events.breaker_state(name, state)
