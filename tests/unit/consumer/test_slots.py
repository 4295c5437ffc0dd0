"""The slot book: a job holds a slot from the moment it is chosen until it finishes or is given
back, claimed ahead or not; a job type's caps (all its jobs, and each tenant's) hold across
the jobs chosen, waiting and running."""

from __future__ import annotations

from typing import Any

from fakes import work_item

import tenantq
from tenantq.consumer.claim_ahead import ClaimAhead
from tenantq.consumer.dispatcher import FairDispatcher
from tenantq.consumer.slots import SlotBook
from tenantq.consumer.work import WorkItem


def book(app: tenantq.App, slots: int = 8) -> SlotBook:
    dispatcher: FairDispatcher[WorkItem] = FairDispatcher({"default": 1})
    return SlotBook(
        slots,
        ClaimAhead(0, 0.0),
        find_type=app.find,
        tenants=dispatcher,
        dependencies_ready=lambda names: True,
    )


def test_a_job_types_caps_hold_per_type_and_per_tenant() -> None:
    app = tenantq.App(tenantq.Settings())

    @app.job("capped", concurrency=2, tenant_concurrency=1)
    def capped(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None: ...

    slots = book(app)
    acme = work_item("acme", job_type="capped")
    slots.reserve(acme)
    assert not slots.has_room(work_item("acme", job_type="capped"))  # acme's one
    assert slots.has_room(work_item("beta", job_type="capped"))
    slots.reserve(work_item("beta", job_type="capped"))
    assert not slots.has_room(work_item("gamma", job_type="capped"))  # the type's two
    assert slots.has_room(work_item("gamma", job_type="other"))  # no caps: not counted
    slots.release(acme)
    assert slots.has_room(work_item("gamma", job_type="capped"))
    assert slots.has_room(work_item("acme", job_type="capped"))


def test_a_job_holds_its_slot_while_claimed_and_while_it_waits_for_one() -> None:
    slots = book(tenantq.App(tenantq.Settings()))
    assert slots.free(busy=3) == 5
    first, second = work_item(), work_item()
    slots.reserve(first)
    slots.reserve(second)
    slots.chosen(2)
    assert slots.free(busy=3) == 3 and slots.claiming == 2
    # The claim leased the first only: it waits for a slot; the second's slot is free.
    slots.answered([first, second], [first], seconds=0.004)
    assert slots.claiming == 0 and list(slots.ready) == [first]
    assert slots.free(busy=3) == 4
    assert slots.give_back_ready(lambda item: True) == [first]
    assert slots.free(busy=3) == 5
