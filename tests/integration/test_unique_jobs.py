"""Guarantee: an idempotency key names one job. A second enqueue with the key, through the
outbox or the producer (enqueue or enqueue_batch), returns the first job with
created=False and writes or publishes nothing; with another payload it raises JobConflict
and the original is kept; the job runs once."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from support import all_in, counting_app, running_worker, wait_for

import tenantq
from tenantq.outbox.relay import RelayService
from tenantq.store.engine import psycopg_url
from tenantq.topics import main_topic


def test_a_key_names_one_job(settings: tenantq.Settings, db: psycopg.Connection[Any]) -> None:
    app, ran = counting_app(settings, "invoice")

    url = psycopg_url(settings.require_database_url())
    topic = main_topic(settings.topic_prefix, "default")
    key = f"order-{uuid.uuid4().hex[:8]}"
    with tenantq.Outbox(app) as outbox:
        with psycopg.connect(url) as conn:
            first = outbox.enqueue(
                conn, "invoice", tenant="acme", payload={"n": 1}, idempotency_key=key
            )
        with psycopg.connect(url) as conn:
            again = outbox.enqueue(
                conn, "invoice", tenant="acme", payload={"n": 1}, idempotency_key=key
            )
            with pytest.raises(tenantq.JobConflict, match=key):
                outbox.enqueue(
                    conn, "invoice", tenant="acme", payload={"n": 2}, idempotency_key=key
                )
    assert first.created and not again.created and again.job_id == first.job_id
    entries = db.execute("SELECT count(*) FROM tenantq_outbox WHERE main_topic = %s", (topic,))
    assert entries.fetchone() == (1,)

    other_key = f"order-{uuid.uuid4().hex[:8]}"
    with tenantq.Producer(settings, app) as producer:
        known = producer.enqueue(
            "invoice", tenant="acme", payload={"n": 1}, idempotency_key=key
        ).result(30)
        with pytest.raises(tenantq.JobConflict, match="nothing was published"):
            producer.enqueue("invoice", tenant="acme", payload={"n": 3}, idempotency_key=key)
        fresh = producer.enqueue(
            "invoice", tenant="beta", payload={"n": 4}, idempotency_key=other_key
        ).result(30)
    assert known.job_id == first.job_id and not known.created
    assert fresh.created
    # Kafka holds it, so its row is written: the next enqueue of the key finds it.
    wait_for(lambda: all_in(db, [fresh.job_id], {"pending", "leased", "succeeded"}), timeout=10)
    with tenantq.Producer(settings, app) as producer:
        refs = producer.enqueue_batch(
            [
                {"job_type": "invoice", "tenant": "beta", "payload": {"n": 4},
                 "idempotency_key": other_key},
                {"job_type": "invoice", "tenant": "beta", "payload": {"n": 5}},
            ]
        ).result(30)  # fmt: skip
    assert refs[0].job_id == fresh.job_id and not refs[0].created
    assert refs[1].created

    jobs = [first.job_id, fresh.job_id, refs[1].job_id]
    relay = RelayService(settings, ["default"])
    relay.start()
    try:
        with running_worker(app, settings):
            wait_for(lambda: all_in(db, jobs, {"succeeded"}), timeout=60, what="jobs ran")
    finally:
        relay.stop(10)
    assert ran == dict.fromkeys(jobs, 1)
    published = db.execute(
        "SELECT count(*) FROM tenantq_jobs WHERE idempotency_key IN (%s, %s)", (key, other_key)
    )
    assert published.fetchone() == (2,)
