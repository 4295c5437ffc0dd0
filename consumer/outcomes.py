"""Error classification, in one place: how an attempt's ending becomes a job state.

| what ended the attempt                          | outcome   | state     | attempt   |
| ----------------------------------------------- | --------- | --------- | --------- |
| handler returned                                | succeeded | succeeded | used      |
| operator cancel seen before it returned         | canceled  | canceled  | used      |
| ``PermanentError``, payload invalid, or a type  | dead      | dead      | used      |
| in the job type's ``never_retry_on``            |           |           |           |
| ``Snooze(delay)``                               | snoozed   | retrying  | given back|
| ``RateLimited`` / ``RetryableError`` / any other| retrying  | retrying  | used      |
| (dead once its error class's retry budget, or  |           |           |           |
|  ``max_attempts``, is used up)                 |           |           |           |
| ``Exception``, timeout                          | (dead when attempts are used up)      |
| shutdown / revoke before it finished            | released  | runnable  | given back|
| ``SystemExit`` / ``KeyboardInterrupt``          | released  | runnable  | given back|

A ``BaseException`` that is not an ``Exception`` is never a job failure: it stops the worker,
not the job (the attempt is given back).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pydantic

from tenantq.app import JobType
from tenantq.consumer.retry_policy import RetryPolicy
from tenantq.errors import (
    JobCanceled,
    PayloadValidationError,
    PermanentError,
    RateLimited,
    RetryableError,
    Snooze,
)
from tenantq.headers import DelayReason
from tenantq.states import JobState, Outcome


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with a job after an attempt. Build one with the constructor of its outcome
    (``Verdict.succeeded()``, ``Verdict.retrying(...)``, ...): each sets the state, whether the
    attempt is given back, and why a retry waits, consistently."""

    outcome: Outcome
    state: JobState
    error_class: str | None = None
    error_message: str | None = None
    delay_seconds: float | None = None
    give_back: bool = False
    #: Why the job waits in a retry tier (the ``DELAY_REASON`` header); None when it does not.
    delay_reason: DelayReason | None = None

    @property
    def retries(self) -> bool:
        return self.state is JobState.RETRYING

    @classmethod
    def succeeded(cls) -> Verdict:
        return _SUCCEEDED

    @classmethod
    def canceled(cls, message: str) -> Verdict:
        return cls(Outcome.CANCELED, JobState.CANCELED, "Canceled", message)

    @classmethod
    def dead(cls, error_class: str, message: str, *, timed_out: bool = False) -> Verdict:
        """Terminal failure; ``timed_out`` keeps the ``timeout`` outcome on a last attempt
        that overran."""
        outcome = Outcome.TIMEOUT if timed_out else Outcome.DEAD
        return cls(outcome, JobState.DEAD, error_class, message)

    @classmethod
    def retrying(
        cls,
        error_class: str,
        message: str,
        delay_seconds: float,
        *,
        timed_out: bool = False,
        reason: DelayReason = DelayReason.RETRY,
    ) -> Verdict:
        """A failed attempt (it counts) that runs again after ``delay_seconds``."""
        outcome = Outcome.TIMEOUT if timed_out else Outcome.RETRYING
        return cls(
            outcome,
            JobState.RETRYING,
            error_class,
            message,
            delay_seconds=max(0.0, delay_seconds),
            delay_reason=reason,
        )

    @classmethod
    def snoozed(
        cls,
        error_class: str,
        message: str,
        delay_seconds: float,
        *,
        reason: DelayReason = DelayReason.SNOOZE,
    ) -> Verdict:
        """Later, without spending the attempt (``Snooze``, an open circuit breaker)."""
        return cls(
            Outcome.SNOOZED,
            JobState.RETRYING,
            error_class,
            message,
            delay_seconds=max(0.0, delay_seconds),
            give_back=True,
            delay_reason=reason,
        )

    @classmethod
    def released(cls, reason: str) -> Verdict:
        """The lease is given back with its attempt (shutdown, revoke, a stopping worker):
        runnable again, and the message's offset stays unfinished for the next owner."""
        return cls(Outcome.RELEASED, JobState.RUNNABLE, "Released", reason, give_back=True)


_SUCCEEDED = Verdict(Outcome.SUCCEEDED, JobState.SUCCEEDED)


#: What an attempt says of the dependencies its job type names: ``success`` / ``failure``
#: count toward their circuit breakers; ``throttled`` (a 429: the dependency protecting
#: itself) and ``neutral`` (the job's own fault, or no call made) give the call permit back.
BreakerSignal = Literal["success", "failure", "throttled", "neutral"]


def crashed_too_often(crashes: int, crash_budget: int) -> str:
    """Why a job whose handler process kept dying is dead as ``PoisonJob``."""
    return f"the process running it died {crashes} times (crash budget {crash_budget})"


def breaker_signal(error: BaseException | None, timed_out: bool) -> BreakerSignal:
    if isinstance(error, RateLimited):
        return "throttled"
    if isinstance(error, PermanentError | PayloadValidationError | Snooze | JobCanceled):
        return "neutral"
    return "success" if error is None and not timed_out else "failure"


def error_name(error: BaseException) -> str:
    kind = type(error)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


def describe(error: BaseException) -> str:
    text = str(error)
    return text if text else repr(error)


def classify(
    error: BaseException | None,
    *,
    job_type: JobType | None,
    attempt: int,
    max_attempts: int,
    policy: RetryPolicy,
    cancel_reason: str | None = None,
    timed_out: bool = False,
) -> Verdict:
    """The verdict on one attempt. ``error`` is None when the handler returned."""
    if cancel_reason == "operator":
        return Verdict.canceled("canceled by an operator")
    if error is None and not timed_out:
        return Verdict.succeeded()
    if cancel_reason in ("shutdown", "revoked") and not timed_out:
        return Verdict.released(f"{cancel_reason} before the job finished")
    if timed_out:
        message = "handler did not finish before its timeout"
        return _retry_or_bury("Timeout", message, None, attempt, max_attempts, policy, True)
    assert error is not None
    if isinstance(error, JobCanceled):
        return Verdict.released(describe(error))
    if not isinstance(error, Exception):
        # SystemExit, KeyboardInterrupt: the worker is stopping, the job did nothing wrong.
        return Verdict.released(f"worker stopping ({error_name(error)})")
    if isinstance(error, Snooze):
        return Verdict.snoozed("Snooze", describe(error), error.delay)
    if isinstance(error, PermanentError | PayloadValidationError | pydantic.ValidationError):
        return Verdict.dead(error_name(error), describe(error))
    if (
        job_type is not None
        and job_type.never_retry_on
        and isinstance(error, job_type.never_retry_on)
    ):
        if not (job_type.retry_on and isinstance(error, job_type.retry_on)):
            return Verdict.dead(error_name(error), describe(error))
    delay = error.delay if isinstance(error, RetryableError) else None
    budgets = job_type.retry_budgets if job_type is not None else ()
    for budgeted, budget in budgets:
        if isinstance(error, budgeted) and attempt >= budget:
            return Verdict.dead(
                error_name(error),
                f"retry budget of {budgeted.__name__} ({budget} attempts) used up; "
                f"last error: {describe(error)}",
            )
    return _retry_or_bury(
        error_name(error), describe(error), delay, attempt, max_attempts, policy, False
    )


def _retry_or_bury(
    error_class: str,
    message: str,
    delay: float | None,
    attempt: int,
    max_attempts: int,
    policy: RetryPolicy,
    timed_out: bool,
) -> Verdict:
    if attempt >= max_attempts:
        return Verdict.dead(
            error_class,
            f"max attempts ({max_attempts}) reached; last error: {message}",
            timed_out=timed_out,
        )
    wait = policy.delay(attempt) if delay is None else delay
    return Verdict.retrying(error_class, message, wait, timed_out=timed_out)
