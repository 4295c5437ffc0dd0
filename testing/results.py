"""What ``JobHarness`` reports: one ``Attempt`` per run of a handler, and a ``JobRun`` for a
job followed from its first attempt to where it settles."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from tenantq.states import JobState, Outcome
from tenantq.testing.recording_producer import EnqueuedJob

__all__ = ["Attempt", "JobRun"]


@dataclass(frozen=True)
class Attempt:
    """How one attempt ended, as the worker judges it (``tenantq.consumer.outcomes``).

    ``outcome`` and ``state`` are what the worker would record; ``delay_seconds`` is how long
    a retried or snoozed job waits before its next attempt (the retry policy, or the
    handler's own word: ``RetryableError(delay=...)``, ``RateLimited``, ``Snooze``);
    ``attempt_given_back`` says the attempt does not count (a snooze, a stopping worker).
    """

    job_type: str
    job_id: uuid.UUID
    tenant: str
    attempt: int
    max_attempts: int
    outcome: Outcome
    state: JobState
    error_class: str | None
    error_message: str | None
    delay_seconds: float | None
    attempt_given_back: bool
    #: What the handler raised (None: it returned, or it timed out without raising).
    error: BaseException | None
    #: Seconds the attempt ran.
    duration: float
    #: The progress a next attempt starts with (``ctx.progress``): the last checkpoint.
    progress: Any
    #: Every ``ctx.checkpoint(...)`` saved, in order, as the database would return it.
    checkpoints: list[Any] = field(default_factory=list)
    #: How many times the handler called ``ctx.heartbeat()``.
    heartbeats: int = 0
    #: The jobs the handler enqueued through the harness's ``producer`` meanwhile.
    enqueued: list[EnqueuedJob] = field(default_factory=list)

    @property
    def succeeded(self) -> bool:
        """The handler returned (and nobody asked it to stop before)."""
        return self.outcome is Outcome.SUCCEEDED

    @property
    def retrying(self) -> bool:
        """Failed (or timed out) and runs again after ``delay_seconds``; the attempt counts."""
        return self.state is JobState.RETRYING and not self.attempt_given_back

    @property
    def snoozed(self) -> bool:
        """Runs again after ``delay_seconds`` without spending the attempt."""
        return self.outcome is Outcome.SNOOZED

    @property
    def dead(self) -> bool:
        """Terminal failure (``error_message`` says why)."""
        return self.state is JobState.DEAD

    @property
    def timed_out(self) -> bool:
        """The handler overran its timeout (retried, or dead on the last attempt)."""
        return self.outcome is Outcome.TIMEOUT


@dataclass(frozen=True)
class JobRun:
    """A job's attempts from its first until it settled: a terminal state, a release (the
    lease given back by a stopping worker) or the harness's snooze limit."""

    attempts: list[Attempt]

    @property
    def last(self) -> Attempt:
        """The last attempt."""
        return self.attempts[-1]

    @property
    def state(self) -> JobState:
        """Where the job ended: succeeded, dead or canceled, else where it waits."""
        return self.last.state

    @property
    def outcome(self) -> Outcome:
        """How the last attempt ended."""
        return self.last.outcome

    @property
    def succeeded(self) -> bool:
        """The job ended succeeded."""
        return self.last.succeeded

    @property
    def dead(self) -> bool:
        """The job ended dead."""
        return self.last.dead

    @property
    def enqueued(self) -> list[EnqueuedJob]:
        """Every job the handler enqueued through the harness's producer, over all attempts."""
        return [job for attempt in self.attempts for job in attempt.enqueued]
