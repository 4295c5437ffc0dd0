"""Claims of the hot lane's jobs have a connection of their own: while the lane keeps its
claims pipeline full, the other tenants' jobs are still dispatched and claimed at once. A
job claimed ahead takes a dependency's token only when it starts."""

from __future__ import annotations

from typing import Any

from fakes import DoneOffsets, FakeExecutor, FakeLane, FakeLeaseKeeper, quota_parts, work_item

import tenantq
from tenantq.consumer.claim_ahead import ClaimAhead
from tenantq.consumer.claims import Claims
from tenantq.consumer.dependencies import DependencyGuard, policies_from
from tenantq.consumer.dispatch import Dispatch
from tenantq.consumer.dispatcher import FairDispatcher
from tenantq.consumer.ledger import Claim, ClaimAnswer
from tenantq.consumer.retry_policy import RetryPolicy
from tenantq.consumer.slots import SlotBook
from tenantq.consumer.starts import RunningTasks, Starter
from tenantq.consumer.work import HOT_LANE_SUFFIX, WorkItem
from tenantq.observability.worker_events import WorkerEvents

SLOTS = 8


class Rig:
    """A dispatch round's parts, built through their constructors: a fair dispatcher of queue
    ``default`` and its lane, the slot book, the claims (over two fake ledger lanes), and a
    starter whose executor runs nothing."""

    def __init__(
        self,
        claims_pending: int = 0,
        lane_claims_pending: int = 0,
        app: Any = None,
        claim_connections: int = 1,
    ) -> None:
        self.app = app or tenantq.App(tenantq.Settings())
        self.settings = self.app.settings.worker
        self.main = FakeLane(claims_pending, claim_connections)
        self.lane = FakeLane(lane_claims_pending)
        self.executor = FakeExecutor()
        self.guard = DependencyGuard(policies_from(self.app.dependencies), clock=lambda: 0.0)
        self.released: list[WorkItem] = []
        self.stats = {"executed": 0, "claimed_ahead": 0}
        self.dispatcher: FairDispatcher[WorkItem] = FairDispatcher(
            {"default": 1, f"default{HOT_LANE_SUFFIX}": 1}, lane_of=lambda i: i.dispatch_lane
        )
        self.slots = SlotBook(
            SLOTS,
            ClaimAhead(0, 0.0),
            find_type=self.app.find,
            tenants=self.dispatcher,
            dependencies_ready=self.guard.ready,
        )
        self.claims = Claims(
            main=self.main,
            lane=self.lane,
            settings=self.settings,
            worker_id="this-worker",
            topics={},
            events=WorkerEvents(),
            hold=lambda items: None,
            mark_done=DoneOffsets().done_items,
            push=self.dispatcher.push,
            unclaimed=self.slots.unclaimed,
            publish=lambda outgoing: None,
            **quota_parts(self.dispatcher.push),
        )
        self.starter = Starter(
            settings=self.settings,
            slots=self.slots,
            executor=self.executor,
            running=RunningTasks(self.executor.cancel),
            owns=lambda topic, partition: True,
            find_type=self.app.find,
            guard=self.guard,
            leases=FakeLeaseKeeper(),
            complete=lambda completion: None,
            release=lambda items, reason: self.released.extend(items),
            events=WorkerEvents(),
            retry_policy=RetryPolicy(),
            stats=self.stats,
            stopping=lambda: False,
        )
        self.dispatch = Dispatch(
            dispatcher=self.dispatcher,
            slots=self.slots,
            claims=self.claims,
            busy=lambda: self.executor.busy,
            queued_ahead=self.starter.queued_ahead,
            may_claim=lambda: True,
            start_ready=self.starter.start_ready,
            stats=self.stats,
        )

    def claimed_batches(self, lane: FakeLane) -> list[list[WorkItem]]:
        return [operation.context for operation in lane.submitted]


def test_a_full_lane_claims_pipeline_does_not_hold_up_the_other_tenants() -> None:
    rig = Rig(claims_pending=0, lane_claims_pending=2)
    hot = [work_item("whale", lane=True) for _ in range(4)]
    cold = work_item("acme")
    for each in [*hot, cold]:
        rig.dispatcher.push(each)
    rig.dispatch.round()
    assert rig.claimed_batches(rig.main) == [[cold]]
    assert rig.claimed_batches(rig.lane) == []
    assert len(rig.dispatcher) == 4  # the lane's jobs wait for their own pipeline
    assert rig.slots.claiming == 1


def test_a_full_main_claims_pipeline_leaves_the_lane_its_own() -> None:
    rig = Rig(claims_pending=2, lane_claims_pending=0)
    hot = [work_item("whale", lane=True) for _ in range(2)]
    cold = work_item("acme")
    for each in [cold, *hot]:
        rig.dispatcher.push(each)
    rig.dispatch.round()
    assert rig.claimed_batches(rig.lane) == [hot]
    assert rig.claimed_batches(rig.main) == []
    assert len(rig.dispatcher) == 1


def test_nothing_is_dispatched_while_both_pipelines_are_full() -> None:
    rig = Rig(2, 2)
    rig.dispatcher.push(work_item("acme"))
    rig.dispatcher.push(work_item("whale", lane=True))
    rig.dispatch.round()
    assert rig.main.submitted == [] and rig.lane.submitted == []
    assert len(rig.dispatcher) == 2


def test_a_claims_lane_of_two_connections_runs_two_claims_and_gathers_a_third() -> None:
    """With two claim connections, a claim is handed over while two run (one per connection,
    the next one gathering), and none past that: more would only wait in the lane, frozen,
    where the dispatcher keeps gathering."""
    rig = Rig(claims_pending=2, claim_connections=2)
    first = work_item("acme")
    rig.dispatcher.push(first)
    rig.dispatch.round()
    assert rig.claimed_batches(rig.main) == [[first]]
    rig.dispatcher.push(work_item("acme"))
    rig.dispatch.round()
    assert rig.claimed_batches(rig.main) == [[first]]
    assert len(rig.dispatcher) == 1


def test_jobs_queued_in_the_handler_process_leave_the_claim_ahead_its_room() -> None:
    """The handler process is given what its slots end within a short while beyond them
    (``Starter.queued_ahead``). Dispatch chooses for that queue too: counted against the
    slots alone, a full queue there would leave no room to claim, and new jobs would wait
    unclaimed until it drained."""
    rig = Rig()
    rig.executor.queues_ahead = True
    claim_ahead = rig.slots.claim_ahead
    claim_ahead.finished(0, 0.0)
    claim_ahead.finished(1_000, 1.0)  # 1,000 finishes a second: 25 within 50 ms (smoothed)
    queued = rig.starter.queued_ahead()
    assert queued == 25
    rig.executor.busy = SLOTS + 10  # every slot running, 10 more queued there
    waiting = [work_item("acme") for _ in range(40)]
    for each in waiting:
        rig.dispatcher.push(each)
    rig.dispatch.round()
    assert rig.claimed_batches(rig.main) == [waiting[: SLOTS + queued - (SLOTS + 10)]]


def test_a_job_claimed_ahead_and_given_back_takes_no_dependency_token() -> None:
    """A dependency's token is taken when the job starts: one that waited for a slot and
    was given back (a revoke, a shutdown) leaves the token for the next job."""
    app = tenantq.App(tenantq.Settings())
    app.dependency("smtp", rate=1.0, burst=1)

    @app.job("t", dependencies=["smtp"])
    def send(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        pass

    rig = Rig(app=app)
    waiting = work_item("acme")
    rig.dispatcher.push(waiting)
    rig.dispatch.round()
    rig.executor.busy = SLOTS  # every slot taken while the claim ran: the job waits, leased
    (claim,) = rig.main.submitted
    leased = work_item("acme", job_id=waiting.job_id, attempt=1)
    assert isinstance(claim, Claim)
    claim.answer = ClaimAnswer({waiting.job_id: leased.lease}, {})  # type: ignore[dict-item]
    rig.dispatch.claimed(claim)
    assert rig.stats["claimed_ahead"] == 1 and rig.executor.submitted == []
    assert list(rig.slots.ready) == [waiting]

    rig.starter.give_back_ready(lambda item: True, "partition revoked")
    assert rig.released == [waiting] and not rig.slots.ready
    assert rig.guard.acquire(["smtp"]), "the given-back job kept the only token"


def _ready_to_hand_over(finished_in_first_second: int) -> tuple[Rig, list[WorkItem]]:
    """A rig whose executor queues ahead (as the handler process does), its slots having
    ended ``finished_in_first_second`` attempts in the first second, and 40 jobs leased and
    waiting (five times the slots)."""
    app = tenantq.App(tenantq.Settings())

    @app.job("t")
    def noop(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        pass

    rig = Rig(app=app)
    rig.executor.queues_ahead = True
    rig.slots.claim_ahead.finished(finished_in_first_second, 1.0)
    leased = [work_item("acme", attempt=1) for _ in range(40)]
    rig.slots.ready.extend(leased)
    return rig, leased


def test_a_slow_handlers_leased_jobs_wait_in_the_worker_not_in_the_handler_process() -> None:
    # Seconds per job: its slots end a few attempts a second, none within the hand-over's
    # horizon. Only the free slots get jobs; the rest stay where a revoke gives them back.
    rig, leased = _ready_to_hand_over(4)
    rig.starter.start_ready()
    assert [task.item for task in rig.executor.submitted[0]] == leased[:SLOTS]
    assert list(rig.slots.ready) == leased[SLOTS:]


def test_short_jobs_go_to_the_handler_process_ahead_of_free_slots() -> None:
    # Thousands a second: a batch beyond the free slots is handed over at once, so a slot
    # that frees starts the next job without waiting for the member.
    rig, leased = _ready_to_hand_over(2_000)
    rig.starter.start_ready()
    assert [task.item for task in rig.executor.submitted[0]] == leased
    assert not rig.slots.ready
