"""Every error tenantq raises or understands, in one tree.

Two families:

* ``TenantqError`` and its children: what the library raises to its callers (bad settings, bad
  input at enqueue, admission, undecodable messages, topic drift, lost leases).
* ``JobOutcome`` and its children: what a *handler* raises to tell the worker how an attempt
  ended (``RetryableError``, ``PermanentError``, ``RateLimited``, ``Snooze``). Any other
  ``Exception`` from a handler is retryable unless the job type says otherwise;
  ``BaseException`` that is not an ``Exception`` (``SystemExit``, ``KeyboardInterrupt``) is
  never a job failure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tenantq.producer.delivery import JobRef


class TenantqError(Exception):
    """Base of every error tenantq raises."""


class ConfigurationError(TenantqError):
    """A setting is missing or invalid. The message names the setting."""


# -- input at enqueue ----------------------------------------------------------------------


class InvalidJobError(TenantqError, ValueError):
    """An enqueue request that can never succeed (bad tenant, options, payload, size)."""


class InvalidTenantId(InvalidJobError):
    """The tenant id is empty, too long or has characters outside ``[A-Za-z0-9._:-]``."""


class PayloadValidationError(InvalidJobError):
    """The payload does not fit the job type's model; the message names the field."""


class UnknownJobType(TenantqError, LookupError):
    """No handler (or model) is registered for this job type."""


class JobConflict(TenantqError):
    """The same job id or idempotency key was used with a different payload."""


# -- admission (backpressure) ---------------------------------------------------------------


class AdmissionError(TenantqError):
    """The producer refused a job to protect the queue; retry later."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class QueueFull(AdmissionError):
    """The local producer buffer stayed full past the buffer timeout."""


class AdmissionRejected(AdmissionError):
    """The tenant's token bucket is empty; ``retry_after`` says when a token is due."""


class LatencyBudgetExceeded(AdmissionError):
    """The queue's oldest waiting message is older than its latency budget."""


class EnqueueFailed(TenantqError):
    """Kafka did not acknowledge the write. ``possibly_persisted`` means it may still have
    landed: retry with the same job id, which the worker deduplicates."""

    def __init__(self, message: str, *, retriable: bool, possibly_persisted: bool) -> None:
        super().__init__(message)
        self.retriable = retriable
        self.possibly_persisted = possibly_persisted


class BatchEnqueueFailed(EnqueueFailed):
    """Some jobs of an ``enqueue_batch`` were not acknowledged; every job is settled.

    ``failures`` maps request indexes to each job's own ``EnqueueFailed``; ``refs`` has the
    ``JobRef`` of each acknowledged job and None where it failed. The batch is ``retriable``
    if every failure is, and ``possibly_persisted`` if any failure is: resubmit the failed
    requests with the same job ids (the worker deduplicates).
    """

    def __init__(self, failures: dict[int, EnqueueFailed], refs: list[JobRef | None]) -> None:
        first_index, first = next(iter(failures.items()))
        super().__init__(
            f"{len(failures)} of {len(refs)} jobs were not acknowledged; "
            f"first, request #{first_index}: {first}",
            retriable=all(failure.retriable for failure in failures.values()),
            possibly_persisted=any(failure.possibly_persisted for failure in failures.values()),
        )
        self.failures = failures
        self.refs = refs


# -- decoding (what the worker dead-letters without a handler) --------------------------------


class EnvelopeError(TenantqError):
    """A message that cannot be turned into a job. ``reason`` is a short stable code."""

    reason = "undecodable"


class MessageTooLarge(EnvelopeError):
    reason = "oversized"


class TruncatedMessage(EnvelopeError):
    reason = "truncated"


class CorruptMessage(EnvelopeError):
    reason = "corrupt"


class UnknownSchemaFingerprint(EnvelopeError):
    reason = "unknown_schema"


class EmptyMessage(EnvelopeError):
    reason = "empty"


class InvalidEnvelopeField(EnvelopeError):
    """A decoded envelope with a value no tenantq producer writes (e.g. max_attempts -5)."""

    reason = "invalid_field"


# -- operations --------------------------------------------------------------------------------


class TopicDriftError(TenantqError):
    """An existing topic differs from its declaration (e.g. fewer partitions)."""


class DatabaseUnavailable(TenantqError):
    """PostgreSQL cannot be reached or dropped the connection (a restart, a failover, a proxy).
    Weather, not death: the work is kept and done again once the database is back.

    ``opened_at`` (``time.monotonic()``) is when the failed connection was opened, None for a
    connection that could not be opened: a connection older than the database's return is a
    leftover of the outage, not news of another one."""

    def __init__(self, message: str, opened_at: float | None = None) -> None:
        super().__init__(message)
        self.opened_at = opened_at


class DatabaseAccessRefused(DatabaseUnavailable):
    """PostgreSQL refused this client: a wrong password or user, no ``pg_hba.conf`` entry, a
    TLS setting the server rejects. Retrying as configured never gets in, so a process that
    is starting fails at once with this one line (it names the server); one that was running
    treats it as any outage (a password rotated under it comes back with the fix)."""


class KafkaAccessRefused(ConfigurationError):
    """The Kafka cluster refused this client's credentials or TLS (a failed SASL login, a
    certificate it does not trust). librdkafka would retry for ever; tenantq says so in one
    line naming the cluster instead (``tenantq.kafka_access``)."""


class DevStackError(TenantqError):
    """The local dev stack could not be started, stopped or found."""


# -- handler outcomes ------------------------------------------------------------------------


class JobOutcome(Exception):
    """Base of the exceptions a handler raises to steer its job."""


class RetryableError(JobOutcome):
    """Try again later. ``delay`` (seconds) replaces the computed backoff when given."""

    def __init__(self, message: str = "", delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay


class PermanentError(JobOutcome):
    """Never try again: the job goes dead at once with this reason."""


class RateLimited(RetryableError):
    """The downstream throttled us (e.g. HTTP 429); retry after ``retry_after`` seconds."""

    def __init__(self, retry_after: float, message: str = "rate limited") -> None:
        super().__init__(message, delay=retry_after)
        self.retry_after = retry_after


class JobCanceled(JobOutcome):
    """Raised by ``ctx.raise_if_cancelled()``: the job was asked to stop (by an operator, a
    shutdown or a rebalance) and did."""


class Snooze(JobOutcome):
    """Run again after ``delay`` seconds without consuming an attempt."""

    def __init__(self, delay: float) -> None:
        super().__init__(f"snoozed for {delay}s")
        self.delay = delay
