"""Which DLQ records an operator means: the filters of `tenantq dlq list | show | replay | purge`.

Within one option, repeated values are alternatives (``--tenant a --tenant b``: either); across
options, all must hold. Times are ISO 8601 (a time without a zone is UTC) or relative to now
(``90s``, ``15m``, ``1h``, ``2d``, ``1w``: that long ago).
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tenantq.dlq.records import DeadLetter

_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


class FilterError(ValueError):
    """A filter value that cannot be understood; the message says which and why."""


def parse_time(text: str, *, now: dt.datetime | None = None) -> dt.datetime:
    """An aware UTC time from ISO 8601 or a relative age (``1h`` = one hour before ``now``)."""
    current = now or dt.datetime.now(dt.UTC)
    relative = _RELATIVE.match(text)
    if relative:
        amount, unit = float(relative.group(1)), relative.group(2).lower()
        try:
            return current - dt.timedelta(seconds=amount * _UNIT_SECONDS[unit])
        except OverflowError:
            raise FilterError(f"{text!r} reaches back before the year 1") from None
    try:
        parsed = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise FilterError(
            f"{text!r} is neither an ISO 8601 time (2026-01-31T12:00:00Z) "
            "nor a relative age (90s, 15m, 1h, 2d, 1w)"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    try:
        return parsed.astimezone(dt.UTC)
    except OverflowError:
        raise FilterError(f"{text!r} is out of range in UTC") from None


def parse_job_ids(values: Iterable[str]) -> frozenset[uuid.UUID]:
    """Job ids as UUIDs; a clear error naming the bad one."""
    ids = set()
    for value in values:
        try:
            ids.add(uuid.UUID(value.strip()))
        except ValueError:
            raise FilterError(f"--job-id {value!r} is not a UUID") from None
    return frozenset(ids)


@dataclass(frozen=True)
class DeadLetterFilter:
    """A conjunction of optional conditions on a ``DeadLetter``; empty matches everything."""

    tenants: frozenset[str] = frozenset()
    job_types: frozenset[str] = frozenset()
    #: Prefixes of the error class (``Undecodable`` matches every ``Undecodable:<reason>``).
    error_classes: tuple[str, ...] = ()
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    job_ids: frozenset[uuid.UUID] = frozenset()

    @classmethod
    def parse(
        cls,
        *,
        tenants: Iterable[str] = (),
        job_types: Iterable[str] = (),
        error_classes: Iterable[str] = (),
        since: str | None = None,
        until: str | None = None,
        job_ids: Iterable[str] = (),
        now: dt.datetime | None = None,
    ) -> DeadLetterFilter:
        """Build from command-line text; raises ``FilterError`` on a bad value."""
        current = now or dt.datetime.now(dt.UTC)
        built = cls(
            tenants=frozenset(tenants),
            job_types=frozenset(job_types),
            error_classes=tuple(error_classes),
            since=parse_time(since, now=current) if since else None,
            until=parse_time(until, now=current) if until else None,
            job_ids=parse_job_ids(job_ids),
        )
        if built.since and built.until and built.since >= built.until:
            raise FilterError(f"--since ({built.since}) must be before --until ({built.until})")
        return built

    def matches(self, letter: DeadLetter) -> bool:
        """Whether the record satisfies every condition."""
        if self.tenants and letter.tenant not in self.tenants:
            return False
        if self.job_types and letter.job_type not in self.job_types:
            return False
        if self.error_classes and not letter.error_class.startswith(self.error_classes):
            return False
        if self.since and letter.dead_at < self.since:
            return False
        if self.until and letter.dead_at >= self.until:
            return False
        return not (self.job_ids and letter.job_id not in self.job_ids)

    @property
    def only_until(self) -> bool:
        """True when the filter is nothing but ``--until`` (what purge can honour exactly)."""
        return self.until is not None and self == DeadLetterFilter(until=self.until)

    def as_json(self) -> dict[str, Any]:
        """The filter as the audit table stores it (sorted, times in ISO 8601 UTC)."""
        return {
            "tenants": sorted(self.tenants),
            "job_types": sorted(self.job_types),
            "error_classes": list(self.error_classes),
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "job_ids": sorted(str(job_id) for job_id in self.job_ids),
        }
