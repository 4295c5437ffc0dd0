"""``QueueStatsCollector``: queue depth, oldest runnable age and live workers, read from
Postgres when Prometheus scrapes.

Reading at scrape time (rather than on a timer) means the numbers are as fresh as the scrape
and nothing runs when nobody is looking. Results are cached for ``min_interval_seconds`` so
several scrapers, or a scraper with a short interval, cost one query. A failing database never
fails the scrape: the last good numbers are dropped and ``tenantq_stats_up`` goes to 0.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import psycopg
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tenantq.errors import TenantqError
from tenantq.observability import specs as names
from tenantq.store import outbox as outbox_store
from tenantq.store import placement as placement_store
from tenantq.store import quotas as quota_store
from tenantq.store import stats
from tenantq.store.engine import DeploymentConnection

logger = logging.getLogger("tenantq.observability.specs")

ConnectionFactory = Callable[[], DeploymentConnection]


class QueueStatsCollector(Collector):
    """A custom Prometheus collector of the ``source="postgres"`` families of
    ``tenantq.observability.specs.SPECS``. Register it with ``registry.register(collector)``.

    ``connect`` opens an autocommit connection (``lambda: connect(settings,
    autocommit=True)``); the collector keeps it and reopens it after a failure. ``queues``
    are always reported (an idle queue shows age 0, not a missing series); None reports the
    queues that have jobs.
    """

    def __init__(
        self,
        connect: ConnectionFactory,
        *,
        queues: Sequence[str] | None = None,
        top_tenants: int = 20,
        stale_worker_seconds: float = 60.0,
        min_interval_seconds: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._connect = connect
        self._queues = list(queues) if queues is not None else None
        self._top_tenants = top_tenants
        self._stale_worker_seconds = stale_worker_seconds
        self._min_interval = min_interval_seconds
        self._clock = clock
        self._connection: DeploymentConnection | None = None
        self._lock = threading.Lock()
        self._cached: list[Metric] = []
        self._cached_at: float | None = None

    def describe(self) -> Iterator[Metric]:
        """The families without samples: registration checks names without a query."""
        for spec in names.SPECS:
            if spec.source == "postgres":
                yield GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)

    def collect(self) -> Iterator[Metric]:
        """The families with fresh (or at most ``min_interval_seconds`` old) samples."""
        with self._lock:
            now = self._clock()
            if self._cached_at is None or now - self._cached_at >= self._min_interval:
                self._cached = self._refresh()
                self._cached_at = now
            yield from self._cached

    def close(self) -> None:
        """Close the collector's connection."""
        with self._lock:
            self._drop_connection()

    # -- internals ----------------------------------------------------------------------------

    def _refresh(self) -> list[Metric]:
        started = time.perf_counter()
        try:
            if self._connection is None or self._connection.closed:
                self._connection = self._connect()
                # now() is the transaction's start: outside autocommit the ages would freeze.
                self._connection.autocommit = True
            queue_stats = stats.job_stats_by_tenant(
                self._connection, queues=self._queues, top_tenants=self._top_tenants
            )
            workers = stats.worker_summary(
                self._connection, stale_after_seconds=self._stale_worker_seconds
            )
            lag = outbox_store.outbox_lag(self._connection, self._queues)
            lanes = placement_store.lane_members(self._connection, self._queues)
            limited = quota_store.tenant_running_limited(self._connection)
        except (psycopg.Error, TenantqError, OSError) as error:
            # Scrapes must keep working when Postgres does not: report it, retry next scrape.
            logger.warning("stats query failed: %s", type(error).__name__)
            self._drop_connection()
            return [_gauge(names.STATS_UP, 0.0), _duration(started)]
        families = (
            _queue_families(queue_stats)
            + _worker_families(workers)
            + _outbox_families([queue.queue for queue in queue_stats], lag)
            + _lane_families([queue.queue for queue in queue_stats], lanes, self._top_tenants)
            + _quota_families(limited, self._top_tenants)
        )
        return [*families, _gauge(names.STATS_UP, 1.0), _duration(started)]

    def _drop_connection(self) -> None:
        if self._connection is not None:
            try:
                self._connection.close()
            finally:
                self._connection = None


def _lane_families(
    queues: list[str], lanes: dict[str, list[str]], top_tenants: int
) -> list[Metric]:
    count = _family(names.LANE_TENANTS)
    member = _family(names.TENANT_IN_LANE)
    for queue in sorted(set(queues) | set(lanes)):
        tenants = lanes.get(queue, [])
        count.add_metric([queue], float(len(tenants)))
        for tenant in tenants[:top_tenants]:
            member.add_metric([queue, tenant], 1.0)
        if len(tenants) > top_tenants:
            member.add_metric([queue, "other"], float(len(tenants) - top_tenants))
    return [count, member]


def _quota_families(limited: list[quota_store.TenantRunning], top_tenants: int) -> list[Metric]:
    """Running per tenant with limits of its own, busiest first: the top by name, the rest
    summed as ``other`` (their caps are not summed: a sum of caps caps nothing)."""
    running = _family(names.TENANT_RUNNING)
    cap = _family(names.TENANT_MAX_RUNNING)
    for tenant in limited[:top_tenants]:
        running.add_metric([tenant.tenant_id], float(tenant.running))
        if tenant.max_running is not None:
            cap.add_metric([tenant.tenant_id], float(tenant.max_running))
    rest = limited[top_tenants:]
    if rest:
        running.add_metric(["other"], float(sum(tenant.running for tenant in rest)))
    return [running, cap]


def _family(name: str) -> GaugeMetricFamily:
    spec = names.SPECS_BY_NAME[name]
    return GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)


def _gauge(name: str, value: float) -> GaugeMetricFamily:
    family = _family(name)
    family.add_metric([], value)
    return family


def _duration(started: float) -> GaugeMetricFamily:
    return _gauge(names.STATS_QUERY_DURATION, time.perf_counter() - started)


_DEPTH_STATES = ("pending", "runnable", "leased", "retrying")


def _queue_families(queue_stats: list[stats.QueueStats]) -> list[Metric]:
    depth = _family(names.QUEUE_DEPTH)
    oldest = _family(names.OLDEST_RUNNABLE_AGE)
    tenant_oldest = _family(names.TENANT_OLDEST_RUNNABLE_AGE)
    dead = _family(names.JOBS_DEAD_LAST_HOUR)
    succeeded = _family(names.JOBS_SUCCEEDED_LAST_MINUTE)
    for queue in queue_stats:
        oldest.add_metric([queue.queue], queue.totals.oldest_runnable_age_seconds or 0.0)
        for tenant in queue.tenants.values():
            tenant_age = tenant.totals.oldest_runnable_age_seconds
            if tenant_age is not None:
                tenant_oldest.add_metric([queue.queue, tenant.tenant], tenant_age)
            for job_type, counts in tenant.job_types.items():
                labels = [queue.queue, job_type, tenant.tenant]
                for state in _DEPTH_STATES:
                    depth.add_metric([*labels, state], float(getattr(counts, state)))
                dead.add_metric(labels, float(counts.dead_last_hour))
                succeeded.add_metric(labels, float(counts.succeeded_last_minute))
    return [depth, oldest, tenant_oldest, dead, succeeded]


def _worker_families(workers: stats.WorkerSummary) -> list[Metric]:
    count = _family(names.CLUSTER_WORKERS)
    count.add_metric(["alive"], float(workers.alive))
    count.add_metric(["stale"], float(workers.stale))
    return [
        count,
        _gauge(names.CLUSTER_SLOTS, float(workers.slots)),
        _gauge(names.CLUSTER_BUSY_SLOTS, float(workers.busy_slots)),
    ]


def _outbox_families(queues: list[str], lag: dict[str, outbox_store.OutboxLag]) -> list[Metric]:
    """Relay lag and unsent entries per queue; 0 for a queue with nothing waiting."""
    age = _family(names.OUTBOX_LAG)
    unsent = _family(names.OUTBOX_UNSENT)
    for queue in sorted(set(queues) | set(lag)):
        found = lag.get(queue)
        age.add_metric([queue], found.oldest_age_seconds if found else 0.0)
        unsent.add_metric([queue], float(found.unsent) if found else 0.0)
    return [age, unsent]
