"""The job envelope: its dataclass and its Avro single-object codec.

Wire format (Avro "single-object encoding"): ``0xC3 0x01``, the 8-byte little-endian
CRC-64-AVRO fingerprint of the writer schema's parsing canonical form, then the Avro binary
body. There is no schema registry: a reader knows every envelope schema shipped in
``tenantq/schemas/envelope_v*.avsc`` and resolves the writer by fingerprint, reading with the
newest. Deployment rule that follows: ship a new ``.avsc`` to every reader before any writer
uses it (a reader that does not know a fingerprint raises ``UnknownSchemaFingerprint``).
"""

from __future__ import annotations

import datetime as dt
import io
import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer
from fastavro.schema import fingerprint, to_parsing_canonical_form

from tenantq.errors import (
    CorruptMessage,
    EmptyMessage,
    MessageTooLarge,
    TruncatedMessage,
    UnknownSchemaFingerprint,
)

#: The two marker bytes that open every single-object encoded message.
SINGLE_OBJECT_MARKER = b"\xc3\x01"
HEADER_LENGTH = len(SINGLE_OBJECT_MARKER) + 8

_SCHEMA_FILE = re.compile(r"^envelope_v(\d+)\.avsc$")


@dataclass(frozen=True, slots=True)
class Envelope:
    """One job as it travels through Kafka. ``payload`` is the JSON payload as UTF-8 bytes."""

    job_id: uuid.UUID
    queue: str
    job_type: str
    tenant_id: str
    partition_key: str
    payload: bytes
    created_at: dt.datetime
    run_after: dt.datetime | None = None
    max_attempts: int | None = None
    idempotency_key: str | None = None
    trace_context: dict[str, str] = field(default_factory=dict)
    replay_count: int = 0
    attributes: dict[str, str] = field(default_factory=dict)

    def payload_json(self) -> Any:
        """The payload decoded from JSON."""
        return json.loads(self.payload)


@dataclass(frozen=True)
class EnvelopeSchema:
    """One parsed envelope schema with its fingerprint."""

    version: int
    parsed: dict[str, Any]
    fingerprint: bytes

    @classmethod
    def from_definition(cls, version: int, definition: Mapping[str, Any]) -> EnvelopeSchema:
        parsed = parse_schema(dict(definition))
        if not isinstance(parsed, dict):
            raise ValueError("an envelope schema must be a record")
        digest = fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO")
        # fastavro renders the CRC-64-AVRO value as its little-endian bytes, which is exactly
        # the byte order single-object encoding puts on the wire.
        return cls(version=version, parsed=parsed, fingerprint=bytes.fromhex(digest))


class EnvelopeCodec:
    """Encodes with the newest known schema (or ``writer_version``); decodes any known one into
    the newest (or ``reader_version``).

    The module-level ``encode_envelope``/``decode_envelope`` use the shipped schemas; tests
    build codecs with extra schemas to prove evolution in both directions.
    """

    def __init__(
        self,
        schemas: Iterable[EnvelopeSchema],
        *,
        writer_version: int | None = None,
        reader_version: int | None = None,
    ) -> None:
        ordered = sorted(schemas, key=lambda schema: schema.version)
        if not ordered:
            raise ValueError("an envelope codec needs at least one schema")
        self._by_fingerprint = {schema.fingerprint: schema for schema in ordered}
        by_version = {schema.version: schema for schema in ordered}
        self.reader = by_version[reader_version] if reader_version is not None else ordered[-1]
        self.writer = by_version[writer_version] if writer_version is not None else ordered[-1]
        self._writer_header = SINGLE_OBJECT_MARKER + self.writer.fingerprint

    @property
    def writer_fingerprint_hex(self) -> str:
        return self.writer.fingerprint.hex()

    def encode_record(self, record: Mapping[str, Any]) -> bytes:
        """A raw record (field name to value) as a single-object encoded message."""
        buffer = io.BytesIO()
        buffer.write(self._writer_header)
        schemaless_writer(buffer, self.writer.parsed, record)
        return buffer.getvalue()

    def encode(self, envelope: Envelope) -> bytes:
        return self.encode_record(_record_of(envelope))

    def decode_record(self, data: bytes | None, *, max_bytes: int) -> dict[str, Any]:
        """The message as a record in the reader schema's shape. Raises an ``EnvelopeError``
        subclass naming the problem; never allocates more than ``data`` already holds."""
        if not data:
            raise EmptyMessage("empty message (null or zero-length value, e.g. a tombstone)")
        size = len(data)
        if size > max_bytes:
            raise MessageTooLarge(f"message of {size} bytes exceeds the limit of {max_bytes}")
        if size < len(SINGLE_OBJECT_MARKER) or data[:2] != SINGLE_OBJECT_MARKER:
            starts = bytes(data[:2]).hex() or "nothing"
            raise CorruptMessage(
                f"not an Avro single-object message: starts with {starts}, "
                f"expected {SINGLE_OBJECT_MARKER.hex()}"
            )
        if size < HEADER_LENGTH:
            raise TruncatedMessage(f"message of {size} bytes ends inside its 10-byte header")
        writer = self._by_fingerprint.get(bytes(data[2:HEADER_LENGTH]))
        if writer is None:
            raise UnknownSchemaFingerprint(
                f"unknown envelope schema fingerprint {bytes(data[2:HEADER_LENGTH]).hex()}; "
                f"known: {', '.join(sorted(fp.hex() for fp in self._by_fingerprint))}"
            )
        body = io.BytesIO(data)
        body.seek(HEADER_LENGTH)
        reader_schema = None if writer is self.reader else self.reader.parsed
        try:
            # fastavro reads a declared length with BytesIO.read(n), which returns at most what
            # is left, then raises EOFError on the short read: a body declaring a 2 GB string
            # costs no more memory than the message itself.
            record = schemaless_reader(body, writer.parsed, reader_schema)
        except EOFError as error:
            if "Expected -" in str(error):
                raise CorruptMessage(f"corrupt Avro body: negative length ({error})") from None
            raise TruncatedMessage(
                f"message of {size} bytes ends before its Avro body does ({error or 'EOF'})"
            ) from None
        except (ValueError, IndexError, TypeError, UnicodeDecodeError, OverflowError) as error:
            raise CorruptMessage(f"corrupt Avro body: {type(error).__name__}: {error}") from None
        if body.tell() != size:
            raise CorruptMessage(
                f"corrupt Avro body: {size - body.tell()} trailing bytes after the record"
            )
        if not isinstance(record, dict):
            raise CorruptMessage("corrupt Avro body: not a record")
        return record

    def decode(self, data: bytes | None, *, max_bytes: int) -> Envelope:
        record = self.decode_record(data, max_bytes=max_bytes)
        try:
            return _envelope_of(record)
        except (KeyError, TypeError, ValueError) as error:
            raise CorruptMessage(f"corrupt envelope: {type(error).__name__}: {error}") from None


def _record_of(envelope: Envelope) -> dict[str, Any]:
    # Built by hand: dataclasses.asdict deep-copies, which costs more than the encoding.
    return {
        "job_id": envelope.job_id,
        "queue": envelope.queue,
        "job_type": envelope.job_type,
        "tenant_id": envelope.tenant_id,
        "partition_key": envelope.partition_key,
        "payload": envelope.payload,
        "created_at": envelope.created_at,
        "run_after": envelope.run_after,
        "max_attempts": envelope.max_attempts,
        "idempotency_key": envelope.idempotency_key,
        "trace_context": envelope.trace_context,
        "replay_count": envelope.replay_count,
        "attributes": envelope.attributes,
    }


def _envelope_of(record: Mapping[str, Any]) -> Envelope:
    job_id = record["job_id"]
    return Envelope(
        job_id=job_id if isinstance(job_id, uuid.UUID) else uuid.UUID(str(job_id)),
        queue=record["queue"],
        job_type=record["job_type"],
        tenant_id=record["tenant_id"],
        partition_key=record["partition_key"],
        payload=record["payload"],
        created_at=record["created_at"],
        run_after=record.get("run_after"),
        max_attempts=record.get("max_attempts"),
        idempotency_key=record.get("idempotency_key"),
        trace_context=dict(record.get("trace_context") or {}),
        replay_count=record.get("replay_count", 0),
        attributes=dict(record.get("attributes") or {}),
    )


def shipped_schemas() -> list[EnvelopeSchema]:
    """Every ``envelope_v<N>.avsc`` packaged with tenantq, oldest first."""
    found = []
    for entry in resources.files("tenantq.schemas").iterdir():
        match = _SCHEMA_FILE.match(entry.name)
        if match:
            definition = json.loads(entry.read_text(encoding="utf-8"))
            found.append(EnvelopeSchema.from_definition(int(match.group(1)), definition))
    return sorted(found, key=lambda schema: schema.version)


DEFAULT_CODEC = EnvelopeCodec(shipped_schemas())

#: Hex fingerprint of the schema this build writes, for the ``tenantq-schema`` header.
SCHEMA_FINGERPRINT_HEX = DEFAULT_CODEC.writer_fingerprint_hex


def encode_envelope(envelope: Envelope) -> bytes:
    """The envelope as an Avro single-object message in the newest shipped schema."""
    return DEFAULT_CODEC.encode(envelope)


def decode_envelope(data: bytes | None, *, max_bytes: int) -> Envelope:
    """Decode a message written with any shipped envelope schema.

    Raises ``EmptyMessage``, ``MessageTooLarge``, ``CorruptMessage``, ``TruncatedMessage`` or
    ``UnknownSchemaFingerprint`` (all ``EnvelopeError``), each with a message naming the problem.
    """
    return DEFAULT_CODEC.decode(data, max_bytes=max_bytes)
