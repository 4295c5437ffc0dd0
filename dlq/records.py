"""One record of a queue's dead-letter topic, decoded for the DLQ tools (`tenantq dlq`).

The worker writes each dead letter as the original key and value bytes plus headers saying
why it died (``tenantq.producer.publisher.dead_letter``). The envelope is the truth: the job
id, type and tenant come from it when it decodes, and from the headers only when it does not
(an undecodable message has no envelope and possibly no job row; it cannot be replayed).

Anyone can write to a DLQ topic, so nothing read here raises. A record that does not parse
is **unreadable**: a header tenantq reads holds what the worker could not have written there
(``tenantq.dlq.header_values``), or the body is not an envelope although no ``Undecodable``
error class says so. It is listed with what could be read and why it is unreadable, and it
is never replayed.

| record | decoded as | replay |
| --- | --- | --- |
| envelope, headers parse | a dead letter | yes, by its job row |
| worker's ``Undecodable:*`` letter, body not an envelope | undecodable | skipped |
| envelope, error class ``Undecodable:*`` (an invalid tenant) | undecodable | skipped |
| a header that does not parse | unreadable | skipped, counted |
| body not an envelope, no ``Undecodable:*`` error class | unreadable | skipped, counted |
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from dataclasses import dataclass, fields
from typing import Any, NamedTuple, TypeVar

from tenantq import headers
from tenantq.dlq import header_values
from tenantq.dlq.header_values import printable, time_of_ms
from tenantq.errors import EnvelopeError
from tenantq.schemas.envelope import Envelope, decode_envelope

#: Error classes the worker gives messages it could not decode (``Undecodable:<reason>``).
UNDECODABLE_PREFIX = "Undecodable:"
#: Why replay skips an unreadable record (one text, so a report counts them together).
UNREADABLE_SKIP = "unreadable: a DLQ record that does not parse is never replayed"


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A DLQ record: where it sits, what job it was, and why it died."""

    topic: str
    dlq_partition: int
    dlq_offset: int
    #: The record's Kafka timestamp (ms), None when the record has none.
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    job_id: uuid.UUID | None
    job_type: str | None
    tenant: str | None
    error_class: str
    error_message: str
    attempts: int | None
    worker: str | None
    source_topic: str | None
    source_partition: int | None
    source_offset: int | None
    #: From the dead-at header, else the record's timestamp; None when neither is a time.
    dead_at: dt.datetime | None
    envelope: Envelope | None
    #: Why the value is not a usable envelope (None when it is).
    undecodable_reason: str | None
    #: Why the record does not parse (None when it does): see the module docstring.
    unreadable_reason: str | None = None

    @property
    def unreadable(self) -> bool:
        """Whether the record does not parse (listed as such, never replayed)."""
        return self.unreadable_reason is not None

    @property
    def position(self) -> str:
        """``partition@offset``: how `tenantq dlq show` and the console name a record."""
        return f"{self.dlq_partition}@{self.dlq_offset}"

    @property
    def replayable(self) -> bool:
        """Whether replay can publish it again: only a readable, decodable envelope can be."""
        return self.skip_reason is None

    @property
    def skip_reason(self) -> str | None:
        """Why replay must skip it, or None."""
        if self.unreadable:
            return UNREADABLE_SKIP
        if self.envelope is None:
            return f"undecodable ({self.undecodable_reason}): no envelope to replay"
        if self.error_class.startswith(UNDECODABLE_PREFIX):
            # Decodes, yet the worker refused it (an invalid tenant id): it would die again.
            return f"refused by the worker as {self.error_class}: it would die again"
        return None

    @property
    def payload_sha256(self) -> bytes:
        """The hash the job row keeps of the payload (not of the whole envelope)."""
        assert self.envelope is not None
        return hashlib.sha256(self.envelope.payload).digest()

    def raw_headers(self) -> list[tuple[str, str]]:
        """Every header, name and value escaped for a terminal or a page (``printable``)."""
        return [(printable(name, 80), printable(value)) for name, value in self.headers]

    def as_dict(self, *, full: bool = False) -> dict[str, Any]:
        """Plain data for JSON; ``full`` adds every header and the decoded envelope. An
        unreadable record always carries its headers, escaped, and why it is unreadable."""
        data: dict[str, Any] = {
            "topic": self.topic,
            "dlq_partition": self.dlq_partition,
            "dlq_offset": self.dlq_offset,
            "timestamp_ms": self.timestamp_ms,
            "dead_at": self.dead_at.isoformat() if self.dead_at else None,
            "job_id": str(self.job_id) if self.job_id else None,
            "job_type": self.job_type,
            "tenant": self.tenant,
            "error_class": self.error_class,
            "error_message": self.error_message,
            "attempts": self.attempts,
            "worker": self.worker,
            "source_topic": self.source_topic,
            "source_partition": self.source_partition,
            "source_offset": self.source_offset,
            "replayable": self.replayable,
            "unreadable": self.unreadable,
        }
        if self.unreadable:
            data["unreadable_reason"] = self.unreadable_reason
            data["raw_headers"] = [list(pair) for pair in self.raw_headers()]
        if full:
            data["key"] = _text(self.key)
            data["headers"] = {name: _text(value) for name, value in self.headers}
            data["undecodable_reason"] = self.undecodable_reason
            data["unreadable_reason"] = self.unreadable_reason
            data["envelope"] = _envelope_dict(self.envelope)
            data["value_bytes"] = None if self.value is None else len(self.value)
        return data


class _Place(NamedTuple):
    """Where a record sits, and its headers as they came (what is known before any parsing)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
    raw_headers: list[tuple[str, bytes]]


def decode_dead_letter(
    *,
    topic: str,
    partition: int,
    offset: int,
    timestamp_ms: int | None,
    key: bytes | None,
    value: bytes | None,
    raw_headers: list[tuple[str, bytes]],
    max_bytes: int,
) -> DeadLetter:
    """A DLQ record as a ``DeadLetter``; never raises on bad content, only describes it."""
    found = headers.header_map(list(raw_headers))
    parsed, problems = header_values.parse_headers(found)
    envelope: Envelope | None = None
    reason: str | None = None
    try:
        envelope = decode_envelope(value, max_bytes=max_bytes)
    except EnvelopeError as error:
        reason = f"{error.reason}: {error}"
    error_class = _header(parsed, headers.ERROR_CLASS, str)
    if envelope is None and not (error_class or "").startswith(UNDECODABLE_PREFIX):
        problems.append(
            f"body: not an envelope ({printable(reason, 200)}) and no "
            f"{UNDECODABLE_PREFIX}* error class says the worker found it so"
        )
    return _letter(
        _Place(topic, partition, offset, timestamp_ms, raw_headers),
        key=key,
        value=value,
        parsed=parsed,
        envelope=envelope,
        undecodable_reason=reason,
        unreadable_reason="; ".join(problems) or None,
    )


def unreadable_letter(
    *,
    topic: str,
    partition: int,
    offset: int,
    timestamp_ms: int | None,
    raw_headers: list[tuple[str, bytes]],
    reason: str,
) -> DeadLetter:
    """A record that could not be read at all, with where it sits and why: a letter of which
    nothing was read."""
    return _letter(
        _Place(topic, partition, offset, timestamp_ms, raw_headers),
        key=None,
        value=None,
        parsed={},
        envelope=None,
        undecodable_reason=None,
        unreadable_reason=reason,
    )


def _letter(
    place: _Place,
    *,
    key: bytes | None,
    value: bytes | None,
    parsed: dict[str, header_values.HeaderValue],
    envelope: Envelope | None,
    undecodable_reason: str | None,
    unreadable_reason: str | None,
) -> DeadLetter:
    """The ``DeadLetter`` of what was read: the job from its envelope when it decoded, else
    from the headers that parsed; what neither says is unknown (None)."""
    topic, partition, offset, timestamp_ms, raw_headers = place
    dead_at = parsed.get(headers.DEAD_AT_MS)
    return DeadLetter(
        topic=topic,
        dlq_partition=partition,
        dlq_offset=offset,
        timestamp_ms=timestamp_ms,
        key=key,
        value=value,
        headers=tuple(raw_headers),
        job_id=envelope.job_id if envelope else _header(parsed, headers.JOB_ID, uuid.UUID),
        job_type=envelope.job_type if envelope else _header(parsed, headers.JOB_TYPE, str),
        tenant=envelope.tenant_id if envelope else _header(parsed, headers.TENANT, str),
        error_class=_header(parsed, headers.ERROR_CLASS, str) or "(unknown)",
        error_message=_header(parsed, headers.ERROR_MESSAGE, str) or "",
        attempts=_header(parsed, headers.ATTEMPTS, int),
        worker=_header(parsed, headers.WORKER, str),
        source_topic=_header(parsed, headers.SOURCE_TOPIC, str),
        source_partition=_header(parsed, headers.SOURCE_PARTITION, int),
        source_offset=_header(parsed, headers.SOURCE_OFFSET, int),
        dead_at=dead_at if isinstance(dead_at, dt.datetime) else time_of_ms(timestamp_ms),
        envelope=envelope,
        undecodable_reason=undecodable_reason,
        unreadable_reason=unreadable_reason,
    )


HeaderT = TypeVar("HeaderT", str, int, uuid.UUID)


def _header(
    parsed: dict[str, header_values.HeaderValue], header: str, kind: type[HeaderT]
) -> HeaderT | None:
    """The parsed value of ``header`` when it is a ``kind``, else None."""
    value = parsed.get(header)
    return value if isinstance(value, kind) else None


def _text(value: bytes | None) -> str | None:
    """Bytes as text when they are UTF-8, else as hex (so JSON output never fails)."""
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return "hex:" + value.hex()


def _envelope_dict(envelope: Envelope | None) -> dict[str, Any] | None:
    if envelope is None:
        return None
    try:
        payload: Any = envelope.payload_json()
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        payload = _text(envelope.payload)
    # Every field of the envelope, so that one added to it is shown too; the payload last,
    # as it is the long part.
    shown = {
        field.name: getattr(envelope, field.name)
        for field in fields(envelope)
        if field.name != "payload"
    }
    shown["job_id"] = str(envelope.job_id)
    shown["created_at"] = envelope.created_at.isoformat()
    shown["run_after"] = envelope.run_after.isoformat() if envelope.run_after else None
    shown["payload"] = payload
    return shown
