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

import pydantic
from tenantq.app import JobType
from tenantq.consumer.retry_policy import RetryPolicy
from tenantq.errors import (
    JobCanceled,
    PayloadValidationError,
    PermanentError,
    RetryableError,
    Snooze,
)
from tenantq.states import JobState


@dataclass(frozen=True)
class Verdict:
    """What to do with a job after an attempt."""

    outcome: str
    state: JobState
    error_class: str | None = None
    error_message: str | None = None
    delay_seconds: float | None = None
    give_back: bool = False

    @property
    def retries(self) -> bool:
        return self.state is JobState.RETRYING


SUCCEEDED = Verdict("succeeded", JobState.SUCCEEDED)


def error_name(error: BaseException) -> str:
    kind = type(error)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


def describe(error: BaseException) -> str:
    text = str(error)
    return text if text else repr(error)


def released(reason: str) -> Verdict:
    return Verdict("released", JobState.RUNNABLE, "Released", reason, give_back=True)


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
        return Verdict("canceled", JobState.CANCELED, "Canceled", "canceled by an operator")
    if error is None and not timed_out:
        return SUCCEEDED
    if cancel_reason in ("shutdown", "revoked") and not timed_out:
        return released(f"{cancel_reason} before the job finished")
    if timed_out:
        error_class, message = "Timeout", "handler did not finish before its timeout"
        return _retry_or_bury("timeout", error_class, message, None, attempt, max_attempts, policy)
    assert error is not None
    if isinstance(error, JobCanceled):
        return released(describe(error))
    if not isinstance(error, Exception):
        # SystemExit, KeyboardInterrupt: the worker is stopping, the job did nothing wrong.
        return released(f"worker stopping ({error_name(error)})")
    if isinstance(error, Snooze):
        return Verdict(
            "snoozed",
            JobState.RETRYING,
            "Snooze",
            describe(error),
            delay_seconds=max(0.0, error.delay),
            give_back=True,
        )
    if isinstance(error, PermanentError | PayloadValidationError | pydantic.ValidationError):
        return Verdict("dead", JobState.DEAD, error_name(error), describe(error))
    if (
        job_type is not None
        and job_type.never_retry_on
        and isinstance(error, job_type.never_retry_on)
    ):
        if not (job_type.retry_on and isinstance(error, job_type.retry_on)):
            return Verdict("dead", JobState.DEAD, error_name(error), describe(error))
    delay = error.delay if isinstance(error, RetryableError) else None
    budgets = job_type.retry_budgets if job_type is not None else ()
    for budgeted, budget in budgets:
        if isinstance(error, budgeted) and attempt >= budget:
            return Verdict(
                "dead",
                JobState.DEAD,
                error_name(error),
                f"retry budget of {budgeted.__name__} ({budget} attempts) used up; "
                f"last error: {describe(error)}",
            )
    return _retry_or_bury(
        "retrying", error_name(error), describe(error), delay, attempt, max_attempts, policy
    )


def _retry_or_bury(
    outcome: str,
    error_class: str,
    message: str,
    delay: float | None,
    attempt: int,
    max_attempts: int,
    policy: RetryPolicy,
) -> Verdict:
    if attempt >= max_attempts:
        return Verdict(
            "dead" if outcome != "timeout" else "timeout",
            JobState.DEAD,
            error_class,
            f"max attempts ({max_attempts}) reached; last error: {message}",
        )
    wait = policy.delay(attempt) if delay is None else max(0.0, delay)
    return Verdict(outcome, JobState.RETRYING, error_class, message, delay_seconds=wait)
