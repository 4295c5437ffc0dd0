"""Job ids are fresh UUIDv7s, minted in bulk, whose text is the standard UUID form."""

from __future__ import annotations

import pickle
import random
import time
import uuid
import weakref

import pytest
from tenantq.job_ids import job_id_text, new_job_id, new_job_id_ints, uuid_of_int


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


def test_uuid_of_int_is_the_uuid_that_uuid_makes() -> None:
    generator = random.Random(21)
    values = [0, (1 << 128) - 1, *new_job_id_ints(200)]
    values += [generator.getrandbits(128) for _ in range(300)]
    for value in values:
        made, expected = uuid_of_int(value), uuid.UUID(int=value)
        assert type(made) is uuid.UUID
        assert made == expected and hash(made) == hash(expected) and str(made) == str(expected)
        assert made.is_safe is expected.is_safe and made.version == expected.version
        assert made.bytes == expected.bytes and pickle.loads(pickle.dumps(made)) == expected
    weakref.ref(uuid_of_int(values[2]))  # the __weakref__ slot is there, as UUID's
    with pytest.raises(TypeError, match="immutable"):
        uuid_of_int(1).int = 2  # type: ignore[misc]  # as immutable as UUID's own
