"""Read-only statistics of the job table, for ``tenantq stats`` and the metrics collector.

Named, noun-first statements, one function each, all run with psycopg 3. Ages are computed
with the database clock (``now()``), never the caller's, so a skewed host cannot make a late
queue look on time. ``now()`` is the start of the transaction: run these on an autocommit
connection (``connect(settings, autocommit=True)``) for fresh numbers.

Cost: unfinished jobs are read through the two partial indexes that cover them
(``ix_tenantq_jobs_waiting`` for pending/runnable/retrying, ``ix_tenantq_jobs_lease_owner``
for leased), so the finished history, which is most of the table, is never scanned; finished
counts go through ``ix_tenantq_jobs_finished_at`` and only its last hour. Every index leads
with the deployment, and every statement reads the connection's deployment only
(``DeploymentConnection``): one topic prefix's stats never count another's jobs or workers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from tenantq.store.engine import DeploymentConnection

#: The label shared by tenants past the top N.
OTHER_TENANT = "other"

#: Counts per (queue, tenant-or-other, job_type). The three branches are split by state so
#: each one matches a partial index's predicate (the waiting jobs by queue and tenant, the
#: leased ones by owner, the finished ones by finish time); tenants are ranked per queue by volume
#: (unfinished + died in the last hour + succeeded in the last minute, ties by id) and all
#: but the top %(top)s are folded into 'other'.
JOB_STATS_BY_TENANT = """
WITH facts AS (
    SELECT queue, tenant_id, job_type,
           count(*) FILTER (WHERE state = 'pending') AS pending,
           count(*) FILTER (WHERE state = 'runnable') AS runnable,
           0::bigint AS leased,
           count(*) FILTER (WHERE state = 'retrying') AS retrying,
           0::bigint AS dead_last_hour,
           0::bigint AS succeeded_last_minute,
           min(run_after) FILTER (WHERE run_after <= now()) AS oldest_due
    FROM tenantq_jobs
    WHERE deployment = %(deployment)s AND state IN ('pending', 'runnable', 'retrying')
      AND (%(queues)s::text[] IS NULL OR queue = ANY(%(queues)s::text[]))
    GROUP BY queue, tenant_id, job_type
    UNION ALL
    SELECT queue, tenant_id, job_type, 0, 0, count(*), 0, 0, 0, NULL
    FROM tenantq_jobs
    WHERE deployment = %(deployment)s AND state = 'leased'
      AND (%(queues)s::text[] IS NULL OR queue = ANY(%(queues)s::text[]))
    GROUP BY queue, tenant_id, job_type
    UNION ALL
    SELECT queue, tenant_id, job_type, 0, 0, 0, 0,
           count(*) FILTER (WHERE state = 'dead'),
           count(*) FILTER (
               WHERE state = 'succeeded' AND finished_at > now() - interval '1 minute'
           ),
           NULL
    FROM tenantq_jobs
    WHERE deployment = %(deployment)s AND finished_at IS NOT NULL
      AND finished_at > now() - interval '1 hour'
      AND state IN ('dead', 'succeeded')
      AND (%(queues)s::text[] IS NULL OR queue = ANY(%(queues)s::text[]))
    GROUP BY queue, tenant_id, job_type
),
ranked AS (
    SELECT queue, tenant_id,
           row_number() OVER (
               PARTITION BY queue
               ORDER BY sum(pending + runnable + leased + retrying + dead_last_hour
                            + succeeded_last_minute) DESC,
                        tenant_id
           ) AS volume_rank
    FROM facts
    GROUP BY queue, tenant_id
)
SELECT f.queue,
       CASE WHEN r.volume_rank <= %(top)s THEN f.tenant_id ELSE 'other' END AS tenant,
       f.job_type,
       sum(f.pending)::bigint,
       sum(f.runnable)::bigint,
       sum(f.leased)::bigint,
       sum(f.retrying)::bigint,
       sum(f.dead_last_hour)::bigint,
       sum(f.succeeded_last_minute)::bigint,
       -- greatest() skips NULLs, so "nothing due" must stay NULL explicitly, not become 0.
       CASE WHEN min(f.oldest_due) IS NOT NULL
            THEN extract(epoch FROM greatest(now() - min(f.oldest_due), interval '0'))::float8
       END
FROM facts AS f
JOIN ranked AS r USING (queue, tenant_id)
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3
"""

#: The headline number alone, per named queue: one index probe each on
#: ix_tenantq_jobs_waiting (queue, run_after), whatever the backlog. NULL = nothing is due.
JOB_OLDEST_RUNNABLE_AGE = """
SELECT q.queue,
       CASE WHEN oldest.run_after IS NOT NULL
            THEN extract(epoch FROM greatest(now() - oldest.run_after, interval '0'))::float8
       END
FROM unnest(%(queues)s::text[]) AS q(queue)
LEFT JOIN LATERAL (
    SELECT run_after
    FROM tenantq_jobs
    WHERE deployment = %(deployment)s AND queue = q.queue
      AND state IN ('pending', 'runnable', 'retrying')
      AND run_after <= now()
    ORDER BY run_after
    LIMIT 1
) AS oldest ON true
ORDER BY q.queue
"""

#: Workers that have not stopped, split by whether their heartbeat is recent.
WORKER_SUMMARY = """
SELECT count(*) FILTER (WHERE heartbeat_at >= now() - %(stale)s * interval '1 second'),
       count(*) FILTER (WHERE heartbeat_at < now() - %(stale)s * interval '1 second'),
       coalesce(sum(slots) FILTER (
           WHERE heartbeat_at >= now() - %(stale)s * interval '1 second'), 0)::bigint,
       coalesce(sum(running_jobs) FILTER (
           WHERE heartbeat_at >= now() - %(stale)s * interval '1 second'), 0)::bigint
FROM tenantq_workers
WHERE deployment = %(deployment)s AND stopped_at IS NULL
"""


@dataclass(frozen=True)
class JobCounts:
    """Counts of one slice of jobs (a queue, a tenant, or a tenant's job type)."""

    pending: int = 0
    runnable: int = 0
    leased: int = 0
    retrying: int = 0
    dead_last_hour: int = 0
    succeeded_last_minute: int = 0
    #: Seconds since the oldest due, unfinished job could have run; None when none is due.
    oldest_runnable_age_seconds: float | None = None

    @property
    def depth(self) -> int:
        """Unfinished jobs: pending + runnable + leased + retrying."""
        return self.pending + self.runnable + self.leased + self.retrying

    @property
    def running(self) -> int:
        """Jobs leased by a worker right now."""
        return self.leased

    def __add__(self, other: JobCounts) -> JobCounts:
        ages = [
            age
            for age in (self.oldest_runnable_age_seconds, other.oldest_runnable_age_seconds)
            if age is not None
        ]
        return JobCounts(
            pending=self.pending + other.pending,
            runnable=self.runnable + other.runnable,
            leased=self.leased + other.leased,
            retrying=self.retrying + other.retrying,
            dead_last_hour=self.dead_last_hour + other.dead_last_hour,
            succeeded_last_minute=self.succeeded_last_minute + other.succeeded_last_minute,
            oldest_runnable_age_seconds=max(ages) if ages else None,
        )

    def as_dict(self) -> dict[str, Any]:
        """Plain data for JSON: ``depth``, then every field."""
        return {"depth": self.depth, **asdict(self)}


@dataclass
class TenantStats:
    """One tenant (or ``other``) of a queue, with its job-type breakdown."""

    tenant: str
    totals: JobCounts = field(default_factory=JobCounts)
    job_types: dict[str, JobCounts] = field(default_factory=dict)


@dataclass
class QueueStats:
    """One queue: totals and its tenants, busiest first, ``other`` last."""

    queue: str
    totals: JobCounts = field(default_factory=JobCounts)
    tenants: dict[str, TenantStats] = field(default_factory=dict)


@dataclass(frozen=True)
class WorkerSummary:
    """Registered workers that have not stopped: live (recent heartbeat) and stale."""

    alive: int
    stale: int
    slots: int
    busy_slots: int


def job_stats_by_tenant(
    connection: DeploymentConnection,
    *,
    queues: Sequence[str] | None = None,
    top_tenants: int = 20,
) -> list[QueueStats]:
    """Counts per queue, tenant and job type; the ``top_tenants`` busiest tenants of each
    queue by volume keep their name, the rest are folded into ``other``. Every queue in
    ``queues`` is in the result (empty if it has no jobs); None means every queue with jobs."""
    if top_tenants < 0:
        raise ValueError(f"top_tenants must be >= 0, got {top_tenants}")
    params = {
        "deployment": connection.deployment,
        "queues": list(queues) if queues is not None else None,
        "top": top_tenants,
    }
    with connection.cursor() as cursor:
        cursor.execute(JOB_STATS_BY_TENANT, params)
        rows = cursor.fetchall()
    result: dict[str, QueueStats] = {name: QueueStats(name) for name in queues or ()}
    for queue, tenant, job_type, pending, runnable, leased, retrying, dead, done, age in rows:
        counts = JobCounts(
            pending=int(pending),
            runnable=int(runnable),
            leased=int(leased),
            retrying=int(retrying),
            dead_last_hour=int(dead),
            succeeded_last_minute=int(done),
            oldest_runnable_age_seconds=age,
        )
        queue_stats = result.setdefault(queue, QueueStats(queue))
        queue_stats.totals = queue_stats.totals + counts
        tenant_stats = queue_stats.tenants.setdefault(tenant, TenantStats(tenant))
        tenant_stats.totals = tenant_stats.totals + counts
        tenant_stats.job_types[job_type] = counts
    for queue_stats in result.values():
        queue_stats.tenants = dict(
            sorted(
                queue_stats.tenants.items(),
                key=lambda item: (item[0] == OTHER_TENANT, -_volume(item[1].totals), item[0]),
            )
        )
    return [result[name] for name in sorted(result)]


def _volume(counts: JobCounts) -> int:
    return counts.depth + counts.dead_last_hour + counts.succeeded_last_minute


def job_oldest_runnable_age(
    connection: DeploymentConnection, queues: Sequence[str]
) -> dict[str, float | None]:
    """Seconds since the oldest due job of each queue could have run (None: nothing due)."""
    with connection.cursor() as cursor:
        cursor.execute(
            JOB_OLDEST_RUNNABLE_AGE,
            {"deployment": connection.deployment, "queues": list(queues)},
        )
        return {queue: age for queue, age in cursor.fetchall()}


def top_tenants(stats: Sequence[QueueStats]) -> list[str]:
    """Named tenants of ``stats``, busiest first across queues (to preload a labeler)."""
    volume: dict[str, int] = {}
    for queue_stats in stats:
        for name, tenant in queue_stats.tenants.items():
            if name != OTHER_TENANT:
                volume[name] = volume.get(name, 0) + _volume(tenant.totals)
    return sorted(volume, key=lambda name: (-volume[name], name))


def worker_summary(
    connection: DeploymentConnection, *, stale_after_seconds: float
) -> WorkerSummary:
    """Workers not stopped: those whose heartbeat is younger than ``stale_after_seconds``
    are alive (their slots count), the others are stale (crashed or hung)."""
    with connection.cursor() as cursor:
        cursor.execute(
            WORKER_SUMMARY, {"deployment": connection.deployment, "stale": stale_after_seconds}
        )
        row = cursor.fetchone()
    assert row is not None
    alive, stale, slots, busy = (int(value) for value in row)
    return WorkerSummary(alive=alive, stale=stale, slots=slots, busy_slots=busy)
