"""Read queries (and one action) of the web console (``tenantq web``): named, noun-first
statements, one function each, parameterised, run on an autocommit connection so ``now()``
is fresh.

The console reuses the statements that already exist (``stats``, ``job_admin``,
``placement``, ``replay``); what is here is only what no CLI needed. Optional filters are
written ``(%(x)s IS NULL OR ...)``; those statements are executed with ``prepare=False`` so
psycopg never turns them into a generic plan that ignores which filters are set.

Cost: finished jobs are read through ``ix_tenantq_jobs_finished_at`` and only a bounded
window of it; a search is a ``LIMIT`` scan in ``created_at`` order.

Every statement reads (or changes) the rows of the connection's deployment only
(``DeploymentConnection``): the console of one topic prefix never lists or acts on another's.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg.rows import dict_row

from tenantq.store.engine import DeploymentConnection

#: The database's own clock, for the health line (and a round-trip time).
DATABASE_PING = "SELECT now()"

#: Workers that have not stopped and were heard from recently; stale ones show their age.
WORKER_LIST = """
SELECT id, hostname, pid, queues, slots, running_jobs,
       extract(epoch FROM now() - heartbeat_at)::float8 AS heartbeat_age_seconds,
       extract(epoch FROM now() - started_at)::float8 AS uptime_seconds
FROM tenantq_workers
WHERE deployment = %(deployment)s AND stopped_at IS NULL
  AND heartbeat_at > now() - %(within)s * interval '1 second'
ORDER BY id
"""

#: Jobs finished per queue and minute (0 = the current minute), succeeded and dead apart.
JOB_FINISHED_PER_MINUTE = """
SELECT queue,
       floor(extract(epoch FROM now() - finished_at) / 60)::int AS minutes_ago,
       count(*) FILTER (WHERE state = 'succeeded')::bigint,
       count(*) FILTER (WHERE state = 'dead')::bigint
FROM tenantq_jobs
WHERE deployment = %(deployment)s AND finished_at IS NOT NULL
  AND finished_at > now() - %(minutes)s * interval '1 minute'
  AND queue = ANY(%(queues)s::text[])
GROUP BY 1, 2
"""

#: Enqueue-to-finished latency of the queue's succeeded jobs in a window, per tenant class:
#: ranked by volume in the window, rank 1 is hot, the next max(1, n / 10) heavy, the rest
#: light (the classes of ``tenantq demo``'s report).
JOB_LATENCY_BY_TENANT_CLASS = """
WITH done AS (
    SELECT tenant_id,
           extract(epoch FROM finished_at - coalesce(enqueued_at, created_at))::float8 AS latency
    FROM tenantq_jobs
    WHERE deployment = %(deployment)s AND finished_at IS NOT NULL
      AND finished_at > now() - %(minutes)s * interval '1 minute'
      AND state = 'succeeded' AND queue = %(queue)s
),
volume AS (
    SELECT tenant_id,
           row_number() OVER (ORDER BY count(*) DESC, tenant_id) AS rank,
           count(*) OVER () AS tenants
    FROM done
    GROUP BY tenant_id
)
SELECT CASE WHEN v.rank = 1 THEN 'hot'
            WHEN v.rank <= 1 + greatest(1, v.tenants / 10) THEN 'heavy'
            ELSE 'light' END AS tenant_class,
       count(*)::bigint,
       count(DISTINCT d.tenant_id)::bigint,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY d.latency),
       percentile_cont(0.9) WITHIN GROUP (ORDER BY d.latency),
       percentile_cont(0.99) WITHIN GROUP (ORDER BY d.latency)
FROM done AS d
JOIN volume AS v USING (tenant_id)
GROUP BY 1
"""

#: Jobs by any combination of queue, tenant, job type, states, error class prefix and a
#: creation-time range, newest first.
JOB_SEARCH = """
SELECT id, queue, job_type, tenant_id, state::text AS state, attempts, max_attempts, replays,
       last_error_class, last_error_message, created_at, run_after, finished_at
FROM tenantq_jobs
WHERE deployment = %(deployment)s
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s::text)
  AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s::text)
  AND (%(states)s::text[] IS NULL OR state::text = ANY(%(states)s::text[]))
  AND (%(error_class)s::text IS NULL OR starts_with(last_error_class, %(error_class)s::text))
  AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR created_at < %(until)s::timestamptz)
ORDER BY created_at DESC, id
LIMIT %(limit)s
"""

#: "Run again now" of a job that waits (scheduled, backing off, or due): due at once. The
#: message that owns its wait still comes; the fenced claim runs the job only once.
JOB_RUN_NOW = """
UPDATE tenantq_jobs
SET run_after = now(), updated_at = now()
WHERE id = %(id)s AND deployment = %(deployment)s
  AND state IN ('pending', 'runnable', 'retrying') AND NOT cancel_requested
RETURNING id, queue, job_type, tenant_id, partition_key, payload, max_attempts,
          idempotency_key, created_at, origin_topic, origin_partition, replays
"""

#: The latest replays and purges, for the DLQ page.
REPLAY_AUDIT_RECENT = """
SELECT id, actor, at, queue, action, dry_run, matched, replayed
FROM tenantq_replay_audit
WHERE deployment = %(deployment)s
ORDER BY id DESC
LIMIT %(limit)s
"""


@dataclass(frozen=True)
class WorkerRow:
    """A registered worker process (one member of a queue's consumer group)."""

    id: str
    hostname: str
    pid: int
    queues: tuple[str, ...]
    slots: int
    running_jobs: int
    heartbeat_age_seconds: float
    uptime_seconds: float

    @property
    def utilization(self) -> float | None:
        """Busy share of its slots (None for a worker without slots)."""
        return self.running_jobs / self.slots if self.slots else None


@dataclass(frozen=True)
class FinishedMinute:
    """Jobs of one queue that finished in one minute."""

    queue: str
    minutes_ago: int
    succeeded: int
    dead: int


@dataclass(frozen=True)
class ClassLatency:
    """Latency percentiles (seconds) of one tenant class's succeeded jobs."""

    tenant_class: str
    jobs: int
    tenants: int
    p50: float
    p90: float
    p99: float


@dataclass(frozen=True)
class JobSearch:
    """What to look for; None (or empty) means any."""

    queue: str | None = None
    tenant: str | None = None
    job_type: str | None = None
    states: tuple[str, ...] = ()
    error_class: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    limit: int = 100


def database_ping(connection: DeploymentConnection) -> tuple[dt.datetime, float]:
    """The database clock and the round trip in milliseconds."""
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(DATABASE_PING)
        row = cursor.fetchone()
    assert row is not None
    return row[0], (time.perf_counter() - started) * 1000


def worker_list(connection: DeploymentConnection, *, within_seconds: float) -> list[WorkerRow]:
    """Workers not stopped whose last heartbeat is at most ``within_seconds`` old."""
    with connection.cursor() as cursor:
        cursor.execute(WORKER_LIST, {"deployment": connection.deployment, "within": within_seconds})
        rows = cursor.fetchall()
    return [
        WorkerRow(
            id=row[0],
            hostname=row[1],
            pid=int(row[2]),
            queues=tuple(row[3] or ()),
            slots=int(row[4]),
            running_jobs=int(row[5]),
            heartbeat_age_seconds=max(0.0, float(row[6])),
            uptime_seconds=max(0.0, float(row[7])),
        )
        for row in rows
    ]


def job_finished_per_minute(
    connection: DeploymentConnection, queues: Sequence[str], *, minutes: int
) -> list[FinishedMinute]:
    """Succeeded and dead jobs per queue and minute over the last ``minutes``."""
    with connection.cursor() as cursor:
        cursor.execute(
            JOB_FINISHED_PER_MINUTE,
            {"deployment": connection.deployment, "queues": list(queues), "minutes": minutes},
        )
        rows = cursor.fetchall()
    return [FinishedMinute(row[0], int(row[1]), int(row[2]), int(row[3])) for row in rows]


def job_latency_by_tenant_class(
    connection: DeploymentConnection, queue: str, *, minutes: int
) -> list[ClassLatency]:
    """p50/p90/p99 enqueue-to-finished seconds per tenant class (hot, heavy, light)."""
    with connection.cursor() as cursor:
        cursor.execute(
            JOB_LATENCY_BY_TENANT_CLASS,
            {"deployment": connection.deployment, "queue": queue, "minutes": minutes},
        )
        rows = cursor.fetchall()
    order = {"hot": 0, "heavy": 1, "light": 2}
    found = [
        ClassLatency(row[0], int(row[1]), int(row[2]), float(row[3]), float(row[4]), float(row[5]))
        for row in rows
    ]
    return sorted(found, key=lambda item: order.get(item.tenant_class, 9))


def job_search(connection: DeploymentConnection, search: JobSearch) -> list[dict[str, Any]]:
    """Jobs matching ``search``, newest first, at most ``search.limit``."""
    parameters = {
        "deployment": connection.deployment,
        "queue": search.queue or None,
        "tenant": search.tenant or None,
        "job_type": search.job_type or None,
        "states": list(search.states) or None,
        "error_class": search.error_class or None,
        "since": search.since,
        "until": search.until,
        "limit": search.limit,
    }
    with connection.cursor(row_factory=dict_row) as cursor:
        cursor.execute(JOB_SEARCH, parameters, prepare=False)
        return cursor.fetchall()


def job_run_now(connection: DeploymentConnection, job_id: uuid.UUID) -> dict[str, Any] | None:
    """Make a waiting job due now; returns what is needed to publish it again, or None when
    the job does not wait (running, finished, asked to cancel, or unknown)."""
    with connection.transaction(), connection.cursor(row_factory=dict_row) as cursor:
        cursor.execute(JOB_RUN_NOW, {"id": job_id, "deployment": connection.deployment})
        return cursor.fetchone()


def replay_audit_recent(connection: DeploymentConnection, *, limit: int) -> list[dict[str, Any]]:
    """The latest ``limit`` replay and purge audit rows, newest first."""
    with connection.cursor(row_factory=dict_row) as cursor:
        cursor.execute(REPLAY_AUDIT_RECENT, {"deployment": connection.deployment, "limit": limit})
        return cursor.fetchall()
