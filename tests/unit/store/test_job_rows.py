"""The rows a claim or a pending insert sends: every array parameter carries the field it is
named for, in request order."""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from typing import Any

from tenantq.schemas.envelope import Envelope
from tenantq.store.binary_arrays import ArrayParameter
from tenantq.store.job_store import JOB_ROW_COLUMNS, ClaimRequest, job_row_arrays


def _request(index: int) -> ClaimRequest:
    return ClaimRequest(
        job_id=uuid.UUID(int=index),
        queue=f"queue{index}",
        job_type=f"type{index}",
        tenant_id=f"tenant{index}",
        partition_key=f"key{index}",
        payload=b"p%d" % index,
        payload_sha256=b"h%d" % index,
        max_attempts=index + 1,
        idempotency_key=None if index % 2 else f"idem{index}",
        origin_topic=f"topic{index}",
        origin_partition=index,
        origin_offset=1_000 + index,
        enqueued_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=index),
    )


def test_every_array_carries_its_field_in_request_order() -> None:
    requests = [_request(index) for index in range(5)]
    arrays = job_row_arrays(requests)
    assert list(arrays) == list(JOB_ROW_COLUMNS)
    for parameter, field in JOB_ROW_COLUMNS.items():
        assert _values(arrays[parameter]) == [getattr(request, field) for request in requests]


def test_no_requests_are_empty_arrays() -> None:
    arrays = job_row_arrays([])
    assert list(arrays) == list(JOB_ROW_COLUMNS)
    assert all(_values(array) == [] for array in arrays.values())


def _values(array: Any) -> list[Any]:
    return list(array.values if isinstance(array, ArrayParameter) else array)


def test_a_claim_request_of_an_envelope_carries_each_field_by_name() -> None:
    # ``ClaimRequest.of`` builds the tuple in field order: a field out of place fails here.
    created = dt.datetime(2026, 12, 3, tzinfo=dt.UTC)
    envelope = Envelope(
        uuid.UUID(int=7), "q", "type7", "tenant7", "key7", b"{}", created,
        max_attempts=9, idempotency_key="idem7",
    )  # fmt: skip
    request = ClaimRequest.of(
        envelope, queue="queue7", max_attempts=4, origin=("topic7", 3, 70), payload_sha256=b"h7"
    )
    assert request._asdict() == {
        "job_id": uuid.UUID(int=7),
        "queue": "queue7",
        "job_type": "type7",
        "tenant_id": "tenant7",
        "partition_key": "key7",
        "payload": b"{}",
        "payload_sha256": b"h7",
        "max_attempts": 4,
        "idempotency_key": "idem7",
        "origin_topic": "topic7",
        "origin_partition": 3,
        "origin_offset": 70,
        "enqueued_at": created,
    }
    unhashed = ClaimRequest.of(envelope, queue="q", max_attempts=4, origin=("t", 0, 0))
    assert unhashed.payload_sha256 == hashlib.sha256(b"{}").digest()
