"""Jobs a tenant's limit held back at the claim: parked per tenant, out of fair dispatch,
until the claim's answer says to ask again.

A job the claim left waiting was not touched (no row written, no attempt spent). It waits
here with the other held-back jobs of its queue and tenant, not in the dispatcher, so the
tenants it shares a partition with are chosen as if it were not there, and the loop does not
spin on it. A tenant's jobs go back to dispatch a few at a time (``RELEASED_AT_ONCE``) when:

| what happened                                         | released                           |
| ----------------------------------------------------- | ---------------------------------- |
| the time the claim gave has come (the rate's next     | a few                              |
| start; a recheck of a cap or a share)                 |                                    |
| a job of the tenant ended here, its result written    | as many as ended (a cap has room   |
| (held back by its cap)                                | again: here first)                 |
| a claim of its released jobs let every one through    | a few more at once (room is left)  |

Their messages stay unfinished: a partition's commit waits at the first of them, as it does
for any job not yet done, while the jobs after it run. They leave their partition's read-ahead
window from the first time they are held back until they are leased or let go
(``Partitions.hold_back``, up to a window's worth more per partition), so the messages of the
other tenants behind them are read on. A tenant with a
large backlog held back is what the hot lane moves out of a shared partition
(``tenantq.consumer.hot_lane``): its jobs held here go to the lane with the rest.

The start and the end of a tenant's time held back (no job held back for ``QUIET_SECONDS``)
are logged, once each; every job held back is reported (``WorkerEvents.quota_throttled``).

Runs on the poll thread.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tenantq.consumer.work import WorkItem
from tenantq.log import log_event
from tenantq.observability.worker_events import WorkerEvents
from tenantq.store.quota_claim import Throttle
from tenantq.tenant_limits import ThrottleReason

log = logging.getLogger("tenantq.worker")

#: Held-back jobs of a tenant sent back to dispatch at once: enough for what a limit lets
#: through between two asks, few enough that asking costs little while it lets none.
RELEASED_AT_ONCE = 16
#: The least wait before asking again (the claim may say 0: due now).
LEAST_WAIT_SECONDS = 0.005
#: A tenant no job of which was held back this long is no longer held back (logged).
QUIET_SECONDS = 1.0
#: After jobs went back to dispatch, the answer to their claim says when the rest follow; this
#: is when they follow if no answer comes (the released ones were given up meanwhile).
UNANSWERED_SECONDS = 1.0

Key = tuple[str, str]


@dataclass(eq=False, slots=True)
class _Held:
    """A tenant's jobs of one queue held back, and its time held back."""

    items: deque[WorkItem] = field(default_factory=deque)
    #: When to send a few back to dispatch (``time.monotonic``).
    retry_at: float = 0.0
    #: The limit that held the last one back.
    reason: ThrottleReason = ThrottleReason.MAX_RUNNING
    #: When this time held back began, and when a job was last held back.
    since: float = 0.0
    last_held: float = 0.0
    #: Jobs held back since it began (a job asked for again counts again).
    held_back: int = 0


@dataclass(eq=False, kw_only=True)
class Throttles:
    """The held-back jobs of this worker (see the module docstring). Poll thread only."""

    #: Back to fair dispatch (the dispatcher's ``push``).
    push: Callable[[WorkItem], None]
    #: Their messages leave their windows (1) or count in them again (-1).
    held_back: Callable[[Iterable[WorkItem], int], None]
    events: WorkerEvents
    worker_id: str
    clock: Callable[[], float] = time.monotonic
    _held: dict[Key, _Held] = field(default_factory=dict, init=False)
    #: (retry at, key): when each tenant's jobs go back; stale entries (a later hold
    #: moved the time) are skipped when reached.
    _due: list[tuple[float, Key]] = field(default_factory=list, init=False)
    _count: int = field(default=0, init=False)

    def __len__(self) -> int:
        """Jobs held back here now."""
        return self._count

    def hold(self, throttled: list[tuple[WorkItem, Throttle]]) -> None:
        """Park the jobs a claim held back, each until the time its answer gave."""
        if not throttled:
            return
        now = self.clock()
        by_key: dict[Key, list[tuple[WorkItem, Throttle]]] = {}
        for item, throttle in throttled:
            by_key.setdefault((item.queue, item.tenant_id), []).append((item, throttle))
        for key, pairs in by_key.items():
            held = self._held.get(key)
            if held is None:
                held = self._held[key] = _Held(since=now)
            fresh = held.held_back == 0
            items = held.items
            # Parked ahead of what waits here already: they are the oldest asked for.
            fresh_items = []
            for item, _ in reversed(pairs):
                items.appendleft(item)
                if not item.held_back:
                    item.held_back = True
                    fresh_items.append(item)
            self.held_back(fresh_items, 1)
            self._count += len(pairs)
            wait = max(LEAST_WAIT_SECONDS, min(throttle.retry_after for _, throttle in pairs))
            held.reason = pairs[0][1].reason
            held.last_held = now
            held.held_back += len(pairs)
            self._schedule(key, held, now + wait)
            self.events.quota_throttled(key[0], key[1], held.reason.value, len(pairs))
            if fresh:
                self._log(
                    "tenant.held_back", key, held, waiting=len(items), retry_after=round(wait, 3)
                )

    def release_due(self) -> None:
        """Send back a few jobs of each tenant whose time to ask again has come; end the time
        held back of tenants none of whose jobs was held back for ``QUIET_SECONDS``."""
        due = self._due
        if not due and not self._held:
            return
        now = self.clock()
        while due and due[0][0] <= now:
            retry_at, key = heapq.heappop(due)
            held = self._held.get(key)
            if held is not None and held.retry_at == retry_at:
                self._release(key, held, RELEASED_AT_ONCE)
        if self._held:
            for key, held in list(self._held.items()):
                if not held.items and now - held.last_held >= QUIET_SECONDS:
                    self._end(key, held, now)

    def next_due(self) -> float | None:
        """When the next tenant's jobs go back to dispatch (``time.monotonic``); None when no
        job waits here."""
        due = self._due
        while due:
            retry_at, key = due[0]
            held = self._held.get(key)
            if held is not None and held.retry_at == retry_at and held.items:
                return retry_at
            heapq.heappop(due)
        return None

    def results_written(self, items: Iterable[WorkItem]) -> None:
        """Jobs that ran here have their results written (their leases ended): a tenant held
        back by its cap gets as many jobs back to dispatch as ended."""
        if not self._held:
            return
        ended: dict[Key, int] = {}
        for item in items:
            key = (item.queue, item.tenant_id)
            held = self._held.get(key)
            if held is not None and held.items and held.reason is ThrottleReason.MAX_RUNNING:
                ended[key] = ended.get(key, 0) + 1
        for key, count in ended.items():
            self._release(key, self._held[key], count)

    def let_through(self, keys: Iterable[Key]) -> None:
        """A claim let every job of these tenants through: the next few go back at once."""
        for key in keys:
            held = self._held.get(key)
            if held is not None and held.items:
                self._release(key, held, RELEASED_AT_ONCE)

    def waiting(self, queue: str, tenant: str) -> bool:
        """Jobs of ``tenant`` in ``queue`` are held back here."""
        held = self._held.get((queue, tenant))
        return held is not None and bool(held.items)

    def is_held(self, key: Key) -> bool:
        """The tenant of ``key`` (queue, tenant) is in a time held back here."""
        return key in self._held

    def take(self, which: Callable[[WorkItem], bool]) -> list[WorkItem]:
        """Take out the held-back jobs that match (their partition was given up, or their
        tenant moved to the hot lane)."""
        taken: list[WorkItem] = []
        for held in self._held.values():
            if not held.items:
                continue
            kept: deque[WorkItem] = deque()
            for item in held.items:
                (taken if which(item) else kept).append(item)
            held.items = kept
        self._count -= len(taken)
        self.let_go(taken)
        return taken

    def let_go(self, items: Iterable[WorkItem]) -> None:
        """These items leave the worker's hands held back (leased, done, given up): their
        messages count in their windows again."""
        gone = [item for item in items if item.held_back]
        for item in gone:
            item.held_back = False
        self.held_back(gone, -1)

    # -- internals ----------------------------------------------------------------------------

    def _schedule(self, key: Key, held: _Held, retry_at: float) -> None:
        held.retry_at = retry_at
        heapq.heappush(self._due, (retry_at, key))

    def _release(self, key: Key, held: _Held, count: int) -> None:
        items = held.items
        released: list[WorkItem] = []
        while items and len(released) < count:
            released.append(items.popleft())
        # They stay out of their windows until their claim answers (``let_go``): a window
        # that took them back on every ask would pause and resume its partition each time.
        for item in released:
            self.push(item)
        self._count -= len(released)
        if items:
            # The rest follow when the claim of the released ones answers (``hold``,
            # ``let_through``), or after a while if none does.
            self._schedule(key, held, self.clock() + UNANSWERED_SECONDS)

    def _end(self, key: Key, held: _Held, now: float) -> None:
        del self._held[key]
        self._log(
            "tenant.no_longer_held_back",
            key,
            held,
            held_back=held.held_back,
            seconds=round(held.last_held - held.since, 3),
        )

    def _log(self, event: str, key: Key, held: _Held, **fields: Any) -> None:
        """The start or the end of a tenant's time held back, named alike in both."""
        log_event(
            log,
            event,
            tenant=key[1],
            queue=key[0],
            reason=held.reason.value,
            **fields,
            worker=self.worker_id,
        )
