"""Per-tenant admission: one token bucket per tenant, rejecting with a retry-after."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from tenantq.errors import AdmissionRejected
from tenantq.settings import ProducerSettings
from tenantq.token_bucket import TokenBucket

#: Beyond this many buckets, full (idle) ones are dropped: an idle tenant's bucket is full,
#: so forgetting it changes nothing, and memory stays bounded by the active tenants.
PRUNE_ABOVE = 10_000


class TenantAdmission:
    """Token buckets per tenant, from ``tenant_rate_per_second``/``tenant_burst`` and the
    per-tenant ``tenant_rate_overrides``. Without a rate (the default) everything is admitted."""

    def __init__(
        self, settings: ProducerSettings, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._rate = settings.tenant_rate_per_second
        self._burst = settings.tenant_burst
        self._overrides: Mapping[str, float] = dict(settings.tenant_rate_overrides)
        self._clock = clock
        self._buckets: dict[str, TokenBucket] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self._rate is not None or bool(self._overrides)

    def _bucket(self, tenant_id: str) -> TokenBucket | None:
        bucket = self._buckets.get(tenant_id)
        if bucket is not None:
            return bucket
        rate = self._overrides.get(tenant_id, self._rate)
        if rate is None:
            return None
        with self._lock:
            bucket = self._buckets.get(tenant_id)
            if bucket is None:
                if len(self._buckets) >= PRUNE_ABOVE:
                    self._buckets = {
                        name: kept for name, kept in self._buckets.items() if not kept.full
                    }
                bucket = TokenBucket(rate, self._burst, self._clock)
                self._buckets[tenant_id] = bucket
            return bucket

    def admit(self, counts: Mapping[str, int]) -> None:
        """Take ``counts[tenant]`` tokens from each tenant's bucket, all or nothing.

        Raises ``AdmissionRejected`` (with the longest retry-after) and gives back what was
        taken from the other tenants of the batch.
        """
        if not self.enabled:
            return
        taken: list[tuple[TokenBucket, int]] = []
        for tenant_id, count in counts.items():
            bucket = self._bucket(tenant_id)
            if bucket is None:
                continue
            if count > bucket.burst:
                wait = None
                message = (
                    f"tenant {tenant_id!r}: {count} jobs in one call exceed its burst of "
                    f"{int(bucket.burst)}; split the batch"
                )
            else:
                wait = bucket.take(count)
                if wait == 0.0:
                    taken.append((bucket, count))
                    continue
                message = (
                    f"tenant {tenant_id!r} is over its admission rate of {bucket.rate:g}/s; "
                    f"retry after {wait:.3f}s"
                )
            for refunded, amount in taken:
                refunded.give_back(amount)
            raise AdmissionRejected(message, retry_after=wait)
