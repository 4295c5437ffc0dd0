"""Dead letters: garbage in the DLQ is described, not raised; a record that does not parse is
unreadable, with what could be read, and never replayable."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid

import pytest

from tenantq import headers
from tenantq.dlq.records import UNREADABLE_SKIP, DeadLetter, decode_dead_letter
from tenantq.schemas.envelope import Envelope, encode_envelope

NOW_MS = 1_796_609_536_579  # 2026-12-07T...Z


def letter(
    raw_headers: list[tuple[str, bytes]], value: bytes | None, timestamp_ms: int | None = NOW_MS
) -> DeadLetter:
    return decode_dead_letter(
        topic="t.default.dlq",
        partition=2,
        offset=7,
        timestamp_ms=timestamp_ms,
        key=b"acme",
        value=value,
        raw_headers=raw_headers,
        max_bytes=1_000_000,
    )


def envelope_bytes(job: uuid.UUID) -> bytes:
    return encode_envelope(
        Envelope(job, "default", "mail", "acme", "acme", b"{}", dt.datetime.now(dt.UTC))
    )


def worker_headers(**replaced: bytes) -> list[tuple[str, bytes]]:
    """What the worker writes on a dead letter, with some values replaced."""
    written = {
        headers.ERROR_CLASS: b"PermanentError",
        headers.ERROR_MESSAGE: b"downstream said no",
        headers.ATTEMPTS: b"3",
        headers.WORKER: b"host-1:4242",
        headers.SOURCE_TOPIC: b"t.default",
        headers.SOURCE_PARTITION: b"1",
        headers.SOURCE_OFFSET: b"42",
        headers.DEAD_AT_MS: str(NOW_MS).encode(),
    }
    written.update({name.replace("_", "-"): value for name, value in replaced.items()})
    return list(written.items())


def test_garbage_in_the_dlq_is_described_not_raised() -> None:
    job = uuid.uuid4()
    found = letter(
        [("tenantq-error-class", b"Undecodable:corrupt"), ("tenantq-job-id", str(job).encode())],
        b"\x00garbage",
        timestamp_ms=1,
    )
    assert found.envelope is None and not found.replayable and not found.unreadable
    assert found.job_id == job
    assert found.skip_reason is not None and "undecodable (corrupt" in found.skip_reason
    assert found.as_dict(full=True)["envelope"] is None


def test_what_the_worker_writes_is_readable_and_replayable() -> None:
    job = uuid.uuid4()
    found = letter(worker_headers(), envelope_bytes(job))
    assert found.replayable and not found.unreadable and found.skip_reason is None
    assert (found.job_id, found.attempts, found.source_offset) == (job, 3, 42)
    assert found.dead_at == dt.datetime.fromtimestamp(NOW_MS / 1000, tz=dt.UTC)
    assert found.position == "2@7"


@pytest.mark.parametrize(
    ("header", "value", "why"),
    [
        ("tenantq-dead-at-ms", b"-99999999999999999", "out of range"),
        ("tenantq-dead-at-ms", b"1796609536579000", "out of range"),  # microseconds
        ("tenantq-dead-at-ms", b"253402300800000", "out of range"),  # 10000-01-01
        ("tenantq-dead-at-ms", b"soon", "not a decimal integer"),
        ("tenantq-attempts", b"-1", "out of range"),
        ("tenantq-attempts", "١٢".encode(), "not a decimal integer"),  # digits, not ASCII ones
        ("tenantq-source-offset", b"1_000", "not a decimal integer"),
        ("tenantq-source-partition", b"9" * 5000, "not a decimal integer"),
        ("tenantq-job-id", b"not-a-uuid", "not a UUID"),
        ("tenantq-error-class", b"\xff\xfe", "not UTF-8"),
        ("tenantq-tenant", b"acme\n<script>", "unprintable"),
        ("tenantq-payload-sha256", b"abc", "not a SHA-256"),
    ],
)
def test_a_header_that_does_not_parse_makes_the_record_unreadable(
    header: str, value: bytes, why: str
) -> None:
    job = uuid.uuid4()
    found = letter([*worker_headers(), (header, value)], envelope_bytes(job))
    assert found.unreadable and not found.replayable
    assert found.skip_reason == UNREADABLE_SKIP
    assert found.unreadable_reason is not None
    assert found.unreadable_reason.startswith(f"{header}: ") and why in found.unreadable_reason
    # What could be read still is: where it sits, the job, the other headers.
    assert (found.topic, found.position, found.job_id, found.attempts is not None) == (
        "t.default.dlq", "2@7", job, header != "tenantq-attempts"
    )  # fmt: skip
    data = found.as_dict()
    assert data["unreadable"] is True and data["unreadable_reason"] == found.unreadable_reason
    assert [header, *found.raw_headers()[-1][1:]] == data["raw_headers"][-1]
    json.dumps(found.as_dict(full=True))


def test_an_out_of_range_dead_at_falls_back_to_the_record_timestamp() -> None:
    found = letter(worker_headers(dead_at_ms=b"-99999999999999999"), envelope_bytes(uuid.uuid4()))
    assert found.dead_at == dt.datetime.fromtimestamp(NOW_MS / 1000, tz=dt.UTC)
    for stamp in (None, -5, 2**62):
        timeless = letter([], b"\x00", timestamp_ms=stamp)
        assert timeless.dead_at is None and timeless.as_dict()["dead_at"] is None


def test_a_body_that_is_no_envelope_without_an_undecodable_class_is_unreadable() -> None:
    found = letter(worker_headers(), b"\x00not avro")
    assert found.unreadable and found.unreadable_reason is not None
    assert found.unreadable_reason.startswith("body: not an envelope (corrupt:")
    assert letter([], None).unreadable  # nothing at all: no class, no body


def test_raw_headers_are_escaped_for_terminals_and_pages() -> None:
    found = letter([("x-\x1b[2J", b"[/]\n\x00\xff<b>")], b"\x00")
    [(name, value)] = found.raw_headers()
    assert name == "x-\\x1b[2J"
    assert value == "[/]\\n\\x00\\xff<b>"
    long = letter([("x", b"a" * 1000)], b"\x00").raw_headers()[0][1]
    assert long.endswith("… (1000 bytes in all)") and len(long) < 330


def test_a_deeply_nested_payload_is_shown_as_text() -> None:
    envelope = Envelope(
        uuid.uuid4(), "default", "mail", "acme", "acme", b"[" * 100_000, dt.datetime.now(dt.UTC)
    )
    found = letter(worker_headers(), encode_envelope(envelope))
    assert found.as_dict(full=True)["envelope"]["payload"] == "[" * 100_000


def test_the_full_view_shows_every_envelope_field_as_json() -> None:
    job = uuid.uuid4()
    found = letter(worker_headers(), envelope_bytes(job))
    shown = found.as_dict(full=True)["envelope"]
    assert set(shown) == {field.name for field in dataclasses.fields(Envelope)}
    assert list(shown)[-1] == "payload"
    assert (shown["job_id"], shown["payload"], shown["run_after"]) == (str(job), {}, None)
    assert dt.datetime.fromisoformat(shown["created_at"]).tzinfo is not None
    json.dumps(shown)
