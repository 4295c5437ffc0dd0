"""Claims of the hot lane's jobs have a connection of their own: while the lane keeps its
claims pipeline full, the other tenants' jobs are still dispatched and claimed at once."""

from __future__ import annotations

import collections
import datetime as dt
import threading
import uuid
from types import SimpleNamespace
from typing import Any

import tenantq
from tenantq.consumer.claim_ahead import ClaimAhead
from tenantq.consumer.dependencies import DependencyGuard, policies_from
from tenantq.consumer.dispatcher import FairDispatcher
from tenantq.consumer.intake import Polled
from tenantq.consumer.work import HOT_LANE_SUFFIX, WorkItem
from tenantq.consumer.worker import Worker
from tenantq.schemas.envelope import Envelope


def item(tenant: str, *, lane: bool) -> WorkItem:
    envelope = Envelope(
        uuid.uuid4(), "default", "t", tenant, tenant, b"{}", dt.datetime.now(dt.UTC)
    )
    topic = "p.default.lane" if lane else "p.default"
    record = Polled(topic, 0, 5, tenant.encode(), b"x", [], 0)
    return WorkItem(
        topic, 0, 5, tenant.encode(), b"x", record, None, "default", envelope, 3, lane=lane
    )


def worker_with(claims_pending: int, lane_claims_pending: int, waiting: list[WorkItem]) -> Any:
    worker: Any = Worker.__new__(Worker)
    worker._stop_requested = threading.Event()
    worker.health = SimpleNamespace(up=True)
    worker.ledger = SimpleNamespace(
        claims=SimpleNamespace(pending=claims_pending),
        lane_claims=SimpleNamespace(pending=lane_claims_pending),
    )
    worker.slots = 8
    worker.executor = SimpleNamespace(busy=0)
    worker._claiming = 0
    worker._ready = collections.deque()
    worker.claim_ahead = ClaimAhead(0, 0.0)
    worker._type_running = {}
    worker._type_tenant_running = {}
    worker._limited_types = {}
    worker.app = SimpleNamespace(find=lambda name: None)
    worker.dispatcher = FairDispatcher(
        {"default": 1, f"default{HOT_LANE_SUFFIX}": 1}, lane_of=lambda i: i.dispatch_lane
    )
    for waiting_item in waiting:
        worker.dispatcher.push(waiting_item)
    worker.claimed_batches = []
    worker.intake = SimpleNamespace(claim=worker.claimed_batches.append)
    return worker


def test_a_full_lane_claims_pipeline_does_not_hold_up_the_other_tenants() -> None:
    hot = [item("whale", lane=True) for _ in range(4)]
    cold = item("acme", lane=False)
    worker = worker_with(claims_pending=0, lane_claims_pending=2, waiting=[*hot, cold])
    worker._dispatch()
    assert worker.claimed_batches == [[cold]]
    assert len(worker.dispatcher) == 4  # the lane's jobs wait for their own pipeline


def test_a_full_main_claims_pipeline_leaves_the_lane_its_own() -> None:
    hot = [item("whale", lane=True) for _ in range(2)]
    cold = item("acme", lane=False)
    worker = worker_with(claims_pending=2, lane_claims_pending=0, waiting=[cold, *hot])
    worker._dispatch()
    assert worker.claimed_batches == [hot]
    assert len(worker.dispatcher) == 1


def test_nothing_is_dispatched_while_both_pipelines_are_full() -> None:
    worker = worker_with(2, 2, [item("acme", lane=False), item("whale", lane=True)])
    worker._dispatch()
    assert worker.claimed_batches == []


def test_a_job_claimed_ahead_and_given_back_takes_no_dependency_token() -> None:
    """A dependency's token is taken when the job starts: one that waited for a slot and
    was given back (a revoke, a shutdown) leaves the token for the next job."""
    app = tenantq.App(tenantq.Settings())
    app.dependency("smtp", rate=1.0, burst=1)

    @app.job("t", dependencies=["smtp"])
    def send(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        pass

    waiting = item("acme", lane=False)
    waiting.lease = SimpleNamespace(attempt=1)  # type: ignore[assignment]
    worker = worker_with(0, 0, [])
    worker.app = app
    worker.guard = DependencyGuard(policies_from(app.dependencies), clock=lambda: 0.0)
    worker.executor = SimpleNamespace(busy=worker.slots, submit=lambda tasks: None)
    worker.partitions = SimpleNamespace(owns=lambda topic, partition: True)
    worker.intake = SimpleNamespace(claimed=lambda operation: [waiting])
    worker.stats = {"claimed_ahead": 0}
    worker._tasks = {}
    released: list[WorkItem] = []
    worker.release_leases = lambda items, reason: released.extend(items)
    worker._reserve(waiting)
    worker._claiming = 1
    worker._claimed(SimpleNamespace(context=[waiting], answer=None))
    assert worker.stats["claimed_ahead"] == 1  # no free slot: it waits, leased

    worker._release_ready(lambda item: True, "partition revoked")
    assert released == [waiting]
    assert worker.guard.acquire(["smtp"]), "the given-back job kept the only token"
