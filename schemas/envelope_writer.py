"""A hand-specialised Avro writer for the current envelope schema: the producer's hot path.

fastavro's generic writer walks the schema for every record; the envelope's layout is fixed,
and the fields that repeat (queue, job type, tenant, key) can be encoded once and reused. This
writer produces byte-for-byte what fastavro produces (a unit test compares them over many
envelopes) and only for the schema whose fingerprint it was written against: when a newer
schema ships, ``writer_for`` returns None and the producer falls back to fastavro.
The worker reads the plain shape with ``envelope_reader``; everything else goes through
fastavro.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from tenantq.schemas.envelope import SINGLE_OBJECT_MARKER, EnvelopeCodec

#: CRC-64-AVRO (little-endian hex) of the schema this writer encodes: envelope_v1.avsc.
WRITTEN_FOR_FINGERPRINT = "14364afe051345c0"

#: The Avro timestamps' zero: both the writer and ``envelope_reader`` count from it.
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_NULL_BRANCH = b"\x00"
_VALUE_BRANCH = b"\x02"
_EMPTY_MAP = b"\x00"


def encode_long(value: int) -> bytes:
    """Avro ``long``: zig-zag, then little-endian base-128 varint."""
    number = (value << 1) ^ (value >> 63)
    out = bytearray()
    while number & ~0x7F:
        out.append((number & 0x7F) | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


#: ``encode_long`` of every length below ``SMALL_LENGTH_LIMIT``, by length: a hot loop may
#: index it instead of calling ``encode_length``.
SMALL_LENGTHS = [encode_long(value) for value in range(1 << 14)]
SMALL_LENGTH_LIMIT = len(SMALL_LENGTHS)


def encode_length(value: int) -> bytes:
    return SMALL_LENGTHS[value] if value < SMALL_LENGTH_LIMIT else encode_long(value)


def encode_string(text: str) -> bytes:
    data = text.encode()
    return encode_length(len(data)) + data


def timestamp_micros(moment: dt.datetime) -> int:
    """Microseconds since the epoch, with fastavro's integer arithmetic (no float rounding)."""
    delta = moment - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _encode_map(values: Mapping[str, str]) -> bytes:
    if not values:
        return _EMPTY_MAP
    parts = [encode_long(len(values))]
    for key, value in values.items():
        parts.append(encode_string(key))
        parts.append(encode_string(value))
    parts.append(_EMPTY_MAP)
    return b"".join(parts)


#: The six trailing fields when all are at their defaults: run_after, max_attempts and
#: idempotency_key null, empty trace_context, replay_count 0, empty attributes.
DEFAULT_TAIL = _NULL_BRANCH * 3 + _EMPTY_MAP + encode_long(0) + _EMPTY_MAP


def encode_tail(
    run_after: dt.datetime | None,
    max_attempts: int | None,
    idempotency_key: str | None,
    trace_context: Mapping[str, str],
    replay_count: int = 0,
    attributes: Mapping[str, str] | None = None,
) -> bytes:
    """The fields after ``created_at``."""
    if (
        run_after is None
        and max_attempts is None
        and idempotency_key is None
        and not trace_context
        and not replay_count
        and not attributes
    ):
        return DEFAULT_TAIL
    return b"".join(
        (
            _NULL_BRANCH
            if run_after is None
            else _VALUE_BRANCH + encode_long(timestamp_micros(run_after)),
            _NULL_BRANCH if max_attempts is None else _VALUE_BRANCH + encode_long(max_attempts),
            _NULL_BRANCH
            if idempotency_key is None
            else _VALUE_BRANCH + encode_string(idempotency_key),
            _encode_map(trace_context),
            encode_long(replay_count),
            _encode_map(attributes or {}),
        )
    )


class EnvelopeWriter:
    """Encodes envelopes in three cached pieces: the identity (queue, job type, tenant, key),
    the creation time (one per batch) and the tail (constant for plain jobs)."""

    def __init__(self, header: bytes) -> None:
        self.header = header

    @staticmethod
    def identity(queue: str, job_type: str, tenant_id: str, partition_key: str) -> bytes:
        return (
            encode_string(queue)
            + encode_string(job_type)
            + encode_string(tenant_id)
            + encode_string(partition_key)
        )

    def encode(
        self, job_id_text: str, identity: bytes, payload: bytes, created: bytes, tail: bytes
    ) -> bytes:
        """``created`` is ``encode_long(timestamp_micros(created_at))``; ``job_id_text`` the
        36-character UUID (its Avro length prefix is the single byte 0x48)."""
        return b"".join(
            (
                self.header,
                b"\x48",
                job_id_text.encode(),
                identity,
                encode_length(len(payload)),
                payload,
                created,
                tail,
            )
        )


def writer_for(codec: EnvelopeCodec) -> EnvelopeWriter | None:
    """A fast writer for ``codec``'s writer schema, or None if this module does not know it."""
    if codec.writer_fingerprint_hex != WRITTEN_FOR_FINGERPRINT:
        return None
    return EnvelopeWriter(SINGLE_OBJECT_MARKER + codec.writer.fingerprint)
