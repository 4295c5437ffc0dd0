"""Guarantee: one tenant never holds more of a worker's slots than its cap
(``tenant_max_share`` of the slots, or a job type's ``tenant_concurrency``) while the other
tenants' jobs run beside it; and the cap costs the tenant nothing when nobody else waits (it
still finishes)."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
from support import all_in, running_worker, wait_for

import tenantq


def test_a_tenant_holds_at_most_its_share_of_the_slots(
    make_settings: Any, db: psycopg.Connection[Any]
) -> None:
    settings = make_settings(tenant_isolation={"tenant_max_share": 0.5, "hot_lane": False})
    app = tenantq.App(settings)
    lock = threading.Lock()
    running: dict[str, int] = {}
    most: dict[str, int] = {}

    def measured(keys: list[str], seconds: float) -> None:
        with lock:
            for key in keys:
                running[key] = running.get(key, 0) + 1
                most[key] = max(most.get(key, 0), running[key])
        time.sleep(seconds)
        with lock:
            for key in keys:
                running[key] -= 1

    @app.job("task")
    def task(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        measured([ctx.tenant], 0.05)

    @app.job("export", tenant_concurrency=1)
    def export(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        # Counted as the tenant's too: its tasks and exports share the tenant's cap.
        measured([ctx.tenant, f"export:{ctx.tenant}"], 0.05)

    with tenantq.Producer(settings, app) as producer:
        ids = [
            ref.job_id
            for ref in producer.enqueue_batch(
                [{"job_type": "task", "tenant": "big", "payload": {"n": n}} for n in range(60)]
                + [{"job_type": "task", "tenant": f"small{n}", "payload": {}} for n in range(8)]
                + [{"job_type": "export", "tenant": "big", "payload": {"n": n}} for n in range(6)]
            ).result(60)
        ]
    with running_worker(app, settings, concurrency=8):
        wait_for(lambda: all_in(db, ids, {"succeeded"}), timeout=120, what="every job done")
    assert most["big"] <= 4, most  # half of 8 slots (its tasks and exports share the cap)
    assert most["big"] >= 2, most  # and it did get slots in parallel
    assert most["export:big"] == 1, most
