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

import dataclasses
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

_FIELDS = tuple(field.name for field in dataclasses.fields(Envelope))
_SETTERS = tuple(Envelope.__dict__[name].__set__ for name in _FIELDS)
#: The plain envelope is made through its slots, as the frozen dataclass's own ``__init__``
#: makes it through ``object.__setattr__`` one field at a time (half the cost). Only while
#: the fields are those this reader knows; a unit test compares the result with
#: ``Envelope(...)``.
_DIRECT = _FIELDS == (
    "job_id", "queue", "job_type", "tenant_id", "partition_key", "payload", "created_at",
    "run_after", "max_attempts", "idempotency_key", "trace_context", "replay_count",
    "attributes",
)  # fmt: skip
_new_object = object.__new__


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
    # The plain shape ends in the default tail, right after ``created_at``.
    tail_start = size - _TAIL_LENGTH
    if data[tail_start:] != DEFAULT_TAIL:
        return None
    try:
        job_id = _job_id(data[HEADER_LENGTH + 1 : _JOB_ID_END])
        names, position = _names(data, size)
        start, end = _field(data, position, size)
        if end >= tail_start:
            return None
        payload = data[start:end]
        stamp = data[end:tail_start]
        created_at = _CREATED.get(stamp)
        if created_at is None:
            micros, position = _read_long(data, end)
            if position != tail_start:
                return None
            created_at = EPOCH + _timedelta(microseconds=micros)
            if len(_CREATED) >= CREATED_REMEMBERED:
                _CREATED.clear()
            _CREATED[stamp] = created_at
    except (IndexError, ValueError, OverflowError):  # UnicodeDecodeError is a ValueError
        return None
    queue, job_type, tenant_id, partition_key = names
    return _plain_envelope(job_id, queue, job_type, tenant_id, partition_key, payload, created_at)


_TAIL_LENGTH = len(DEFAULT_TAIL)
#: ``created_at`` by its encoded bytes: a producer stamps one time on every job of a batch
#: (``RequestPreparer.prepare_all``), so a poll holds few distinct ones. A hit costs a slice
#: and a lookup instead of reading an 8-byte varint in Python and adding a timedelta to the
#: epoch (1.5 us of an envelope's 5). Identical bytes read alike, and an entry is only made
#: for bytes that read to exactly the tail. Cleared when full: the times move on.
_CREATED: dict[bytes, dt.datetime] = {}
CREATED_REMEMBERED = 1_024

#: The four names after the job id (queue, job type, tenant id, partition key) by their
#: encoded bytes: the same few recur in every poll. A hit costs one slice and one lookup
#: instead of four slices and four decodes, and hands out the same ``str`` objects, whose
#: hashes are then already known to every dict the worker keys by them. Bounded.
_NAMES: dict[bytes, tuple[str, str, str, str]] = {}
NAMES_REMEMBERED = 10_000


def _names(data: bytes, size: int) -> tuple[tuple[str, str, str, str], int]:
    """The four names after the job id and the position after them. Raises IndexError or
    ValueError where they do not fit in ``data``, as the reading does."""
    position = _JOB_ID_END
    # Names under 64 bytes have a one-byte length, even (zig-zag of a positive number).
    for _ in range(4):
        length = data[position]
        if length & 0x81:
            return _names_in_full(data, size)
        position += 1 + (length >> 1)
    if position > size:
        return _names_in_full(data, size)  # raises: a name runs past the end
    head = data[_JOB_ID_END:position]
    names = _NAMES.get(head)
    if names is None:
        names, position = _names_in_full(data, size)
        if len(_NAMES) < NAMES_REMEMBERED:
            _NAMES[head] = names
    return names, position


def _names_in_full(data: bytes, size: int) -> tuple[tuple[str, str, str, str], int]:
    """``_names``, each length read as a full Avro ``long``."""
    position = _JOB_ID_END
    pieces: list[str] = []
    for _ in range(4):
        start, position = _field(data, position, size)
        pieces.append(data[start:position].decode())
    return (pieces[0], pieces[1], pieces[2], pieces[3]), position


def _field(data: bytes, position: int, size: int) -> tuple[int, int]:
    """Where the bytes or string whose Avro length is at ``position`` starts and ends; raises
    ValueError when the length is negative or runs past ``size``, IndexError when the data
    ends inside it."""
    length = data[position]
    if length & 0x80:
        length, position = _read_long(data, position)
    else:  # a length under 64 is one byte: read here, not in a call
        position += 1
        length = (length >> 1) ^ -(length & 1)
    end = position + length
    if length < 0 or end > size:
        raise ValueError("a length past the end of the data")
    return position, end


def _plain_envelope(
    job_id: uuid.UUID,
    queue: str,
    job_type: str,
    tenant_id: str,
    partition_key: str,
    payload: bytes,
    created_at: dt.datetime,
) -> Envelope:
    """``Envelope(job_id, ..., created_at)`` with every later field at its default."""
    if not _DIRECT:
        return Envelope(job_id, queue, job_type, tenant_id, partition_key, payload, created_at)
    made = _new_object(Envelope)
    (
        set_job_id, set_queue, set_job_type, set_tenant_id, set_partition_key, set_payload,
        set_created_at, set_run_after, set_max_attempts, set_idempotency_key,
        set_trace_context, set_replay_count, set_attributes,
    ) = _SETTERS  # fmt: skip
    set_job_id(made, job_id)
    set_queue(made, queue)
    set_job_type(made, job_type)
    set_tenant_id(made, tenant_id)
    set_partition_key(made, partition_key)
    set_payload(made, payload)
    set_created_at(made, created_at)
    set_run_after(made, None)
    set_max_attempts(made, None)
    set_idempotency_key(made, None)
    set_trace_context(made, {})
    set_replay_count(made, 0)
    set_attributes(made, {})
    return made


def _job_id(raw: bytes) -> uuid.UUID:
    """``uuid.UUID(raw.decode("ascii"))`` for the 36 bytes of an envelope's job id; raises
    ValueError as it does (``int`` rejects what is not ASCII).

    Without the hyphens, ``UUID`` reads its text with ``int(digits, 16)``: where that accepts
    the same 32 characters, the result is the same, so the object is made from the integer
    directly (half the cost of ``UUID(text)``, which re-checks what ``int`` has just read).
    ``int`` reads bytes as it reads their ASCII text, and accepts no more of them (fewer
    spaces), so anything it refuses goes to fastavro's reading, the reference. Anything else
    (braces, a ``urn:`` prefix, a hyphen elsewhere) is ``UUID``'s to judge. A unit test pins
    the ``UUID`` attributes this relies on.
    """
    digits = raw.replace(b"-", b"")
    if len(digits) != 32:
        return _UUID(raw.decode("ascii"))
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
