"""The values of a dead letter's headers, parsed without ever raising, and raw bytes made safe
to show.

Anyone who can write to a DLQ topic can put anything in its headers. Each parser here returns
the value, or a ``Problem`` saying why the bytes are not what tenantq writes there: a number
out of the range the worker could have written (a dead-at time in microseconds, a negative
offset), text that is not UTF-8 or has control characters, a job id that is not a UUID. The
record is then "unreadable" (``tenantq.dlq.records``), never an exception.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from tenantq import headers

#: Decimal integers as tenantq writes them: ASCII digits, an optional minus, at most 20 of
#: them (``int()`` alone would take spaces, underscores, other scripts' digits and 4,300
#: digits of CPU work).
_INTEGER = re.compile(rb"-?[0-9]{1,20}")
_SHA256_HEX = re.compile(rb"[0-9a-f]{64}")

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
#: The last millisecond a ``datetime`` can hold (9999-12-31T23:59:59.999Z).
LATEST_MS = (dt.datetime.max.replace(tzinfo=dt.UTC) - _EPOCH) // dt.timedelta(milliseconds=1)
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

#: How much of a raw value ``printable`` shows before it cuts.
SHOWN_CHARACTERS = 300


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a header's bytes are not a value tenantq could have written there."""

    reason: str


HeaderValue = str | int | uuid.UUID | dt.datetime | bytes


def millisecond_time(value: bytes) -> dt.datetime | Problem:
    """A time written as milliseconds since 1970, within what a ``datetime`` holds."""
    number = integer(value, 0, LATEST_MS)
    if isinstance(number, Problem):
        return Problem(f"{number.reason} (milliseconds since 1970, up to the year 9999)")
    return _EPOCH + dt.timedelta(milliseconds=number)


def time_of_ms(milliseconds: int | None) -> dt.datetime | None:
    """A record's Kafka timestamp as a time, or None when absent or out of range."""
    if milliseconds is None or not 0 <= milliseconds <= LATEST_MS:
        return None
    return _EPOCH + dt.timedelta(milliseconds=milliseconds)


def integer(value: bytes, low: int, high: int) -> int | Problem:
    """A decimal integer in ``[low, high]``."""
    if _INTEGER.fullmatch(value) is None:
        return Problem(f"{printable(value, 40)} is not a decimal integer")
    number = int(value)
    if not low <= number <= high:
        return Problem(f"{number} is out of range ({low} to {high})")
    return number


def name(value: bytes) -> str | Problem:
    """A name (error class, tenant, job type, worker, topic): UTF-8, every character printable
    (no control, format or line-separator characters)."""
    text = utf8(value)
    if isinstance(text, str) and not text.isprintable():
        return Problem(f"{printable(value, 80)} has unprintable characters")
    return text


def utf8(value: bytes) -> str | Problem:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return Problem(f"{printable(value, 80)} is not UTF-8")


def lenient_text(value: bytes) -> str:
    """Text that may be cut anywhere (the worker cuts error messages at 4,000 bytes, possibly
    inside a character): never a problem, undecodable bytes replaced."""
    return value.decode("utf-8", errors="replace")


def job_id(value: bytes) -> uuid.UUID | Problem:
    try:
        return uuid.UUID(value.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return Problem(f"{printable(value, 80)} is not a UUID")


def sha256_hex(value: bytes) -> bytes | Problem:
    if _SHA256_HEX.fullmatch(value) is None:
        return Problem(f"{printable(value, 80)} is not a SHA-256 in hex")
    return value


#: The parser of each header a dead letter's reader looks at; other headers (the job's own,
#: a tracing system's) are carried, never parsed.
PARSERS: dict[str, Callable[[bytes], HeaderValue | Problem]] = {
    headers.JOB_ID: job_id,
    headers.JOB_TYPE: name,
    headers.TENANT: name,
    headers.ERROR_CLASS: name,
    headers.ERROR_MESSAGE: lenient_text,
    headers.ATTEMPTS: lambda value: integer(value, 0, INT32_MAX),
    headers.WORKER: name,
    headers.SOURCE_TOPIC: name,
    headers.SOURCE_PARTITION: lambda value: integer(value, 0, INT32_MAX),
    headers.SOURCE_OFFSET: lambda value: integer(value, 0, INT64_MAX),
    headers.DEAD_AT_MS: millisecond_time,
    headers.PAYLOAD_SHA256: sha256_hex,
    headers.REPLAY_COUNT: lambda value: integer(value, 0, INT32_MAX),
}


def parse_headers(
    found: dict[str, bytes],
) -> tuple[dict[str, HeaderValue], list[str]]:
    """The parsed value of every known header present, and a problem line for each that does
    not parse (``tenantq-dead-at-ms: -99... is out of range ...``)."""
    values: dict[str, HeaderValue] = {}
    problems: list[str] = []
    for header, parse in PARSERS.items():
        raw = found.get(header)
        if raw is None:
            continue
        parsed = parse(raw)
        if isinstance(parsed, Problem):
            problems.append(f"{header}: {parsed.reason}")
        else:
            values[header] = parsed
    return values, problems


def printable(value: bytes | str | None, limit: int = SHOWN_CHARACTERS) -> str:
    """Raw bytes (or text) as one line that is safe at a terminal and in a page: UTF-8 shown
    as it is, other bytes as ``\\xNN``, control characters escaped (``\\n``, ``\\x1b``), cut
    after ``limit`` characters with the full size said."""
    if value is None:
        return "(none)"
    text = value.decode("utf-8", errors="backslashreplace") if isinstance(value, bytes) else value
    shown = text[:limit]
    escaped = "".join(
        character if character.isprintable() else _escape(character) for character in shown
    )
    if len(text) > limit:
        size = f"{len(value)} bytes" if isinstance(value, bytes) else f"{len(text)} characters"
        escaped += f"… ({size} in all)"
    return escaped


def _escape(character: str) -> str:
    escaped = repr(character)[1:-1]
    if escaped == character:  # printable to repr, not to str.isprintable (a wide space)
        return f"\\u{ord(character):04x}"
    return escaped
