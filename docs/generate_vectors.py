"""Write the envelope's conformance vectors (``schemas/vectors/envelope_v1.json``).

A producer written in another language proves it speaks tenantq's wire format by encoding each
valid vector's ``decoded`` fields and comparing its bytes with ``encoded_hex``, and by
decoding each invalid vector into the named error. The vectors are made by tenantq's own
encoder (fastavro under the envelope schema) from fixed inputs, so they change only when the
schema or the encoding does::

    python docs/generate_vectors.py          # rewrite the vectors file
    python docs/generate_vectors.py --check  # exit 1 when the file is not current

``tests/unit/schemas/test_conformance_vectors.py`` runs the check, and decodes every vector
with fastavro alone and with tenantq's reader.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import uuid
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from tenantq.schemas.envelope import (
    DEFAULT_CODEC,
    SINGLE_OBJECT_MARKER,
    Envelope,
    encode_envelope,
)

VECTORS = Path(__file__).resolve().parent.parent / "schemas" / "vectors" / "envelope_v1.json"

_MINIMAL = Envelope(
    job_id=uuid.UUID("01939f2a-7c00-7000-8000-000000000001"),
    queue="default",
    job_type="send_email",
    tenant_id="acme",
    partition_key="acme",
    payload=b"{}",
    created_at=dt.datetime(2026, 12, 7, 3, 0, 0, tzinfo=dt.UTC),
)

_VALID: list[tuple[str, str, Envelope]] = [
    (
        "minimal",
        "Every optional field at its default: the shape nearly every job has.",
        _MINIMAL,
    ),
    (
        "full",
        "Every field set: scheduled, capped attempts, an idempotency key, a W3C trace "
        "context, a replay count and attributes.",
        Envelope(
            job_id=uuid.UUID("01939f2a-7c00-7abc-9def-0123456789ab"),
            queue="exports",
            job_type="billing.export:v2",
            tenant_id="globex-eu",
            partition_key="globex-eu#3",
            payload=json.dumps(
                {"account": 42, "format": "csv", "rows": [1, 2, 3], "note": None},
                separators=(",", ":"),
            ).encode(),
            created_at=dt.datetime(2026, 12, 7, 3, 0, 0, 123456, tzinfo=dt.UTC),
            run_after=dt.datetime(2026, 12, 7, 4, 30, 0, tzinfo=dt.UTC),
            max_attempts=5,
            idempotency_key="export-2026-12-07-globex",
            trace_context={
                "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "tracestate": "vendor=opaque",
            },
            replay_count=2,
            attributes={"origin": "billing-service", "priority": "high"},
        ),
    ),
    (
        "unicode",
        "Non-ASCII text in every string field and in the payload (lengths are UTF-8 bytes).",
        Envelope(
            job_id=uuid.UUID("01939f2a-7c00-7000-8000-0000000000ff"),
            queue="default",
            job_type="notify",
            tenant_id="tenant-ü",
            partition_key="tenant-ü",
            payload=json.dumps({"subject": "Grüße 👋 — 日本語"}, ensure_ascii=False).encode(),
            created_at=dt.datetime(2026, 12, 7, 3, 0, 0, tzinfo=dt.UTC),
            idempotency_key="ключ-1",
            attributes={"ラベル": "値"},
        ),
    ),
    (
        "before-epoch-and-long-payload",
        "A created_at before 1970 (a negative long) and a payload longer than 127 bytes "
        "(a multi-byte length).",
        Envelope(
            job_id=uuid.UUID("01939f2a-7c00-7000-8000-000000000abc"),
            queue="default",
            job_type="archive",
            tenant_id="initech",
            partition_key="initech",
            payload=json.dumps({"blob": "x" * 300}).encode(),
            created_at=dt.datetime(1969, 7, 20, 20, 17, 40, tzinfo=dt.UTC),
            max_attempts=1,
        ),
    ),
]


def _micros(moment: dt.datetime) -> int:
    delta = moment - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _json_value(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, dt.datetime):
        return _micros(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value


def decoded_fields(envelope: Envelope) -> dict[str, Any]:
    """The envelope's fields, in its order, as JSON values: the time fields in microseconds
    since the epoch (Avro's ``timestamp-micros``), the payload as its UTF-8 text (it is JSON).
    Read from the dataclass, so that a field the envelope gains is in every vector."""
    return {field.name: _json_value(getattr(envelope, field.name)) for field in fields(envelope)}


def _invalid() -> list[dict[str, str]]:
    valid = encode_envelope(_MINIMAL)
    unknown = SINGLE_OBJECT_MARKER + bytes.fromhex("0000000000000000") + valid[10:]
    return [
        {
            "name": "empty",
            "description": "A zero-length value (a tombstone).",
            "encoded_hex": "",
            "error": "EmptyMessage",
        },
        {
            "name": "bad-marker",
            "description": "Plain Avro without the single-object marker C3 01.",
            "encoded_hex": valid[10:].hex(),
            "error": "CorruptMessage",
        },
        {
            "name": "header-only",
            "description": "The marker and fingerprint, then nothing.",
            "encoded_hex": valid[:10].hex(),
            "error": "TruncatedMessage",
        },
        {
            "name": "truncated-body",
            "description": "The minimal vector cut five bytes short.",
            "encoded_hex": valid[:-5].hex(),
            "error": "TruncatedMessage",
        },
        {
            "name": "trailing-bytes",
            "description": "The minimal vector followed by a byte the record does not own.",
            "encoded_hex": (valid + b"\x00").hex(),
            "error": "CorruptMessage",
        },
        {
            "name": "unknown-fingerprint",
            "description": "A schema fingerprint no reader knows (there is no registry).",
            "encoded_hex": unknown.hex(),
            "error": "UnknownSchemaFingerprint",
        },
    ]


def render() -> str:
    """The vectors file, as it should be."""
    document = {
        "about": (
            "Conformance vectors of the tenantq job envelope (Avro single-object encoding: "
            "C3 01, the 8-byte little-endian CRC-64-AVRO fingerprint of the writer schema, "
            "then the Avro binary body). Generated by docs/generate_vectors.py; do not edit."
        ),
        "schema": "envelope_v1.avsc",
        "fingerprint_hex": DEFAULT_CODEC.writer.fingerprint.hex(),
        "kafka": {
            "key": "the envelope's partition_key, UTF-8",
            "headers": (
                "optional on the main topic (tenantq-job-id, tenantq-job-type, tenantq-tenant, "
                "tenantq-schema with fingerprint_hex): the worker reads the envelope"
            ),
        },
        "valid": [
            {
                "name": name,
                "description": description,
                "decoded": decoded_fields(envelope),
                "encoded_hex": encode_envelope(envelope).hex(),
            }
            for name, description, envelope in _VALID
        ],
        "invalid": _invalid(),
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is not current")
    arguments = parser.parse_args()
    wanted = render()
    if arguments.check:
        current = VECTORS.read_text(encoding="utf-8") if VECTORS.exists() else ""
        if current != wanted:
            print(f"{VECTORS} is not current: run python docs/generate_vectors.py")
            return 1
        return 0
    VECTORS.parent.mkdir(parents=True, exist_ok=True)
    VECTORS.write_text(wanted, encoding="utf-8")
    print(f"wrote {VECTORS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
