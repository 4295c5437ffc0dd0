"""Guarantee: a claim that waits in the database does not hold up the worker's next claim.

The claims lane runs one claim per connection (``worker.claim_connections``, 2 by default):
while one claim's commit waits (for the WAL to reach the disk, or here for another
transaction's row), the next runs on the other connection. Each claim is its own
transaction and is answered only once committed, so a job still starts only behind a durable
lease. With one connection the next claim waits for the first: the contrast shows the test
can fail.
"""

from __future__ import annotations

import queue
import time
from typing import Any

import psycopg
import pytest
from support import new_claim_requests

import tenantq
from tenantq.consumer.database_health import DatabaseHealth
from tenantq.consumer.ledger import Claim, ClaimSettings, Ledger, Operation
from tenantq.store.engine import psycopg_url
from tenantq.store.job_store import JobStore

OWNER = "w-overlap-test"
SETTINGS = ClaimSettings(lease_seconds=30, stale_owner_seconds=60, crash_budget=3)

INSERT_UNCOMMITTED = (
    "INSERT INTO tenantq_jobs (id, deployment, queue, job_type, tenant_id, partition_key, "
    "state, payload, payload_sha256, max_attempts) VALUES (%s, %s, 'default', 'export', "
    "'acme', 'acme', 'runnable', %s, %s, 3)"
)


def _answer(finished: queue.SimpleQueue[Operation[Any, Any]], timeout: float) -> Claim | None:
    try:
        operation = finished.get(timeout=timeout)
    except queue.Empty:
        return None
    assert isinstance(operation, Claim)
    return operation


@pytest.mark.parametrize("connections", [2, 1])
def test_the_next_claim_runs_while_one_waits_in_the_database(
    database_settings: tenantq.Settings, connections: int
) -> None:
    ledger = Ledger(
        lambda lane: JobStore.open(database_settings, OWNER, role=f"worker-{lane}"),
        DatabaseHealth(),
        claim_connections=connections,
    )
    ledger.start()
    waiting_request, next_request = new_claim_requests("acme", 2)
    try:
        # Another transaction is inserting the first job's row: a claim of it waits for that
        # transaction to end (whether the row will exist decides what the claim does).
        with psycopg.connect(psycopg_url(database_settings.require_database_url())) as holder:
            holder.execute(
                INSERT_UNCOMMITTED,
                (
                    waiting_request.job_id,
                    database_settings.topic_prefix,
                    waiting_request.payload,
                    waiting_request.payload_sha256,
                ),
            )
            ledger.claims.submit(Claim([waiting_request], settings=SETTINGS))
            time.sleep(0.3)  # the first claim is in the database, waiting
            ledger.claims.submit(Claim([next_request], settings=SETTINGS))
            answered = _answer(ledger.finished, timeout=5.0)
            if connections == 1:
                assert answered is None  # behind the waiting claim
            else:
                assert answered is not None and answered.rows == [next_request]
                assert answered.answer is not None
                assert set(answered.answer.leases) == {next_request.job_id}
                assert ledger.claims.pending == 1  # the first still waits
            holder.rollback()
        leased = {}
        for operation in [answered] if answered is not None else []:
            assert operation.answer is not None
            leased.update(operation.answer.leases)
        while len(leased) < 2:
            operation = _answer(ledger.finished, timeout=10.0)
            assert operation is not None and operation.answer is not None
            leased.update(operation.answer.leases)
        # Both leased to us, each once, and durable: another connection sees them.
        assert set(leased) == {waiting_request.job_id, next_request.job_id}
        assert all(lease.attempt == 1 for lease in leased.values())
        with psycopg.connect(psycopg_url(database_settings.require_database_url())) as reader:
            rows = reader.execute(
                "SELECT count(*) FROM tenantq_jobs WHERE id = ANY(%s) AND state = 'leased'"
                " AND lease_owner = %s",
                ([waiting_request.job_id, next_request.job_id], OWNER),
            ).fetchone()
        assert rows is not None and rows[0] == 2
    finally:
        ledger.stop(5.0)
