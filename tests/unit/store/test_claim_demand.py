"""The limited claim's demand parameters: each job of a limited tenant numbered by its demand
key (tenant, queue, job type) in the order the keys first appear, with its place among that
key's jobs; a job of any other tenant with neither; each key with its count."""

from __future__ import annotations

import uuid

from tenantq.store.job_store import ClaimRequest
from tenantq.store.quota_claim import ClaimQuotas


def _job(tenant: str, queue: str = "default", job_type: str = "export") -> ClaimRequest:
    return ClaimRequest(
        job_id=uuid.uuid4(),
        queue=queue,
        job_type=job_type,
        tenant_id=tenant,
        partition_key=tenant,
        payload=b"{}",
        payload_sha256=b"h",
        max_attempts=3,
        idempotency_key=None,
        origin_topic="topic",
        origin_partition=0,
        origin_offset=0,
        enqueued_at=None,
    )


def test_jobs_are_numbered_by_key_and_ranked_within_it() -> None:
    batch = [
        _job("acme"),
        _job("free"),
        _job("acme", job_type="report"),
        _job("acme"),
        _job("initech", queue="bulk"),
        _job("acme", job_type="report"),
        _job("acme"),
    ]
    parameters = ClaimQuotas(limited_tenants={"acme", "initech"}).parameters(batch)
    assert list(parameters["demand_nos"].values) == [1, None, 2, 1, 3, 2, 1]
    assert list(parameters["demand_ranks"].values) == [1, None, 1, 2, 1, 2, 3]
    assert list(parameters["demand_tenants"].values) == ["acme", "acme", "initech"]
    assert list(parameters["demand_queues"].values) == ["default", "default", "bulk"]
    assert list(parameters["demand_job_types"].values) == ["export", "report", "export"]
    assert list(parameters["demand_counts"].values) == [3, 2, 1]


def test_a_batch_without_limited_tenants_has_no_demand() -> None:
    parameters = ClaimQuotas(limited_tenants=frozenset()).parameters([_job("acme")] * 2)
    assert list(parameters["demand_nos"].values) == [None, None]
    assert list(parameters["demand_ranks"].values) == [None, None]
    assert list(parameters["demand_counts"].values) == []
