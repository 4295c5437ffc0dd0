"""``RecordingProducer`` checks what ``tenantq.Producer`` checks and records the envelope a
worker would read; an idempotency key names one job; the harness reports and runs the jobs
a handler enqueued through it."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

import fakes
import pytest
from pydantic import BaseModel

import tenantq
from tenantq.errors import JobConflict, PayloadValidationError
from tenantq.testing import JobHarness, RecordingProducer


class Order(BaseModel):
    order: int


@pytest.fixture
def app(tmp_path: Path) -> tenantq.App:
    return tenantq.App(fakes.make_settings(tmp_path))


def test_jobs_are_recorded_as_the_envelope_a_worker_reads(app: tenantq.App) -> None:
    receipt = app.job("receipt", queue="mail", model=Order)(lambda ctx, payload: None)
    recording = RecordingProducer(app)
    ref = receipt.enqueue(recording, tenant="acme", payload=Order(order=1), max_attempts=4)
    by_name = recording.enqueue("receipt", tenant="beta", payload={"order": 2}, delay=60)
    batch = recording.enqueue_batch([receipt.request(tenant="c", payload=Order(order=3))])
    awaited = asyncio.run(recording.enqueue_async("receipt", tenant="d", payload={"order": 4}))
    refs = [ref.result(0), by_name.result(0), *batch.result(0), awaited]
    jobs = recording.jobs
    assert [job.job_id for job in jobs] == [ref.job_id for ref in refs]
    assert [ref.offset for ref in refs] == [0, 1, 2, 3] and all(ref.created for ref in refs)
    assert [(job.job_type, job.tenant, job.queue) for job in jobs] == [
        ("receipt", tenant, "mail") for tenant in ("acme", "beta", "c", "d")
    ]
    assert [job.payload_json() for job in jobs] == [{"order": n} for n in (1, 2, 3, 4)]
    assert jobs[0].envelope.max_attempts == 4 and jobs[0].topic == "unit.mail"
    assert jobs[1].envelope.run_after is not None and jobs[1].topic.startswith("unit.mail.retry")
    assert recording.of_type("receipt") == jobs and recording.of_type("other") == []
    recording.clear()
    assert recording.jobs == []


def test_what_the_producer_refuses_is_refused_and_nothing_of_the_batch_is_kept(
    app: tenantq.App,
) -> None:
    app.job("receipt", model=Order)(lambda ctx, payload: None)
    recording = RecordingProducer(app)
    good = {"job_type": "receipt", "tenant": "acme", "payload": {"order": 1}}
    refused: list[tuple[dict[str, Any], type[Exception]]] = [
        ({**good, "payload": {"order": "x"}}, PayloadValidationError),
        ({**good, "tenant": "bad tenant!"}, tenantq.InvalidTenantId),
        ({**good, "queue": "undeclared"}, tenantq.InvalidJobError),
        ({**good, "run_after": dt.datetime(9999, 1, 1, tzinfo=dt.UTC)}, tenantq.InvalidJobError),
    ]
    for request, error in refused:
        with pytest.raises(error):
            recording.enqueue_many([good, request])
    assert recording.jobs == []


def test_an_idempotency_key_names_one_job(app: tenantq.App) -> None:
    recording = RecordingProducer(app)
    first = recording.enqueue("receipt", tenant="acme", payload={"order": 1}, idempotency_key="k")
    again = recording.enqueue("receipt", tenant="acme", payload={"order": 1}, idempotency_key="k")
    assert again.result(0).job_id == first.result(0).job_id and not again.result(0).created
    with pytest.raises(JobConflict, match="'k'"):
        recording.enqueue("receipt", tenant="acme", payload={"order": 2}, idempotency_key="k")
    in_one_batch = recording.enqueue_many(
        [
            {"job_type": "receipt", "tenant": "b", "payload": {}, "idempotency_key": "j"},
            {"job_type": "receipt", "tenant": "b", "payload": {}, "idempotency_key": "j"},
        ]
    )
    assert [f.result(0).created for f in in_one_batch] == [True, False]
    assert len(recording.jobs) == 2
    with pytest.raises(JobConflict):  # the whole batch is refused, its first job too
        recording.enqueue_many(
            [
                {"job_type": "receipt", "tenant": "c", "payload": {}, "idempotency_key": "new"},
                {"job_type": "receipt", "tenant": "c", "payload": {"x": 1}, "idempotency_key": "j"},
            ]
        )
    assert len(recording.jobs) == 2


def test_follow_up_jobs_are_reported_and_run_in_turn(app: tenantq.App) -> None:
    with JobHarness(app) as harness:
        audited: list[Any] = []

        @app.job("audit")
        def audit(ctx: tenantq.JobContext, payload: Order) -> None:
            audited.append((ctx.tenant, payload.order, ctx.job_id))

        @app.job("checkout")
        def checkout(ctx: tenantq.JobContext, payload: Order) -> None:
            audit.enqueue(harness.producer, tenant=ctx.tenant, payload=payload)
            if payload.order > 1:
                audit.enqueue(harness.producer, tenant=ctx.tenant, payload=Order(order=0))

        attempt = harness.run(checkout, tenant="acme", payload=Order(order=1))
        assert [(job.job_type, job.payload_json()) for job in attempt.enqueued] == [
            ("audit", {"order": 1})
        ]
        checkout.enqueue(harness.producer, tenant="beta", payload=Order(order=2))
        runs = harness.run_enqueued()
        # The audit of the first attempt, the checkout, then the two audits it enqueued.
        assert [run.last.job_type for run in runs] == ["audit", "checkout", "audit", "audit"]
        assert all(run.succeeded for run in runs)
        assert [(tenant, order) for tenant, order, _ in audited] == [
            ("acme", 1),
            ("beta", 2),
            ("beta", 0),
        ]
        assert [job_id for *_, job_id in audited] == [
            job.job_id for job in harness.producer.of_type("audit")
        ]
        assert runs[1].enqueued == harness.producer.of_type("audit")[1:]
        assert harness.run_enqueued() == []  # each recorded job runs once
