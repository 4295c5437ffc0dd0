"""One round of dispatch: choose the next jobs fairly (``FairDispatcher``) for the slots that are
free, counting the jobs claimed ahead, and hand them to the claims lanes in one statement per
lane; when a claim answers, its leased jobs wait for a slot and start.

Per claims lane, one claim runs and one gathers: freed slots wait for the next statement
rather than each making its own. The hot lane's claims have their own lane, so a lane that
keeps its pipeline full does not hold up the other tenants' claims.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from tenantq.consumer.claims import Claims
from tenantq.consumer.dispatcher import FairDispatcher
from tenantq.consumer.ledger import Claim
from tenantq.consumer.slots import SlotBook
from tenantq.consumer.work import HOT_LANE_SUFFIX, WorkItem
from tenantq.settings import Settings


@dataclass(eq=False, kw_only=True)
class Dispatch:
    """Chooses, claims, and starts what the claims leased (poll thread only)."""

    dispatcher: FairDispatcher[WorkItem]
    slots: SlotBook
    claims: Claims
    #: Handler slots running now (the executor's; with the handler process, the jobs queued
    #: there too).
    busy: Callable[[], int]
    #: What the executor is given beyond its slots (``Starter.queued_ahead``): dispatch
    #: chooses for it too, or the jobs queued in the handler process would use up what is
    #: claimed ahead, and new jobs would wait unclaimed until the queue there drained.
    queued_ahead: Callable[[], int]
    #: Not stopping, and the database is up.
    may_claim: Callable[[], bool]
    #: Start leased jobs in free slots (``Starter.start_ready``).
    start_ready: Callable[[], None]
    stats: dict[str, int]

    def round(self) -> None:
        """Choose the next jobs fairly and hand them to the claims lanes."""
        if not self.may_claim():
            return
        claims = self.claims
        main_full = claims.full(lane=False)
        lane_full = claims.full(lane=True)
        if main_full and lane_full:
            return
        slots = self.slots
        free = slots.free(self.busy()) + self.queued_ahead()
        if free <= 0 or not len(self.dispatcher):
            return
        has_room = slots.has_room

        def runnable(item: WorkItem) -> bool:
            return not (lane_full if item.lane else main_full) and has_room(item)

        # Each is reserved as it is chosen: that counts it in flight for the next choice.
        chosen = self.dispatcher.pop_many(free, runnable, slots.reserve)
        if chosen:
            slots.chosen(len(chosen))
            claims.claim(chosen)

    def claimed(self, operation: Claim) -> None:
        """A claim answered: its leased jobs start in the free slots, the rest wait for one
        (claimed ahead); the jobs it did not lease give their slots back."""
        items: list[WorkItem] = operation.context
        answer = operation.answer
        # A claim that waited out an outage is no round trip to plan by.
        seconds = (
            time.monotonic() - operation.submitted
            if answer is not None and not answer.again
            else None
        )
        claimed = self.claims.claimed(operation)
        self.slots.answered(items, claimed, seconds)
        self.start_ready()
        # What did not start waits for a slot: claimed ahead.
        self.stats["claimed_ahead"] += min(len(self.slots.ready), len(claimed))


def fair_dispatcher(
    settings: Settings, queues: list[str], slots: int, strict: bool
) -> FairDispatcher[WorkItem]:
    """The dispatcher of a worker of ``queues``: a lane per queue and per queue's hot lane,
    with their weights (in the order given, when ``strict``), and a cap on each tenant's
    share of the ``slots``."""
    isolation = settings.tenant_isolation
    weights = {queue: settings.queue(queue).weight for queue in queues}
    weights.update({f"{queue}{HOT_LANE_SUFFIX}": isolation.lane_weight for queue in queues})
    return FairDispatcher(
        weights,
        strict=strict,
        # One tenant cannot hold every slot while others wait (at least one slot).
        tenant_in_flight_limit=max(1, int(slots * isolation.tenant_max_share)),
        lane_of=lambda item: item.dispatch_lane,
    )
