"""The producer's specialised envelope writer is byte-for-byte fastavro's."""

from __future__ import annotations

import datetime as dt
import random

from envelope_records import random_head, random_text

from tenantq.schemas.envelope import DEFAULT_CODEC, decode_envelope
from tenantq.schemas.envelope_writer import (
    WRITTEN_FOR_FINGERPRINT,
    EnvelopeWriter,
    encode_long,
    encode_tail,
    timestamp_micros,
    writer_for,
)


def test_the_writer_matches_the_shipped_schema() -> None:
    # Fails when a new envelope schema ships: update the writer (or accept the fastavro path).
    assert DEFAULT_CODEC.writer_fingerprint_hex == WRITTEN_FOR_FINGERPRINT
    assert writer_for(DEFAULT_CODEC) is not None


def test_encode_long_matches_avro_examples() -> None:
    # From the Avro specification: 0 -> 00, -1 -> 01, 1 -> 02, -2 -> 03, 2 -> 04, 64 -> 80 01.
    assert [encode_long(value) for value in (0, -1, 1, -2, 2, -64, 64)] == [
        b"\x00", b"\x01", b"\x02", b"\x03", b"\x04", b"\x7f", b"\x80\x01",
    ]  # fmt: skip


def test_byte_for_byte_fastavro_over_many_envelopes() -> None:
    writer = writer_for(DEFAULT_CODEC)
    assert isinstance(writer, EnvelopeWriter)
    generator = random.Random(7)
    for _ in range(2000):
        record = random_head(generator)
        created = record["created_at"]
        run_after = None if generator.random() < 0.5 else created + dt.timedelta(seconds=5.5)
        record |= {
            "run_after": run_after,
            "max_attempts": generator.choice([None, 1, 63, 64, 1000]),
            "idempotency_key": generator.choice([None, "", random_text(generator, 300)]),
            "trace_context": {
                random_text(generator, 10): random_text(generator, 60)
                for _ in range(generator.choice([0, 0, 1, 3]))
            },
            "replay_count": generator.choice([0, 0, 1, 70]),
            "attributes": {random_text(generator, 5): "v" for _ in range(generator.choice([0, 2]))},
        }
        expected = DEFAULT_CODEC.encode_record(record)
        identity = writer.identity(
            record["queue"], record["job_type"], record["tenant_id"], record["partition_key"]
        )
        tail = encode_tail(
            run_after,
            record["max_attempts"],
            record["idempotency_key"],
            record["trace_context"],
            record["replay_count"],
            record["attributes"],
        )
        actual = writer.encode(
            record["job_id"],
            identity,
            record["payload"],
            encode_long(timestamp_micros(created)),
            tail,
        )
        assert actual == expected
        assert decode_envelope(actual, max_bytes=10**6).created_at == created
