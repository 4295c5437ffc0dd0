"""SQL of the tenants' shares of fair queues (``tenantq_tenant_shares``), for the workers'
``ShareSync`` (``tenantq.quotas.shares``), run with psycopg 3.

A worker adds the starts it made since its last sync to each tenant's virtual time (starts
divided by weight), raised first to within ``window`` of the slowest competitor it saw (no
credit for time spent below one's share), and marks the tenants of which it holds more than it
may start as backlogged; then it reads the virtual times of its fair queues' tenants.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tenantq.store.engine import DeploymentConnection

#: Add each tenant's starts (``starts`` / ``weights``) to its virtual time, raised first to
#: ``floors`` (the slowest competitor's time; NULL: none seen) less ``window``. A new row's
#: insert value is what it starts from; the update reads the starts back out of it.
SHARES_ADD = """
INSERT INTO tenantq_tenant_shares AS s (deployment, queue, tenant_id, weight, virtual_time,
                                        floor_time, backlogged_at, throttled_at, updated_at)
SELECT %(deployment)s, d.queue, d.tenant_id, d.weight,
       greatest(0, d.floor - %(window)s) + d.starts::float8 / d.weight, d.floor,
       CASE WHEN d.backlogged THEN now() END, CASE WHEN d.held THEN now() END, now()
FROM unnest(%(queues)s::text[], %(tenants)s::text[], %(weights)s::int[], %(starts)s::int[],
            %(floors)s::float8[], %(backlogged)s::bool[], %(held)s::bool[])
    AS d(queue, tenant_id, weight, starts, floor, backlogged, held)
-- One order for every worker: rows are locked as they are upserted.
ORDER BY d.tenant_id COLLATE "C", d.queue COLLATE "C"
ON CONFLICT (deployment, queue, tenant_id) DO UPDATE SET
    weight = excluded.weight,
    virtual_time = greatest(s.virtual_time, excluded.floor_time - %(window)s)
                   + excluded.virtual_time - greatest(0, excluded.floor_time - %(window)s),
    floor_time = excluded.floor_time,
    backlogged_at = coalesce(excluded.backlogged_at, s.backlogged_at),
    throttled_at = coalesce(excluded.throttled_at, s.throttled_at),
    updated_at = excluded.updated_at
"""

#: The tenants of ``queues`` written in the last ``recent_seconds`` (a tenant not seen since
#: starts level with the others: ``lift``), each with whether it competes now.
SHARES_OF_QUEUES = """
SELECT queue, tenant_id, virtual_time,
       coalesce(backlogged_at > now() - make_interval(secs => %(competing_seconds)s), false)
FROM tenantq_tenant_shares
WHERE deployment = %(deployment)s AND queue = ANY(%(queues)s::text[])
  AND updated_at > now() - make_interval(secs => %(recent_seconds)s)
"""


@dataclass(frozen=True)
class ShareChange:
    """A worker's news of one tenant of a fair queue since its last sync."""

    queue: str
    tenant_id: str
    weight: int
    starts: int
    #: The slowest competitor's virtual time the worker saw (None: none).
    floor: float | None
    #: The worker holds more of it than it may start.
    backlogged: bool
    #: Its share held one of its jobs back.
    held: bool


@dataclass(frozen=True)
class TenantShare:
    queue: str
    tenant_id: str
    virtual_time: float
    competing: bool


def shares_add(
    connection: DeploymentConnection, changes: Sequence[ShareChange], window: float
) -> None:
    """Write ``changes`` (in one statement, each row under its lock until the commit); a
    virtual time is raised to within ``window`` of the floor first."""
    if not changes:
        return
    columns: dict[str, list[Any]] = {
        name: [getattr(change, attribute) for change in changes]
        for name, attribute in (
            ("queues", "queue"),
            ("tenants", "tenant_id"),
            ("weights", "weight"),
            ("starts", "starts"),
            ("floors", "floor"),
            ("backlogged", "backlogged"),
            ("held", "held"),
        )
    }
    with connection.cursor() as cursor:
        cursor.execute(
            SHARES_ADD, {"deployment": connection.deployment, "window": window, **columns}
        )


def shares_of_queues(
    connection: DeploymentConnection,
    queues: Sequence[str],
    *,
    competing_seconds: float,
    recent_seconds: float,
) -> list[TenantShare]:
    """The recent tenants of ``queues`` with their virtual times."""
    with connection.cursor() as cursor:
        cursor.execute(
            SHARES_OF_QUEUES,
            {
                "deployment": connection.deployment,
                "queues": list(queues),
                "competing_seconds": competing_seconds,
                "recent_seconds": recent_seconds,
            },
        )
        return [TenantShare(q, t, float(v), bool(c)) for q, t, v, c in cursor.fetchall()]
