"""The one table that turns an attempt's ending into a job state."""

from __future__ import annotations

import pydantic
from fakes import seeded_retry_policy

from tenantq.app import JobType
from tenantq.consumer.outcomes import Verdict, classify
from tenantq.errors import JobCanceled, PermanentError, RateLimited, RetryableError, Snooze
from tenantq.headers import DelayReason
from tenantq.states import JobState, Outcome


def verdict(error: BaseException | None, attempt: int = 1, max_attempts: int = 3, **kw: object):  # type: ignore[no-untyped-def]
    return classify(
        error,
        job_type=kw.pop("job_type", None),
        attempt=attempt,  # type: ignore[arg-type]
        max_attempts=max_attempts,
        policy=seeded_retry_policy(),
        **kw,
    )  # type: ignore[arg-type]


def test_success_permanent_and_validation() -> None:
    assert verdict(None).state is JobState.SUCCEEDED
    assert verdict(PermanentError("no")).state is JobState.DEAD

    class M(pydantic.BaseModel):
        x: int

    try:
        M.model_validate({"x": "y"})
    except pydantic.ValidationError as error:
        assert verdict(error).state is JobState.DEAD


def test_retryable_until_attempts_run_out() -> None:
    first = verdict(ConnectionError("timeout"), attempt=1)
    assert first.state is JobState.RETRYING and first.delay_seconds is not None
    last = verdict(ConnectionError("timeout"), attempt=3)
    assert last.state is JobState.DEAD and "max attempts (3)" in (last.error_message or "")


def test_handler_delay_wins_over_backoff() -> None:
    assert verdict(RetryableError("x", delay=7)).delay_seconds == 7
    assert verdict(RateLimited(retry_after=42)).delay_seconds == 42


def test_snooze_gives_the_attempt_back() -> None:
    snoozed = verdict(Snooze(5), attempt=3, max_attempts=3)
    assert snoozed.state is JobState.RETRYING and snoozed.give_back and snoozed.delay_seconds == 5


def test_system_exit_and_cancellation_are_not_failures() -> None:
    for error in (SystemExit(1), KeyboardInterrupt(), JobCanceled("stop")):
        released = verdict(error, attempt=3)
        assert released.state is JobState.RUNNABLE and released.give_back


def test_shutdown_and_operator_cancel() -> None:
    assert verdict(None, cancel_reason="operator").state is JobState.CANCELED
    assert verdict(ValueError(), cancel_reason="shutdown").state is JobState.RUNNABLE
    assert verdict(None, cancel_reason="shutdown").state is JobState.SUCCEEDED


def test_timeout_retries_then_dies() -> None:
    assert verdict(None, timed_out=True).state is JobState.RETRYING
    assert verdict(None, attempt=3, timed_out=True).state is JobState.DEAD


def test_per_type_never_retry_on() -> None:
    job_type = JobType("t", "q", None, None, never_retry_on=(KeyError,), retry_on=())
    assert verdict(KeyError("k"), job_type=job_type).state is JobState.DEAD
    assert verdict(ValueError("v"), job_type=job_type).state is JobState.RETRYING


def test_retry_budget_per_error_class() -> None:
    job_type = JobType("t", "q", None, None, retry_budgets=((TimeoutError, 2),))
    assert verdict(TimeoutError(), attempt=1, max_attempts=8, job_type=job_type).retries
    spent = verdict(TimeoutError(), attempt=2, max_attempts=8, job_type=job_type)
    assert spent.state is JobState.DEAD and "retry budget of TimeoutError" in (
        spent.error_message or ""
    )
    # other errors keep the job's own max_attempts
    assert verdict(ValueError(), attempt=2, max_attempts=8, job_type=job_type).retries


def test_each_verdict_says_why_its_job_waits() -> None:
    assert verdict(ConnectionError("timeout")).delay_reason is DelayReason.RETRY
    assert verdict(RateLimited(retry_after=3)).delay_reason is DelayReason.RETRY
    assert verdict(Snooze(5)).delay_reason is DelayReason.SNOOZE
    assert verdict(None, timed_out=True).delay_reason is DelayReason.RETRY
    breaker = Verdict.snoozed("CircuitOpen", "open", 2.0, reason=DelayReason.BREAKER)
    assert breaker.delay_reason is DelayReason.BREAKER and breaker.give_back
    for done in (verdict(None), verdict(PermanentError("no")), Verdict.released("shutdown")):
        assert done.delay_reason is None


def test_constructors_fix_state_and_attempt_accounting_per_outcome() -> None:
    assert Verdict.succeeded() == Verdict(Outcome.SUCCEEDED, JobState.SUCCEEDED)
    released = Verdict.released("revoked")
    assert (released.outcome, released.state, released.give_back) == (
        Outcome.RELEASED,
        JobState.RUNNABLE,
        True,
    )
    snoozed = Verdict.snoozed("Snooze", "later", -3)
    assert (snoozed.state, snoozed.give_back, snoozed.delay_seconds) == (
        JobState.RETRYING,
        True,
        0.0,
    )
    retrying = Verdict.retrying("E", "m", 2.0, timed_out=True)
    assert (retrying.outcome, retrying.give_back) == (Outcome.TIMEOUT, False)
    assert Verdict.dead("E", "m", timed_out=True).outcome is Outcome.TIMEOUT
    assert Verdict.dead("E", "m").state is JobState.DEAD
