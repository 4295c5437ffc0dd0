"""Fair dispatch: which leased job runs next.

A hot tenant must not starve the cold tenants that share its partition, and a high-priority
queue goes first without starving the rest. Leased jobs wait in per-queue, per-tenant FIFO
sub-queues; ``pop`` picks a queue (strictly in order, or by smooth weighted round robin), then
the next tenant of that queue in round-robin order (deficit round robin with a unit cost),
skipping tenants at their in-flight limit and jobs whose type is at its concurrency limit.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar


class Dispatchable(Protocol):
    @property
    def queue(self) -> str: ...

    @property
    def tenant_id(self) -> str: ...


T = TypeVar("T", bound=Dispatchable)


@dataclass
class _QueueLane(Generic[T]):
    weight: int
    tenants: OrderedDict[str, deque[T]]
    current: int = 0  # smooth weighted round robin state


class FairDispatcher(Generic[T]):
    """Per-queue, per-tenant round robin with in-flight limits."""

    def __init__(
        self,
        queue_weights: dict[str, int],
        *,
        strict: bool = False,
        tenant_in_flight_limit: int | None = None,
        lane_of: Callable[[T], str] = lambda item: item.queue,
    ) -> None:
        """``queue_weights``: the dispatch lanes (a queue, or a queue's hot lane) and their
        weights; ``lane_of`` names an item's lane (its queue unless told otherwise)."""
        self._lanes: dict[str, _QueueLane[T]] = {
            name: _QueueLane(weight, OrderedDict()) for name, weight in queue_weights.items()
        }
        self._order = list(queue_weights)
        self._strict = strict
        self._tenant_limit = tenant_in_flight_limit
        self._lane_of = lane_of
        self._in_flight: dict[str, int] = {}
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def push(self, item: T) -> None:
        lane = self._lanes[self._lane_of(item)]
        lane.tenants.setdefault(item.tenant_id, deque()).append(item)
        self._size += 1

    def waiting(self, lane: str, tenant: str) -> bool:
        """Items of ``tenant`` wait in the dispatch lane ``lane`` (a queue, or its hot lane)."""
        found = self._lanes.get(lane)
        return found is not None and tenant in found.tenants

    def started(self, item: T) -> None:
        self._in_flight[item.tenant_id] = self._in_flight.get(item.tenant_id, 0) + 1

    def finished(self, item: T) -> None:
        count = self._in_flight.get(item.tenant_id, 0) - 1
        if count <= 0:
            self._in_flight.pop(item.tenant_id, None)
        else:
            self._in_flight[item.tenant_id] = count

    def pop(self, runnable: Callable[[T], bool] = lambda item: True) -> T | None:
        """The next item to run, or None when nothing may run now."""
        for lane in self._lane_order():
            item = self._pop_from(lane, runnable)
            if item is not None:
                return item
        return None

    def pop_many(
        self,
        count: int,
        runnable: Callable[[T], bool] = lambda item: True,
        taken: Callable[[T], None] = lambda item: None,
    ) -> list[T]:
        """Up to ``count`` items, the ones that as many ``pop`` calls would give, in the same
        order. ``taken`` is called on each as it is chosen, before the next is looked at (it
        may change what is runnable: a tenant's or a job type's count in flight).

        While one lane holds work, as under a steady load, the round robin of its tenants runs
        here without a call per item."""
        chosen: list[T] = []
        while len(chosen) < count:
            busy = [lane for lane in (self._lanes[name] for name in self._order) if lane.tenants]
            if not busy:
                return chosen
            if len(busy) > 1:
                item = self.pop(runnable)
                if item is None:
                    return chosen
                chosen.append(item)
                taken(item)
                continue
            # One lane: what ``_pop_from`` does, item after item.
            tenants = busy[0].tenants
            limit = self._tenant_limit
            in_flight = self._in_flight
            while len(chosen) < count and tenants:
                for _ in range(len(tenants)):
                    tenant = next(iter(tenants))
                    items = tenants[tenant]
                    tenants.move_to_end(tenant)
                    if limit is not None and in_flight.get(tenant, 0) >= limit:
                        continue
                    if not runnable(items[0]):
                        continue
                    item = items.popleft()
                    if not items:
                        del tenants[tenant]
                    self._size -= 1
                    break
                else:
                    return chosen  # nothing in the lane may run now (a full turn found none)
                chosen.append(item)
                taken(item)
        return chosen

    def _lane_order(self) -> Iterator[_QueueLane[T]]:
        busy = [name for name in self._order if self._lanes[name].tenants]
        if self._strict or len(busy) <= 1:
            yield from (self._lanes[name] for name in busy)
            return
        # Smooth weighted round robin (as nginx does): each lane gains its weight, the
        # richest goes first and pays the total. Others follow as fallbacks.
        total = sum(self._lanes[name].weight for name in busy)
        for name in busy:
            self._lanes[name].current += self._lanes[name].weight
        ranked = sorted(busy, key=lambda name: self._lanes[name].current, reverse=True)
        self._lanes[ranked[0]].current -= total
        yield from (self._lanes[name] for name in ranked)

    def _pop_from(self, lane: _QueueLane[T], runnable: Callable[[T], bool]) -> T | None:
        for _ in range(len(lane.tenants)):
            tenant, items = next(iter(lane.tenants.items()))
            # Rotate the tenant to the back whatever happens: round robin.
            lane.tenants.move_to_end(tenant)
            if (
                self._tenant_limit is not None
                and self._in_flight.get(tenant, 0) >= self._tenant_limit
            ):
                continue
            if not runnable(items[0]):
                continue
            item = items.popleft()
            if not items:
                del lane.tenants[tenant]
            self._size -= 1
            return item
        return None

    def remove(self, predicate: Callable[[T], bool]) -> list[T]:
        """Take out every waiting item that matches (e.g. of revoked partitions)."""
        removed: list[T] = []
        for lane in self._lanes.values():
            for tenant in list(lane.tenants):
                kept: deque[T] = deque()
                for item in lane.tenants[tenant]:
                    (removed if predicate(item) else kept).append(item)
                if kept:
                    lane.tenants[tenant] = kept
                else:
                    del lane.tenants[tenant]
        self._size -= len(removed)
        return removed
