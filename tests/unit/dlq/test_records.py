"""Dead letters: garbage in the DLQ is described, not raised."""

from __future__ import annotations

import uuid

from tenantq.dlq.records import decode_dead_letter


def test_garbage_in_the_dlq_is_described_not_raised() -> None:
    job = uuid.uuid4()
    found = decode_dead_letter(
        partition=2,
        offset=7,
        timestamp_ms=1,
        key=None,
        value=b"\x00garbage",
        raw_headers=[
            ("tenantq-error-class", b"Undecodable:corrupt"),
            ("tenantq-job-id", str(job).encode()),
        ],
        max_bytes=1_000_000,
    )
    assert found.envelope is None and not found.replayable
    assert found.job_id == job
    assert found.skip_reason is not None and "undecodable (corrupt" in found.skip_reason
    assert found.as_dict(full=True)["envelope"] is None
