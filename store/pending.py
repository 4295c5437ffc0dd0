"""Rows for scheduled jobs: a job enqueued with a future ``run_after`` waits in a retry tier;
its row says ``pending`` (with the due time) from the moment Kafka holds it, so stats count it
and an operator can cancel it before it runs. The worker's claim leases it once due. Rows
are the connection's deployment's; an id another deployment holds is left as it is."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from tenantq.store.engine import DeploymentConnection
from tenantq.store.job_store import ClaimRequest, job_row_arrays

#: Insert the pending rows of a batch; a row that exists already (the job is known: claimed,
#: canceled, or a retried enqueue) is left as it is.
JOB_INSERT_PENDING = """
INSERT INTO tenantq_jobs (id, deployment, queue, job_type, tenant_id, partition_key, state,
                          payload, payload_sha256, max_attempts, run_after, idempotency_key,
                          origin_topic, origin_partition, origin_offset, enqueued_at)
SELECT id, %(deployment)s, queue, job_type, tenant_id, partition_key, 'pending', payload,
       payload_sha256, max_attempts, run_after, idempotency_key, origin_topic, origin_partition,
       origin_offset, enqueued_at
FROM unnest(
    %(ids)s::uuid[], %(queues)s::text[], %(job_types)s::text[], %(tenant_ids)s::text[],
    %(partition_keys)s::text[], %(payloads)s::bytea[], %(payload_hashes)s::bytea[],
    %(max_attempts)s::int[], %(run_afters)s::timestamptz[], %(idempotency_keys)s::text[],
    %(origin_topics)s::text[], %(origin_partitions)s::int[], %(origin_offsets)s::bigint[],
    %(enqueued_ats)s::timestamptz[]
) AS t(id, queue, job_type, tenant_id, partition_key, payload, payload_sha256, max_attempts,
       run_after, idempotency_key, origin_topic, origin_partition, origin_offset, enqueued_at)
ON CONFLICT DO NOTHING
"""


def insert_pending(
    connection: DeploymentConnection,
    rows: Sequence[ClaimRequest],
    run_afters: Sequence[dt.datetime],
) -> int:
    """Insert ``rows`` as pending jobs due at ``run_afters``, in one statement; returns how
    many were new."""
    if not rows:
        return 0
    parameters = {
        **job_row_arrays(rows),
        "run_afters": list(run_afters),
        "deployment": connection.deployment,
    }
    with connection.transaction(), connection.cursor() as cursor:
        cursor.execute(JOB_INSERT_PENDING, parameters)
        return cursor.rowcount
