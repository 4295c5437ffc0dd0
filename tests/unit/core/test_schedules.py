"""Ticks of periodic schedules, the identity of each tick's job, and the checks of
``app.periodic``."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

import tenantq
from tenantq.schedules import make_schedule, tick_text

UTC = dt.UTC


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_every_ticks_at_whole_multiples_of_the_interval_since_the_epoch() -> None:
    schedule = make_schedule("beat", job_type="ping", tenant="ops", every=2)
    assert schedule.next_after(at("2026-12-01T10:00:01.300")) == at("2026-12-01T10:00:02")
    assert schedule.next_after(at("2026-12-01T10:00:02")) == at("2026-12-01T10:00:04")
    assert schedule.latest_at_or_before(at("2026-12-01T10:00:03.999")) == at("2026-12-01T10:00:02")
    assert schedule.latest_at_or_before(at("2026-12-01T10:00:04")) == at("2026-12-01T10:00:04")
    hourly = make_schedule("h", job_type="ping", tenant="ops", every=dt.timedelta(hours=1))
    assert hourly.next_after(at("2026-12-01T10:59:59")) == at("2026-12-01T11:00:00")
    assert hourly.spec == "every 3600s" and schedule.spec == "every 2s"


def test_cron_ticks_in_utc_both_ways() -> None:
    nightly = make_schedule("n", job_type="report", tenant="ops", cron="0 3 * * *")
    assert nightly.next_after(at("2026-12-01T03:00:00")) == at("2026-12-02T03:00:00")
    assert nightly.next_after(at("2026-12-01T02:59:59")) == at("2026-12-01T03:00:00")
    assert nightly.latest_at_or_before(at("2026-12-01T03:00:00")) == at("2026-12-01T03:00:00")
    assert nightly.latest_at_or_before(at("2026-12-01T02:59:59")) == at("2026-11-30T03:00:00")
    every_minute = make_schedule("m", job_type="report", tenant="ops", cron="* * * * *")
    assert every_minute.latest_at_or_before(at("2026-12-01T03:00:59.5")) == at(
        "2026-12-01T03:00:00"
    )
    assert nightly.spec == "cron 0 3 * * *"
    # An aware time in another zone means the same instant (11:00 in Tokyo is 02:00 UTC).
    tokyo = dt.timezone(dt.timedelta(hours=9))
    assert nightly.next_after(dt.datetime(2026, 12, 1, 11, 0, tzinfo=tokyo)) == at(
        "2026-12-01T03:00:00"
    )


def test_a_tick_has_one_job_id_and_key_wherever_it_is_computed() -> None:
    one = make_schedule("beat", job_type="ping", tenant="ops", every=2)
    same = make_schedule("beat", job_type="ping", tenant="ops", every=2)
    other = make_schedule("other", job_type="ping", tenant="ops", every=2)
    tick = at("2026-12-01T10:00:02")
    job_id = one.job_id(tick, "tenantq")
    assert job_id == same.job_id(tick, "tenantq")
    assert job_id != other.job_id(tick, "tenantq")
    assert job_id != one.job_id(at("2026-12-01T10:00:04"), "tenantq")
    # Each deployment sharing a database has its own job for the tick of its own schedule.
    assert job_id != one.job_id(tick, "staging")
    # UUIDv7-shaped: version 7, RFC variant, the tick's millisecond first (time-ordered).
    assert job_id.version == 7 and job_id.variant == uuid.RFC_4122
    assert job_id.int >> 80 == int(tick.timestamp() * 1000)
    assert one.idempotency_key(tick) == "periodic:beat:2026-12-01T10:00:02Z"
    assert tick_text(at("2026-12-01T10:00:02.5")) == "2026-12-01T10:00:02.500000Z"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"every": 2, "cron": "* * * * *"}, "exactly one of"),
        ({}, "exactly one of"),
        ({"every": 0.5}, "at least 1 second"),
        ({"every": float("nan")}, "finite"),
        ({"every": "2s"}, "seconds or a timedelta"),
        ({"cron": "0 3 * *"}, "five fields"),
        ({"cron": "0 0 3 * * *"}, "five fields"),
        ({"cron": "61 * * * *"}, "cron"),
        ({"every": 2, "tenant": "bad tenant!"}, "tenant"),
    ],
)
def test_bad_schedules_are_configuration_errors(arguments: dict[str, object], message: str) -> None:
    fields: dict[str, object] = {"job_type": "ping", "tenant": "ops", **arguments}
    with pytest.raises(tenantq.ConfigurationError, match=message):
        make_schedule("beat", **fields)  # type: ignore[arg-type]


def test_app_periodic_registers_by_unique_name() -> None:
    app = tenantq.App()
    app.periodic("beat", job_type="ping", tenant="ops", every=2, catch_up=True)
    assert app.schedules["beat"].catch_up and app.schedules["beat"].payload == {}
    with pytest.raises(tenantq.ConfigurationError, match="declared twice"):
        app.periodic("beat", job_type="ping", tenant="ops", every=5)
    with pytest.raises(tenantq.ConfigurationError, match="must match"):
        app.periodic("no spaces", job_type="ping", tenant="ops", every=5)
