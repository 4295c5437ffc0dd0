"""Guarantee: the relay publishes what ``tenantq_enqueue`` wrote as the producer would have:
the envelope carries the payload bytes its row hashed, created at its enqueue time, keyed and
placed by the tenant's placement (a pinned tenant on its partition, a scheduled job on a retry
tier), in commit order with the Python outbox's entries. The record is committed before it
is published, so a relay that dies in between publishes the same bytes. A job the relay's own
limits refuse is dead with the reason, and the entries behind it are still published."""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from support import topic_records

import tenantq
from tenantq import headers as header_names
from tenantq.outbox.entry_encoder import EntryEncoder
from tenantq.outbox.relay import RelayService
from tenantq.partitioner.placement import Placement, key_partition
from tenantq.schemas.envelope import decode_envelope
from tenantq.store import outbox as outbox_store
from tenantq.store.engine import connect, psycopg_url
from tenantq.store.placement import placement_upsert
from tenantq.topics import main_topic, retry_topic


def sql_enqueue(
    settings: tenantq.Settings, tenant: str, payload: str, run_after: str | None = None
) -> uuid.UUID:
    """One job enqueued in SQL in a transaction of its own, committed."""
    with psycopg.connect(psycopg_url(settings.require_database_url())) as conn:
        row = conn.execute(
            "SELECT tenantq_enqueue('default', 'receipt', %s, %s::jsonb, NULL, "
            "now() + %s::interval, %s)",
            (tenant, payload, run_after, settings.topic_prefix),
        ).fetchone()
    assert row is not None
    return uuid.UUID(str(row[0]))


@contextlib.contextmanager
def relaying(settings: tenantq.Settings) -> Iterator[RelayService]:
    """A relay of the queue ``default``, closed on leaving the block."""
    relay = RelayService(settings, ["default"])
    try:
        yield relay
    finally:
        relay.close()


@pytest.fixture
def topic(settings: tenantq.Settings) -> str:
    """The main topic of queue ``default``, once a relay's first round registered the queue
    (``tenantq_enqueue`` refuses a queue no relay registered) with the settings' limits."""
    with relaying(settings) as relay:
        assert relay.drain() == 0
    return main_topic(settings.topic_prefix, "default")


def published(settings: tenantq.Settings, topic: str) -> dict[uuid.UUID, Any]:
    """Every record of ``topic`` by job id: (partition, offset, key, value, headers)."""
    records: dict[uuid.UUID, Any] = {}
    for message in topic_records(settings, topic, f"reader-{uuid.uuid4()}"):
        headers = {name: value.decode() for name, value in message.headers() or []}
        job_id = uuid.UUID(headers[header_names.JOB_ID])
        records[job_id] = (
            message.partition(), message.offset(), message.key(), message.value(), headers
        )  # fmt: skip
    return records


def job_row(db: psycopg.Connection[Any], job_id: uuid.UUID) -> tuple[Any, ...]:
    row = db.execute(
        "SELECT state::text, payload, payload_sha256, enqueued_at, origin_topic, "
        "origin_partition, partition_key, last_error_class, last_error_message "
        "FROM tenantq_jobs WHERE id = %s",
        (job_id,),
    ).fetchone()
    assert row is not None
    return tuple(row)


def test_sql_jobs_are_published_as_the_producer_would(
    settings: tenantq.Settings, db: psycopg.Connection[Any], topic: str
) -> None:
    with relaying(settings) as relay:
        with connect(settings) as connection:
            placement_upsert(
                connection, queue="default", tenant_id="whale", placement=Placement.pinned((3,))
            )
            connection.commit()

        acme = sql_enqueue(settings, "acme", '{"order": 1, "total": 12.50}')
        with (
            tenantq.Outbox(settings=settings) as outbox,
            psycopg.connect(psycopg_url(settings.require_database_url())) as conn,
        ):
            python_job = outbox.enqueue(conn, "receipt", tenant="acme", payload={"order": 2}).job_id
        whale = sql_enqueue(settings, "whale", '{"order": 3}')
        later = sql_enqueue(settings, "acme", '{"order": 4}', run_after="1 hour")
        assert relay.drain() == 4

    records = published(settings, topic)
    assert set(records) == {acme, python_job, whale}
    for job_id in (acme, whale):
        _, payload, digest, enqueued_at, origin_topic, origin_partition, key, _, _ = job_row(
            db, job_id
        )
        partition, _, record_key, value, headers = records[job_id]
        envelope = decode_envelope(value, max_bytes=settings.max_message_bytes)
        assert envelope.payload == payload and hashlib.sha256(payload).digest() == digest
        assert envelope.created_at == enqueued_at
        assert (origin_topic, origin_partition, key) == (topic, partition, envelope.tenant_id)
        assert record_key == envelope.tenant_id.encode()
        assert headers[header_names.JOB_TYPE] == "receipt"
    assert records[acme][0] == key_partition("acme", 4)
    assert records[whale][0] == 3  # the pinned partition
    # Commit order within the partition the two acme jobs share.
    assert records[acme][0] == records[python_job][0]
    assert records[acme][1] < records[python_job][1]
    tier = published(settings, retry_topic(settings.topic_prefix, "default", 2))
    assert set(tier) == {later}
    assert header_names.DUE_AT_MS in tier[later][4]
    left = db.execute("SELECT count(*) FROM tenantq_outbox WHERE main_topic = %s", (topic,))
    assert left.fetchone() == (0,)


def test_a_record_is_committed_before_it_is_published(
    settings: tenantq.Settings, db: psycopg.Connection[Any], topic: str
) -> None:
    with relaying(settings) as relay:
        job_id = sql_enqueue(settings, "acme", '{"order": 5}')
        # A relay's round up to its encoding, then nothing: as if it died before publishing.
        encoder = EntryEncoder(settings)
        with connect(settings) as connection:
            batch = outbox_store.outbox_next_batch(connection, topic, 10)
            (encoded,) = encoder.encode(connection, batch)
            (stored,) = outbox_store.outbox_next_batch(connection, topic, 10)
        encoder.close()
        assert stored == encoded
        assert relay.drain() == 1
    assert published(settings, topic)[job_id][3] == encoded.value


def test_a_job_the_relays_limits_refuse_is_dead_and_the_rest_is_published(
    settings: tenantq.Settings, db: psycopg.Connection[Any], topic: str
) -> None:
    # Accepted under the registered limit of 1 MB, then relayed by a relay whose limit is
    # 2 kB (a rolling change of the settings).
    too_big = sql_enqueue(settings, "acme", '"' + "x" * 3000 + '"')
    behind = sql_enqueue(settings, "acme", '{"order": 6}')
    with relaying(settings.model_copy(update={"max_message_bytes": 2048})) as strict:
        assert strict.drain() == 1
    state, *_, error_class, error_message = job_row(db, too_big)
    assert (state, error_class) == ("dead", "tenantq.errors.InvalidJobError")
    assert "the limit (max_message_bytes) is 2048" in error_message
    assert set(published(settings, topic)) == {behind}
    left = db.execute("SELECT count(*) FROM tenantq_outbox WHERE main_topic = %s", (topic,))
    assert left.fetchone() == (0,)
    # The strict relay registered its limit: the function now refuses what it cannot send.
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=r"max_message_bytes\) is 2048"):
        sql_enqueue(settings, "acme", '"' + "x" * 3000 + '"')
