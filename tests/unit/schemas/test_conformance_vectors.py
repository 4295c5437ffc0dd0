"""The envelope's conformance vectors (``schemas/vectors/envelope_v1.json``) say what workers
read: every valid vector decodes to its fields with fastavro alone (the schema file and nothing
of tenantq) and with tenantq's readers, and tenantq's encoders (fastavro's and the producer's
specialised writer) produce its bytes exactly; every invalid vector is refused with its named
error. The file is current with its generator."""

from __future__ import annotations

import datetime as dt
import io
import json
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from docs_scripts import docs_script
from fastavro import parse_schema, schemaless_reader
from fastavro.schema import fingerprint, to_parsing_canonical_form

from tenantq import errors
from tenantq.schemas.envelope import Envelope, decode_envelope, encode_envelope
from tenantq.schemas.envelope_reader import read_envelope
from tenantq.schemas.envelope_writer import (
    EnvelopeWriter,
    encode_long,
    encode_tail,
    timestamp_micros,
)

ROOT = Path(__file__).resolve().parents[3]
VECTORS = json.loads((ROOT / "schemas" / "vectors" / "envelope_v1.json").read_text("utf-8"))
SCHEMA = parse_schema(json.loads((ROOT / "schemas" / "envelope_v1.avsc").read_text("utf-8")))
VALID = {vector["name"]: vector for vector in VECTORS["valid"]}
INVALID = {vector["name"]: vector for vector in VECTORS["invalid"]}
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
MAX_BYTES = 1 << 20


def _generator() -> ModuleType:
    return docs_script("generate_vectors")


def _micros(moment: dt.datetime | None) -> int | None:
    return None if moment is None else timestamp_micros(moment)


def _moment(micros: int | None) -> dt.datetime | None:
    return None if micros is None else EPOCH + dt.timedelta(microseconds=micros)


def _envelope(fields: dict[str, Any]) -> Envelope:
    return Envelope(
        job_id=uuid.UUID(fields["job_id"]),
        queue=fields["queue"],
        job_type=fields["job_type"],
        tenant_id=fields["tenant_id"],
        partition_key=fields["partition_key"],
        payload=fields["payload"].encode(),
        created_at=_moment(fields["created_at"]) or EPOCH,
        run_after=_moment(fields["run_after"]),
        max_attempts=fields["max_attempts"],
        idempotency_key=fields["idempotency_key"],
        trace_context=fields["trace_context"],
        replay_count=fields["replay_count"],
        attributes=fields["attributes"],
    )


def _fields(envelope: Envelope) -> dict[str, Any]:
    """The envelope as the vectors write its decoded fields (the generator's own rule)."""
    fields: dict[str, Any] = _generator().decoded_fields(envelope)
    return fields


def test_the_vectors_are_current() -> None:
    path = ROOT / "schemas" / "vectors" / "envelope_v1.json"
    assert path.read_text("utf-8") == _generator().render(), (
        "schemas/vectors/envelope_v1.json is not current: run "
        ".venv/bin/python docs/generate_vectors.py"
    )


def test_there_is_a_minimal_and_a_full_vector_and_the_full_one_sets_every_field() -> None:
    assert {"minimal", "full"} <= set(VALID)
    assert all(value not in (None, {}, 0) for value in VALID["full"]["decoded"].values())
    canonical = to_parsing_canonical_form(SCHEMA)
    assert VECTORS["fingerprint_hex"] == fingerprint(canonical, "CRC-64-AVRO")


@pytest.mark.parametrize("name", sorted(VALID))
def test_a_valid_vector_decodes_with_fastavro_alone(name: str) -> None:
    data = bytes.fromhex(VALID[name]["encoded_hex"])
    assert data[:2] == b"\xc3\x01"
    assert data[2:10].hex() == VECTORS["fingerprint_hex"]
    body = io.BytesIO(data[10:])
    record = schemaless_reader(body, SCHEMA, None)
    assert body.tell() == len(data) - 10, "bytes left after the record"
    assert isinstance(record, dict)
    decoded = VALID[name]["decoded"]
    assert str(record["job_id"]) == decoded["job_id"]
    assert record["payload"] == decoded["payload"].encode()
    assert _micros(record["created_at"]) == decoded["created_at"]
    assert _micros(record["run_after"]) == decoded["run_after"]
    for field in (
        "queue",
        "job_type",
        "tenant_id",
        "partition_key",
        "max_attempts",
        "idempotency_key",
        "trace_context",
        "replay_count",
        "attributes",
    ):
        assert record[field] == decoded[field], field


@pytest.mark.parametrize("name", sorted(VALID))
def test_a_valid_vector_decodes_with_tenantqs_readers(name: str) -> None:
    data = bytes.fromhex(VALID[name]["encoded_hex"])
    assert _fields(read_envelope(data, max_bytes=MAX_BYTES)) == VALID[name]["decoded"]
    assert _fields(decode_envelope(data, max_bytes=MAX_BYTES)) == VALID[name]["decoded"]
    # The payload is JSON: what a handler's model is validated against.
    json.loads(read_envelope(data, max_bytes=MAX_BYTES).payload)


@pytest.mark.parametrize("name", sorted(VALID))
def test_tenantqs_encoders_produce_a_valid_vectors_bytes(name: str) -> None:
    envelope = _envelope(VALID[name]["decoded"])
    assert encode_envelope(envelope).hex() == VALID[name]["encoded_hex"]
    writer = EnvelopeWriter(bytes.fromhex("c301" + VECTORS["fingerprint_hex"]))
    produced = writer.encode(
        str(envelope.job_id),
        writer.identity(
            envelope.queue, envelope.job_type, envelope.tenant_id, envelope.partition_key
        ),
        envelope.payload,
        encode_long(timestamp_micros(envelope.created_at)),
        encode_tail(
            envelope.run_after,
            envelope.max_attempts,
            envelope.idempotency_key,
            envelope.trace_context,
            envelope.replay_count,
            envelope.attributes,
        ),
    )
    assert produced.hex() == VALID[name]["encoded_hex"]


@pytest.mark.parametrize("name", sorted(INVALID))
def test_an_invalid_vector_is_refused_with_its_named_error(name: str) -> None:
    data = bytes.fromhex(INVALID[name]["encoded_hex"])
    expected = getattr(errors, INVALID[name]["error"])
    assert issubclass(expected, errors.EnvelopeError)
    with pytest.raises(expected):
        read_envelope(data, max_bytes=MAX_BYTES)
    with pytest.raises(expected):
        decode_envelope(data, max_bytes=MAX_BYTES)
