"""Rows for scheduled jobs: a job enqueued with a future ``run_after`` waits in a retry tier;
its row says ``pending`` (with the due time) from the moment Kafka holds it, so stats count it
and an operator can cancel it before it runs. The worker's claim leases it once due."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

#: Insert the pending rows of a batch; a row that exists already (the job is known: claimed,
#: canceled, or a retried enqueue) is left as it is.
JOB_INSERT_PENDING = """
INSERT INTO tenantq_jobs (id, queue, job_type, tenant_id, partition_key, state, payload,
                          payload_sha256, max_attempts, run_after, idempotency_key,
                          origin_topic, origin_partition, origin_offset, enqueued_at)
SELECT id, queue, job_type, tenant_id, partition_key, 'pending', payload, payload_sha256,
       max_attempts, run_after, idempotency_key, origin_topic, origin_partition, origin_offset,
       enqueued_at
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


@dataclass(frozen=True, slots=True)
class PendingRow:
    job_id: uuid.UUID
    queue: str
    job_type: str
    tenant_id: str
    partition_key: str
    payload: bytes
    payload_sha256: bytes
    max_attempts: int
    run_after: dt.datetime
    idempotency_key: str | None
    origin_topic: str
    origin_partition: int
    origin_offset: int
    enqueued_at: dt.datetime


def insert_pending(connection: psycopg.Connection[Any], rows: Sequence[PendingRow]) -> int:
    """Insert ``rows`` as pending jobs in one statement; returns how many were new."""
    if not rows:
        return 0
    parameters = {
        "ids": [r.job_id for r in rows],
        "queues": [r.queue for r in rows],
        "job_types": [r.job_type for r in rows],
        "tenant_ids": [r.tenant_id for r in rows],
        "partition_keys": [r.partition_key for r in rows],
        "payloads": [r.payload for r in rows],
        "payload_hashes": [r.payload_sha256 for r in rows],
        "max_attempts": [r.max_attempts for r in rows],
        "run_afters": [r.run_after for r in rows],
        "idempotency_keys": [r.idempotency_key for r in rows],
        "origin_topics": [r.origin_topic for r in rows],
        "origin_partitions": [r.origin_partition for r in rows],
        "origin_offsets": [r.origin_offset for r in rows],
        "enqueued_ats": [r.enqueued_at for r in rows],
    }
    with connection.transaction(), connection.cursor() as cursor:
        cursor.execute(JOB_INSERT_PENDING, parameters)
        return cursor.rowcount
