"""Noisy-neighbour protection: a tenant that floods its partition moves to the hot lane.

Keying jobs by tenant puts every tenant of a partition behind whatever is ahead of it in the
log. Fair dispatch shares the slots among the tenants of the read-ahead window, but the window
is bounded: when one tenant floods its partition, the window fills with its jobs and the
other tenants' messages wait unread behind its backlog. So a worker watches each main-topic
partition it owns:

| partition backlog (unfinished + unread) | top tenant's share of the window | what happens |
| --------------------------------------- | -------------------------------- | ------------ |
| below ``hot_backlog``                   | any                              | nothing      |
| at least ``hot_backlog``                | below ``hot_share``              | nothing      |
| at least ``hot_backlog``                | at least ``hot_share``           | moved        |

A moved tenant gets a placement row ``lane`` (reason, automatic). From then on, every worker
*diverts* that tenant's messages it reads from the main topic — publishes them to the queue's
lane topic (``<prefix>.<queue>.lane``, any partition, so every worker shares the backlog) and,
once Kafka holds them, marks them done on the main partition — so the window frees at once and
the others' messages are read. Producers route the tenant's new jobs to the lane themselves
(they reread placements within ``placement_ttl_seconds``). The lane is a dispatch lane of its
own (``lane_weight`` against the queue's weight): it gets every slot nobody else wants, and
shares them when others wait. A job keeps its id, payload and every guarantee on the way: a
diverted message is one more copy of the job, which the claim deduplicates.

The tenant goes back (``tenantq.consumer.lane_keeper``) once the lane has been drained for
``release_after_seconds`` and it has been there that long. An operator can put a tenant in the
lane, or keep one out of it, with ``tenantq placement``; a worker never overrides that.

Runs on the poll thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tenantq.observability.worker_events import WorkerEvents
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.settings import Settings, TenantIsolationSettings
from tenantq.store.placement import PlacementReader, PlacementWatcher

if TYPE_CHECKING:
    from tenantq.consumer.partitions import Partitions

log = logging.getLogger("tenantq.worker")

#: How often the partitions are looked at, and the placement table reread.
CHECK_SECONDS = 0.25


@dataclass(eq=False)
class HotLane:
    """Which tenants of this worker's queues are in their hot lane, and who should be."""

    settings: TenantIsolationSettings
    placements: PlacementBook
    #: Main topic -> queue.
    main_topics: dict[str, str]
    events: WorkerEvents
    #: Tells the world (the placement table) that a tenant of a queue moved, and why.
    move: Callable[[str, str, str], None]
    clock: Callable[[], float] = time.monotonic
    #: Tells the placement book of a change at once (``start``, ``stop``).
    watcher: PlacementWatcher | None = None
    _checked: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        #: Per queue, the tenants in the lane: the table's, plus this worker's own moves
        #: (effective at once, before the table is read again).
        self.members: dict[str, set[str]] = {queue: set() for queue in self.main_topics.values()}
        self._moved_here: dict[str, dict[str, float]] = {queue: {} for queue in self.members}

    @classmethod
    def for_worker(
        cls,
        settings: Settings,
        main_topics: dict[str, str],
        events: WorkerEvents,
        move: Callable[[str, str, str], None],
    ) -> HotLane:
        """A worker's: its placement book refreshed in the background, and told of a change
        at once by a watcher when ``placement_watch`` is on."""
        placements = PlacementBook(
            PlacementReader(settings),
            settings.producer.placement_ttl_seconds,
            refresh_in_background=True,
        )
        watcher = (
            PlacementWatcher(settings, placements.changed)
            if settings.producer.placement_watch
            else None
        )
        isolation = settings.tenant_isolation
        return cls(isolation, placements, main_topics, events, move, watcher=watcher)

    def start(self) -> None:
        if self.watcher is not None:
            self.watcher.start()

    def stop(self) -> None:
        if self.watcher is not None:
            self.watcher.stop(2.0)

    def in_lane(self, queue: str, tenant: str) -> bool:
        members = self.members.get(queue)
        return members is not None and tenant in members

    def check(
        self, partitions: Partitions, lags: Callable[[], dict[tuple[str, int], int]]
    ) -> list[tuple[str, str]]:
        """Look at the partitions (at most every ``CHECK_SECONDS``); returns the (queue, tenant)
        moved to the lane now."""
        now = self.clock()
        if now - self._checked < CHECK_SECONDS:
            return []
        self._checked = now
        self._reload(now)
        if not self.settings.hot_lane:
            return []
        moved: list[tuple[str, str]] = []
        lag = lags()
        for key, state in partitions.states.items():
            queue = self.main_topics.get(key[0])
            if queue is None or state.revoked or not state.tenant_counts:
                continue
            in_flight = state.offsets.in_flight
            backlog = max(in_flight, lag.get(key, 0))
            if backlog < self.settings.hot_backlog or in_flight == 0:
                continue
            tenant, count = state.tenant_counts.most_common(1)[0]
            share = count / in_flight
            if (
                share < self.settings.hot_share
                or self.in_lane(queue, tenant)
                or tenant in self.placements.set_by_operator(queue)
            ):
                continue
            reason = (
                f"held {share:.0%} of partition {key[1]}'s {in_flight} unfinished messages "
                f"with {backlog} waiting"
            )
            self.members[queue].add(tenant)
            self._moved_here[queue][tenant] = now
            log.warning("tenant %s of queue %s moves to the hot lane: %s", tenant, queue, reason)
            self.events.tenant_moved_to_lane(queue, tenant)
            self.move(queue, tenant, reason)
            moved.append((queue, tenant))
        return moved

    def _reload(self, now: float) -> None:
        for queue, members in self.members.items():
            placed = {
                tenant
                for tenant, placement in self.placements.placements(queue).items()
                if placement.in_lane
            }
            # A move of ours counts until the table shows it (or a TTL has passed: then the
            # table, say an operator's "hashed", is the truth).
            recent = {
                tenant
                for tenant, at in self._moved_here[queue].items()
                if now - at < max(self.placements.ttl_seconds, 1.0) * 2
            }
            self._moved_here[queue] = {t: self._moved_here[queue][t] for t in recent}
            members.clear()
            members.update(placed | recent)
