"""SQL of the DLQ tools (`tenantq dlq replay | purge`): named statements, one function each.

A replay brings a dead job back with one guarded statement per batch: only rows that are
``dead`` in the queue being replayed, not asked to cancel, and whose payload hash matches the
DLQ record move to ``runnable`` (the ``dead -> runnable`` transition of
``tenantq.states.TRANSITIONS``). Every other row is reported as it is, so the caller can say
why it was skipped. The same query without the update serves dry runs.

Only the connection's deployment's rows are found (``DeploymentConnection``): a DLQ record
that names another deployment's job is reported as having no row, and left alone. Audit rows
are the deployment's too.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from tenantq.store.engine import DeploymentConnection

#: Bring a batch of dead jobs back: attempts start again from zero (the claim takes a lease
#: only while attempts < max_attempts), run_after is now so the claim finds the job due,
#: finished_at is cleared (the CHECK constraint wants it NULL outside terminal states) and
#: last_error_* are kept so the operator still sees why it died. The outer SELECT sees the rows
#: as they were before the update (one snapshot), which is what the caller reports.
JOB_REPLAY_BATCH = """
WITH wanted AS (
    SELECT * FROM unnest(%(ids)s::uuid[], %(payload_hashes)s::bytea[]) AS t(id, payload_sha256)
),
revived AS (
    UPDATE tenantq_jobs j
    SET state = 'runnable', attempts = 0, replays = j.replays + 1, finished_at = NULL,
        run_after = now(), lease_owner = NULL, lease_until = NULL, updated_at = now()
    FROM wanted w
    WHERE j.id = w.id AND j.deployment = %(deployment)s AND j.queue = %(queue)s
      AND j.state = 'dead' AND NOT j.cancel_requested
      AND j.payload_sha256 IS NOT DISTINCT FROM w.payload_sha256
    RETURNING j.id, j.replays
)
SELECT w.id AS job_id, j.state::text AS state, j.queue, j.attempts, j.replays,
       coalesce(j.cancel_requested, false) AS cancel_requested,
       j.payload_sha256 IS NOT DISTINCT FROM w.payload_sha256 AS same_payload,
       r.id IS NOT NULL AS revived, r.replays AS replays_after
FROM wanted w
LEFT JOIN tenantq_jobs j ON j.id = w.id AND j.deployment = %(deployment)s
LEFT JOIN revived r ON r.id = w.id
"""

#: What ``JOB_REPLAY_BATCH`` would do, changing nothing (``--dry-run``).
JOB_REPLAY_PREVIEW = """
WITH wanted AS (
    SELECT * FROM unnest(%(ids)s::uuid[], %(payload_hashes)s::bytea[]) AS t(id, payload_sha256)
)
SELECT w.id AS job_id, j.state::text AS state, j.queue, j.attempts, j.replays,
       coalesce(j.cancel_requested, false) AS cancel_requested,
       j.payload_sha256 IS NOT DISTINCT FROM w.payload_sha256 AS same_payload,
       coalesce(j.state = 'dead' AND j.queue = %(queue)s AND NOT j.cancel_requested
                AND j.payload_sha256 IS NOT DISTINCT FROM w.payload_sha256, false) AS revived,
       j.replays + 1 AS replays_after
FROM wanted w
LEFT JOIN tenantq_jobs j ON j.id = w.id AND j.deployment = %(deployment)s
"""

#: Where a batch of jobs stands now (canary checks, purge summaries).
JOB_STATE_SUMMARY = """
SELECT id, state::text, last_error_class, last_error_message
FROM tenantq_jobs WHERE id = ANY(%(ids)s::uuid[]) AND deployment = %(deployment)s
"""

#: One row per replay, purge or dry run: who, when, which filter, how many.
REPLAY_AUDIT_INSERT = """
INSERT INTO tenantq_replay_audit (deployment, actor, queue, action, filter, dry_run, matched,
                                  replayed, job_ids)
VALUES (%(deployment)s, %(actor)s, %(queue)s, %(action)s, %(filter)s, %(dry_run)s,
        %(matched)s, %(replayed)s, %(job_ids)s::uuid[])
RETURNING id
"""


@dataclass(frozen=True, slots=True)
class ReplayRow:
    """The job row of one DLQ record as the replay statement found it (state None: no row)."""

    job_id: uuid.UUID
    state: str | None
    queue: str | None
    attempts: int | None
    replays: int | None
    cancel_requested: bool
    same_payload: bool
    #: The row went (or, in a dry run, would go) from dead to runnable.
    revived: bool
    #: The row's replay count after this replay, when revived.
    replays_after: int | None


@dataclass(frozen=True, slots=True)
class JobSummary:
    """A job's state and last error."""

    job_id: uuid.UUID
    state: str
    error_class: str | None
    error_message: str | None


def job_replay_batch(
    connection: DeploymentConnection,
    queue: str,
    jobs: Sequence[tuple[uuid.UUID, bytes]],
    *,
    dry_run: bool,
) -> dict[uuid.UUID, ReplayRow]:
    """Revive the dead jobs among ``jobs`` (id, payload hash), committed before returning,
    or with ``dry_run`` only say which would be. Every asked id is in the result."""
    if not jobs:
        return {}
    parameters = {
        "deployment": connection.deployment,
        "queue": queue,
        "ids": [job_id for job_id, _ in jobs],
        "payload_hashes": [digest for _, digest in jobs],
    }
    statement = JOB_REPLAY_PREVIEW if dry_run else JOB_REPLAY_BATCH
    # The statements name their columns after ReplayRow's fields.
    with connection.transaction(), connection.cursor(row_factory=class_row(ReplayRow)) as cursor:
        cursor.execute(statement, parameters)
        rows = cursor.fetchall()
    return {row.job_id: row for row in rows}


def job_state_summary(
    connection: DeploymentConnection, job_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, JobSummary]:
    """State and last error of each job that has a row (in the connection's deployment)."""
    if not job_ids:
        return {}
    parameters = {"ids": list(job_ids), "deployment": connection.deployment}
    with connection.transaction(), connection.cursor() as cursor:
        cursor.execute(JOB_STATE_SUMMARY, parameters)
        rows = cursor.fetchall()
    return {row[0]: JobSummary(row[0], row[1], row[2], row[3]) for row in rows}


def replay_audit_insert(
    connection: DeploymentConnection,
    *,
    actor: str,
    queue: str,
    action: str,
    filter_: dict[str, Any],
    dry_run: bool,
    matched: int,
    replayed: int,
    job_ids: Sequence[uuid.UUID],
) -> int:
    """Write one audit row; returns its id."""
    with connection.transaction(), connection.cursor() as cursor:
        cursor.execute(
            REPLAY_AUDIT_INSERT,
            {
                "deployment": connection.deployment,
                "actor": actor,
                "queue": queue,
                "action": action,
                "filter": Jsonb(filter_),
                "dry_run": dry_run,
                "matched": matched,
                "replayed": replayed,
                "job_ids": list(job_ids),
            },
        )
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])
