"""Shares by weight: when tenants wait for one queue, their starts across the fleet go in the
ratio of their weights.

A tenant's jobs usually sit on one partition owned by one member, so no member's fair dispatch
alone can give a weight-4 tenant four times a weight-1 tenant's starts: the one decision needs
every member's starts. Each tenant of a fair queue (a queue where some tenant has a weight of
its own, ``QuotaBook.fair``) has a virtual time, its starts divided by its weight, kept in
``tenantq_tenant_shares``. A member lets a tenant start until its virtual time is more than
``FAIR_WINDOW`` ahead of its slowest competitor's; what is held back waits in the member
(``tenantq.consumer.throttles``) and is asked for again after ``RETRY_SECONDS``. A competitor
is a tenant of which some member held more than it could start within the last
``COMPETING_SECONDS`` (a tenant that sends a trickle holds nobody back). No virtual time is let
fall further behind the slowest competitor's than the window: time a tenant sat idle, or ran
below its share, is no credit to spend later in a burst, and one that ran alone meets the
others level.

The decision is each member's, from the fleet's virtual times as of its last sync (every
``SYNC_SECONDS``) plus its own starts since: shares are proportions, not limits. Writing them
at each claim, as caps and rates are, made every member's claims of two shared tenants wait for
each other's commit in turn (measured: 6,000 jobs of 50 ms took 57 s on 32 slots, 16 s without
weights); a member syncs ten times a second instead, and errs by what the others started
within that.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable

from tenantq.background import ServiceLoop
from tenantq.settings import Settings
from tenantq.store.engine import LazyConnection
from tenantq.store.shares import ShareChange, TenantShare, shares_add, shares_of_queues

#: How far ahead of its slowest competitor (in starts of weight 1) a tenant may run: wide
#: enough that a member does not stall between two syncs waiting for the others' starts (at
#: 4, members held both tenants back in turn), narrow enough to keep a burst to a few dozen.
FAIR_WINDOW = 32.0
#: How long a tenant found backlogged stays a competitor.
COMPETING_SECONDS = 1.0
#: How often a member adds its starts to the fleet's and reads the others'.
SYNC_SECONDS = 0.1
#: When a job its share held back is asked for again.
RETRY_SECONDS = 0.05
#: Tenants not written for this long are left out of a read (they meet the others level).
RECENT_SECONDS = 600.0

Key = tuple[str, str]


class ShareBook:
    """A member's view of its fair queues' shares (see the module docstring): the poll thread
    asks ``room`` and reports ``started``, ``backlogged`` and ``held``; ``ShareSync`` takes
    the news (``take_changes``) and hands the fleet's times back (``replace``)."""

    def __init__(self, weight_of: Callable[[str, str], int]) -> None:
        self._weight_of = weight_of
        self._lock = threading.Lock()
        #: Per queue, tenant -> (virtual time, competing), as of the last sync.
        self._view: dict[str, dict[str, tuple[float, bool]]] = {}
        #: Since the last sync (under the lock): starts per tenant, tenants backlogged,
        #: tenants held back.
        self._starts: dict[Key, int] = {}
        self._backlogged: set[Key] = set()
        self._held: set[Key] = set()

    def room(self, queue: str, tenant: str) -> int | None:
        """How many jobs of ``tenant`` in ``queue`` may start now; None: any number (no
        competitor)."""
        with self._lock:
            view = self._view.get(queue)
            floor = self._floor(view, tenant)
            if floor is None:
                return None
            weight = self._weight_of(queue, tenant)
            start = self._time(view, queue, tenant, floor, weight)
        return max(0, math.floor((floor + FAIR_WINDOW - start) * weight) + 1)

    def started(self, queue: str, tenant: str, count: int) -> None:
        """``count`` jobs of ``tenant`` in ``queue`` were handed to a claim."""
        if count > 0:
            with self._lock:
                key = (queue, tenant)
                self._starts[key] = self._starts.get(key, 0) + count

    def backlogged(self, queue: str, tenant: str, *, held: bool = False) -> None:
        """This member holds more of ``tenant``'s jobs of ``queue`` than it hands to a claim
        now (``held``: its share held some back)."""
        with self._lock:
            self._backlogged.add((queue, tenant))
            if held:
                self._held.add((queue, tenant))

    def take_changes(self) -> list[ShareChange]:
        """The news since the last sync, and the floor each tenant's time is raised within
        the window of (ShareSync's thread)."""
        with self._lock:
            keys = set(self._starts) | self._backlogged
            changes = [
                ShareChange(
                    queue,
                    tenant,
                    self._weight_of(queue, tenant),
                    self._starts.get((queue, tenant), 0),
                    self._floor(self._view.get(queue), tenant),
                    (queue, tenant) in self._backlogged,
                    (queue, tenant) in self._held,
                )
                for queue, tenant in sorted(keys)
            ]
            self._starts.clear()
            self._backlogged.clear()
            self._held.clear()
        return changes

    def restore(self, changes: Iterable[ShareChange]) -> None:
        """News taken for a sync that failed: kept for the next one."""
        with self._lock:
            for change in changes:
                key = (change.queue, change.tenant_id)
                self._starts[key] = self._starts.get(key, 0) + change.starts
                if change.backlogged:
                    self._backlogged.add(key)
                if change.held:
                    self._held.add(key)

    def replace(self, shares: Iterable[TenantShare]) -> None:
        """The fleet's virtual times of the fair queues, as just read (ShareSync's thread).
        Starts taken by ``take_changes`` are in them; those reported since are not yet."""
        view: dict[str, dict[str, tuple[float, bool]]] = {}
        for share in shares:
            view.setdefault(share.queue, {})[share.tenant_id] = (
                share.virtual_time,
                share.competing,
            )
        with self._lock:
            self._view = view

    def _floor(self, view: dict[str, tuple[float, bool]] | None, tenant: str) -> float | None:
        """The slowest competitor's virtual time, other than ``tenant``'s (None: none)."""
        if not view:
            return None
        times = [time for other, (time, competing) in view.items() if competing and other != tenant]
        return min(times) if times else None

    def _time(
        self,
        view: dict[str, tuple[float, bool]] | None,
        queue: str,
        tenant: str,
        floor: float,
        weight: int,
    ) -> float:
        """``tenant``'s virtual time now: the fleet's as last read (no further behind the
        floor than the window), plus this member's starts since."""
        known = view.get(tenant) if view else None
        base = max(known[0] if known else 0.0, floor - FAIR_WINDOW)
        return base + self._starts.get((queue, tenant), 0) / weight


class ShareSync(ServiceLoop):
    """Every ``SYNC_SECONDS``, adds this member's starts to the fleet's virtual times and reads
    them back into ``book``, for the fair queues of ``fair_queues()`` (a connection and a
    thread of its own; idle while none of its queues is fair)."""

    def __init__(
        self,
        settings: Settings,
        book: ShareBook,
        fair_queues: Callable[[], list[str]],
        interval: float = SYNC_SECONDS,
    ) -> None:
        super().__init__("share-sync")
        self._book = book
        self._fair_queues = fair_queues
        self._interval = interval
        self._database = LazyConnection(settings, "tenantq-share-sync", autocommit=True)

    def run_round(self) -> float:
        started = time.monotonic()
        queues = self._fair_queues()
        if not queues:
            self._book.replace(())
            return 1.0
        connection = self._database.get()
        changes = self._book.take_changes()
        try:
            shares_add(connection, changes, FAIR_WINDOW)
        except Exception:
            self._book.restore(changes)
            raise
        self._book.replace(
            shares_of_queues(
                connection,
                queues,
                competing_seconds=COMPETING_SECONDS,
                recent_seconds=RECENT_SECONDS,
            )
        )
        return max(0.0, self._interval - (time.monotonic() - started))

    def reset(self) -> None:
        self._database.close()
