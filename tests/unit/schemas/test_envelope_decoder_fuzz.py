"""Fuzz: whatever bytes reach the worker, the envelope decoders raise only ``EnvelopeError``,
the one error the worker's intake turns into a dead letter with the reason
(``tenantq.consumer.intake``: ``except (EnvelopeError, InvalidTenantId)``). Anything else
would leave the worker's loop and, uncommitted, kill every member that reads the record.

The bytes are made to reach every layer: random bytes, the single-object marker with a
known or unknown fingerprint and a random body, and real envelopes cut, flipped, grown and
given absurd varints."""

from __future__ import annotations

import datetime as dt

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tenantq.errors import EnvelopeError
from tenantq.schemas.envelope import (
    DEFAULT_CODEC,
    SINGLE_OBJECT_MARKER,
    Envelope,
    decode_envelope,
    encode_envelope,
)
from tenantq.schemas.envelope_reader import read_envelope

MAX_BYTES = 1_000_000
#: A few seconds of the unit suite; ``--hypothesis-seed`` or more examples to dig deeper.
FUZZ = settings(
    max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)

texts = st.text(max_size=40)
times = st.datetimes(
    min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31), timezones=st.just(dt.UTC)
)
envelopes = st.builds(
    Envelope,
    job_id=st.uuids(),
    queue=texts,
    job_type=texts,
    tenant_id=texts,
    partition_key=texts,
    payload=st.binary(max_size=200),
    created_at=times,
    run_after=st.none() | times,
    max_attempts=st.none() | st.integers(-(2**31), 2**31 - 1),
    idempotency_key=st.none() | texts,
    trace_context=st.dictionaries(texts, texts, max_size=3),
    replay_count=st.integers(-(2**31), 2**31 - 1),
    attributes=st.dictionaries(texts, texts, max_size=3),
)
#: A long's zig-zag varint of any size, including ones longer than a long.
varints = (
    st.lists(st.integers(0x80, 0xFF), max_size=12)
    .map(bytes)
    .flatmap(lambda head: st.integers(0, 0x7F).map(lambda last: head + bytes([last])))
)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A real envelope, then broken: cut, bytes flipped, bytes or a varint put in, grown."""
    data = bytearray(encode_envelope(draw(envelopes)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["cut", "flip", "insert", "varint", "append"]))
        at = draw(st.integers(0, len(data)))
        if kind == "cut":
            del data[at:]
        elif kind == "flip" and at < len(data):
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "varint":
            data[at:at] = draw(varints)
        else:
            data += draw(st.binary(min_size=1, max_size=16))
    return bytes(data)


known_header = st.just(SINGLE_OBJECT_MARKER + DEFAULT_CODEC.writer.fingerprint)
messages = st.one_of(
    st.none(),
    st.binary(max_size=300),
    st.tuples(known_header, st.binary(max_size=300)).map(b"".join),
    st.tuples(st.just(SINGLE_OBJECT_MARKER), st.binary(max_size=300)).map(b"".join),
    mutated(),
)


def decodes_or_refuses(data: bytes | None, max_bytes: int) -> object:
    """The envelope, or the class of the ``EnvelopeError``; any other error fails the test."""
    try:
        return read_envelope(data, max_bytes=max_bytes)
    except EnvelopeError as error:
        assert error.reason and str(error)  # the dead letter says why
        return type(error)


@FUZZ
@given(data=messages, max_bytes=st.sampled_from([MAX_BYTES, 64, 11]))
def test_the_decoders_raise_only_envelope_errors(data: bytes | None, max_bytes: int) -> None:
    # The worker's reader (its own fast path first), then the reference it falls back to.
    found = decodes_or_refuses(data, max_bytes)
    try:
        reference: object = decode_envelope(data, max_bytes=max_bytes)
    except EnvelopeError as error:
        reference = type(error)
    assert isinstance(found, Envelope) == isinstance(reference, Envelope)


@settings(max_examples=40, deadline=None, database=None)
@given(envelope=envelopes)
def test_what_is_written_reads_back(envelope: Envelope) -> None:
    # The mutations start from real envelopes: each of them must itself read back whole.
    data = encode_envelope(envelope)
    assert read_envelope(data, max_bytes=MAX_BYTES) == envelope
