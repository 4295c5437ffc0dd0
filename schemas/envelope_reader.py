"""A hand-specialised reader for plain envelopes of the current schema: the worker's hot path.

fastavro's generic reader spends about 7 us per envelope walking the schema, more than the
rest of the message's decoding. Most envelopes have one shape: the current schema, a 36-char
job id, and every field after ``created_at`` at its default (no ``run_after``,
``max_attempts`` or idempotency key, empty maps, ``replay_count`` 0). ``read_envelope`` reads
that shape directly. Anything else, and anything it cannot read to the last byte, goes to
``decode_envelope`` (fastavro, with its checks and error classes). A unit test compares the
two over many envelopes and over corrupted ones.
"""

from __future__ import annotations

import datetime as dt
import uuid

from tenantq.job_ids import uuid_of_int
from tenantq.schemas.envelope import (
    DEFAULT_CODEC,
    HEADER_LENGTH,
    SINGLE_OBJECT_MARKER,
    Envelope,
    decode_envelope,
)
from tenantq.schemas.envelope_writer import DEFAULT_TAIL, EPOCH, WRITTEN_FOR_FINGERPRINT

_FINGERPRINT = bytes.fromhex(WRITTEN_FOR_FINGERPRINT)
_PLAIN_HEADER = SINGLE_OBJECT_MARKER + _FINGERPRINT
#: The job id's Avro length prefix: 36 characters, zig-zag encoded.
_JOB_ID_LENGTH = 0x48
_JOB_ID_END = HEADER_LENGTH + 1 + 36
#: Only when the codec reads into the schema this reader knows.
_ENABLED = DEFAULT_CODEC.reader.fingerprint == _FINGERPRINT

_UUID = uuid.UUID
_timedelta = dt.timedelta


def read_envelope(data: bytes | None, *, max_bytes: int) -> Envelope:
    """``decode_envelope``, with the plain shape read without fastavro. Same result, same
    errors (``EnvelopeError`` subclasses naming the problem)."""
    if _ENABLED and data and len(data) <= max_bytes and data.startswith(_PLAIN_HEADER):
        envelope = _read_plain(data)
        if envelope is not None:
            return envelope
    return decode_envelope(data, max_bytes=max_bytes)


def _read_plain(data: bytes) -> Envelope | None:
    """The envelope if ``data`` has the plain shape to its last byte, else None."""
    size = len(data)
    if size <= _JOB_ID_END or data[HEADER_LENGTH] != _JOB_ID_LENGTH:
        return None
    try:
        job_id = _job_id(data[HEADER_LENGTH + 1 : _JOB_ID_END].decode("ascii"))
        position = _JOB_ID_END
        pieces: list[bytes] = []
        for _ in range(5):  # queue, job_type, tenant_id, partition_key, payload
            length = data[position]
            if length & 0x80:
                length, position = _read_long(data, position)
            else:  # a length under 64 is one byte: read here, not in a call
                position += 1
                length = (length >> 1) ^ -(length & 1)
            end = position + length
            if length < 0 or end > size:
                return None
            pieces.append(data[position:end])
            position = end
        micros, position = _read_long(data, position)
        created_at = EPOCH + _timedelta(microseconds=micros)
        queue, job_type, tenant_id, partition_key = (
            pieces[0].decode(), pieces[1].decode(), pieces[2].decode(), pieces[3].decode()
        )  # fmt: skip
    except (IndexError, ValueError, OverflowError):  # UnicodeDecodeError is a ValueError
        return None
    if data[position:] != DEFAULT_TAIL:
        return None
    return Envelope(job_id, queue, job_type, tenant_id, partition_key, pieces[4], created_at)


def _job_id(text: str) -> uuid.UUID:
    """``uuid.UUID(text)`` for the 36 characters of an envelope's job id; raises ValueError
    as it does.

    Without the hyphens, ``UUID`` reads its text with ``int(digits, 16)``: where that accepts
    the same 32 characters, the result is the same, so the object is made from the integer
    directly (half the cost of ``UUID(text)``, which re-checks what ``int`` has just read).
    Anything else (braces, a ``urn:`` prefix, a hyphen elsewhere) is ``UUID``'s to judge. A
    unit test pins the ``UUID`` attributes this relies on.
    """
    digits = text.replace("-", "")
    if len(digits) != 32:
        return _UUID(text)
    return uuid_of_int(int(digits, 16))


def _read_long(data: bytes, position: int) -> tuple[int, int]:
    """An Avro ``long`` at ``position`` (zig-zag varint) and the position after it; raises
    IndexError when the data ends inside it."""
    byte = data[position]
    position += 1
    number = byte & 0x7F
    shift = 7
    while byte & 0x80:
        if shift > 63:
            raise ValueError("varint longer than a long")
        byte = data[position]
        position += 1
        number |= (byte & 0x7F) << shift
        shift += 7
    return (number >> 1) ^ -(number & 1), position
