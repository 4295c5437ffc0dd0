"""SQL of periodic schedules (``tenantq_periodic``): one row per schedule name.

Every scheduler (one per ``tenantq worker``) upserts its app's schedules at start and then
advances a due schedule with ``PERIODIC_ADVANCE``, a compare-and-set on ``next_tick``, in
the same transaction as the outbox enqueue of the tick's job: of several schedulers that saw
the same due tick, the first to commit moves ``next_tick`` on and the others match no row
(they wait on its row lock, then re-check), so a tick makes one job or none, never two.

Schedule names are per deployment (the connection's, ``DeploymentConnection``): two
deployments on one database may both have a "nightly-report", each ticking on its own.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from tenantq.store.engine import DeploymentConnection

#: Register a schedule, or refresh its definition. A changed schedule (another interval or
#: cron expression) starts again from ``next_tick`` as the caller computed it from now; an
#: unchanged one keeps its tick, so restarting workers never skips or repeats one.
PERIODIC_UPSERT = """
INSERT INTO tenantq_periodic AS p (deployment, name, job_type, tenant_id, queue, schedule,
                                   catch_up, next_tick)
VALUES (%(deployment)s, %(name)s, %(job_type)s, %(tenant_id)s, %(queue)s, %(schedule)s,
        %(catch_up)s, %(next_tick)s)
ON CONFLICT (deployment, name) DO UPDATE SET
    job_type = excluded.job_type,
    tenant_id = excluded.tenant_id,
    queue = excluded.queue,
    catch_up = excluded.catch_up,
    next_tick = CASE WHEN p.schedule = excluded.schedule THEN p.next_tick
                     ELSE excluded.next_tick END,
    schedule = excluded.schedule,
    updated_at = now()
RETURNING name, next_tick
"""

#: The next tick of each named schedule, and the database's time.
PERIODIC_NEXT_TICKS = """
SELECT name, next_tick, now() FROM tenantq_periodic
WHERE deployment = %(deployment)s AND name = ANY(%(names)s::text[])
"""

#: Compare-and-set: move a due schedule from ``expected`` to ``next_tick``, recording the
#: enqueued tick (``tick`` NULL: a skipped tick, nothing enqueued).
PERIODIC_ADVANCE = """
UPDATE tenantq_periodic
SET next_tick = %(next_tick)s,
    last_tick = coalesce(%(tick)s, last_tick),
    last_job_id = coalesce(%(job_id)s, last_job_id),
    updated_at = now()
WHERE deployment = %(deployment)s AND name = %(name)s AND next_tick = %(expected)s
  AND next_tick <= now()
RETURNING name
"""

PERIODIC_LIST = """
SELECT name, job_type, tenant_id, queue, schedule, catch_up, last_tick, last_job_id,
       next_tick, updated_at
FROM tenantq_periodic WHERE deployment = %(deployment)s ORDER BY name
"""


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """One row of ``tenantq_periodic``."""

    name: str
    job_type: str
    tenant_id: str
    queue: str
    schedule: str
    catch_up: bool
    last_tick: dt.datetime | None
    last_job_id: uuid.UUID | None
    next_tick: dt.datetime
    updated_at: dt.datetime


def periodic_upsert(
    connection: DeploymentConnection,
    *,
    name: str,
    job_type: str,
    tenant_id: str,
    queue: str,
    schedule: str,
    catch_up: bool,
    next_tick: dt.datetime,
) -> dt.datetime:
    """Register or refresh a schedule, committed; returns its next tick."""
    parameters = {
        "deployment": connection.deployment,
        "name": name,
        "job_type": job_type,
        "tenant_id": tenant_id,
        "queue": queue,
        "schedule": schedule,
        "catch_up": catch_up,
        "next_tick": next_tick,
    }
    with connection.transaction(), connection.cursor() as cursor:
        cursor.execute(PERIODIC_UPSERT, parameters)
        row = cursor.fetchone()
    assert row is not None
    next_value: dt.datetime = row[1]
    return next_value


def periodic_next_ticks(
    connection: DeploymentConnection, names: Sequence[str]
) -> tuple[dict[str, dt.datetime], dt.datetime]:
    """({name: next tick}, the database's now)."""
    parameters = {"deployment": connection.deployment, "names": list(names)}
    with connection.transaction(), connection.cursor() as cursor:
        cursor.execute(PERIODIC_NEXT_TICKS, parameters)
        rows = cursor.fetchall()
        if not rows:
            cursor.execute("SELECT now()")
            now_row = cursor.fetchone()
            assert now_row is not None
            return {}, now_row[0]
    return {row[0]: row[1] for row in rows}, rows[0][2]


def periodic_advance(
    connection: DeploymentConnection,
    *,
    name: str,
    expected: dt.datetime,
    next_tick: dt.datetime,
    tick: dt.datetime | None,
    job_id: uuid.UUID | None,
) -> bool:
    """The compare-and-set, in the caller's transaction; True when this caller won."""
    cursor = connection.execute(
        PERIODIC_ADVANCE,
        {
            "deployment": connection.deployment,
            "name": name,
            "expected": expected,
            "next_tick": next_tick,
            "tick": tick,
            "job_id": job_id,
        },
    )
    return cursor.fetchone() is not None


def periodic_list(connection: DeploymentConnection) -> list[ScheduleRow]:
    """Every schedule of the deployment, by name."""
    with connection.cursor() as cursor:
        cursor.execute(PERIODIC_LIST, {"deployment": connection.deployment})
        return [ScheduleRow(*row) for row in cursor.fetchall()]
