"""Read-only statements over an explicit set of jobs (those one demo run enqueued), so runs
that share a database never see each other's jobs (and of the connection's deployment only).

Named, noun-first, one function each, parameterised; run them on an autocommit connection
so ``now()`` is fresh. Jobs are found by primary key (``id = ANY(...)``), a few thousand ids
per call: an index scan, cheap at the demo's sampling rate.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tenantq.store.engine import DeploymentConnection

#: Jobs by state, with the retries they took (attempts past the first).
JOB_SET_STATE_COUNTS = """
SELECT state::text, count(*)::bigint, coalesce(sum(greatest(attempts - 1, 0)), 0)::bigint
FROM tenantq_jobs
WHERE id = ANY(%(ids)s::uuid[]) AND deployment = %(deployment)s
GROUP BY state
"""

#: Seconds since the oldest due, unfinished job of the set could have run; NULL: none due.
JOB_SET_OLDEST_RUNNABLE_AGE = """
SELECT extract(epoch FROM greatest(now() - min(run_after), interval '0'))::float8
FROM tenantq_jobs
WHERE id = ANY(%(ids)s::uuid[]) AND deployment = %(deployment)s
  AND state IN ('pending', 'runnable', 'retrying')
  AND run_after <= now()
"""

#: One row per job: where it ended and when (epoch seconds, database clock for finished).
JOB_SET_OUTCOMES = """
SELECT id, tenant_id, job_type, state::text, attempts, last_error_class,
       extract(epoch FROM enqueued_at)::float8,
       extract(epoch FROM started_at)::float8,
       extract(epoch FROM finished_at)::float8
FROM tenantq_jobs
WHERE id = ANY(%(ids)s::uuid[]) AND deployment = %(deployment)s
"""


@dataclass(frozen=True)
class JobSetCounts:
    """How many jobs of the set are in each state, and the retries they took."""

    by_state: dict[str, int]
    retries: int

    @property
    def seen(self) -> int:
        """Jobs a worker has recorded (the others are still only in Kafka)."""
        return sum(self.by_state.values())

    @property
    def terminal(self) -> int:
        return sum(self.by_state.get(state, 0) for state in ("succeeded", "dead", "canceled"))


@dataclass(frozen=True)
class JobOutcome:
    """One job's final facts, for latency and outcome summaries."""

    job_id: uuid.UUID
    tenant: str
    job_type: str
    state: str
    attempts: int
    last_error_class: str | None
    enqueued_at: float | None
    started_at: float | None
    finished_at: float | None


def _parameters(connection: DeploymentConnection, job_ids: Sequence[uuid.UUID]) -> dict[str, Any]:
    return {"ids": list(job_ids), "deployment": connection.deployment}


def job_set_state_counts(
    connection: DeploymentConnection, job_ids: Sequence[uuid.UUID]
) -> JobSetCounts:
    """Counts by state of the jobs in ``job_ids`` that the store knows."""
    with connection.cursor() as cursor:
        cursor.execute(JOB_SET_STATE_COUNTS, _parameters(connection, job_ids))
        rows = cursor.fetchall()
    return JobSetCounts(
        by_state={state: int(count) for state, count, _ in rows},
        retries=sum(int(retries) for _, _, retries in rows),
    )


def job_set_oldest_runnable_age(
    connection: DeploymentConnection, job_ids: Sequence[uuid.UUID]
) -> float | None:
    """Age in seconds of the oldest due, unfinished job of the set (None: none is due)."""
    with connection.cursor() as cursor:
        cursor.execute(JOB_SET_OLDEST_RUNNABLE_AGE, _parameters(connection, job_ids))
        row = cursor.fetchone()
    return None if row is None or row[0] is None else float(row[0])


def job_set_outcomes(
    connection: DeploymentConnection, job_ids: Sequence[uuid.UUID]
) -> list[JobOutcome]:
    """The final facts of every job of the set the store knows."""
    with connection.cursor() as cursor:
        cursor.execute(JOB_SET_OUTCOMES, _parameters(connection, job_ids))
        return [JobOutcome(*row) for row in cursor.fetchall()]
