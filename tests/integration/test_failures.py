"""Guarantee: permanent errors and invalid payloads go dead at once; retryable errors go dead
after max attempts, with one attempt row per attempt and the job in the DLQ with its reason;
RateLimited honours its retry-after; Snooze does not consume an attempt; a job type no
worker knows is retried within its budget and then dead."""

from __future__ import annotations

import time
from typing import Any

import psycopg
from pydantic import BaseModel
from support import all_in, running_worker, topic_records, wait_for

import tenantq
from tenantq import headers
from tenantq.consumer.retry_policy import RetryPolicy
from tenantq.topics import dlq_topic


class Order(BaseModel):
    order_id: int


def dlq_records(settings: tenantq.Settings) -> list[dict[str, str]]:
    topic = dlq_topic(settings.topic_prefix, "default")
    return [
        {k: (v or b"").decode(errors="replace") for k, v in message.headers() or []}
        for message in topic_records(settings, topic, "dlq-reader")
    ]


def test_permanent_retryable_ratelimited_snooze_unknown(
    make_settings: Any, db: psycopg.Connection[Any]
) -> None:
    settings = make_settings(worker={"unknown_type_attempts": 2})
    app = tenantq.App(settings)
    calls: dict[str, list[tuple[int, float]]] = {}

    def note(ctx: tenantq.JobContext) -> None:
        calls.setdefault(ctx.job_type, []).append((ctx.attempt, time.time()))

    @app.job("permanent", max_attempts=5)
    def permanent(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        note(ctx)
        raise tenantq.PermanentError("card declined")

    @app.job("always_fails", max_attempts=3)
    def always_fails(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        note(ctx)
        raise ConnectionError("upstream timed out")

    @app.job("typed", max_attempts=5)
    def typed(ctx: tenantq.JobContext, payload: Order) -> None:
        note(ctx)

    @app.job("throttled", max_attempts=5)
    def throttled(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        note(ctx)
        if ctx.attempt == 1:
            raise tenantq.RateLimited(retry_after=2.0)

    @app.job("snoozer", max_attempts=1)
    def snoozer(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        note(ctx)
        if len(calls["snoozer"]) < 3:
            raise tenantq.Snooze(0.5)

    with tenantq.Producer(settings) as producer:  # no app: the worker validates payloads
        ids = {
            name: producer.enqueue(name, tenant="acme", payload=payload).result(30).job_id
            for name, payload in [
                ("permanent", {}),
                ("always_fails", {}),
                ("typed", {"order_id": "not a number"}),
                ("throttled", {}),
                ("snoozer", {}),
                ("nobody_handles_this", {}),
            ]
        }
    # Backoff of a few tenths of a second: what is checked is the attempts, not their spacing
    # (RateLimited and Snooze give their own delays, which take precedence over the policy).
    with running_worker(app, settings, retry_policy=RetryPolicy(base_delay=0.2)):
        wait_for(
            lambda: all_in(db, list(ids.values()), {"succeeded", "dead"}),
            timeout=90,
            what="all terminal",
        )
    state = dict(
        db.execute(
            "SELECT job_type, state::text || '/' || attempts FROM tenantq_jobs WHERE id = ANY(%s)",
            (list(ids.values()),),
        ).fetchall()
    )
    assert state == {
        "permanent": "dead/1",
        "always_fails": "dead/3",
        "typed": "dead/1",
        "throttled": "succeeded/2",
        "snoozer": "succeeded/1",  # three runs, one attempt: snoozes gave theirs back
        "nobody_handles_this": "dead/2",
    }
    assert [a for a, _ in calls["permanent"]] == [1]
    assert [a for a, _ in calls["always_fails"]] == [1, 2, 3]
    assert "typed" not in calls  # the handler never saw the invalid payload
    (first, second) = calls["throttled"]
    assert second[1] - first[1] >= 2.0  # Retry-After honoured
    assert [a for a, _ in calls["snoozer"]] == [1, 1, 1]
    attempt_rows = db.execute(
        "SELECT attempt, outcome, error_class FROM tenantq_job_attempts WHERE job_id = %s "
        "ORDER BY id",
        (ids["always_fails"],),
    ).fetchall()
    assert attempt_rows == [
        (1, "retrying", "ConnectionError"),
        (2, "retrying", "ConnectionError"),
        (3, "dead", "ConnectionError"),
    ]
    dead = db.execute(
        "SELECT last_error_class, last_error_message FROM tenantq_jobs WHERE id = %s",
        (ids["typed"],),
    ).fetchone()
    assert dead is not None and dead[0] == "tenantq.errors.PayloadValidationError"
    assert "order_id" in dead[1]
    records = dlq_records(settings)
    by_type = {r[headers.JOB_TYPE]: r for r in records}
    assert set(by_type) == {"permanent", "always_fails", "typed", "nobody_handles_this"}
    assert by_type["permanent"][headers.ERROR_CLASS] == "tenantq.errors.PermanentError"
    assert by_type["always_fails"][headers.ATTEMPTS] == "3"
    assert by_type["nobody_handles_this"][headers.ERROR_CLASS] == "UnknownJobType"
    assert len(records) == 4
