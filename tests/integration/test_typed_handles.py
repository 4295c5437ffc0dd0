"""Guarantee: a job enqueued through its typed handle (``@app.job`` returns it) runs its
handler with the model it was given, exactly once, by each of the handle's forms: through a
producer, its asyncio form, inside a committed outbox transaction, and as a batch request;
the job type's name still works beside it."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import psycopg
from pydantic import BaseModel
from support import all_in, running_worker, wait_for

import tenantq
from tenantq.outbox.relay import RelayService
from tenantq.store.engine import psycopg_url


class SendEmail(BaseModel):
    to: str
    subject: str = "hello"


def test_jobs_enqueued_through_a_typed_handle_run_with_their_model(
    settings: tenantq.Settings, db: psycopg.Connection[Any]
) -> None:
    app = tenantq.App(settings)
    seen: dict[uuid.UUID, list[SendEmail]] = {}
    lock = threading.Lock()

    @app.job("send_email", max_attempts=3)
    def send_email(ctx: tenantq.JobContext, payload: SendEmail) -> None:
        with lock:
            seen.setdefault(ctx.job_id, []).append(payload)

    expected: dict[uuid.UUID, str] = {}
    with tenantq.Producer(settings, app) as producer:
        ref = send_email.enqueue(producer, tenant="acme", payload=SendEmail(to="one@x")).result(30)
        expected[ref.job_id] = "one@x"
        ref = asyncio.run(
            send_email.enqueue_async(producer, tenant="beta", payload=SendEmail(to="two@x"))
        )
        expected[ref.job_id] = "two@x"
        batch = producer.enqueue_batch(
            [send_email.request(tenant=f"t{n}", payload=SendEmail(to=f"{n}@x")) for n in range(5)]
        ).result(30)
        expected.update({ref.job_id: f"{n}@x" for n, ref in enumerate(batch)})
        ref = producer.enqueue("send_email", tenant="acme", payload={"to": "named@x"}).result(30)
        expected[ref.job_id] = "named@x"

    url = psycopg_url(settings.require_database_url())
    with tenantq.Outbox(app) as outbox, psycopg.connect(url) as conn:
        outbox_ref = send_email.enqueue(outbox, conn, tenant="gamma", payload=SendEmail(to="o@x"))
        expected[outbox_ref.job_id] = "o@x"
    assert outbox_ref.created and outbox_ref.queue == "default"

    relay = RelayService(settings, ["default"])
    relay.start()
    try:
        with running_worker(app, settings):
            wait_for(lambda: all_in(db, list(expected), {"succeeded"}), timeout=60, what="jobs ran")
    finally:
        relay.stop(10)
    assert {job_id: [p.to for p in payloads] for job_id, payloads in seen.items()} == {
        job_id: [to] for job_id, to in expected.items()
    }
    assert all(type(p) is SendEmail for payloads in seen.values() for p in payloads)
