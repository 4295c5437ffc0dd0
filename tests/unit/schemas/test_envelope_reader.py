"""The worker's specialised envelope reader gives what fastavro gives: the same envelope for
every message, the same error class for every broken one."""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import random
import uuid
import weakref
from typing import Any

import fastavro
import pytest
from envelope_records import random_head, random_text, unset_tail

from tenantq.errors import EnvelopeError
from tenantq.schemas import envelope_reader
from tenantq.schemas.envelope import DEFAULT_CODEC, Envelope, decode_envelope
from tenantq.schemas.envelope_reader import read_envelope

MAX_BYTES = 10**6


def random_record(generator: random.Random, *, plain: bool) -> dict[str, Any]:
    record = random_head(generator)
    created = record["created_at"]
    record |= unset_tail()
    if not plain:
        field = generator.choice(
            ["run_after", "max_attempts", "idempotency_key", "trace", "replay", "attributes"]
        )
        if field == "run_after":
            record["run_after"] = created + dt.timedelta(seconds=5.5)
        elif field == "max_attempts":
            record["max_attempts"] = generator.choice([1, 64, 1000])
        elif field == "idempotency_key":
            record["idempotency_key"] = random_text(generator, 50)
        elif field == "trace":
            record["trace_context"] = {"traceparent": random_text(generator, 60)}
        elif field == "replay":
            record["replay_count"] = generator.choice([1, 70])
        else:
            record["attributes"] = {"k": "v"}
    return record


def outcome(data: bytes) -> object:
    """What decoding gives: the envelope, or the class of the error."""
    try:
        return decode_envelope(data, max_bytes=MAX_BYTES)
    except EnvelopeError as error:
        return type(error)


def fast_outcome(data: bytes) -> object:
    try:
        return read_envelope(data, max_bytes=MAX_BYTES)
    except EnvelopeError as error:
        return type(error)


def test_the_reader_is_on_for_the_shipped_schema() -> None:
    # Fails when a new envelope schema ships: update the reader (or accept the fastavro path).
    assert envelope_reader._ENABLED


def test_plain_envelopes_are_read_without_fastavro_and_equal_its_result() -> None:
    generator = random.Random(11)
    for _ in range(2000):
        data = DEFAULT_CODEC.encode_record(random_record(generator, plain=True))
        read = envelope_reader._read_plain(data)
        assert read is not None
        assert read == decode_envelope(data, max_bytes=MAX_BYTES)


def test_job_ids_are_made_as_uuid_makes_them() -> None:
    # The reader builds the UUID from its integer; it must be the object UUID(text) gives.
    generator = random.Random(14)
    texts = [str(uuid.UUID(int=generator.getrandbits(128))) for _ in range(500)]
    texts += [t.upper() for t in texts[:50]]
    for text in texts:
        made, expected = envelope_reader._job_id(text.encode()), uuid.UUID(text)
        assert type(made) is uuid.UUID
        assert made == expected and hash(made) == hash(expected) and str(made) == str(expected)
        assert made.is_safe is expected.is_safe
        assert made.version == expected.version
    weakref.ref(envelope_reader._job_id(texts[0].encode()))  # __weakref__ slot present, as UUID's
    # Not the canonical shape: UUID's own verdict, value or error.
    digits = texts[0].replace("-", "")
    braced = "{" + digits[:8] + "-" + digits[8:12] + "-" + digits[12:] + "}"
    assert len(braced) == 36
    assert envelope_reader._job_id(braced.encode()) == uuid.UUID(braced) == uuid.UUID(texts[0])
    for broken in ("x" * 36, texts[0][:35] + "g", "-" * 36, texts[0][:35] + "é"):
        with pytest.raises(ValueError):
            envelope_reader._job_id(broken.encode())


def test_other_envelopes_go_to_fastavro_with_the_same_result() -> None:
    generator = random.Random(12)
    for _ in range(500):
        data = DEFAULT_CODEC.encode_record(random_record(generator, plain=False))
        assert envelope_reader._read_plain(data) is None
        assert read_envelope(data, max_bytes=MAX_BYTES) == decode_envelope(
            data, max_bytes=MAX_BYTES
        )


def test_broken_messages_end_as_fastavro_ends_them() -> None:
    generator = random.Random(13)
    for _ in range(3000):
        data = bytearray(DEFAULT_CODEC.encode_record(random_record(generator, plain=True)))
        damage = generator.choice(["truncate", "flip", "append", "length"])
        if damage == "truncate":
            data = data[: generator.randrange(len(data))]
        elif damage == "flip":
            for _ in range(generator.randrange(1, 4)):
                position = generator.randrange(len(data))
                data[position] ^= 1 << generator.randrange(8)
        elif damage == "append":
            data += bytes([generator.randrange(256)])
        else:  # a string's length byte past the end, or negative
            data[47] = generator.choice([0x7F, 0x01, 0xFE])
        assert fast_outcome(bytes(data)) == outcome(bytes(data))


@pytest.mark.parametrize("size_limit", [10, 60])
def test_the_size_limit_holds_on_the_fast_path(size_limit: int) -> None:
    data = DEFAULT_CODEC.encode_record(random_record(random.Random(1), plain=True))
    assert len(data) > size_limit
    with pytest.raises(EnvelopeError) as raised:
        read_envelope(data, max_bytes=size_limit)
    assert type(raised.value).__name__ == "MessageTooLarge"


def test_a_plain_envelope_made_through_its_slots_is_the_dataclass_s_own() -> None:
    assert envelope_reader._DIRECT  # fails when Envelope's fields change: update the reader
    job_id = uuid.UUID(int=random.Random(15).getrandbits(128))
    created = dt.datetime(2026, 12, 3, tzinfo=dt.UTC)
    args = (job_id, "q", "t", "tenant-1", "tenant-1", b"{}", created)
    first, second = envelope_reader._plain_envelope(*args), envelope_reader._plain_envelope(*args)
    assert first == Envelope(*args) == second
    # Each envelope has maps of its own, as the dataclass's default factories give it.
    assert first.trace_context is not second.trace_context
    assert first.attributes is not second.attributes
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.queue = "other"  # type: ignore[misc]


def test_names_read_again_are_the_same_objects_and_the_same_envelope() -> None:
    generator = random.Random(16)
    record = random_head(generator) | {"queue": "q", "job_type": "t", "tenant_id": "acme"}
    record["partition_key"] = "acme"
    first = DEFAULT_CODEC.encode_record(random_record(generator, plain=True) | record)
    record["job_id"] = str(uuid.UUID(int=generator.getrandbits(128)))
    second = DEFAULT_CODEC.encode_record(random_record(generator, plain=True) | record)
    one, other = envelope_reader._read_plain(first), envelope_reader._read_plain(second)
    assert one == decode_envelope(first, max_bytes=MAX_BYTES)
    assert other == decode_envelope(second, max_bytes=MAX_BYTES)
    assert one is not None and other is not None and one.job_id != other.job_id
    assert one.tenant_id is other.tenant_id and one.queue is other.queue
    # Names that are not UTF-8 are never remembered: fastavro's reading names the error.
    broken = bytearray(first)
    broken[envelope_reader._JOB_ID_END + 1] = 0xFF  # the queue's only byte
    remembered = len(envelope_reader._NAMES)
    assert envelope_reader._read_plain(bytes(broken)) is None
    assert len(envelope_reader._NAMES) == remembered
    with pytest.raises(EnvelopeError):
        read_envelope(bytes(broken), max_bytes=MAX_BYTES)


def test_a_creation_time_read_again_is_the_same_object_and_damage_is_still_seen() -> None:
    generator = random.Random(17)
    created = dt.datetime(2026, 12, 4, 22, 40, 1, 123456, tzinfo=dt.UTC)
    batch = [
        DEFAULT_CODEC.encode_record(random_record(generator, plain=True) | {"created_at": created})
        for _ in range(50)
    ]
    read = [envelope_reader._read_plain(data) for data in batch]
    assert all(envelope is not None for envelope in read)
    assert [envelope.created_at for envelope in read if envelope is not None] == [created] * 50
    assert len({id(envelope.created_at) for envelope in read if envelope is not None}) == 1
    assert read == [decode_envelope(data, max_bytes=MAX_BYTES) for data in batch]
    # With the time remembered, any damage to its bytes or to the tail is judged as fastavro
    # judges it: the remembered bytes are only ever a whole varint ending at the tail.
    tail = len(envelope_reader.DEFAULT_TAIL)
    for data in batch[:20]:
        stamp_end = len(data) - tail
        for position in range(stamp_end - 8, len(data)):
            for bit in range(8):
                damaged = bytearray(data)
                damaged[position] ^= 1 << bit
                assert fast_outcome(bytes(damaged)) == outcome(bytes(damaged))
        assert fast_outcome(data[:-1]) == outcome(data[:-1])
        assert fast_outcome(data + b"\x00") == outcome(data + b"\x00")


def test_the_creation_times_remembered_are_bounded() -> None:
    generator = random.Random(18)
    base = dt.datetime(2026, 12, 4, tzinfo=dt.UTC)
    for step in range(envelope_reader.CREATED_REMEMBERED + 10):
        created = base + dt.timedelta(microseconds=step)
        data = DEFAULT_CODEC.encode_record(
            random_record(generator, plain=True) | {"created_at": created}
        )
        envelope = envelope_reader._read_plain(data)
        assert envelope is not None and envelope.created_at == created
        assert len(envelope_reader._CREATED) <= envelope_reader.CREATED_REMEMBERED


def fastavro_envelope(data: bytes) -> Envelope:
    """The envelope fastavro reads from ``data``, with nothing of tenantq's decoding in
    between: the reference the specialised reader is compared with."""
    schema = DEFAULT_CODEC.writer
    assert data[:2] == b"\xc3\x01" and data[2:10] == schema.fingerprint
    body = io.BytesIO(data[10:])
    record = fastavro.schemaless_reader(body, schema.parsed, schema.parsed)
    assert isinstance(record, dict) and body.read() == b""
    return Envelope(**record)


def fastavro_bytes(record: dict[str, Any]) -> bytes:
    """``record`` written by fastavro alone, as single-object encoding."""
    buffer = io.BytesIO()
    buffer.write(b"\xc3\x01" + DEFAULT_CODEC.writer.fingerprint)
    fastavro.schemaless_writer(buffer, DEFAULT_CODEC.writer.parsed, record)
    return buffer.getvalue()


#: Texts that reach every corner of a string field: empty, each UTF-8 width, escapes and
#: controls, and lengths on both sides of where the Avro length prefix grows a byte.
EDGE_TEXTS = [
    "",
    "a",
    "é",
    "漢字",
    "🙂" * 3,
    '\x00\n\t"\\\u2028',
    "x" * 63,
    "x" * 64,
    "é" * 32,
    "y" * 8191,
    "y" * 8192,
]
#: Every optional field at its default (None, empty, 0) and at other values, edges included.
OPTIONAL_VALUES: dict[str, list[Any]] = {
    "run_after": [
        None,
        dt.datetime(1970, 1, 1, tzinfo=dt.UTC),
        dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC),
        dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC),
    ],
    "max_attempts": [None, 0, 1, -1, 2**31 - 1, -(2**31)],
    "idempotency_key": [None, "", "k", "ключ-🙂", "z" * 300],
    "trace_context": [
        {},
        {"": ""},
        {"traceparent": "00-ab-cd-01"},
        {f"k{n}é": "v" * n for n in range(40)},
    ],
    "replay_count": [0, 1, -1, 63, 64, 2**31 - 1, -(2**31)],
    "attributes": [{}, {"a": ""}, {"🙂": "漢"}, {f"{n}": "w" * n for n in range(100)}],
}


def edge_records(generator: random.Random) -> list[dict[str, Any]]:
    """Envelope records over the edges: every optional field alone at each of its values,
    every subset of them set together, names and payloads of every edge text, payloads up
    to 900 kB, job ids of every digit, creation times from before 1970 to year 9999."""
    created_times = [
        dt.datetime(1970, 1, 1, tzinfo=dt.UTC),
        dt.datetime(1900, 1, 1, tzinfo=dt.UTC),
        dt.datetime(2026, 6, 1, 12, 0, 0, 1, tzinfo=dt.UTC),
        dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC),
    ]
    job_ids = [
        "00000000-0000-0000-0000-000000000000",
        "ffffffff-ffff-ffff-ffff-ffffffffffff",
        str(uuid.UUID(int=generator.getrandbits(128))),
    ]
    payloads = [b"", b"{}", b"null", '{"t":"é漢🙂"}'.encode(), b"x" * 16383, b"x" * 16384]
    payloads += [bytes(generator.randrange(256) for _ in range(1000)), b"p" * 900_000]

    def base() -> dict[str, Any]:
        return {
            "job_id": generator.choice(job_ids),
            "queue": "default",
            "job_type": "send_email",
            "tenant_id": "acme",
            "partition_key": "acme",
            "payload": b'{"to":"a@example.com"}',
            "created_at": generator.choice(created_times),
            **unset_tail(),
        }

    records = []
    for name, values in OPTIONAL_VALUES.items():
        for value in values:
            records.append(base() | {name: value})
    names = list(OPTIONAL_VALUES)
    for mask in range(1 << len(names)):
        record = base()
        for bit, name in enumerate(names):
            if mask & (1 << bit):
                record[name] = generator.choice(OPTIONAL_VALUES[name][1:])
        records.append(record)
    for text in EDGE_TEXTS:
        for field in ("queue", "job_type", "tenant_id", "partition_key"):
            records.append(base() | {field: text})
        records.append(base() | {"queue": text, "job_type": text, "tenant_id": text})
    for payload in payloads:
        records.append(base() | {"payload": payload})
        records.append(base() | {"payload": payload, "idempotency_key": "k", "replay_count": 2})
    for job_id in job_ids:
        records.append(base() | {"job_id": job_id.upper()})
    return records


def test_the_reader_equals_fastavro_over_edge_envelopes() -> None:
    """The differential test of the specialised reader against fastavro: envelopes written
    by fastavro alone, over every edge (``edge_records``), read by ``read_envelope`` and by
    fastavro alone, give equal envelopes; so does every truncation point of a few."""
    generator = random.Random(31)
    records = edge_records(generator)
    assert len(records) > 150
    plain = 0
    for record in records:
        data = fastavro_bytes(record)
        assert data == DEFAULT_CODEC.encode_record(record)
        expected = fastavro_envelope(data)
        read = read_envelope(data, max_bytes=MAX_BYTES)
        assert read == expected
        assert type(read.job_id) is uuid.UUID and read.job_id.is_safe is expected.job_id.is_safe
        plain += envelope_reader._read_plain(data) is not None
    assert plain > 50  # the fast path itself was compared, not only its fallback
    for record in records[:: max(1, len(records) // 12)]:
        data = fastavro_bytes(record)
        for end in sorted({*range(0, min(len(data), 80)), len(data) - 1, len(data) // 2}):
            assert fast_outcome(data[:end]) == outcome(data[:end])


def test_the_reader_equals_fastavro_over_random_envelopes() -> None:
    """Random envelopes of every field's kind of text and size (``tests/envelope_records``),
    a third of them with a random set of optional fields, read alike by both."""
    generator = random.Random(32)
    for _ in range(3000):
        record = random_record(generator, plain=generator.random() < 0.66)
        if generator.random() < 0.2:
            for name in generator.sample(list(OPTIONAL_VALUES), 3):
                record[name] = generator.choice(OPTIONAL_VALUES[name])
        data = fastavro_bytes(record)
        assert read_envelope(data, max_bytes=MAX_BYTES) == fastavro_envelope(data)
