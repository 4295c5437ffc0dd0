"""The leases this process holds: what the heartbeat renews, and what it finds lost.

A lease is held from its claim's answer until its result is settled (written, refused, or
given back). A held job whose result is on its way to the database is ``completing``: a lease
the heartbeat then finds gone was completed, not lost. A lease found lost is counted once as
an expiry, and its handler is asked to stop; its result will be refused as stale.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet

from tenantq.consumer.work import WorkItem

#: What ``release`` returns when no lease was lost (shared: nobody changes it).
_NONE_LOST: frozenset[uuid.UUID] = frozenset()


class LeaseBook:
    """Held, completing and lost leases, under one lock: the poll thread holds and releases,
    the heartbeat thread reads what is held and reports losses."""

    def __init__(
        self,
        *,
        expired: Callable[[str], None],
        cancel: Callable[[uuid.UUID, str], None],
    ) -> None:
        #: Told the queue of each lease lost (the expiry metric).
        self._expired = expired
        #: Asks the handler of a job to stop, with the reason.
        self._cancel = cancel
        self._lock = threading.Lock()
        #: Jobs whose lease this process holds (under the lock).
        self._held: dict[uuid.UUID, WorkItem] = {}
        #: Held jobs whose result is on its way to the database (under the lock).
        self._completing: set[uuid.UUID] = set()
        #: Held jobs whose lease the heartbeat found lost (under the lock).
        self._lost: set[uuid.UUID] = set()

    def hold(self, items: Iterable[WorkItem]) -> None:
        """Leases now ours: heartbeated until their results are settled."""
        with self._lock:
            held = self._held
            for item in items:
                held[item.job_id] = item

    def completing(self, job_ids: Iterable[uuid.UUID]) -> None:
        """Results of these jobs are handed to the database."""
        with self._lock:
            self._completing.update(job_ids)

    def release(self, job_ids: list[uuid.UUID]) -> AbstractSet[uuid.UUID]:
        """Forget the leases of settled results, under one lock; returns the jobs whose loss
        was reported already."""
        with self._lock:
            forget = self._held.pop
            completed = self._completing.discard
            for job_id in job_ids:
                forget(job_id, None)
                completed(job_id)
            lost = self._lost
            if not lost:  # almost always: no job id to hash (a Python-level __hash__)
                return _NONE_LOST
            already_lost = {job_id for job_id in job_ids if job_id in lost}
            lost.difference_update(already_lost)
        return already_lost

    def held_ids(self) -> list[uuid.UUID]:
        """The heartbeat thread: the jobs to renew."""
        with self._lock:
            return list(self._held)

    def lost(self, job_id: uuid.UUID) -> None:
        """The heartbeat thread: a lease we hold is no longer ours (it expired and the job
        moved on). Counted once per job; its handler is asked to stop."""
        with self._lock:
            item = self._held.get(job_id)
            first = item is not None and job_id not in self._lost
            if job_id in self._completing:
                return  # completed, not lost: the result is on its way to the database
            if first:
                self._lost.add(job_id)
        if first and item is not None:
            self._expired(item.queue)
        self._cancel(job_id, "lease_lost")
