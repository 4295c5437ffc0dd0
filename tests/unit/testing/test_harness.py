"""``JobHarness`` reports each attempt as the worker would judge it: success, retry with the
policy's delay or the handler's, dead with its reason, snoozed, timed out, canceled or
released; with the model validated, checkpoints carried to the next attempt, and the jobs a
handler enqueued."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import fakes
import pytest
from pydantic import BaseModel

import tenantq
from tenantq.consumer.retry_policy import RetryPolicy
from tenantq.errors import PayloadValidationError
from tenantq.states import JobState, Outcome
from tenantq.testing import JobHarness


class SendEmail(BaseModel):
    to: str


class Boom(Exception):
    pass


@pytest.fixture
def app(tmp_path: Path) -> tenantq.App:
    return tenantq.App(fakes.make_settings(tmp_path))


@pytest.fixture
def harness(app: tenantq.App) -> Any:
    # No jitter: the delays are the policy's ceilings, 2 s then 6 s then 18 s.
    with JobHarness(app, retry_policy=RetryPolicy(jitter=0.0)) as made:
        yield made


def test_a_handler_that_returns_succeeds_with_its_model(app: tenantq.App, harness: Any) -> None:
    seen: list[Any] = []

    @app.job("send_email", queue="mail", max_attempts=4)
    def send_email(ctx: tenantq.JobContext, payload: SendEmail) -> None:
        seen.append((payload, ctx.tenant, ctx.queue, ctx.attempt, ctx.max_attempts))

    attempt = harness.run(send_email, tenant="acme", payload=SendEmail(to="a@x"))
    assert attempt.succeeded and attempt.state is JobState.SUCCEEDED
    assert (attempt.outcome, attempt.error, attempt.delay_seconds) == (
        Outcome.SUCCEEDED,
        None,
        None,
    )
    assert seen == [(SendEmail(to="a@x"), "acme", "mail", 1, 4)]
    assert harness.run("send_email", payload={"to": "b@x"}).succeeded  # by name, as JSON
    assert type(seen[-1][0]) is SendEmail


def test_a_payload_the_producer_refuses_raises_and_nothing_runs(
    app: tenantq.App, harness: Any
) -> None:
    ran: list[Any] = []
    app.job("send_email", model=SendEmail)(lambda ctx, payload: ran.append(payload))
    with pytest.raises(PayloadValidationError, match="does not fit SendEmail"):
        harness.run("send_email", payload={"to": 5})
    with pytest.raises(tenantq.UnknownJobType):
        harness.run("nobody", payload={})
    assert ran == []


def test_a_payload_that_no_longer_fits_its_model_is_dead_at_once(
    app: tenantq.App, harness: Any
) -> None:
    app.job("send_email", model=SendEmail, max_attempts=5)(lambda ctx, payload: None)
    attempt = harness.run_encoded("send_email", b'{"recipient": "a@x"}')
    assert attempt.dead and attempt.outcome is Outcome.DEAD
    assert attempt.error_class == "tenantq.errors.PayloadValidationError"
    assert "does not fit its model" in (attempt.error_message or "")


def test_failures_retry_with_the_policy_s_delay_until_attempts_run_out(
    app: tenantq.App, harness: Any
) -> None:
    @app.job("flaky", max_attempts=3)
    def flaky(ctx: Any, payload: Any) -> None:
        raise Boom("downstream said no")

    first = harness.run(flaky, payload={})
    assert first.retrying and first.state is JobState.RETRYING and not first.attempt_given_back
    assert (first.delay_seconds, first.error_class) == (2.0, f"{__name__}.Boom")
    assert isinstance(first.error, Boom) and first.error_message == "downstream said no"
    assert harness.run(flaky, payload={}, attempt=2).delay_seconds == 6.0
    last = harness.run(flaky, payload={}, attempt=3)
    assert (
        last.dead
        and last.error_message == "max attempts (3) reached; last error: downstream said no"
    )


def test_the_handler_s_own_word_on_retries(app: tenantq.App, harness: Any) -> None:
    errors: dict[str, BaseException] = {
        "retry_later": tenantq.RetryableError("busy", delay=7.5),
        "throttled": tenantq.RateLimited(3.0),
        "permanent": tenantq.PermanentError("no such user"),
        "snooze": tenantq.Snooze(30.0),
        "never": KeyError("gone"),
    }
    for name, error in errors.items():

        def handler(ctx: Any, payload: Any, error: BaseException = error) -> None:
            raise error

        app.job(name, never_retry_on=[KeyError] if name == "never" else ())(handler)
    assert harness.run("retry_later", payload={}).delay_seconds == 7.5
    assert harness.run("throttled", payload={}).delay_seconds == 3.0
    permanent = harness.run("permanent", payload={})
    assert permanent.dead and permanent.error_message == "no such user"
    snoozed = harness.run("snooze", payload={})
    assert snoozed.snoozed and snoozed.attempt_given_back and not snoozed.retrying
    assert (snoozed.state, snoozed.delay_seconds) == (JobState.RETRYING, 30.0)
    assert harness.run("never", payload={}).dead


def test_a_retry_budget_ends_the_job_before_max_attempts(app: tenantq.App, harness: Any) -> None:
    @app.job("budgeted", max_attempts=10, retry_budgets={TimeoutError: 2})
    def budgeted(ctx: Any, payload: Any) -> None:
        raise TimeoutError("slow")

    assert harness.run(budgeted, payload={}).retrying
    second = harness.run(budgeted, payload={}, attempt=2)
    assert second.dead and "retry budget of TimeoutError (2 attempts)" in (
        second.error_message or ""
    )


def test_a_handler_past_its_timeout_is_given_up_on(app: tenantq.App, harness: Any) -> None:
    @app.job("slow", timeout=0.2, max_attempts=2)
    def slow(ctx: tenantq.JobContext, payload: Any) -> None:
        ctx.wait_cancelled(10)  # told to stop at the timeout

    @app.job("slow_async", timeout=0.2, max_attempts=2)
    async def slow_async(ctx: tenantq.JobContext, payload: Any) -> None:
        await asyncio.sleep(10)

    for job in (slow, slow_async):
        started = time.monotonic()
        first = harness.run(job, payload={})
        assert time.monotonic() - started < 5
        assert first.timed_out and first.state is JobState.RETRYING and first.delay_seconds == 2.0
        assert first.error_message == "handler did not finish before its timeout"
        last = harness.run(job, payload={}, attempt=2)
        assert last.timed_out and last.dead
    assert harness.run(slow, payload={}, timeout=0.05).timed_out  # a timeout of the call's own


def test_checkpoints_are_carried_to_the_next_attempt(app: tenantq.App, harness: Any) -> None:
    starts: list[Any] = []

    @app.job("export", max_attempts=5)
    def export(ctx: tenantq.JobContext, payload: Any) -> None:
        starts.append(ctx.progress)
        step = (ctx.progress or {"step": 0})["step"] + 1
        assert ctx.checkpoint({"step": step, "rows": (1, 2)})
        ctx.heartbeat()
        if step < 3:
            raise tenantq.RetryableError("not done")

    run = harness.run_to_end(export, payload={})
    assert [attempt.outcome for attempt in run.attempts] == ["retrying", "retrying", "succeeded"]
    assert [attempt.attempt for attempt in run.attempts] == [1, 2, 3]
    # What the next attempt reads is what the database would give back: JSON.
    assert starts == [None, {"step": 1, "rows": [1, 2]}, {"step": 2, "rows": [1, 2]}]
    assert run.last.checkpoints == [{"step": 3, "rows": [1, 2]}] and run.last.heartbeats == 1
    assert run.succeeded and run.state is JobState.SUCCEEDED


def test_progress_the_database_cannot_store_fails_the_attempt(
    app: tenantq.App, harness: Any
) -> None:
    @app.job("bad_progress")
    def bad_progress(ctx: tenantq.JobContext, payload: Any) -> None:
        ctx.checkpoint({"when": object()})

    attempt = harness.run(bad_progress, payload={})
    assert attempt.retrying and attempt.error_class == "TypeError"


def test_run_to_end_follows_retries_and_snoozes_until_the_job_settles(
    app: tenantq.App, harness: Any
) -> None:
    calls: list[int] = []

    @app.job("bounce", max_attempts=3)
    def bounce(ctx: tenantq.JobContext, payload: Any) -> None:
        calls.append(ctx.attempt)
        if len(calls) == 1:
            raise tenantq.Snooze(5)
        raise Boom("still bouncing")

    run = harness.run_to_end(bounce, payload={})
    assert calls == [1, 1, 2, 3]  # the snooze kept the attempt
    assert [a.outcome for a in run.attempts] == ["snoozed", "retrying", "retrying", "dead"]
    assert run.dead and run.state is JobState.DEAD
    assert [a.delay_seconds for a in run.attempts] == [5.0, 2.0, 6.0, None]

    @app.job("snoozer")
    def snoozer(ctx: Any, payload: Any) -> None:
        raise tenantq.Snooze(1)

    forever = harness.run_to_end(snoozer, payload={})
    assert len(forever.attempts) == 100 and forever.state is JobState.RETRYING


@pytest.mark.parametrize(
    ("reason", "outcome", "state"),
    [
        ("operator", Outcome.CANCELED, JobState.CANCELED),
        ("shutdown", Outcome.RELEASED, JobState.RUNNABLE),
        ("revoked", Outcome.RELEASED, JobState.RUNNABLE),
    ],
)
def test_a_cancelled_attempt_ends_as_the_worker_says(
    app: tenantq.App, harness: Any, reason: str, outcome: Outcome, state: JobState
) -> None:
    @app.job("patient")
    def patient(ctx: tenantq.JobContext, payload: Any) -> None:
        ctx.wait_cancelled(10)
        ctx.raise_if_cancelled()

    attempt = harness.run(patient, payload={}, cancel=reason, cancel_after=0.05)
    assert (attempt.outcome, attempt.state) == (outcome, state)


def test_a_lost_lease_refuses_the_checkpoint(app: tenantq.App, harness: Any) -> None:
    saved: list[bool] = []

    @app.job("keeper")
    def keeper(ctx: tenantq.JobContext, payload: Any) -> None:
        ctx.wait_cancelled(10)
        saved.append(ctx.checkpoint({"n": 1}))
        saved.append(ctx.heartbeat())

    attempt = harness.run(keeper, payload={}, cancel="lease_lost")
    assert saved == [False, False] and attempt.checkpoints == [] and attempt.progress is None
