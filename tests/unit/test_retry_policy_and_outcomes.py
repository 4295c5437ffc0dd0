"""The retry policy's formula and bounds, and the one table that turns an attempt's ending into
a job state."""

from __future__ import annotations

import random

import pydantic
import pytest
from tenantq.app import JobType
from tenantq.consumer.outcomes import classify
from tenantq.consumer.retry_policy import RetryPolicy
from tenantq.errors import JobCanceled, PermanentError, RateLimited, RetryableError, Snooze
from tenantq.states import JobState
from tenantq.topics import tier_for_wait


def policy(jitter: float = 0.5) -> RetryPolicy:
    return RetryPolicy(
        base_delay=2, multiplier=3, max_delay=60, jitter=jitter, random_source=random.Random(1)
    )


def test_backoff_grows_within_jitter_band_and_caps() -> None:
    p = policy()
    for attempt, ceiling in [(1, 2), (2, 6), (3, 18), (4, 54), (5, 60), (400, 60)]:
        for _ in range(50):
            delay = p.delay(attempt)
            assert ceiling * 0.5 <= delay <= ceiling


def test_no_jitter_is_exact() -> None:
    assert policy(jitter=0).delay(3) == 18


@pytest.mark.parametrize("bad", [{"base_delay": 0}, {"multiplier": float("nan")}, {"jitter": 2}])
def test_policy_rejects_nonsense(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**bad)  # type: ignore[arg-type]


def verdict(error: BaseException | None, attempt: int = 1, max_attempts: int = 3, **kw: object):  # type: ignore[no-untyped-def]
    return classify(
        error,
        job_type=kw.pop("job_type", None),
        attempt=attempt,  # type: ignore[arg-type]
        max_attempts=max_attempts,
        policy=policy(),
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


def test_tier_choice_covers_the_wait_and_hops_past_the_last() -> None:
    delays = (5.0, 30.0, 300.0)
    assert tier_for_wait(0.1, delays) == 0
    assert tier_for_wait(5.0, delays) == 0
    assert tier_for_wait(5.1, delays) == 1
    assert tier_for_wait(299, delays) == 2
    assert tier_for_wait(10_000, delays) == 2


def test_retry_budget_per_error_class() -> None:
    job_type = JobType("t", "q", None, None, retry_budgets=((TimeoutError, 2),))
    assert verdict(TimeoutError(), attempt=1, max_attempts=8, job_type=job_type).retries
    spent = verdict(TimeoutError(), attempt=2, max_attempts=8, job_type=job_type)
    assert spent.state is JobState.DEAD and "retry budget of TimeoutError" in (
        spent.error_message or ""
    )
    # other errors keep the job's own max_attempts
    assert verdict(ValueError(), attempt=2, max_attempts=8, job_type=job_type).retries


def test_transient_database_errors_are_recognised() -> None:
    from tenantq.consumer.runner import is_transient_database_error

    class Deadlock(Exception):
        sqlstate = "40P01"

    class Wrapped(Exception):
        orig = Deadlock()

    assert is_transient_database_error(Deadlock())
    assert is_transient_database_error(Wrapped())
    try:
        try:
            raise Deadlock()
        except Deadlock as inner:
            raise RuntimeError("query failed") from inner
    except RuntimeError as outer:
        assert is_transient_database_error(outer)
    assert not is_transient_database_error(ValueError("no"))
