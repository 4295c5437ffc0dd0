"""A crash of the handler process: the job that killed it (it left a note) spends its attempt;
the jobs that ran beside it run again at once under their leases. Nobody knows which: each
counts the crash in the database, and a job at its crash budget is dead as a poison job."""

from __future__ import annotations

from typing import Any

from fakes import DoneOffsets, FakeExecutor, FakeLane, seeded_retry_policy, work_item

import tenantq
from tenantq.consumer.claim_ahead import ClaimAhead
from tenantq.consumer.completer import Completion
from tenantq.consumer.context import JobContext
from tenantq.consumer.dependencies import DependencyGuard
from tenantq.consumer.dispatcher import FairDispatcher
from tenantq.consumer.finishing import Finisher
from tenantq.consumer.inbox import Inbox
from tenantq.consumer.ledger import CountCrashes
from tenantq.consumer.runner import Task
from tenantq.consumer.slots import SlotBook
from tenantq.consumer.starts import RunningTasks
from tenantq.consumer.work import WorkItem
from tenantq.observability.worker_events import WorkerEvents
from tenantq.states import JobState

CRASH_BUDGET = 3


class Rig:
    def __init__(self) -> None:
        self.app = tenantq.App(tenantq.Settings())

        @self.app.job("t")
        def handler(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None: ...

        self.inbox = Inbox()
        self.executor = FakeExecutor()
        self.running = RunningTasks(self.executor.cancel)
        dispatcher: FairDispatcher[WorkItem] = FairDispatcher({"default": 1})
        self.slots = SlotBook(
            8,
            ClaimAhead(0, 0.0),
            find_type=self.app.find,
            tenants=dispatcher,
            dependencies_ready=lambda names: True,
        )
        self.completed: list[Completion] = []
        self.again: list[Task] = []
        self.claims = FakeLane()
        self.finisher = Finisher(
            inbox=self.inbox,
            running=self.running,
            slots=self.slots,
            executor=self.executor,
            guard=DependencyGuard({}),
            events=WorkerEvents(),
            complete=self.completed.append,
            release_leases=lambda job_ids: set(),
            mark_done=DoneOffsets().done_items,
            count_crashes=self.claims.submit,
            start_ready=lambda: None,
            run_again=self.again.extend,
            retry_policy=seeded_retry_policy(),
            crash_budget=CRASH_BUDGET,
        )

    def task(self, attempt: int = 1) -> Task:
        item = work_item(attempt=attempt)
        job_type = self.app.find("t")
        assert job_type is not None
        context = JobContext(item.job_id, "default", "t", "acme", attempt, 3, 30.0)
        task = Task(job_type, b"{}", context, 30.0, item)
        self.running.by_job[item.job_id] = task
        return task


def test_the_culprit_spends_its_attempt_and_the_others_run_again() -> None:
    rig = Rig()
    culprit, beside = rig.task(attempt=1), rig.task()
    rig.inbox.crashed([culprit, beside], culprit, "killed by signal 9")
    rig.finisher.handle_crashes()
    (completion,) = rig.completed
    assert completion.item is culprit.item
    assert completion.verdict.state is JobState.RETRYING
    assert completion.verdict.error_class == "ProcessCrashed"
    assert rig.again == [beside] and rig.claims.submitted == []
    assert culprit.item.job_id not in rig.running.by_job


def test_the_culprit_at_its_last_attempt_is_dead() -> None:
    rig = Rig()
    culprit = rig.task(attempt=3)
    rig.inbox.crashed([culprit], culprit, "killed by signal 9")
    rig.finisher.handle_crashes()
    assert rig.completed[0].verdict.state is JobState.DEAD


def test_without_a_culprit_each_counts_the_crash_and_one_past_its_budget_is_dead() -> None:
    rig = Rig()
    poison, other = rig.task(), rig.task()
    rig.inbox.crashed([poison, other], None, "killed by signal 9")
    rig.finisher.handle_crashes()
    (count,) = rig.claims.submitted
    assert isinstance(count, CountCrashes) and count.context == [poison, other]
    assert rig.completed == [] and rig.again == []
    count.answer = {poison.context.job_id: CRASH_BUDGET, other.context.job_id: 1}
    rig.finisher.crashes_counted(count)
    (completion,) = rig.completed
    assert completion.item is poison.item and completion.verdict.error_class == "PoisonJob"
    assert rig.again == [other]
