"""Job ids are fresh UUIDv7s, minted in bulk, whose text is the standard UUID form."""

from __future__ import annotations

import time
import uuid

from tenantq.job_ids import job_id_text, new_job_id, new_job_id_ints


def test_job_ids_are_fresh_uuid7s() -> None:
    ints = new_job_id_ints(500)
    assert len(set(ints)) == 500
    for value in ints:
        made = uuid.UUID(int=value)
        assert made.version == 7 and made.variant == uuid.RFC_4122
        assert job_id_text(value) == str(made)
    assert new_job_id().version == 7
    millis = int(time.time() * 1000)
    assert abs((ints[0] >> 80) - millis) < 5_000
