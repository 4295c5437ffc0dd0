"""A periodic schedule: its definition, its ticks, and the identity of each tick's job.

The app holds its schedules as it holds its job types (``app.periodic`` checks one as it is
declared), so they are part of the foundation; ``tenantq.periodic.scheduler`` enqueues them.

Ticks are pure functions of the definition, the same in every process:

- ``every=N`` ticks at whole multiples of N seconds since the Unix epoch (``every=2`` at
  even seconds, ``every=3600`` on the hour), so workers started at different times agree;
- ``cron="m h dom mon dow"`` ticks when the expression matches, in UTC, as Debian's cron
  reads it (parsed by ``cronsim``).

Each tick's job has an id derived from the schedule name and the tick time (UUIDv7-shaped:
the tick's millisecond, then 74 bits of a SHA-256) and the idempotency key
``periodic:<name>:<tick>``, so any second enqueue of one tick names the same job.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import re
import uuid
from dataclasses import dataclass
from typing import Any, Required, TypedDict

from cronsim import CronSim, CronSimError

from tenantq.errors import ConfigurationError, InvalidTenantId
from tenantq.settings import seconds_of
from tenantq.tenant_ids import validate_tenant_id

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)


class ScheduleOptions(TypedDict, total=False):
    """The keyword arguments of ``app.periodic(name, ...)``, checked by ``make_schedule``."""

    job_type: Required[str]
    tenant: Required[str]
    payload: Any
    every: float | dt.timedelta | None
    cron: str | None
    queue: str | None
    catch_up: bool


@dataclass(frozen=True)
class Schedule:
    """One ``app.periodic(...)`` declaration."""

    name: str
    job_type: str
    tenant: str
    payload: Any
    every: dt.timedelta | None
    cron: str | None
    queue: str | None
    catch_up: bool

    @property
    def spec(self) -> str:
        """How the schedule is written in ``tenantq_periodic`` and ``tenantq periodic list``."""
        if self.cron is not None:
            return f"cron {self.cron}"
        assert self.every is not None
        return f"every {_seconds_text(self.every)}"

    def next_after(self, moment: dt.datetime) -> dt.datetime:
        """The first tick strictly after ``moment``."""
        if self.cron is not None:
            return next(iter(CronSim(self.cron, moment.astimezone(dt.UTC))))
        period = _micros(self.every)
        since = _micros(moment.astimezone(dt.UTC) - EPOCH)
        return EPOCH + dt.timedelta(microseconds=(since // period + 1) * period)

    def latest_at_or_before(self, moment: dt.datetime) -> dt.datetime:
        """The last tick at or before ``moment``."""
        moment = moment.astimezone(dt.UTC)
        if self.cron is not None:
            # cronsim skips its start both ways: start just after, then step back if needed.
            found: dt.datetime = next(
                iter(CronSim(self.cron, moment + dt.timedelta(seconds=1), reverse=True))
            )
            while found > moment:
                found = next(iter(CronSim(self.cron, found, reverse=True)))
            return found
        period = _micros(self.every)
        since = _micros(moment - EPOCH)
        return EPOCH + dt.timedelta(microseconds=(since // period) * period)

    def job_id(self, tick: dt.datetime, deployment: str) -> uuid.UUID:
        """The id of the job of ``tick`` in ``deployment`` (the topic prefix): the same
        wherever it is computed, and another in each deployment (job ids are unique across
        the deployments that share a database)."""
        milliseconds = _micros(tick.astimezone(dt.UTC) - EPOCH) // 1000
        text = f"{deployment}\x00{self.name}\x00{tick_text(tick)}"
        digest = hashlib.sha256(text.encode()).digest()
        bits = int.from_bytes(digest[:10])
        value = (
            (milliseconds << 80)
            | (0x7 << 76)
            | ((bits >> 68) << 64)
            | (0b10 << 62)
            | (bits & ((1 << 62) - 1))
        )
        return uuid.UUID(int=value)

    def idempotency_key(self, tick: dt.datetime) -> str:
        return f"periodic:{self.name}:{tick_text(tick)}"


def tick_text(tick: dt.datetime) -> str:
    """A tick in UTC, ISO 8601 to the microsecond when it has one."""
    text = tick.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    return text


def make_schedule(
    name: str,
    *,
    job_type: str,
    tenant: str,
    payload: Any = None,
    every: float | dt.timedelta | None = None,
    cron: str | None = None,
    queue: str | None = None,
    catch_up: bool = False,
) -> Schedule:
    """A checked ``Schedule``; a ``ConfigurationError`` names what is wrong."""
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ConfigurationError(f"periodic name {name!r} must match {NAME_PATTERN.pattern}")
    if (every is None) == (cron is None):
        raise ConfigurationError(f"periodic {name!r}: give exactly one of every= or cron=")
    interval: dt.timedelta | None = None
    if every is not None:
        seconds = seconds_of(every)
        if seconds is None:
            raise ConfigurationError(f"periodic {name!r}: every is seconds or a timedelta")
        if not math.isfinite(seconds):
            raise ConfigurationError(f"periodic {name!r}: every must be finite")
        interval = every if isinstance(every, dt.timedelta) else dt.timedelta(seconds=seconds)
        if interval < dt.timedelta(seconds=1):
            raise ConfigurationError(f"periodic {name!r}: every must be at least 1 second")
    if cron is not None:
        cron = " ".join(str(cron).split())
        if len(cron.split(" ")) != 5:
            raise ConfigurationError(
                f"periodic {name!r}: cron {cron!r} must have five fields (minute hour "
                "day-of-month month day-of-week)"
            )
        try:
            CronSim(cron, EPOCH)
        except CronSimError as error:
            raise ConfigurationError(f"periodic {name!r}: cron {cron!r}: {error}") from None
    try:
        tenant = validate_tenant_id(tenant)
    except InvalidTenantId as error:
        raise ConfigurationError(f"periodic {name!r}: {error}") from None
    return Schedule(
        name=name,
        job_type=job_type,
        tenant=tenant,
        payload={} if payload is None else payload,
        every=interval,
        cron=cron,
        queue=queue,
        catch_up=bool(catch_up),
    )


def _micros(delta: dt.timedelta | None) -> int:
    assert delta is not None
    return delta // _MICROSECOND


def _seconds_text(delta: dt.timedelta) -> str:
    seconds = delta.total_seconds()
    return f"{seconds:g}s"
