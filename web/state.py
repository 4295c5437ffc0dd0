"""What the Overview shows, read in one go: per queue the job counts (Postgres), what Kafka
still holds (lag, retry-tier depth, DLQ size), a short history for sparklines, and the worker
group with database and broker health.

Each part fails on its own: a database that is down leaves the Kafka numbers standing, and
the other way round, with the reason in place of the numbers. Throughput history comes from
the job table (finished jobs per minute, so it is there the moment the console starts); the
oldest-runnable-age history cannot be read back from the table, so it is sampled here each
time the overview is read (at most every ``SAMPLE_SECONDS``) and kept in memory.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from tenantq.errors import DatabaseUnavailable
from tenantq.observability.consumer_lag import BacklogProbe, BrokerHealth, QueueBacklog
from tenantq.settings import Settings
from tenantq.store import console as console_store
from tenantq.store import outbox as outbox_store
from tenantq.store import stats
from tenantq.web.database import Database

#: Minutes of throughput history per queue (one sparkline point per minute).
HISTORY_MINUTES = 30
#: Oldest-age samples kept per queue, and the least time between two.
SAMPLES_KEPT = 120
SAMPLE_SECONDS = 2.0
#: Workers silent longer than this are not listed at all (they crashed long ago).
WORKERS_WITHIN_SECONDS = 3600.0


@dataclass(frozen=True)
class DatabaseHealth:
    """Whether PostgreSQL answered, and how fast."""

    up: bool
    latency_ms: float | None = None
    error: str | None = None


@dataclass
class QueueView:
    """One queue as the overview shows it."""

    name: str
    counts: stats.JobCounts | None
    backlog: QueueBacklog
    #: Succeeded per minute, oldest first, ``HISTORY_MINUTES`` points.
    succeeded_per_minute: list[int] = field(default_factory=list)
    #: Oldest runnable age samples (seconds; None = nothing due), oldest first.
    oldest_age_samples: list[float | None] = field(default_factory=list)
    #: Jobs enqueued through the outbox and not yet relayed to Kafka (None: database down).
    outbox: outbox_store.OutboxLag | None = None

    @property
    def succeeded_in_history(self) -> int | None:
        """Succeeded in the window the history covers (``HISTORY_MINUTES``)."""
        return sum(self.succeeded_per_minute) if self.counts is not None else None

    @property
    def throughput_per_minute(self) -> float | None:
        """Mean succeeded per minute over the last five full minutes."""
        if self.counts is None or len(self.succeeded_per_minute) < 6:
            return None
        return sum(self.succeeded_per_minute[-6:-1]) / 5

    def as_dict(self) -> dict[str, Any]:
        """Plain data for ``GET /api/queues``."""
        counts = self.counts.as_dict() if self.counts is not None else None
        return {
            "queue": self.name,
            "jobs": counts,
            "throughput_per_minute": self.throughput_per_minute,
            f"succeeded_last_{HISTORY_MINUTES}_minutes": self.succeeded_in_history,
            "succeeded_per_minute": self.succeeded_per_minute,
            "oldest_runnable_age_samples": self.oldest_age_samples,
            "outbox": None
            if self.outbox is None
            else {
                "unsent": self.outbox.unsent,
                "oldest_age_seconds": self.outbox.oldest_age_seconds,
            },
            **self.backlog.as_dict(),
        }


@dataclass
class Overview:
    """Everything on the overview page, read at ``at``."""

    at: dt.datetime
    queues: list[QueueView]
    workers: list[console_store.WorkerRow] | None
    stale_after_seconds: float
    database: DatabaseHealth
    broker: BrokerHealth

    def as_dict(self) -> dict[str, Any]:
        """Plain data for the API."""
        return {
            "at": self.at.isoformat(timespec="seconds"),
            "database": {
                "up": self.database.up,
                "latency_ms": self.database.latency_ms,
                "error": self.database.error,
            },
            "broker": {
                "up": self.broker.up,
                "brokers": self.broker.brokers,
                "latency_ms": self.broker.latency_ms,
                "error": self.broker.error,
            },
            "queues": [queue.as_dict() for queue in self.queues],
            "workers": None
            if self.workers is None
            else [
                {
                    "id": worker.id,
                    "hostname": worker.hostname,
                    "pid": worker.pid,
                    "queues": list(worker.queues),
                    "slots": worker.slots,
                    "running_jobs": worker.running_jobs,
                    "utilization": worker.utilization,
                    "heartbeat_age_seconds": worker.heartbeat_age_seconds,
                    "stale": worker.heartbeat_age_seconds > self.stale_after_seconds,
                }
                for worker in self.workers
            ],
        }


class OverviewReader:
    """Reads ``Overview`` snapshots; keeps the oldest-age samples between reads."""

    def __init__(self, settings: Settings, database: Database, probe: BacklogProbe) -> None:
        self.settings = settings
        self.database = database
        self.probe = probe
        self._samples: dict[str, deque[float | None]] = {}
        self._sampled_at = 0.0
        self._lock = threading.Lock()

    @property
    def queue_names(self) -> list[str]:
        """The declared queues, in name order."""
        return sorted(self.settings.queues)

    def read(self) -> Overview:
        """A fresh snapshot (database and broker read now)."""
        names = self.queue_names
        counts: dict[str, stats.JobCounts] = {}
        finished: list[console_store.FinishedMinute] = []
        workers: list[console_store.WorkerRow] | None = None
        outbox: dict[str, outbox_store.OutboxLag] = {}
        try:
            with self.database.connection() as connection:
                _, latency = console_store.database_ping(connection)
                for item in stats.job_stats_by_tenant(connection, queues=names, top_tenants=0):
                    counts[item.queue] = item.totals
                outbox = outbox_store.outbox_lag(connection, names)
                finished = console_store.job_finished_per_minute(
                    connection, names, minutes=HISTORY_MINUTES
                )
                workers = console_store.worker_list(
                    connection, within_seconds=WORKERS_WITHIN_SECONDS
                )
            database = DatabaseHealth(up=True, latency_ms=latency)
        except DatabaseUnavailable as error:
            database = DatabaseHealth(up=False, error=str(error))
        broker = self.probe.health()
        samples = self._sample({name: counts[name].oldest_runnable_age_seconds for name in counts})
        queues = []
        for name in names:
            backlog = (
                self.probe.queue_backlog(name)
                if broker.up
                else QueueBacklog(name, error=broker.error or "broker unavailable")
            )
            succeeded = [0] * HISTORY_MINUTES
            for minute in finished:
                if minute.queue == name and 0 <= minute.minutes_ago < HISTORY_MINUTES:
                    index = HISTORY_MINUTES - 1 - minute.minutes_ago
                    succeeded[index] += minute.succeeded
            queues.append(
                QueueView(
                    name=name,
                    counts=counts.get(name) if database.up else None,
                    backlog=backlog,
                    succeeded_per_minute=succeeded,
                    oldest_age_samples=samples.get(name, []),
                    outbox=outbox.get(name, outbox_store.OutboxLag(name, 0, 0.0))
                    if database.up
                    else None,
                )
            )
        return Overview(
            at=dt.datetime.now(dt.UTC),
            queues=queues,
            workers=workers,
            stale_after_seconds=self.settings.worker.stale_owner_seconds,
            database=database,
            broker=broker,
        )

    def _sample(self, ages: dict[str, float | None]) -> dict[str, list[float | None]]:
        """Record this read's ages (unless the last sample is too recent); the series."""
        with self._lock:
            now = time.monotonic()
            if ages and now - self._sampled_at >= SAMPLE_SECONDS:
                self._sampled_at = now
                for name, age in ages.items():
                    self._samples.setdefault(name, deque(maxlen=SAMPLES_KEPT)).append(age)
            return {name: list(series) for name, series in self._samples.items()}
