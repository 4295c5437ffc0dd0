"""Guarantee: workers prune on their own by the retention policy: finished jobs older than
their state's age go with their attempt rows, younger ones and unfinished ones stay, stopped
worker rows go after their age, and of several pruners only one runs a round at a time."""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg
from support import all_in, running_worker, states, wait_for

import tenantq
from tenantq.retention.pruner import Pruner
from tenantq.settings import RetentionSettings


def test_pruners_apply_the_policy(make_settings: Any, db: psycopg.Connection[Any]) -> None:
    settings = make_settings(
        retention=RetentionSettings(
            succeeded=dt.timedelta(0),
            dead=dt.timedelta(hours=1),
            canceled=dt.timedelta(0),
            workers=dt.timedelta(minutes=10),
            interval_seconds=0.3,
        )
    )
    app = tenantq.App(settings)

    @app.job("work", max_attempts=1)
    def work(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        if payload.get("fail"):
            raise tenantq.PermanentError("no")

    with tenantq.Producer(settings, app) as producer:
        done = [
            producer.enqueue("work", tenant="a", payload={"i": i}).result(30).job_id
            for i in range(3)
        ]
        dead = producer.enqueue("work", tenant="a", payload={"fail": True}).result(30).job_id
        waiting = producer.enqueue("work", tenant="a", payload={}, delay=300).result(30).job_id
    with running_worker(app, settings):
        wait_for(
            lambda: all_in(db, done, {"succeeded"}) and all_in(db, [dead], {"dead"}), timeout=60
        )
    db.execute(
        "INSERT INTO tenantq_workers (deployment, id, hostname, pid, queues, stopped_at,"
        " heartbeat_at) VALUES (%s, 'gone-worker', 'h', 1, '{}', now() - interval '1 hour', "
        "now() - interval '1 hour') ON CONFLICT (deployment, id) DO NOTHING",
        (settings.topic_prefix,),
    )
    wait_for(lambda: all_in(db, [waiting], {"pending"}), timeout=10)

    pruners = [Pruner(settings, name=f"pruner-{n}") for n in range(2)]
    for pruner in pruners:
        pruner.start()
    try:
        wait_for(lambda: not states(db, done), timeout=20, what="succeeded jobs pruned")
        wait_for(
            lambda: (
                db.execute(
                    "SELECT count(*) FROM tenantq_workers WHERE id = 'gone-worker'"
                    " AND deployment = %s",
                    (settings.topic_prefix,),
                ).fetchone()
                == (0,)
            ),
            timeout=20,
            what="the stopped worker's row pruned",
        )
    finally:
        for pruner in pruners:
            pruner.stop(10)
    assert states(db, [dead, waiting]) == {dead: "dead", waiting: "pending"}
    assert db.execute(
        "SELECT count(*) FROM tenantq_job_attempts WHERE job_id = ANY(%s)", (done,)
    ).fetchone() == (0,)
    # The session database is shared: earlier scenarios' finished jobs may go too.
    assert sum(pruner.pruned.jobs.get("succeeded", 0) for pruner in pruners) >= 3
