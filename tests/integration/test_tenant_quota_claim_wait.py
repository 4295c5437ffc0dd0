"""Guarantee: a limited claim that waited for another claim's lock on a usage row lets start
only what the row that claim left allows, not what its own snapshot (taken before that claim
committed) saw: a cap and a rate stay exact while two claims of one tenant overlap."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from support import new_claim_requests, wait_for

import tenantq
from tenantq.quotas.tenants import Tenants
from tenantq.store import quota_claim
from tenantq.store.binary_arrays import UuidArray
from tenantq.store.engine import connect, psycopg_url
from tenantq.store.job_store import JobStore, job_row_arrays
from tenantq.store.quota_claim import ClaimQuotas
from tenantq.tenant_limits import ThrottleReason

LEASE_SECONDS = 600.0
PAYLOAD = b"{}"
TENANT = "acme"
WAITING_CLAIM = "tenantq-test-waiting-claim"


@pytest.fixture
def store(database_settings: tenantq.Settings) -> Iterator[JobStore]:
    job_store = JobStore(
        lambda: connect(
            database_settings, autocommit=True, generic_plans=True, application_name=WAITING_CLAIM
        ),
        "claim-wait-owner",
        deployment=database_settings.topic_prefix,
    )
    yield job_store
    job_store.close()


QUOTAS = ClaimQuotas(limited_tenants={TENANT})


def claim(store: JobStore, count: int) -> tuple[int, set[ThrottleReason]]:
    leases, throttles = store.claim_batch_limited(
        new_claim_requests(TENANT, count), QUOTAS, LEASE_SECONDS, 30.0, 3
    )
    return len(leases), {throttle.reason for throttle in throttles.values()}


def claim_uncommitted(connection: psycopg.Connection[Any], deployment: str, count: int) -> int:
    """A limited claim of ``count`` jobs in ``connection``'s open transaction (its row locks
    held until the caller commits); returns the jobs it leased."""
    requests = new_claim_requests(TENANT, count)
    parameters = {
        **job_row_arrays(requests),
        "owner": "claim-first-owner",
        "deployment": deployment,
        "lease_seconds": LEASE_SECONDS,
        "stale_owner_seconds": 30.0,
        "crash_budget": 3,
        "adoptable": UuidArray([]),
        **QUOTAS.parameters(requests),
    }
    rows = connection.execute(
        quota_claim.JOB_CLAIM_BATCH_LIMITED, parameters, binary=True
    ).fetchall()
    return sum(1 for row in rows if row[8] is None)


def overlapping(
    settings: tenantq.Settings, store: JobStore, first: int, second: int
) -> tuple[int, set[ThrottleReason]]:
    """A claim of ``first`` jobs holds the tenant's usage row while a claim of ``second``
    takes its snapshot and waits for the lock; the first commits: the second's answer."""
    answer: list[tuple[int, set[ThrottleReason]]] = []
    with psycopg.connect(psycopg_url(settings.require_database_url())) as holder:
        assert claim_uncommitted(holder, settings.topic_prefix, first) == first
        waiting = threading.Thread(target=lambda: answer.append(claim(store, second)))
        waiting.start()
        with psycopg.connect(
            psycopg_url(settings.require_database_url()), autocommit=True
        ) as watcher:
            wait_for(
                lambda: (
                    watcher.execute(
                        "SELECT count(*) FROM pg_stat_activity"
                        " WHERE application_name = %s AND wait_event_type = 'Lock'",
                        [WAITING_CLAIM],
                    ).fetchone()
                    == (1,)
                ),
                timeout=30,
                what="the second claim waiting for the first's row lock",
            )
        holder.commit()
        waiting.join(30)
    assert answer, "the second claim did not finish"
    return answer[0]


def running(settings: tenantq.Settings) -> int:
    with psycopg.connect(psycopg_url(settings.require_database_url())) as connection:
        row = connection.execute(
            "SELECT count(*) FROM tenantq_jobs WHERE deployment = %s AND tenant_id = %s"
            " AND state = 'leased' AND lease_until > now()",
            [settings.topic_prefix, TENANT],
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_cap_holds_when_a_claim_waited_for_another(
    database_settings: tenantq.Settings, store: JobStore
) -> None:
    Tenants(settings=database_settings).set(TENANT, max_running=10)
    assert claim(store, 1) == (1, set())  # the usage row exists: the snapshot reads it
    # The second claim's snapshot has 1 running and room for 6; the first took 5 of it.
    assert overlapping(database_settings, store, 5, 6) == (4, {ThrottleReason.MAX_RUNNING})
    assert running(database_settings) == 10
    assert claim(store, 1) == (0, {ThrottleReason.MAX_RUNNING})


def test_a_cap_holds_when_two_first_claims_overlap(
    database_settings: tenantq.Settings, store: JobStore
) -> None:
    # Neither claim's snapshot has a usage row: the second's insert meets the first's row.
    Tenants(settings=database_settings).set(TENANT, max_running=10)
    assert overlapping(database_settings, store, 7, 7) == (3, {ThrottleReason.MAX_RUNNING})
    assert running(database_settings) == 10


def test_a_rate_holds_when_a_claim_waited_for_another(
    database_settings: tenantq.Settings, store: JobStore
) -> None:
    # One start per 100 s: no start comes due while the test runs.
    Tenants(settings=database_settings).set(TENANT, rate=0.01, burst=5)
    assert claim(store, 1) == (1, set())
    # The second claim's snapshot has 4 of the burst left; the first took 3 of them.
    assert overlapping(database_settings, store, 3, 4) == (1, {ThrottleReason.RATE})
    assert claim(store, 1) == (0, {ThrottleReason.RATE})
