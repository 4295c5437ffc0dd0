"""Operator actions on single jobs (`tenantq jobs show | cancel`), of the connection's
deployment only: another deployment's job id is not found (and not canceled)."""

from __future__ import annotations

import uuid
from typing import Any

from psycopg.rows import dict_row

from tenantq.store import statements
from tenantq.store.engine import DeploymentConnection


def cancel_job(
    connection: DeploymentConnection,
    job_id: uuid.UUID,
    queue: str,
    *,
    create_unseen: bool = True,
) -> str | None:
    """Request cancellation. Returns the job's state afterwards: ``canceled`` when it had not
    started (or no worker had seen it yet), ``leased`` when a running job was asked to stop,
    None when it had already ended, or has no row and ``create_unseen`` is false (then
    nothing is written)."""
    with connection.transaction(), connection.cursor() as cursor:
        cursor.execute(
            statements.JOB_CANCEL,
            {
                "id": job_id,
                "queue": queue,
                "deployment": connection.deployment,
                "create_unseen": create_unseen,
            },
        )
        row = cursor.fetchone()
    return None if row is None else str(row[1])


def get_job(connection: DeploymentConnection, job_id: uuid.UUID) -> dict[str, Any] | None:
    with connection.cursor(row_factory=dict_row) as cursor:
        cursor.execute(statements.JOB_GET, {"id": job_id, "deployment": connection.deployment})
        return cursor.fetchone()


def list_attempts(connection: DeploymentConnection, job_id: uuid.UUID) -> list[dict[str, Any]]:
    with connection.cursor(row_factory=dict_row) as cursor:
        cursor.execute(statements.ATTEMPT_LIST, {"id": job_id, "deployment": connection.deployment})
        return cursor.fetchall()
