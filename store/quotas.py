"""SQL of tenants' limits (``tenantq_tenants``) for operators and for the workers' copy of
them, and what the limits' use looks like now, run with psycopg 3.

Named, noun-first statements, one small function each. Every change of the table notifies
the channel ``tenantq_tenants`` (the payload: the deployment) in its transaction, so the
workers' copies (``tenantq.quotas.book``) are reread at once; their periodic refresh covers a
missed notification. A row belongs to one deployment (``DeploymentConnection``).

The claim that enforces the limits is ``tenantq.store.quota_claim``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from tenantq.store.engine import DeploymentConnection

TENANTS_CHANNEL = "tenantq_tenants"

TENANTS_CHANGED = "SELECT pg_notify('tenantq_tenants', %(deployment)s)"

TENANTS_LISTEN = "LISTEN tenantq_tenants"

_COLUMNS = """tenant_id, queue, job_type, max_running, rate, burst, weight, updated_at,
       updated_by"""

#: Every row of the deployment (a worker's copy), or of one tenant.
TENANT_LIMIT_LIST = f"""
SELECT {_COLUMNS}
FROM tenantq_tenants
WHERE deployment = %(deployment)s
  AND (%(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s::text)
ORDER BY tenant_id, queue, job_type
"""  # noqa: S608 - fixed text

#: One row, locked for a change that reads it first (``tenant_limit_set``).
TENANT_LIMIT_LOCK = f"""
SELECT {_COLUMNS}
FROM tenantq_tenants
WHERE deployment = %(deployment)s AND tenant_id = %(tenant_id)s AND queue = %(queue)s
  AND job_type = %(job_type)s
FOR UPDATE
"""  # noqa: S608 - fixed text

TENANT_LIMIT_UPSERT = f"""
INSERT INTO tenantq_tenants AS t (deployment, tenant_id, queue, job_type, max_running, rate,
                                  burst, weight, updated_by)
VALUES (%(deployment)s, %(tenant_id)s, %(queue)s, %(job_type)s, %(max_running)s, %(rate)s,
        %(burst)s, %(weight)s, %(updated_by)s)
ON CONFLICT (deployment, tenant_id, queue, job_type) DO UPDATE
SET max_running = excluded.max_running, rate = excluded.rate, burst = excluded.burst,
    weight = excluded.weight, updated_by = excluded.updated_by, updated_at = now()
RETURNING {_COLUMNS}
"""  # noqa: S608 - fixed text

#: The rows of a tenant: all of them, or those of one queue and job type.
TENANT_LIMIT_DELETE = f"""
DELETE FROM tenantq_tenants
WHERE deployment = %(deployment)s AND tenant_id = %(tenant_id)s
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s::text)
RETURNING {_COLUMNS}
"""  # noqa: S608 - fixed text

#: After a change of a tenant's rows: the running bound of each of its usage rows is dropped,
#: so that the next claim of the scope counts its live leases. While the tenant had no cap (no
#: row, or one without a cap) its jobs took the plain claim, which keeps no bound, and a bound
#: left from before would let jobs start past a cap set again. ``claims`` moves on, so a claim
#: whose snapshot is older than the change does not trust the count it made. Rows are locked in
#: the claims' order (``tenantq.store.quota_claim``).
TENANT_USAGE_RECOUNT = """
WITH locked AS (
    SELECT queue, job_type FROM tenantq_tenant_usage
    WHERE deployment = %(deployment)s AND tenant_id = %(tenant_id)s
    ORDER BY queue COLLATE "C", job_type COLLATE "C"
    FOR UPDATE
)
UPDATE tenantq_tenant_usage u
SET running_bound = NULL, claims = u.claims + 1
FROM locked l
WHERE u.deployment = %(deployment)s AND u.tenant_id = %(tenant_id)s AND u.queue = l.queue
  AND u.job_type = l.job_type
"""

#: Each limit row with what it holds back now: the live leases of its scope (counted), and
#: what the claims left in its usage row (the rate's burst left, when and why a claim last
#: held a job back). ``tenant_id`` NULL: every tenant with a row.
TENANT_LIMIT_USE = """
SELECT r.tenant_id, r.queue, r.job_type, r.max_running, r.rate, r.burst, r.weight,
       r.updated_at, r.updated_by,
       (SELECT count(*) FROM tenantq_jobs j
        WHERE j.deployment = %(deployment)s AND j.tenant_id = r.tenant_id
          AND j.state = 'leased' AND j.lease_until > now()
          AND (r.queue = '*' OR j.queue = r.queue)
          AND (r.job_type = '*' OR j.job_type = r.job_type)) AS running,
       CASE WHEN r.rate IS NOT NULL THEN
           greatest(coalesce(r.burst, 1) - greatest(
               extract(epoch FROM u.rate_tat - now())::float8, 0) * r.rate, 0) END
           AS burst_left,
       u.throttled_at, u.throttled_reason,
       extract(epoch FROM now() - u.throttled_at)::float8 AS throttled_seconds_ago
FROM tenantq_tenants r
LEFT JOIN tenantq_tenant_usage u
  ON u.deployment = r.deployment AND u.queue = r.queue AND u.tenant_id = r.tenant_id
 AND u.job_type = r.job_type
WHERE r.deployment = %(deployment)s
  AND (%(tenant_id)s::text IS NULL OR r.tenant_id = %(tenant_id)s::text)
ORDER BY r.tenant_id, r.queue, r.job_type
LIMIT %(limit)s
"""

#: A tenant's live leases (any queue, any job type), and when and why a claim last held one
#: of its jobs back (any scope): what ``tenants show`` says of a tenant under the defaults.
TENANT_RUNNING = """
SELECT (SELECT count(*) FROM tenantq_jobs j
        WHERE j.deployment = %(deployment)s AND j.tenant_id = %(tenant_id)s
          AND j.state = 'leased' AND j.lease_until > now()) AS running,
       u.throttled_at, u.throttled_reason,
       extract(epoch FROM now() - u.throttled_at)::float8 AS throttled_seconds_ago
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (
    SELECT throttled_at, throttled_reason FROM tenantq_tenant_usage
    WHERE deployment = %(deployment)s AND tenant_id = %(tenant_id)s
      AND throttled_at IS NOT NULL
    ORDER BY throttled_at DESC LIMIT 1
) AS u ON true
"""


#: Per tenant with a row of its own: its live leases (any queue, any job type) and its
#: tenant-wide cap, busiest first (the metrics' ``tenantq_tenant_running``).
TENANT_RUNNING_LIMITED = """
SELECT r.tenant_id,
       max(r.max_running) FILTER (WHERE r.queue = '*' AND r.job_type = '*') AS max_running,
       (SELECT count(*) FROM tenantq_jobs j
        WHERE j.deployment = %(deployment)s AND j.tenant_id = r.tenant_id
          AND j.state = 'leased' AND j.lease_until > now()) AS running
FROM tenantq_tenants r
WHERE r.deployment = %(deployment)s
GROUP BY r.tenant_id
ORDER BY running DESC, r.tenant_id
LIMIT %(limit)s
"""


@dataclass(frozen=True)
class TenantLimit:
    """One row of ``tenantq_tenants``: the limits of a tenant's jobs of ``queue`` and
    ``job_type`` ('*' = any). None = no limit of that kind in this row."""

    tenant_id: str
    queue: str
    job_type: str
    max_running: int | None
    rate: float | None
    burst: int | None
    weight: int | None
    updated_at: dt.datetime | None = None
    updated_by: str | None = None

    def limits(self) -> dict[str, Any]:
        """The row's four limits by column name, in the table's order."""
        values = (self.max_running, self.rate, self.burst, self.weight)
        return dict(zip(("max_running", "rate", "burst", "weight"), values, strict=True))

    @property
    def limits_starts(self) -> bool:
        """It caps or paces starts (a weight alone shares a queue out)."""
        return self.max_running is not None or self.rate is not None

    @property
    def empty(self) -> bool:
        """It limits nothing (such a row is deleted, never stored)."""
        return not self.limits_starts and self.weight is None


@dataclass(frozen=True)
class LimitUse:
    """A limit row and what it holds back now."""

    limit: TenantLimit
    #: Live leases of the row's scope.
    running: int
    #: Starts its rate allows at once now (None: no rate).
    burst_left: float | None
    #: When and why a claim last held back a job of the scope (None: never).
    throttled_reason: str | None
    throttled_seconds_ago: float | None


def _limit(row: Sequence[Any]) -> TenantLimit:
    return TenantLimit(*row[:9])


def tenant_limit_list(
    connection: DeploymentConnection, tenant_id: str | None = None
) -> list[TenantLimit]:
    """The deployment's rows (of ``tenant_id`` only, when given)."""
    with connection.cursor() as cursor:
        cursor.execute(
            TENANT_LIMIT_LIST, {"deployment": connection.deployment, "tenant_id": tenant_id}
        )
        return [_limit(row) for row in cursor.fetchall()]


def _row_key(
    connection: DeploymentConnection, tenant_id: str, queue: str | None, job_type: str | None
) -> dict[str, Any]:
    """The parameters that name a row of ``tenantq_tenants`` (queue and job type None: any,
    where the statement allows it)."""
    return {
        "deployment": connection.deployment,
        "tenant_id": tenant_id,
        "queue": queue,
        "job_type": job_type,
    }


def tenant_limit_lock(
    connection: DeploymentConnection, tenant_id: str, queue: str, job_type: str
) -> TenantLimit | None:
    """The row of (tenant, queue, job type), locked until the transaction ends; None when
    there is none."""
    with connection.cursor() as cursor:
        cursor.execute(TENANT_LIMIT_LOCK, _row_key(connection, tenant_id, queue, job_type))
        row = cursor.fetchone()
    return _limit(row) if row is not None else None


def tenant_limit_upsert(connection: DeploymentConnection, limit: TenantLimit) -> TenantLimit:
    """Store ``limit`` as the row of its tenant, queue and job type (the table's CHECKs refuse
    a value out of bounds) and tell the workers."""
    with connection.cursor() as cursor:
        cursor.execute(
            TENANT_LIMIT_UPSERT,
            {
                **_row_key(connection, limit.tenant_id, limit.queue, limit.job_type),
                **limit.limits(),
                "updated_by": limit.updated_by,
            },
        )
        row = cursor.fetchone()
        tenant_rows_changed(cursor, connection.deployment, limit.tenant_id)
    assert row is not None
    return _limit(row)


def tenant_limit_delete(
    connection: DeploymentConnection,
    tenant_id: str,
    queue: str | None = None,
    job_type: str | None = None,
) -> list[TenantLimit]:
    """Delete the rows of ``tenant_id`` (those of ``queue`` and ``job_type`` when given) and
    tell the workers; returns the rows deleted."""
    with connection.cursor() as cursor:
        cursor.execute(TENANT_LIMIT_DELETE, _row_key(connection, tenant_id, queue, job_type))
        deleted = [_limit(row) for row in cursor.fetchall()]
        if deleted:
            tenant_rows_changed(cursor, connection.deployment, tenant_id)
    return deleted


def tenant_limit_use(
    connection: DeploymentConnection, tenant_id: str | None = None, *, limit: int = 10_000
) -> list[LimitUse]:
    """The rows (of ``tenant_id``, or the first ``limit`` of every tenant) with what each
    holds back now."""
    with connection.cursor() as cursor:
        cursor.execute(
            TENANT_LIMIT_USE,
            {"deployment": connection.deployment, "tenant_id": tenant_id, "limit": limit},
        )
        return [
            LimitUse(_limit(row[:9]), int(row[9]), row[10], row[12], row[13])
            for row in cursor.fetchall()
        ]


def tenant_running(connection: DeploymentConnection, tenant_id: str) -> LimitUse:
    """A tenant's live leases and its last throttle, as a ``LimitUse`` of a row that limits
    nothing (the defaults' view of a tenant without rows)."""
    with connection.cursor() as cursor:
        cursor.execute(
            TENANT_RUNNING, {"deployment": connection.deployment, "tenant_id": tenant_id}
        )
        row = cursor.fetchone()
    assert row is not None
    running, _at, reason, ago = row
    empty = TenantLimit(tenant_id, "*", "*", None, None, None, None)
    return LimitUse(empty, int(running), None, reason, ago)


def tenant_rows_changed(cursor: psycopg.Cursor[Any], deployment: str, tenant_id: str) -> None:
    """What follows a change of ``tenant_id``'s limit rows, in the caller's transaction: the
    next claim of each of its scopes counts its live leases (``TENANT_USAGE_RECOUNT``), and the
    listeners (the workers' ``QuotaWatcher``) hear that ``deployment``'s limits changed when
    the transaction commits."""
    cursor.execute(TENANT_USAGE_RECOUNT, {"deployment": deployment, "tenant_id": tenant_id})
    cursor.execute(TENANTS_CHANGED, {"deployment": deployment})


@dataclass(frozen=True)
class TenantRunning:
    """A tenant with limits of its own: its live leases now and its tenant-wide cap."""

    tenant_id: str
    running: int
    max_running: int | None


def tenant_running_limited(
    connection: DeploymentConnection, *, limit: int = 10_000
) -> list[TenantRunning]:
    """The tenants with a row (the first ``limit``, busiest first): live leases, cap."""
    with connection.cursor() as cursor:
        cursor.execute(
            TENANT_RUNNING_LIMITED, {"deployment": connection.deployment, "limit": limit}
        )
        return [
            TenantRunning(tenant, int(running), cap) for tenant, cap, running in cursor.fetchall()
        ]
