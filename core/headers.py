"""Kafka header names tenantq writes and reads, in one place.

Headers are a convenience for routing and inspection; the envelope is the truth. A message with
missing headers is decoded from its envelope, never given a new job id.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

JOB_ID = "tenantq-job-id"
JOB_TYPE = "tenantq-job-type"
TENANT = "tenantq-tenant"
SCHEMA_FINGERPRINT = "tenantq-schema"
#: Milliseconds since the epoch at which a message in a retry tier becomes due.
DUE_AT_MS = "tenantq-due-at-ms"
#: Why a message sits in a retry tier: one of ``DelayReason``.
DELAY_REASON = "tenantq-delay-reason"
#: Dead-letter headers.
ERROR_CLASS = "tenantq-error-class"
ERROR_MESSAGE = "tenantq-error-message"
ATTEMPTS = "tenantq-attempts"
WORKER = "tenantq-worker"
SOURCE_TOPIC = "tenantq-source-topic"
SOURCE_PARTITION = "tenantq-source-partition"
SOURCE_OFFSET = "tenantq-source-offset"
DEAD_AT_MS = "tenantq-dead-at-ms"
PAYLOAD_SHA256 = "tenantq-payload-sha256"
REPLAY_COUNT = "tenantq-replay-count"


def header_map(headers: list[tuple[str, bytes | None]] | None) -> dict[str, bytes]:
    """Kafka's header list as a dict (last value wins), skipping null values."""
    result: dict[str, bytes] = {}
    for key, value in headers or ():
        if value is not None:
            result[key] = value
    return result


def header_pairs(
    listed: dict[str, str | bytes | None] | Sequence[tuple[str, str | bytes | None]] | None,
) -> list[tuple[str, bytes]]:
    """A consumed message's headers (``Message.headers()``: pairs, or a dict) as (name, bytes)
    pairs in their order: text values encoded as UTF-8, null values skipped."""
    pairs = listed.items() if isinstance(listed, dict) else listed or ()
    return [
        (str(name), value if isinstance(value, bytes) else str(value).encode())
        for name, value in pairs
        if value is not None
    ]


class DelayReason(enum.StrEnum):
    """The values of the ``DELAY_REASON`` header: why a message waits in a retry tier."""

    #: A failed attempt waits for its backoff.
    RETRY = "retry"
    #: The handler asked to run later (``Snooze``), without spending an attempt.
    SNOOZE = "snooze"
    #: Enqueued with ``run_after`` / ``delay`` in the future.
    SCHEDULED = "scheduled"
    #: A dependency's circuit breaker is open (or it has no permit free).
    BREAKER = "breaker"
    #: No worker of the group has a handler for the job type (a deploy rolling out).
    UNKNOWN_TYPE = "unknown-type"
    #: Replayed from the DLQ into the first retry tier (``tenantq dlq replay --to retry``).
    REPLAY = "replay"
