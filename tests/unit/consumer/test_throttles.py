"""Jobs a tenant's limit held back wait per tenant, out of dispatch and out of their
partition's window from the first hold until they are leased or let go; they go back a few at
a time when the claim's time comes, when the tenant's jobs end here (a cap), or when a claim
let all of them through; the start and the end of a tenant's time held back are logged once
each, and every hold is reported."""

from __future__ import annotations

import logging
from collections.abc import Iterable

import pytest
from fakes import FakeClock, work_item

from tenantq.consumer.throttles import QUIET_SECONDS, RELEASED_AT_ONCE, Throttles
from tenantq.consumer.work import WorkItem
from tenantq.observability.worker_events import WorkerEvents
from tenantq.store.quota_claim import Throttle
from tenantq.tenant_limits import ThrottleReason

CAP = Throttle(ThrottleReason.MAX_RUNNING, 0.25)
RATE = Throttle(ThrottleReason.RATE, 0.1)


class HoldEvents(WorkerEvents):
    def __init__(self) -> None:
        self.held: list[tuple[str, str, str, int]] = []

    def quota_throttled(self, queue: str, tenant: str, reason: str, count: int) -> None:
        self.held.append((queue, tenant, reason, count))


class Rig:
    def __init__(self) -> None:
        self.clock = FakeClock(100.0)
        self.pushed: list[WorkItem] = []
        #: Messages out of their windows now (what ``Partitions.hold_back`` would count).
        self.out_of_window = 0
        self.events = HoldEvents()
        self.throttles = Throttles(
            push=self.pushed.append,
            held_back=self._held_back,
            events=self.events,
            worker_id="w1",
            clock=self.clock,
        )

    def _held_back(self, items: Iterable[WorkItem], count: int) -> None:
        self.out_of_window += count * len(list(items))


def test_held_back_jobs_wait_until_their_time_then_go_back_a_few_at_a_time() -> None:
    rig = Rig()
    items = [work_item("acme", offset=i) for i in range(40)]
    rig.throttles.hold([(item, RATE) for item in items])
    assert len(rig.throttles) == 40 and rig.out_of_window == 40
    rig.throttles.release_due()
    assert rig.pushed == []  # not yet: no spin on refused claims
    assert rig.throttles.next_due() == pytest.approx(100.1)
    rig.clock.now += 0.1
    rig.throttles.release_due()
    assert rig.pushed == items[:RELEASED_AT_ONCE]  # oldest first
    # Asked for again, they stay out of their windows until the claim answers.
    assert rig.out_of_window == 40
    # The claim held them back again: they go back ahead of the rest, not counted twice.
    rig.throttles.hold([(item, RATE) for item in rig.pushed])
    assert rig.out_of_window == 40 and len(rig.throttles) == 40
    rig.pushed.clear()
    rig.clock.now += 0.1
    rig.throttles.release_due()
    assert rig.pushed == items[:RELEASED_AT_ONCE]
    # Leased now: back in their windows, and the next ones follow at once.
    rig.throttles.let_go(rig.pushed)
    assert rig.out_of_window == 40 - RELEASED_AT_ONCE
    rig.throttles.let_go(rig.pushed)  # idempotent
    assert rig.out_of_window == 40 - RELEASED_AT_ONCE
    rig.throttles.let_through({("default", "acme")})
    assert rig.pushed == items[: 2 * RELEASED_AT_ONCE]


def test_a_capped_tenant_gets_one_back_per_job_of_its_that_ended() -> None:
    rig = Rig()
    items = [work_item("acme", offset=i) for i in range(10)]
    rig.throttles.hold([(item, CAP) for item in items])
    rig.throttles.results_written([work_item("acme"), work_item("acme"), work_item("other")])
    assert rig.pushed == items[:2]
    # A rate is not freed by a job ending.
    paced = [work_item("globex", offset=i) for i in range(3)]
    rig.throttles.hold([(item, RATE) for item in paced])
    rig.throttles.results_written([work_item("globex")])
    assert rig.pushed == items[:2]


def test_the_tenants_of_a_partition_given_up_are_taken_out() -> None:
    rig = Rig()
    acme = [work_item("acme", offset=i) for i in range(3)]
    globex = [work_item("globex", offset=10 + i) for i in range(2)]
    rig.throttles.hold([(item, CAP) for item in acme + globex])
    taken = rig.throttles.take(lambda item: item.tenant_id == "acme")
    assert taken == acme and len(rig.throttles) == 2 and rig.out_of_window == 2
    assert rig.throttles.waiting("default", "globex")
    assert not rig.throttles.waiting("default", "acme")


def test_a_time_held_back_is_logged_at_its_start_and_end_and_each_hold_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rig = Rig()
    caplog.set_level(logging.INFO, logger="tenantq.worker")
    first = [work_item("acme", offset=i) for i in range(3)]
    rig.throttles.hold([(item, CAP) for item in first])
    rig.throttles.hold([(work_item("acme", offset=9), CAP)])
    started = [r for r in caplog.records if "tenant.held_back" in r.getMessage()]
    assert len(started) == 1
    assert rig.events.held == [
        ("default", "acme", "max_running", 3),
        ("default", "acme", "max_running", 1),
    ]
    # All of them go through; a quiet second later the time held back ends, once.
    rig.throttles.results_written([work_item("acme")] * 4)
    rig.throttles.let_go(rig.pushed)
    rig.clock.now += QUIET_SECONDS / 2
    rig.throttles.release_due()
    assert rig.throttles.is_held(("default", "acme"))
    rig.clock.now += QUIET_SECONDS
    rig.throttles.release_due()
    rig.throttles.release_due()
    ended = [r for r in caplog.records if "tenant.no_longer_held_back" in r.getMessage()]
    assert len(ended) == 1 and not rig.throttles.is_held(("default", "acme"))
    assert rig.out_of_window == 0 and rig.throttles.next_due() is None
