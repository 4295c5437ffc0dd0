"""The worker's handler slots and what holds them.

A job holds a slot from the moment dispatch chooses it: while its claim is out (``claiming``),
while it waits leased for a free handler slot (``ready``: claimed ahead, see ``ClaimAhead``),
and while it runs (the executor's ``busy``). The book also counts what runs per job type and
per (job type, tenant) for the types that cap either, and tells the dispatcher's per-tenant
count of each job chosen and given back.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Protocol

from tenantq.app import JobType
from tenantq.consumer.claim_ahead import ClaimAhead
from tenantq.consumer.work import WorkItem

#: Job type names whose limits ``SlotBook`` remembers (names come from messages).
LIMITED_TYPES_REMEMBERED = 10_000


class TenantsInFlight(Protocol):
    """The dispatcher's count of each tenant's jobs in flight."""

    def started(self, item: WorkItem) -> None: ...

    def finished(self, item: WorkItem) -> None: ...


@dataclass(eq=False)
class SlotBook:
    """Slots, claims out, jobs ready, and per-type counts. Poll thread only."""

    #: Handler slots (jobs that may run at once).
    size: int
    claim_ahead: ClaimAhead
    _: KW_ONLY
    find_type: Callable[[str], JobType | None]
    tenants: TenantsInFlight
    dependencies_ready: Callable[[Sequence[str]], bool]
    #: Items chosen and handed to the claims lane, not answered yet.
    claiming: int = field(default=0, init=False)
    #: Leased items waiting for a free handler slot (claimed ahead), oldest first.
    ready: collections.deque[WorkItem] = field(default_factory=collections.deque, init=False)
    _type_running: dict[str, int] = field(default_factory=dict, init=False)
    #: Running per (job type, tenant), for job types with a ``tenant_concurrency``.
    _type_tenant_running: dict[tuple[str, str], int] = field(default_factory=dict, init=False)
    #: ``_limited`` by job type name.
    _limited_types: dict[str, JobType | None] = field(default_factory=dict, init=False)

    def free(self, busy: int) -> int:
        """Jobs dispatch may choose now, with ``busy`` handler slots running."""
        return self.size + self.claim_ahead.jobs - busy - self.claiming - len(self.ready)

    def has_room(self, item: WorkItem) -> bool:
        """The item's job type is under its caps, and its dependencies could let it run."""
        job_type = self._limited(item.job_type)
        if job_type is None:
            return True
        limit = job_type.concurrency
        if limit is not None and self._type_running.get(item.job_type, 0) >= limit:
            return False
        per_tenant = job_type.tenant_concurrency
        if (
            per_tenant is not None
            and self._type_tenant_running.get((item.job_type, item.tenant_id), 0) >= per_tenant
        ):
            return False
        return not job_type.dependencies or self.dependencies_ready(job_type.dependencies)

    def reserve(self, item: WorkItem) -> None:
        """The item is chosen: it counts in flight for the next choice."""
        self.tenants.started(item)
        if self._limited(item.job_type) is None:
            return
        self._type_running[item.job_type] = self._type_running.get(item.job_type, 0) + 1
        key = (item.job_type, item.tenant_id)
        self._type_tenant_running[key] = self._type_tenant_running.get(key, 0) + 1

    def release(self, item: WorkItem) -> None:
        """The item no longer holds a slot (it finished, or was given back)."""
        self.tenants.finished(item)
        if self._limited(item.job_type) is None:
            return
        self._type_running[item.job_type] = max(0, self._type_running.get(item.job_type, 1) - 1)
        key = (item.job_type, item.tenant_id)
        count = self._type_tenant_running.get(key, 1) - 1
        if count > 0:
            self._type_tenant_running[key] = count
        else:
            self._type_tenant_running.pop(key, None)

    def release_all(self, items: Iterable[WorkItem]) -> None:
        """``release`` of each (a batch of finished attempts)."""
        release = self.release
        for item in items:
            release(item)

    # -- claims --------------------------------------------------------------------------------

    def chosen(self, count: int) -> None:
        """``count`` reserved items went to the claims lane."""
        self.claiming += count

    def unclaimed(self, item: WorkItem) -> None:
        """A chosen item goes back to the dispatcher unclaimed."""
        self.claiming -= 1
        self.release(item)

    def answered(
        self, items: list[WorkItem], leased: list[WorkItem], seconds: float | None
    ) -> None:
        """The claim of ``items`` answered (``seconds`` after it was handed over, None when it
        is no round trip to plan by): ``leased`` wait for a slot, the rest are released."""
        self.claiming -= len(items)
        if seconds is not None:
            self.claim_ahead.claim_answered(seconds)
        if len(leased) < len(items):
            kept = {id(item) for item in leased}
            for item in items:
                if id(item) not in kept:
                    self.release(item)
        self.ready.extend(leased)

    def give_back_ready(self, which: Callable[[WorkItem], bool]) -> list[WorkItem]:
        """Take the ready items that match out of the book (their slots are free); returns
        them, whose leases the caller gives back."""
        released: list[WorkItem] = []
        kept: list[WorkItem] = []
        for item in self.ready:
            (released if which(item) else kept).append(item)
        if released:
            self.ready.clear()
            self.ready.extend(kept)
            self.release_all(released)
        return released

    def attempts_finished(self, count: int, now: float) -> None:
        """``count`` attempts ended: the finish rate that claiming ahead plans by."""
        self.claim_ahead.finished(count, now)

    def _limited(self, name: str) -> JobType | None:
        """The job type ``name`` if it limits how many of its jobs run (``concurrency``,
        ``tenant_concurrency``) or names dependencies, else None: most types do neither,
        and their jobs are neither counted nor checked, which keeps a job's way through
        dispatch to a dictionary lookup. Looked up once per type: the app's job types do not
        change while the worker runs."""
        limited = self._limited_types
        if name in limited:
            return limited[name]
        job_type = self.find_type(name)
        if job_type is not None and (
            job_type.concurrency is None
            and job_type.tenant_concurrency is None
            and not job_type.dependencies
        ):
            job_type = None
        if len(limited) < LIMITED_TYPES_REMEMBERED:
            limited[name] = job_type
        return job_type
