"""Guarantee: `tenantq prune --older-than D` deletes finished jobs (succeeded, dead, canceled)
older than D with their attempt rows, and nothing else: a running job, a waiting (scheduled)
job, and finished jobs younger than D stay; `--dry-run` counts and deletes nothing;
`--state` limits it to the states named."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import psycopg
from support import all_in, count_of, running_worker, settings_environment, states, wait_for
from typer.testing import CliRunner

import tenantq
from tenantq.cli import app as cli
from tenantq.store.engine import connect
from tenantq.store.job_admin import cancel_job


def attempt_count(db: psycopg.Connection[Any], job_ids: list[uuid.UUID]) -> int:
    return count_of(
        db,
        "SELECT count(*) FROM tenantq_job_attempts WHERE job_id = ANY(%s)",
        (job_ids,),
    )


def test_prune_removes_only_old_finished_jobs(
    settings: tenantq.Settings, db: psycopg.Connection[Any]
) -> None:
    app = tenantq.App(settings)
    release = threading.Event()

    @app.job("work", max_attempts=2)
    def work(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        if payload.get("hold"):
            release.wait(60)
        if payload.get("fail"):
            raise tenantq.PermanentError("rejected")

    def prune(*arguments: str) -> str:
        result = CliRunner().invoke(cli, ["prune", *arguments], env=settings_environment(settings))
        assert result.exit_code == 0, result.output
        return result.output

    # The session database is shared: clear the finished jobs of earlier scenarios first, so
    # the counts below are this scenario's.
    prune("--older-than", "0s")
    with tenantq.Producer(settings, app) as producer:
        succeeded = [
            producer.enqueue("work", tenant="acme", payload={"i": i}).result(30).job_id
            for i in range(3)
        ]
        dead = [
            producer.enqueue("work", tenant="acme", payload={"fail": True, "i": i})
            .result(30)
            .job_id
            for i in range(2)
        ]
        running = producer.enqueue("work", tenant="beta", payload={"hold": True}).result(30)
        waiting = producer.enqueue("work", tenant="beta", payload={}, delay=120).result(30)
        canceled = producer.enqueue("work", tenant="beta", payload={"c": 1}, delay=120).result(30)
    wait_for(lambda: all_in(db, [waiting.job_id, canceled.job_id], {"pending"}), timeout=10)
    with connect(settings, autocommit=True) as connection:
        assert cancel_job(connection, canceled.job_id, "default") == "canceled"
    finished = succeeded + dead + [canceled.job_id]
    kept = [running.job_id, waiting.job_id]
    with running_worker(app, settings, concurrency=4):
        wait_for(lambda: all_in(db, succeeded, {"succeeded"}), timeout=60, what="succeeded")
        wait_for(lambda: all_in(db, dead, {"dead"}), timeout=60, what="dead")
        wait_for(lambda: all_in(db, [running.job_id], {"leased"}), timeout=60, what="running")
        assert attempt_count(db, succeeded + dead) == 5

        # Younger than an hour: nothing goes, the dead included.
        assert "removed 0 jobs" in prune("--older-than", "1h")
        # One dead job finished two hours ago: only it goes, with its attempt.
        db.execute(
            "UPDATE tenantq_jobs SET finished_at = now() - interval '2 hours' WHERE id = %s",
            (dead[0],),
        )
        out = prune("--older-than", "1h", "--state", "dead")
        assert "removed 1 jobs" in out and "1 dead" in out and "1 attempt rows" in out, out
        assert set(states(db, dead)) == {dead[1]}

        out = prune("--older-than", "0s", "--dry-run")
        assert "would remove 5 jobs" in out and "(3 succeeded, 1 dead, 1 canceled)" in out, out
        assert len(states(db, finished)) == 5

        out = prune("--older-than", "0s")
        assert "removed 5 jobs" in out and "and 4 attempt rows" in out, out
        assert states(db, finished) == {}
        assert attempt_count(db, finished) == 0
        assert states(db, kept) == {running.job_id: "leased", waiting.job_id: "pending"}
        release.set()
        wait_for(lambda: all_in(db, [running.job_id], {"succeeded"}), timeout=30)
    assert states(db, [waiting.job_id]) == {waiting.job_id: "pending"}
