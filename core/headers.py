"""Kafka header names tenantq writes and reads, in one place.

Headers are a convenience for routing and inspection; the envelope is the truth. A message with
missing headers is decoded from its envelope, never given a new job id.
"""

from __future__ import annotations

from collections.abc import Sequence

JOB_ID = "tenantq-job-id"
JOB_TYPE = "tenantq-job-type"
TENANT = "tenantq-tenant"
SCHEMA_FINGERPRINT = "tenantq-schema"
#: Milliseconds since the epoch at which a message in a retry tier becomes due.
DUE_AT_MS = "tenantq-due-at-ms"
#: Why a message sits in a retry tier: retry, snooze, scheduled, breaker, unknown-type.
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
