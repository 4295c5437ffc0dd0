"""Job ids are fresh UUIDv7s, minted in bulk, whose text is the standard UUID form."""

from __future__ import annotations

import pickle
import random
import time
import uuid
import weakref

import pytest

from tenantq.job_ids import (
    job_id_text,
    new_job_id,
    new_job_id_block,
    new_job_id_ints,
    uuid_of_int,
)


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


@pytest.mark.parametrize("count", [0, 1, 15, 16, 17, 1000])
def test_a_block_of_job_ids_and_their_text(count: int) -> None:
    # Below 16 ids they are made one by one, from 16 on with whole-buffer operations.
    millis = int(time.time() * 1000)
    ints, texts = new_job_id_block(count)
    assert len(ints) == count and len(set(ints)) == count and len(texts) == count
    for value, text in zip(ints, texts, strict=True):
        made = uuid.UUID(int=value)
        assert made.version == 7 and made.variant == uuid.RFC_4122
        assert type(text) is bytes and text.decode() == str(made) == job_id_text(value)
        assert abs((value >> 80) - millis) < 5_000
    assert len(new_job_id_ints(count)) == count


@pytest.mark.parametrize("count", [8, 1000])
def test_every_random_bit_of_a_job_id_varies(count: int) -> None:
    # The 74 random bits (rand_a: 12 above the variant, rand_b: the 62 below it) each take
    # both values across the ids, and no other bit varies within a call (one clock read).
    random_bits = (((1 << 12) - 1) << 64) | ((1 << 62) - 1)
    seen_set, seen_clear = 0, 0
    ints = new_job_id_block(count)[0]
    for value in ints:
        seen_set |= value
        seen_clear |= ~value & ((1 << 128) - 1)
        assert (value ^ ints[0]) & ~random_bits == 0
    rounds = 0
    while (seen_set & seen_clear & random_bits) != random_bits and rounds < 50:
        for value in new_job_id_ints(count):
            seen_set |= value
            seen_clear |= ~value & ((1 << 128) - 1)
        rounds += 1
    assert seen_set & seen_clear & random_bits == random_bits


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
