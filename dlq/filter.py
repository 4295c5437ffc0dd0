"""Which DLQ records an operator means: the filters of `tenantq dlq list | show | replay | purge`.

Within one option, repeated values are alternatives (``--tenant a --tenant b``: either); across
options, all must hold. Times are ISO 8601 (a time without a zone is UTC) or relative to now
(``90s``, ``15m``, ``1h``, ``2d``, ``1w``: that long ago, read by the settings' duration
parser, at most 100 years). A record whose time is unknown (unreadable, no usable timestamp)
matches no time condition.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tenantq.dlq.header_values import printable
from tenantq.dlq.records import DeadLetter
from tenantq.settings import DurationOutOfRange, parse_duration

_POSITION = re.compile(r"([0-9]{1,10})@([0-9]{1,19})")


class FilterError(ValueError):
    """A filter value that cannot be understood; the message says which and why."""


def parse_time(text: str, *, now: dt.datetime | None = None) -> dt.datetime:
    """An aware UTC time from ISO 8601 or an age (``1h`` = one hour before ``now``); a
    ``FilterError`` saying why for anything else, out-of-range times and ages included."""
    current = now or dt.datetime.now(dt.UTC)
    written = text.strip()
    try:
        parsed = dt.datetime.fromisoformat(written)
    except ValueError:
        try:
            return current - parse_duration(written)
        except DurationOutOfRange as error:
            raise FilterError(f"'{printable(text, 40)}' is out of range: {error}") from None
        except (ValueError, OverflowError) as error:
            raise FilterError(
                f"'{printable(text, 40)}' is neither an ISO 8601 time (2026-01-31T12:00:00Z) "
                f"nor an age (90s, 15m, 1h, 2d, 1w): {error}"
            ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    try:
        return parsed.astimezone(dt.UTC)
    except OverflowError:  # 9999-12-31T23:00-05:00 is past the calendar in UTC
        raise FilterError(f"'{printable(text, 40)}' is out of range in UTC") from None


def _option_time(option: str, text: str | None, now: dt.datetime) -> dt.datetime | None:
    try:
        return parse_time(text, now=now) if text else None
    except FilterError as error:
        raise FilterError(f"{option}: {error}") from None


def parse_position(text: str) -> tuple[int, int] | None:
    """``partition@offset`` (``2@17``: how the DLQ tools name a record), else None."""
    found = _POSITION.fullmatch(text.strip())
    return None if found is None else (int(found.group(1)), int(found.group(2)))


def parse_job_ids(values: Iterable[str]) -> frozenset[uuid.UUID]:
    """Job ids as UUIDs; a clear error naming the bad one."""
    ids = set()
    for value in values:
        try:
            ids.add(uuid.UUID(value.strip()))
        except ValueError:
            raise FilterError(f"--job-id '{printable(value, 40)}' is not a UUID") from None
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
    #: (partition, offset) of records wanted by where they sit (``tenantq dlq show 2@17``).
    positions: frozenset[tuple[int, int]] = frozenset()

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
            since=_option_time("--since", since, current),
            until=_option_time("--until", until, current),
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
        if self.since and (letter.dead_at is None or letter.dead_at < self.since):
            return False
        if self.until and (letter.dead_at is None or letter.dead_at >= self.until):
            return False
        if self.positions and (letter.dlq_partition, letter.dlq_offset) not in self.positions:
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
            **(
                {"positions": [f"{p}@{o}" for p, o in sorted(self.positions)]}
                if self.positions
                else {}
            ),
        }
