"""The rows a claim or a pending insert sends: every array parameter carries the field it is
named for, in request order."""

from __future__ import annotations

import datetime as dt
import uuid

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
        assert arrays[parameter] == [getattr(request, field) for request in requests]


def test_no_requests_are_empty_arrays() -> None:
    assert job_row_arrays([]) == {parameter: [] for parameter in JOB_ROW_COLUMNS}
