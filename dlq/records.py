"""One record of a queue's dead-letter topic, decoded for the DLQ tools (`tenantq dlq`).

The worker writes each dead letter as the original key and value bytes plus headers saying
why it died (``tenantq.producer.publisher.dead_letter``). The envelope is the truth: the job
id, type and tenant come from it when it decodes, and from the headers only when it does not
(an undecodable message has no envelope and possibly no job row; it cannot be replayed).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from dataclasses import dataclass
from typing import Any

from tenantq import headers
from tenantq.errors import EnvelopeError
from tenantq.schemas.envelope import Envelope, decode_envelope

#: Error classes the worker gives messages it could not decode (``Undecodable:<reason>``).
UNDECODABLE_PREFIX = "Undecodable:"


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A DLQ record: where it sits, what job it was, and why it died."""

    dlq_partition: int
    dlq_offset: int
    timestamp_ms: int
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
    dead_at: dt.datetime
    envelope: Envelope | None
    #: Why the value is not a usable envelope (None when it is).
    undecodable_reason: str | None

    @property
    def replayable(self) -> bool:
        """Whether replay can publish it again: only a decodable envelope can be."""
        return self.envelope is not None and not self.error_class.startswith(UNDECODABLE_PREFIX)

    @property
    def skip_reason(self) -> str | None:
        """Why replay must skip it, or None."""
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

    def as_dict(self, *, full: bool = False) -> dict[str, Any]:
        """Plain data for JSON; ``full`` adds every header and the decoded envelope."""
        data: dict[str, Any] = {
            "dlq_partition": self.dlq_partition,
            "dlq_offset": self.dlq_offset,
            "dead_at": self.dead_at.isoformat(),
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
        }
        if full:
            data["key"] = _text(self.key)
            data["headers"] = {name: _text(value) for name, value in self.headers}
            data["undecodable_reason"] = self.undecodable_reason
            data["envelope"] = _envelope_dict(self.envelope)
            data["value_bytes"] = None if self.value is None else len(self.value)
        return data


def decode_dead_letter(
    *,
    partition: int,
    offset: int,
    timestamp_ms: int,
    key: bytes | None,
    value: bytes | None,
    raw_headers: list[tuple[str, bytes]],
    max_bytes: int,
) -> DeadLetter:
    """A DLQ record as a ``DeadLetter``; never raises on bad content, only describes it."""
    found = headers.header_map(list(raw_headers))
    envelope: Envelope | None = None
    reason: str | None = None
    try:
        envelope = decode_envelope(value, max_bytes=max_bytes)
    except EnvelopeError as error:
        reason = f"{getattr(error, 'reason', type(error).__name__)}: {error}"
    dead_at_ms = _int(found.get(headers.DEAD_AT_MS)) or timestamp_ms
    return DeadLetter(
        dlq_partition=partition,
        dlq_offset=offset,
        timestamp_ms=timestamp_ms,
        key=key,
        value=value,
        headers=tuple(raw_headers),
        job_id=envelope.job_id if envelope else _uuid(found.get(headers.JOB_ID)),
        job_type=envelope.job_type if envelope else _str(found.get(headers.JOB_TYPE)),
        tenant=envelope.tenant_id if envelope else _str(found.get(headers.TENANT)),
        error_class=_str(found.get(headers.ERROR_CLASS)) or "(unknown)",
        error_message=_str(found.get(headers.ERROR_MESSAGE)) or "",
        attempts=_int(found.get(headers.ATTEMPTS)),
        worker=_str(found.get(headers.WORKER)),
        source_topic=_str(found.get(headers.SOURCE_TOPIC)),
        source_partition=_int(found.get(headers.SOURCE_PARTITION)),
        source_offset=_int(found.get(headers.SOURCE_OFFSET)),
        dead_at=dt.datetime.fromtimestamp(dead_at_ms / 1000, tz=dt.UTC),
        envelope=envelope,
        undecodable_reason=reason,
    )


def _str(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", errors="replace")


def _int(value: bytes | None) -> int | None:
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


def _uuid(value: bytes | None) -> uuid.UUID | None:
    try:
        return None if value is None else uuid.UUID(value.decode("ascii", errors="replace"))
    except ValueError:
        return None


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
    except ValueError:
        payload = _text(envelope.payload)
    return {
        "job_id": str(envelope.job_id),
        "queue": envelope.queue,
        "job_type": envelope.job_type,
        "tenant_id": envelope.tenant_id,
        "partition_key": envelope.partition_key,
        "created_at": envelope.created_at.isoformat(),
        "run_after": envelope.run_after.isoformat() if envelope.run_after else None,
        "max_attempts": envelope.max_attempts,
        "idempotency_key": envelope.idempotency_key,
        "replay_count": envelope.replay_count,
        "trace_context": envelope.trace_context,
        "attributes": envelope.attributes,
        "payload": payload,
    }
