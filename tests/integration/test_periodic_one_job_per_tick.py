"""Guarantee: a periodic job every 2 s, scheduled by two workers at once, makes exactly one
job per tick (each tick's job id derives from the schedule and the tick, and the schedule's
next tick moves by compare-and-set in the transaction that enqueues it), every tick runs
once, and `tenantq periodic list` shows the schedule with its last and next run."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

import psycopg
from support import all_in, counting_app, running_worker, settings_environment, wait_for
from typer.testing import CliRunner

import tenantq
from tenantq.cli import app as cli
from tenantq.outbox.relay import RelayService
from tenantq.periodic.scheduler import PeriodicScheduler

#: Ticks (2 s apart) the two schedulers race on before they stop.
TICKS = 4


def test_two_schedulers_make_one_job_per_tick(
    settings: tenantq.Settings, db: psycopg.Connection[Any]
) -> None:
    app, ran = counting_app(settings, "beat")
    name = f"heartbeat-{uuid.uuid4().hex[:8]}"

    app.periodic(name, job_type="beat", tenant="ops", payload={"source": "test"}, every=2)
    schedulers = [PeriodicScheduler(app, settings, name=f"periodic-{n}") for n in "ab"]
    relay = RelayService(settings, ["default"])
    with running_worker(app, settings):
        relay.start()
        for scheduler in schedulers:
            scheduler.start()
        wait_for(
            lambda: sum(scheduler.enqueued for scheduler in schedulers) >= TICKS,
            timeout=60,
            what=f"{TICKS} ticks enqueued",
        )
        for scheduler in schedulers:
            scheduler.stop(10)
        rows = db.execute(
            "SELECT id, idempotency_key FROM tenantq_jobs WHERE idempotency_key LIKE %s",
            (f"periodic:{name}:%",),
        ).fetchall()
        ids = [row[0] for row in rows]
        wait_for(lambda: all_in(db, ids, {"succeeded"}), timeout=60, what="ticks ran")
        relay.stop(10)

    prefix = f"periodic:{name}:"
    ticks = sorted(
        dt.datetime.fromisoformat(key[len(prefix) :].replace("Z", "+00:00")) for _, key in rows
    )
    assert len(ticks) >= TICKS, ticks
    assert len(set(ticks)) == len(ticks)
    assert all(tick.timestamp() % 2 == 0 for tick in ticks), ticks
    assert all((b - a) == dt.timedelta(seconds=2) for a, b in zip(ticks, ticks[1:], strict=False))
    assert sum(scheduler.enqueued for scheduler in schedulers) == len(ticks)
    assert ran == dict.fromkeys(ids, 1)

    result = CliRunner().invoke(
        cli, ["periodic", "list", "--json"], env=settings_environment(settings)
    )
    assert result.exit_code == 0, result.output
    listed = {item["name"]: item for item in json.loads(result.output)}
    assert listed[name]["schedule"] == "every 2s"
    assert dt.datetime.fromisoformat(listed[name]["last_tick"]) == ticks[-1]
    assert dt.datetime.fromisoformat(listed[name]["next_tick"]) > ticks[-1]
