"""Guarantee: a tenant's running cap holds at the claim whatever happened while the tenant had no
cap: jobs started by plain claims in between (its row cleared, then set again) count against
the cap set again, and no job of the tenant starts while they run at or above it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support import new_claim_requests

import tenantq
from tenantq.quotas.tenants import Tenants
from tenantq.store.engine import connect
from tenantq.store.job_store import JobStore
from tenantq.store.quota_claim import ClaimQuotas
from tenantq.tenant_limits import ThrottleReason

LEASE_SECONDS = 600.0
PAYLOAD = b"{}"


@pytest.fixture
def store(database_settings: tenantq.Settings) -> Iterator[JobStore]:
    job_store = JobStore(
        lambda: connect(database_settings, generic_plans=True),
        "claim-test-owner",
        deployment=database_settings.topic_prefix,
    )
    yield job_store
    job_store.close()


def claim_limited(store: JobStore, tenant: str, count: int) -> tuple[int, set[ThrottleReason]]:
    """(jobs leased, reasons of those held back) of a limited claim of ``count`` new jobs."""
    leases, throttles = store.claim_batch_limited(
        new_claim_requests(tenant, count),
        ClaimQuotas(limited_tenants={tenant}),
        LEASE_SECONDS,
        30.0,
        3,
    )
    return len(leases), {throttle.reason for throttle in throttles.values()}


def test_a_cap_set_again_counts_the_jobs_started_while_it_was_cleared(
    database_settings: tenantq.Settings, store: JobStore
) -> None:
    tenants = Tenants(settings=database_settings)
    tenants.set("acme", max_running=10)
    assert claim_limited(store, "acme", 2) == (2, set())  # far below the cap: no count needed

    tenants.clear("acme")
    # Without a row the tenant's jobs take the plain claim, which keeps no usage.
    assert len(store.claim_batch(new_claim_requests("acme", 20), LEASE_SECONDS, 30.0, 3)) == 20

    tenants.set("acme", max_running=10)
    # 22 run: the cap set again admits none until fewer than 10 do.
    assert claim_limited(store, "acme", 3) == (0, {ThrottleReason.MAX_RUNNING})


def test_a_cap_raised_and_lowered_stays_exact(
    database_settings: tenantq.Settings, store: JobStore
) -> None:
    tenants = Tenants(settings=database_settings)
    tenants.set("acme", max_running=4)
    assert claim_limited(store, "acme", 6) == (4, {ThrottleReason.MAX_RUNNING})
    tenants.set("acme", max_running=7)
    assert claim_limited(store, "acme", 6) == (3, {ThrottleReason.MAX_RUNNING})
    tenants.set("acme", max_running=5)
    assert claim_limited(store, "acme", 1) == (0, {ThrottleReason.MAX_RUNNING})
