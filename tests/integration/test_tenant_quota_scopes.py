"""Guarantee: a cap of one queue or one job type of a tenant holds beside the tenant-wide cap in
one claim: a job starts only if every limit that covers it lets it, each limit's room shared
among the batch's jobs it covers in their order, and a job held back says which limit held it."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from support import new_claim_requests

import tenantq
from tenantq.quotas.tenants import Tenants
from tenantq.store.engine import connect
from tenantq.store.job_store import ClaimRequest, JobStore
from tenantq.store.quota_claim import ClaimQuotas
from tenantq.tenant_limits import ThrottleReason

PAYLOAD = b"{}"
TENANT = "acme"


@pytest.fixture
def settings(database_url: str) -> tenantq.Settings:
    return tenantq.Settings(
        database_url=database_url,
        topic_prefix=f"t{uuid.uuid4().hex[:12]}",
        queues={"default": {}, "bulk": {}},
    )


@pytest.fixture
def store(settings: tenantq.Settings) -> Iterator[JobStore]:
    job_store = JobStore(
        lambda: connect(settings, autocommit=True, generic_plans=True),
        "scopes-owner",
        deployment=settings.topic_prefix,
    )
    yield job_store
    job_store.close()


def jobs(count: int, queue: str, job_type: str) -> list[ClaimRequest]:
    return new_claim_requests(TENANT, count, queue=queue, job_type=job_type)


def claim(
    store: JobStore, batch: list[ClaimRequest]
) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str, ThrottleReason]]]:
    """Leased jobs by (queue, job type), and held ones by (queue, job type, reason)."""
    leases, throttles = store.claim_batch_limited(
        batch, ClaimQuotas(limited_tenants={TENANT}), 600.0, 30.0, 3
    )
    by_id = {job.job_id: job for job in batch}
    leased = Counter((by_id[i].queue, by_id[i].job_type) for i in leases)
    held = Counter(
        (by_id[i].queue, by_id[i].job_type, throttle.reason) for i, throttle in throttles.items()
    )
    return leased, held


def test_queue_and_job_type_caps_hold_beside_the_tenant_wide_cap(
    settings: tenantq.Settings, store: JobStore
) -> None:
    tenants = Tenants(settings=settings)
    tenants.set(TENANT, max_running=10)
    tenants.set(TENANT, job_type="report", max_running=2)
    tenants.set(TENANT, queue="bulk", max_running=3)
    batch = jobs(3, "default", "export") + jobs(4, "default", "report") + jobs(4, "bulk", "export")
    leased, held = claim(store, batch)
    # The tenant-wide cap lets 10 of the 11 start: 3 exports, then room for 7 reports (their
    # own cap: 2), then room for 3 of bulk (its own cap: 3).
    assert leased == {("default", "export"): 3, ("default", "report"): 2, ("bulk", "export"): 3}
    assert held == {
        ("default", "report", ThrottleReason.MAX_RUNNING): 2,
        ("bulk", "export", ThrottleReason.MAX_RUNNING): 1,
    }
    # 8 run: the tenant-wide cap has room for 2, the report and bulk caps none.
    leased, held = claim(
        store, jobs(3, "default", "export") + jobs(1, "default", "report") + jobs(1, "bulk", "x")
    )
    assert leased == {("default", "export"): 2}
    assert held == {
        ("default", "export", ThrottleReason.MAX_RUNNING): 1,
        ("default", "report", ThrottleReason.MAX_RUNNING): 1,
        ("bulk", "x", ThrottleReason.MAX_RUNNING): 1,
    }


def test_a_job_type_rate_paces_only_its_own_jobs(
    settings: tenantq.Settings, store: JobStore
) -> None:
    tenants = Tenants(settings=settings)
    # One start per 100 s after the burst: none comes due while the test runs.
    tenants.set(TENANT, job_type="report", rate=0.01, burst=2)
    leased, held = claim(store, jobs(3, "default", "report") + jobs(5, "default", "export"))
    assert leased == {("default", "report"): 2, ("default", "export"): 5}
    assert held == {("default", "report", ThrottleReason.RATE): 1}
