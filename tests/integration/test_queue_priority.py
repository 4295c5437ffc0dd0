"""Guarantee: a worker serving several queues strictly in order runs a high-priority backlog
before the low-priority one (but for the odd low job read before the high queue's first
fetch arrived), and still serves the low queue once the high one is empty."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
from support import all_in, running_worker, wait_for

import tenantq


def test_strict_priority_across_queues(make_settings: Any, db: psycopg.Connection[Any]) -> None:
    queue = tenantq.QueueSettings(partitions=2, retry_delays_seconds=(1.0, 3.0))
    settings = make_settings(queues={"high": queue, "low": queue})
    app = tenantq.App(settings)
    order: list[str] = []
    lock = threading.Lock()

    def make(name: str) -> None:
        @app.job(name, queue=name)
        def handler(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
            time.sleep(0.002)
            with lock:
                order.append(ctx.queue)

    make("high")
    make("low")
    with tenantq.Producer(settings, app) as producer:
        futures = [producer.enqueue("low", tenant=f"t{i % 5}", payload={}) for i in range(200)]
        futures += [producer.enqueue("high", tenant=f"t{i % 5}", payload={}) for i in range(200)]
        ids = [future.result(30).job_id for future in futures]
    with running_worker(app, settings, concurrency=1, strict_priority=True) as worker:
        assert worker.queues == ["high", "low"]
        wait_for(lambda: all_in(db, ids, {"succeeded"}), timeout=90, what="all done")
    # Priority orders what the worker has read. At start the low queue's first fetch can
    # land a moment before the high one's, and a free slot then takes a low job (one in about
    # twelve runs, one job); after that the high backlog goes first.
    last_high = max(i for i, queue in enumerate(order) if queue == "high")
    assert order[:last_high].count("low") <= 3, "".join(queue[0] for queue in order[:60])
    assert order.count("low") == 200
