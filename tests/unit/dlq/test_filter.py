"""DLQ filters: relative and ISO times, prefix matching of error classes, and what a purge
can honour."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from tenantq.dlq.filter import DeadLetterFilter, FilterError, parse_position, parse_time
from tenantq.dlq.records import DeadLetter, decode_dead_letter
from tenantq.schemas.envelope import Envelope, encode_envelope

NOW = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90s", NOW - dt.timedelta(seconds=90)),
        ("15m", NOW - dt.timedelta(minutes=15)),
        ("1h", NOW - dt.timedelta(hours=1)),
        ("1.5h", NOW - dt.timedelta(minutes=90)),
        ("2d", NOW - dt.timedelta(days=2)),
        ("1w", NOW - dt.timedelta(weeks=1)),
        (" 3H ", NOW - dt.timedelta(hours=3)),
        ("2026-02-01T08:30:00+02:00", dt.datetime(2026, 2, 1, 6, 30, tzinfo=dt.UTC)),
        ("2026-02-01T08:30:00Z", dt.datetime(2026, 2, 1, 8, 30, tzinfo=dt.UTC)),
        ("2026-02-01T08:30:00", dt.datetime(2026, 2, 1, 8, 30, tzinfo=dt.UTC)),
        ("2026-02-01", dt.datetime(2026, 2, 1, tzinfo=dt.UTC)),
    ],
)
def test_times_relative_or_iso_come_back_in_utc(text: str, expected: dt.datetime) -> None:
    parsed = parse_time(text, now=NOW)
    assert parsed == expected
    assert parsed.tzinfo == dt.UTC


@pytest.mark.parametrize("text", ["", "yesterday", "1y", "-1h", "h1", "2026-13-01"])
def test_bad_times_are_a_clear_error(text: str) -> None:
    with pytest.raises(FilterError, match="ISO 8601"):
        parse_time(text, now=NOW)


@pytest.mark.parametrize(
    "text", ["99999999d", "9999999999999w", "9999-12-31T23:59:59-14:00", "0001-01-01T00:00+01:00"]
)
def test_times_out_of_range_are_a_clear_error(text: str) -> None:
    with pytest.raises(FilterError, match="before the year 1|out of range"):
        parse_time(text, now=NOW)


def test_since_must_be_before_until_and_job_ids_must_be_uuids() -> None:
    with pytest.raises(FilterError, match="before"):
        DeadLetterFilter.parse(since="1h", until="2h", now=NOW)
    with pytest.raises(FilterError, match="not a UUID"):
        DeadLetterFilter.parse(job_ids=["nope"])


def letter(
    *, tenant: str = "acme", job_type: str = "mail", error: str = "PermanentError", at_ms: int = 0
) -> DeadLetter:
    envelope = Envelope(
        job_id=uuid.uuid4(),
        queue="default",
        job_type=job_type,
        tenant_id=tenant,
        partition_key=tenant,
        payload=b"{}",
        created_at=NOW,
    )
    return decode_dead_letter(
        topic="t.default.dlq",
        partition=0,
        offset=1,
        timestamp_ms=at_ms or int(NOW.timestamp() * 1000),
        key=tenant.encode(),
        value=encode_envelope(envelope),
        raw_headers=[("tenantq-error-class", error.encode())],
        max_bytes=1_000_000,
    )


def test_filters_combine_with_and_and_repeat_with_or() -> None:
    where = DeadLetterFilter.parse(
        tenants=["acme", "globex"], job_types=["mail"], error_classes=["Perm"], now=NOW
    )
    assert where.matches(letter())
    assert where.matches(letter(tenant="globex"))
    assert not where.matches(letter(tenant="initech"))
    assert not where.matches(letter(job_type="export"))
    assert not where.matches(letter(error="Timeout"))


def test_time_window_uses_the_dead_at_time_half_open() -> None:
    where = DeadLetterFilter.parse(since="2h", until="1h", now=NOW)
    hour = 3_600_000
    now_ms = int(NOW.timestamp() * 1000)
    assert where.matches(letter(at_ms=now_ms - 2 * hour))
    assert where.matches(letter(at_ms=now_ms - hour - 1))
    assert not where.matches(letter(at_ms=now_ms - hour))
    assert not where.matches(letter(at_ms=now_ms - 2 * hour - 1))


def test_only_until_tells_purge_what_it_can_do() -> None:
    assert DeadLetterFilter.parse(until="1d", now=NOW).only_until
    assert not DeadLetterFilter.parse(until="1d", tenants=["acme"], now=NOW).only_until
    assert not DeadLetterFilter.parse(since="2d", until="1d", now=NOW).only_until
    assert not DeadLetterFilter().only_until


def test_the_audit_form_is_plain_sorted_json() -> None:
    job = uuid.uuid4()
    where = DeadLetterFilter.parse(tenants=["b", "a"], since="1h", job_ids=[str(job)], now=NOW)
    assert where.as_json() == {
        "tenants": ["a", "b"],
        "job_types": [],
        "error_classes": [],
        "since": "2026-03-01T11:00:00+00:00",
        "until": None,
        "job_ids": [str(job)],
    }


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("99999999d", "at most 36500d"),
        ("1e400", "finite"),
        ("9999-12-31T23:59:59-05:00", "out of range"),
        ("0001-01-01T00:00:00+05:00", "out of range"),
        ("x" * 10_000, "ISO 8601"),
    ],
)
def test_absurd_times_are_a_short_clear_error(text: str, why: str) -> None:
    with pytest.raises(FilterError, match=why) as raised:
        DeadLetterFilter.parse(since=text, now=NOW)
    assert len(str(raised.value)) < 300


def test_a_record_whose_time_is_unknown_matches_no_time_condition() -> None:
    timeless = decode_dead_letter(
        topic="t.default.dlq",
        partition=1,
        offset=5,
        timestamp_ms=None,
        key=None,
        value=None,
        raw_headers=[("tenantq-dead-at-ms", b"-99999999999999999")],
        max_bytes=1_000,
    )
    assert DeadLetterFilter().matches(timeless)
    assert not DeadLetterFilter.parse(since="1h", now=NOW).matches(timeless)
    assert not DeadLetterFilter.parse(until="1h", now=NOW).matches(timeless)
    assert DeadLetterFilter(positions=frozenset({(1, 5)})).matches(timeless)
    assert not DeadLetterFilter(positions=frozenset({(1, 6)})).matches(timeless)


def test_positions_are_partition_at_offset() -> None:
    assert parse_position("2@17") == (2, 17)
    assert parse_position(" 0@0 ") == (0, 0)
    for text in ("2@", "@17", "-1@3", "2@17@1", "a@b", str(uuid.uuid4())):
        assert parse_position(text) is None
