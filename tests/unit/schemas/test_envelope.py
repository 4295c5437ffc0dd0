"""The envelope codec: round trips, schema evolution both ways, and every bad input."""

from __future__ import annotations

import copy
import datetime as dt
import json
import struct
import uuid
from importlib import resources
from typing import Any

import pytest
from fastavro.schema import fingerprint, to_parsing_canonical_form

from tenantq.errors import (
    CorruptMessage,
    EmptyMessage,
    EnvelopeError,
    MessageTooLarge,
    TruncatedMessage,
    UnknownSchemaFingerprint,
)
from tenantq.schemas.envelope import (
    DEFAULT_CODEC,
    HEADER_LENGTH,
    SCHEMA_FINGERPRINT_HEX,
    SINGLE_OBJECT_MARKER,
    Envelope,
    EnvelopeCodec,
    EnvelopeSchema,
    decode_envelope,
    encode_envelope,
)

LIMIT = 1_000_000


def v1_definition() -> dict[str, Any]:
    text = resources.files("tenantq.schemas").joinpath("envelope_v1.avsc").read_text()
    return dict(json.loads(text))


def v2_definition() -> dict[str, Any]:
    """A test-local v2: v1 plus a field with a default, as a real evolution would add."""
    definition = copy.deepcopy(v1_definition())
    definition["fields"].append({"name": "priority", "type": "int", "default": 5})
    return definition


V1 = EnvelopeSchema.from_definition(1, v1_definition())
V2 = EnvelopeSchema.from_definition(2, v2_definition())


def make_envelope(**changes: Any) -> Envelope:
    values: dict[str, Any] = {
        "job_id": uuid.UUID("0190f1c2-7b3a-7def-8abc-0123456789ab"),
        "queue": "default",
        "job_type": "send_email",
        "tenant_id": "acme",
        "partition_key": "acme#3",
        "payload": json.dumps({"to": "a@example.com", "n": 1}).encode(),
        "created_at": dt.datetime(2026, 11, 29, 9, 0, 0, 123456, tzinfo=dt.UTC),
        "run_after": dt.datetime(2026, 11, 29, 10, 0, tzinfo=dt.UTC),
        "max_attempts": 8,
        "idempotency_key": "order-42",
        "trace_context": {"traceparent": "00-abc-def-01"},
        "replay_count": 2,
        "attributes": {"source": "test"},
    }
    values.update(changes)
    return Envelope(**values)


def test_round_trip_keeps_every_field() -> None:
    envelope = make_envelope()
    assert decode_envelope(encode_envelope(envelope), max_bytes=LIMIT) == envelope


def test_round_trip_of_optional_fields_left_empty() -> None:
    envelope = make_envelope(
        run_after=None, max_attempts=None, idempotency_key=None, trace_context={}, attributes={}
    )
    decoded = decode_envelope(encode_envelope(envelope), max_bytes=LIMIT)
    assert decoded == envelope
    assert decoded.created_at.tzinfo is not None
    assert decoded.payload_json() == {"to": "a@example.com", "n": 1}


def test_wire_format_is_single_object_encoding() -> None:
    data = encode_envelope(make_envelope())
    assert data[:2] == b"\xc3\x01"
    assert data[2:HEADER_LENGTH].hex() == SCHEMA_FINGERPRINT_HEX == V1.fingerprint.hex()


def test_fingerprint_is_little_endian_crc64_avro() -> None:
    # The Avro specification's CRC-64-AVRO of the schema "null" is 0x63dd24e7cc258f8a;
    # single-object encoding writes it little-endian.
    digest = bytes.fromhex(fingerprint(to_parsing_canonical_form("null"), "CRC-64-AVRO"))
    assert digest == struct.pack("<Q", 0x63DD24E7CC258F8A)
    assert V1.fingerprint == bytes.fromhex(
        fingerprint(to_parsing_canonical_form(V1.parsed), "CRC-64-AVRO")
    )


def test_old_writer_new_reader_fills_the_default() -> None:
    old = EnvelopeCodec([V1])
    new = EnvelopeCodec([V1, V2])
    record = new.decode_record(old.encode(make_envelope()), max_bytes=LIMIT)
    assert record["priority"] == 5
    assert record["tenant_id"] == "acme"
    assert new.decode(old.encode(make_envelope()), max_bytes=LIMIT) == make_envelope()


def test_new_writer_old_reader_ignores_the_added_field() -> None:
    new = EnvelopeCodec([V1, V2])
    # An old reader that has been shipped the v2 file but still reads as v1.
    old_reader = EnvelopeCodec([V1, V2], writer_version=1, reader_version=1)
    record = dict(new.decode_record(new.encode(make_envelope()), max_bytes=LIMIT))
    record["priority"] = 9
    data = new.encode_record(record)
    assert data[2:HEADER_LENGTH] == V2.fingerprint
    decoded = old_reader.decode_record(data, max_bytes=LIMIT)
    assert "priority" not in decoded
    assert old_reader.decode(data, max_bytes=LIMIT) == make_envelope()


def test_reader_that_never_saw_the_new_schema_names_the_fingerprint() -> None:
    data = EnvelopeCodec([V1, V2]).encode(make_envelope())
    with pytest.raises(UnknownSchemaFingerprint, match=V2.fingerprint.hex()):
        EnvelopeCodec([V1]).decode(data, max_bytes=LIMIT)


@pytest.mark.parametrize("data", [None, b""])
def test_empty_message(data: bytes | None) -> None:
    with pytest.raises(EmptyMessage, match="empty"):
        decode_envelope(data, max_bytes=LIMIT)


def test_oversized_message_is_refused_before_decoding() -> None:
    data = encode_envelope(make_envelope(payload=b"x" * 5000))
    with pytest.raises(MessageTooLarge, match=f"{len(data)} bytes exceeds the limit of 1024"):
        decode_envelope(data, max_bytes=1024)


@pytest.mark.parametrize("data", [b"\x00", b"{}", b'{"job_id": 1}', b"\xc3\x02" + b"\x00" * 20])
def test_bad_marker(data: bytes) -> None:
    with pytest.raises(CorruptMessage, match="not an Avro single-object message"):
        decode_envelope(data, max_bytes=LIMIT)


def test_unknown_fingerprint() -> None:
    data = SINGLE_OBJECT_MARKER + b"\x01" * 8 + b"\x00"
    with pytest.raises(UnknownSchemaFingerprint, match="0101010101010101"):
        decode_envelope(data, max_bytes=LIMIT)


def test_header_cut_short() -> None:
    with pytest.raises(TruncatedMessage, match="header"):
        decode_envelope(encode_envelope(make_envelope())[:6], max_bytes=LIMIT)


def test_every_truncation_of_the_body_is_reported() -> None:
    data = encode_envelope(make_envelope())
    for length in range(HEADER_LENGTH, len(data)):
        with pytest.raises(EnvelopeError) as raised:
            decode_envelope(data[:length], max_bytes=LIMIT)
        assert isinstance(raised.value, TruncatedMessage | CorruptMessage), length


def test_trailing_garbage() -> None:
    with pytest.raises(CorruptMessage, match="3 trailing bytes"):
        decode_envelope(encode_envelope(make_envelope()) + b"abc", max_bytes=LIMIT)


def test_huge_declared_length_does_not_allocate_it() -> None:
    header = SINGLE_OBJECT_MARKER + bytes.fromhex(SCHEMA_FINGERPRINT_HEX)
    # job_id is a string: declare 2**31 - 1 bytes (zig-zag varint) and give three.
    body = b"\xfe\xff\xff\xff\x0f" + b"abc"
    with pytest.raises(TruncatedMessage, match="Expected 2147483647 bytes"):
        decode_envelope(header + body, max_bytes=LIMIT)


def test_negative_length() -> None:
    header = SINGLE_OBJECT_MARKER + bytes.fromhex(SCHEMA_FINGERPRINT_HEX)
    with pytest.raises(CorruptMessage, match="negative length"):
        decode_envelope(header + b"\x03" + b"\x00" * 40, max_bytes=LIMIT)


def test_invalid_utf8_and_bad_union_index() -> None:
    header = SINGLE_OBJECT_MARKER + bytes.fromhex(SCHEMA_FINGERPRINT_HEX)
    with pytest.raises(CorruptMessage):
        decode_envelope(header + b"\x04\xff\xfe" + b"\x00" * 40, max_bytes=LIMIT)
    good = encode_envelope(make_envelope(run_after=None, max_attempts=None, idempotency_key=None))
    # The run_after union index follows created_at; flip every byte to a bad index in turn
    # and require that each either decodes or fails with an EnvelopeError, never anything else.
    for position in range(HEADER_LENGTH, len(good)):
        mutated = bytearray(good)
        mutated[position] = 0x7F
        try:
            decode_envelope(bytes(mutated), max_bytes=LIMIT)
        except EnvelopeError:
            pass


def test_default_codec_writes_the_newest_shipped_schema() -> None:
    assert DEFAULT_CODEC.writer is DEFAULT_CODEC.reader
    assert DEFAULT_CODEC.writer.version >= 1
