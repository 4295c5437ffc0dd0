"""The relay encodes a job ``tenantq_enqueue`` wrote into the record the producer would have
published when it was enqueued: its payload byte for byte, created at its enqueue time, on
the partition of its tenant's key, a scheduled job on a retry tier with its due time; a job
the relay's settings refuse raises the producer's error."""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from pathlib import Path

import fakes
import pytest

from tenantq import headers as header_names
from tenantq.errors import InvalidJobError
from tenantq.job_ids import new_job_id
from tenantq.outbox.entry_encoder import EntryEncoder
from tenantq.partitioner.placement import key_partition
from tenantq.schemas.envelope import SCHEMA_FINGERPRINT_HEX, decode_envelope
from tenantq.store.outbox import UnencodedJob

ENQUEUED_AT = dt.datetime(2026, 12, 7, 9, 30, 15, 123456, tzinfo=dt.UTC)
#: What ``tenantq_enqueue`` stores for ``'{"b": 2, "a": 1.50}'::jsonb``: jsonb's own text.
PAYLOAD = b'{"a": 1.50, "b": 2}'


def unencoded(
    *,
    run_after: dt.datetime | None = None,
    payload: bytes | None = PAYLOAD,
    key: str | None = None,
    job_id: uuid.UUID | None = None,
) -> UnencodedJob:
    return UnencodedJob(
        entry_id=7,
        job_id=job_id or new_job_id(),
        queue="default",
        job_type="send_email",
        tenant_id="acme",
        payload=payload,
        # The function stores "now" (its transaction's start) for a job without run_after.
        run_after=run_after or ENQUEUED_AT - dt.timedelta(microseconds=80),
        idempotency_key=key,
        enqueued_at=ENQUEUED_AT,
    )


def test_a_job_of_now_is_the_producers_record_of_its_enqueue_time(tmp_path: Path) -> None:
    encoder = EntryEncoder(fakes.make_settings(tmp_path))
    job = unencoded(key="order-1")
    encoded = encoder.record_of(job)
    entry = encoded.entry

    envelope = decode_envelope(entry.value, max_bytes=1_000_000)
    assert envelope.job_id == job.job_id
    assert (envelope.queue, envelope.job_type, envelope.tenant_id) == (
        "default",
        "send_email",
        "acme",
    )
    # Byte for byte what the job row holds and hashed: the worker's claim matches the row.
    assert envelope.payload == PAYLOAD
    assert hashlib.sha256(envelope.payload).digest() == hashlib.sha256(PAYLOAD).digest()
    assert envelope.created_at == ENQUEUED_AT
    assert envelope.run_after is None
    assert envelope.max_attempts is None
    assert envelope.idempotency_key == "order-1"
    assert (entry.id, entry.job_id) == (7, job.job_id)
    assert entry.topic == "unit.default"
    assert entry.key == b"acme"
    assert entry.partition == key_partition("acme", 12)
    assert encoded.partition_key == "acme"
    assert dict(entry.headers) == {
        header_names.JOB_ID: str(job.job_id),
        header_names.JOB_TYPE: "send_email",
        header_names.TENANT: "acme",
        header_names.SCHEMA_FINGERPRINT: SCHEMA_FINGERPRINT_HEX,
    }
    # Encoding again (a relay that died before it committed) makes the same record.
    assert encoder.record_of(job) == encoded


def test_a_scheduled_job_goes_to_a_retry_tier_with_its_due_time(tmp_path: Path) -> None:
    encoder = EntryEncoder(fakes.make_settings(tmp_path))
    due = ENQUEUED_AT + dt.timedelta(seconds=90)
    entry = encoder.record_of(unencoded(run_after=due)).entry

    assert entry.topic.startswith("unit.default.retry.")
    headers = dict(entry.headers)
    assert headers[header_names.DUE_AT_MS] == str(int(due.timestamp() * 1000))
    assert headers[header_names.DELAY_REASON] == "scheduled"
    assert decode_envelope(entry.value, max_bytes=1_000_000).run_after == due


def test_a_job_the_relays_limits_refuse_raises_the_producers_error(tmp_path: Path) -> None:
    encoder = EntryEncoder(fakes.make_settings(tmp_path, max_message_bytes=1024))
    with pytest.raises(InvalidJobError, match="max_message_bytes"):
        encoder.record_of(unencoded(payload=b'"' + b"x" * 1100 + b'"'))
    with pytest.raises(InvalidJobError, match="no payload"):
        encoder.record_of(unencoded(payload=None))
