"""SQL of retention: delete finished jobs (with their attempt rows) and gone workers.

Each statement deletes one bounded batch, oldest finished first, in its own short
transaction, so a large backlog never holds locks or bloats one transaction. The WHERE
clause is the whole rule: only terminal states (``finished_at`` is set exactly then, a CHECK
constraint says so), each older than its own age; a state without an age (NULL) is kept.
Rows are locked ``SKIP LOCKED``: a job that a replay is reviving right now is left alone.
A prune deletes the rows of the connection's deployment only (``DeploymentConnection``), by
its own retention policy: deployments sharing a database each prune their own.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from tenantq.store.engine import DeploymentConnection

#: The terminal states a prune deletes, in the order ``tenantq prune`` reports them.
PRUNED_STATES = ("succeeded", "dead", "canceled")

_DOOMED = """
    SELECT id, state FROM tenantq_jobs
    WHERE deployment = %(deployment)s AND finished_at IS NOT NULL
      AND ((state = 'succeeded' AND finished_at < now() - make_interval(secs => %(succeeded)s))
        OR (state = 'dead' AND finished_at < now() - make_interval(secs => %(dead)s))
        OR (state = 'canceled' AND finished_at < now() - make_interval(secs => %(canceled)s)))
"""

#: Delete one batch of finished jobs and their attempts; counts per state, and attempts (the
#: log's rows, and the successes recorded on the job rows themselves, migration 0008).
JOB_PRUNE_BATCH = f"""
WITH doomed AS (
    {_DOOMED}
    ORDER BY finished_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
attempts AS (
    DELETE FROM tenantq_attempt_log a USING doomed d WHERE a.job_id = d.id RETURNING 1
),
jobs AS (
    DELETE FROM tenantq_jobs j USING doomed d
    WHERE j.id = d.id AND j.state IN ('succeeded', 'dead', 'canceled')
    RETURNING j.state::text AS state, j.success_worker_id IS NOT NULL AS success_on_row
)
SELECT state, count(*)::bigint,
       ((SELECT count(*) FROM attempts)
        + (SELECT count(*) FROM jobs WHERE success_on_row))::bigint
FROM jobs GROUP BY state
"""  # noqa: S608 - fixed text; every value is a parameter

#: What ``JOB_PRUNE_BATCH`` would delete, all batches together (``--dry-run``, progress). The
#: attempts are counted through the view of migration 0008 (log rows and recorded successes).
JOB_PRUNE_PREVIEW = f"""
WITH doomed AS ({_DOOMED})
SELECT d.state::text, count(*)::bigint,
       coalesce(sum((SELECT count(*) FROM tenantq_job_attempts a WHERE a.job_id = d.id)),
                0)::bigint
FROM doomed d GROUP BY d.state
"""  # noqa: S608 - fixed text; every value is a parameter

#: Worker rows that stopped (or, crashed, last heartbeated) longer ago than the age.
WORKER_PRUNE = """
DELETE FROM tenantq_workers
WHERE deployment = %(deployment)s
  AND coalesce(stopped_at, heartbeat_at) < now() - make_interval(secs => %(older)s)
RETURNING id
"""


@dataclass
class Pruned:
    """Jobs deleted (or, in a dry run, that would be) by state, and their attempt rows."""

    jobs: dict[str, int] = field(default_factory=dict)
    attempts: int = 0

    @property
    def total(self) -> int:
        return sum(self.jobs.values())

    def add(self, other: Pruned) -> None:
        for state, count in other.jobs.items():
            self.jobs[state] = self.jobs.get(state, 0) + count
        self.attempts += other.attempts


def _ages(connection: DeploymentConnection, ages: dict[str, dt.timedelta | None]) -> dict[str, Any]:
    """The parameters of ``_DOOMED``: the deployment and each state's age in seconds."""
    found: dict[str, Any] = {
        state: None if (age := ages.get(state)) is None else age.total_seconds()
        for state in PRUNED_STATES
    }
    found["deployment"] = connection.deployment
    return found


def job_prune_batch(
    connection: DeploymentConnection, ages: dict[str, dt.timedelta | None], limit: int
) -> Pruned:
    """Delete up to ``limit`` finished jobs older than their state's age, committed."""
    with connection.transaction(), connection.cursor() as cursor:
        cursor.execute(JOB_PRUNE_BATCH, {**_ages(connection, ages), "limit": limit})
        rows = cursor.fetchall()
    pruned = Pruned()
    for state, count, attempts in rows:
        pruned.jobs[state] = int(count)
        pruned.attempts = int(attempts)
    return pruned


def job_prune_preview(
    connection: DeploymentConnection, ages: dict[str, dt.timedelta | None]
) -> Pruned:
    """What pruning with ``ages`` would delete now."""
    with connection.transaction(), connection.cursor() as cursor:
        cursor.execute(JOB_PRUNE_PREVIEW, _ages(connection, ages))
        rows = cursor.fetchall()
    pruned = Pruned()
    for state, count, attempts in rows:
        pruned.jobs[state] = int(count)
        pruned.attempts += int(attempts)
    return pruned


def worker_prune(connection: DeploymentConnection, older: dt.timedelta) -> int:
    """Delete worker rows gone longer than ``older``, committed; returns how many."""
    parameters = {"deployment": connection.deployment, "older": older.total_seconds()}
    with connection.transaction(), connection.cursor() as cursor:
        cursor.execute(WORKER_PRUNE, parameters)
        return cursor.rowcount
