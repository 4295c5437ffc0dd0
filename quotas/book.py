"""``QuotaBook``: a worker's copy of its deployment's tenant limits, to know which claims need
them and which queues are shared out by weight.

A claim of jobs of tenants without caps or rates is the plain ``JOB_CLAIM_BATCH``; a claim
with one job of a capped or paced tenant is ``JOB_CLAIM_BATCH_LIMITED``, which reads the
limits themselves from the table. The copy decides only which of the two a batch takes, and
which of its tenants the limits apply to:

| the batch's job                                          | caps and rates applied   |
| -------------------------------------------------------- | ------------------------ |
| its tenant has a row with a cap or a rate                | yes                      |
| the defaults have a cap or a rate                        | yes (every tenant)       |
| otherwise                                                | no                       |

A queue is shared out by weight (``fair``) when a row of it, or of every queue, gives a tenant
a weight other than the default's (``tenantq.quotas.shares``); ``weight`` is a tenant's there.

The copy is replaced whole (``replace``), so any thread may read it; ``QuotaWatcher`` rereads
the table when a change is notified and every second besides, so a change reaches every worker
within a second. Until the table was read once, every tenant of a batch takes the limited
claim: it reads the limits from the table itself, so they hold from a worker's first claim
(only the shares wait for the copy, which names the queues shared out).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

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
    #: Weights of the rows: (tenant, queue or '*') -> weight.
    weights: dict[tuple[str, str], int] = field(default_factory=dict)
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

    @property
    def unlimited(self) -> bool:
        """No claim applies caps or rates: the table was read and caps or paces nobody, and
        neither do the defaults (a worker of a deployment without them pays for none)."""
        return self.loaded and not self._every_tenant and not self._copy.limited

    def replace(self, rows: Iterable[TenantLimit]) -> None:
        """Take ``rows`` (every row of the deployment) as the copy."""
        limited: set[str] = set()
        fair: set[str] = set()
        weights: dict[tuple[str, str], int] = {}
        every_queue = False
        count = 0
        for row in rows:
            count += 1
            if row.limits_starts:
                limited.add(row.tenant_id)
            if row.weight is not None:
                weights[(row.tenant_id, row.queue)] = row.weight
                if row.weight != self._defaults.weight:
                    if row.queue == ANY:
                        every_queue = True
                    else:
                        fair.add(row.queue)
        self._copy = _Copy(frozenset(limited), frozenset(fair), every_queue, weights, count)
        self.loaded = True

    def fair(self, queue: str) -> bool:
        """Tenants of ``queue`` share it by weight."""
        copy = self._copy
        return copy.every_queue or queue in copy.fair_queues

    @property
    def any_fair(self) -> bool:
        """Some queue is shared out by weight."""
        copy = self._copy
        return copy.every_queue or bool(copy.fair_queues)

    def fair_of(self, queues: Iterable[str]) -> list[str]:
        """Those of ``queues`` shared out by weight."""
        return [queue for queue in queues if self.fair(queue)]

    def weight(self, queue: str, tenant: str) -> int:
        """``tenant``'s weight in ``queue``: its row of the queue's, else its tenant-wide
        row's, else the default."""
        weights = self._copy.weights
        found = weights.get((tenant, queue))
        if found is None:
            found = weights.get((tenant, ANY))
        return found if found is not None else self._defaults.weight

    def quotas_of(self, tenants: Iterable[str]) -> ClaimQuotas | None:
        """What the claim of a batch of ``tenants``' jobs needs to apply the caps and rates;
        None when none of them has any (the plain claim)."""
        copy = self._copy
        if self._every_tenant or not self.loaded:
            limited = set(tenants)
        else:
            limited = {tenant for tenant in tenants if tenant in copy.limited}
        if not limited:
            return None
        defaults = self._defaults
        return ClaimQuotas(
            limited_tenants=limited,
            default_max_running=defaults.max_running,
            default_rate=defaults.rate,
            default_burst=defaults.burst,
        )
