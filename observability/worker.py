"""What a worker process exposes: its metric families, the Postgres-backed queue gauges, and
the /metrics endpoint (127.0.0.1 unless told otherwise). Under ``--processes`` the children
write their samples to a shared multiprocess folder and only the supervisor serves, so one
scrape sees the whole pool."""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Protocol

import psycopg
from prometheus_client import CollectorRegistry

from tenantq.errors import TenantqError
from tenantq.observability.queue_stats import QueueStatsCollector
from tenantq.observability.server import MetricsServer, serve_metrics_from_settings
from tenantq.observability.worker_metrics import WorkerMetrics
from tenantq.settings import Settings
from tenantq.store import stats
from tenantq.store.engine import connect

log = logging.getLogger("tenantq.metrics")

MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"


class PartitionProgress(Protocol):
    """What the gauges read of the partitions a worker owns (``Partitions.progress``)."""

    def lag(self, consumer: Any) -> dict[tuple[str, int], int]:
        """Messages behind the high watermark, per (topic, partition)."""
        ...

    def oldest_unfinished_ms(self) -> dict[str, int]:
        """Per topic, the Kafka timestamp of the oldest message not yet durably done."""
        ...


#: How often a worker refreshes its utilization and lag gauges.
OBSERVE_INTERVAL_SECONDS = 2.0


def queue_stats_collector(settings: Settings, queues: list[str] | None) -> QueueStatsCollector:
    return QueueStatsCollector(
        lambda: connect(settings, autocommit=True, application_name="tenantq-metrics"),
        queues=queues,
        top_tenants=settings.metrics_top_tenants,
        stale_worker_seconds=settings.worker.stale_owner_seconds,
    )


def busiest_tenants(settings: Settings, queues: list[str]) -> list[str]:
    """The tenants with the most unfinished jobs in ``queues``, busiest first, as Postgres says
    now; empty when it cannot say (labels then go first come, first served)."""
    if not settings.metrics_top_tenants:
        return []
    try:
        with connect(settings, autocommit=True, application_name="tenantq-metrics") as db:
            by_tenant = stats.job_stats_by_tenant(
                db, queues=queues, top_tenants=settings.metrics_top_tenants
            )
    except (psycopg.Error, TenantqError, OSError) as error:
        log.warning("could not read the busiest tenants for metric labels: %s", error)
        return []
    return stats.top_tenants(by_tenant)


class WorkerObservability:
    """Metric families of one worker process, and its endpoint when it serves one."""

    def __init__(self, settings: Settings, queues: list[str]) -> None:
        self.registry = CollectorRegistry()
        self.metrics: WorkerMetrics = WorkerMetrics(
            self.registry, top_tenants=settings.metrics_top_tenants
        )
        self.server: MetricsServer | None = None
        self._settings = settings
        self._queues = queues
        self._collector: QueueStatsCollector | None = None
        self._last = 0.0

    def start(self) -> None:
        """Give tenant labels to the tenants with volume first, then serve /metrics (with the
        Postgres-backed queue gauges) when this process serves; under a supervisor, the
        supervisor does."""
        settings = self._settings
        self.metrics.tenants.preload(busiest_tenants(settings, self._queues))
        if settings.metrics_port and not os.environ.get(MULTIPROCESS_ENV):
            self._collector = queue_stats_collector(settings, self._queues)
            self.registry.register(self._collector)
            self.server = serve_metrics_from_settings(self.registry, settings)

    def observe(
        self,
        partitions: PartitionProgress,
        consumer: Any,
        busy: int,
        slots: int,
        queue_of_topic: dict[str, tuple[str, int | None]],
    ) -> None:
        """Refresh utilization, lag and the age of the oldest unfinished message."""
        now = time.monotonic()
        if now - self._last < OBSERVE_INTERVAL_SECONDS:
            return
        self._last = now
        self.metrics.utilization(busy, slots)
        for (topic, partition), lag in partitions.lag(consumer).items():
            self.metrics.consumer_lag(topic, partition, lag)
        oldest: dict[str, int] = {}
        for topic, stamp in partitions.oldest_unfinished_ms().items():
            queue = queue_of_topic[topic][0]
            oldest[queue] = min(stamp, oldest.get(queue, stamp))
        wall_ms = time.time() * 1000
        for queue, stamp in oldest.items():
            self.metrics.committed_message_age(queue, max(0.0, (wall_ms - stamp) / 1000))

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
        if self._collector is not None:
            self._collector.close()
