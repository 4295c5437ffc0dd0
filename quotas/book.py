"""``QuotaBook``: a worker's copy of its deployment's tenant limits, to know which claims need
them.

A claim of jobs of tenants without limits is the plain ``JOB_CLAIM_BATCH``; a claim with one
job of a limited tenant is ``JOB_CLAIM_BATCH_LIMITED``, which reads the limits themselves
from the table. The copy decides only which of the two a batch takes, and which of its
tenants the limits apply to:

| the batch's job                                    | limits applied                       |
| -------------------------------------------------- | ------------------------------------ |
| its tenant has a row with a cap or a rate          | yes                                  |
| the defaults have a cap or a rate                  | yes (every tenant)                   |
| its queue is shared out (a weight differs from the | yes (every tenant of the queue: each |
| default in a row of the queue, or of every queue)  | one's share is counted)              |
| otherwise                                          | no                                   |

The copy is replaced whole (``replace``), so any thread may read it; ``QuotaWatcher`` rereads
the table when a change is notified and every second besides, so a change reaches every worker
within a second. Until the table was read once, every tenant of a batch takes the limits: the
limited claim reads them from the table itself, so they hold from a worker's first claim (only
the shares wait for the copy, which names the queues shared out).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tenantq.settings import TenantDefaults
from tenantq.store.quota_claim import ClaimQuotas
from tenantq.store.quotas import TenantLimit
from tenantq.tenant_limits import ANY


@dataclass(frozen=True)
class _Copy:
    #: Tenants with a row that caps or paces their starts.
    limited: frozenset[str] = frozenset()
    #: Queues shared out by weight; ``every_queue``: all of them (a tenant-wide weight).
    fair_queues: frozenset[str] = frozenset()
    every_queue: bool = False
    rows: int = 0


class QuotaBook:
    """The limits this worker knows of (see the module docstring)."""

    def __init__(self, defaults: TenantDefaults) -> None:
        self._defaults = defaults
        #: The defaults cap or pace every tenant.
        self._every_tenant = defaults.max_running is not None or defaults.rate is not None
        self._copy = _Copy()
        #: Whether the table was read at least once.
        self.loaded = False

    @property
    def rows(self) -> int:
        """Rows in the copy."""
        return self._copy.rows

    def replace(self, rows: Iterable[TenantLimit]) -> None:
        """Take ``rows`` (every row of the deployment) as the copy."""
        limited: set[str] = set()
        fair: set[str] = set()
        every_queue = False
        count = 0
        for row in rows:
            count += 1
            if row.limits_starts:
                limited.add(row.tenant_id)
            if row.weight is not None and row.weight != self._defaults.weight:
                if row.queue == ANY:
                    every_queue = True
                else:
                    fair.add(row.queue)
        self._copy = _Copy(frozenset(limited), frozenset(fair), every_queue, count)
        self.loaded = True

    def fair(self, queue: str) -> bool:
        """Tenants of ``queue`` share it by weight."""
        copy = self._copy
        return copy.every_queue or queue in copy.fair_queues

    def quotas_of(
        self,
        batch: Iterable[tuple[str, str]],
        backlogged: Iterable[tuple[str, str]] = (),
    ) -> ClaimQuotas | None:
        """What the claim of a batch of (queue, tenant) needs to apply the limits; None when
        none of its jobs has any (the plain claim). ``backlogged``: (queue, tenant) of which
        the worker holds more than the batch asks for."""
        copy = self._copy
        every_tenant = self._every_tenant or not self.loaded
        limited: set[str] = set()
        fair_queues: set[str] = set()
        for queue, tenant in batch:
            if copy.every_queue or queue in copy.fair_queues:
                fair_queues.add(queue)
                limited.add(tenant)
            elif every_tenant or tenant in copy.limited:
                limited.add(tenant)
        if not limited:
            return None
        defaults = self._defaults
        return ClaimQuotas(
            limited_tenants=limited,
            fair_queues=tuple(sorted(fair_queues)),
            backlogged=tuple(pair for pair in backlogged if pair[0] in fair_queues),
            default_max_running=defaults.max_running,
            default_rate=defaults.rate,
            default_burst=defaults.burst,
            default_weight=defaults.weight,
        )
