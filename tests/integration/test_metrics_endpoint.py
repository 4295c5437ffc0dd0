"""Guarantee: a worker serves /metrics on 127.0.0.1 with every tenantq metric family (worker
counters and histograms, and the Postgres-backed queue gauges with the oldest runnable age),
and tenant labels stay bounded."""

from __future__ import annotations

from typing import Any

import psycopg
from support import all_in, free_port, running_worker, scrape, wait_for

import tenantq
from tenantq.observability.specs import SPECS


def test_worker_serves_every_metric(make_settings: Any, db: psycopg.Connection[Any]) -> None:
    port = free_port()
    settings = make_settings(metrics_port=port, metrics_top_tenants=3)
    app = tenantq.App(settings)
    app.dependency("smtp", rate=1000, burst=100)

    @app.job("mail", max_attempts=2, dependencies=["smtp"])
    def mail(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        if payload.get("fail"):
            raise tenantq.PermanentError("bounced")

    with tenantq.Producer(settings, app) as producer:
        ids = [
            producer.enqueue("mail", tenant=f"tenant{i}", payload={"fail": i % 5 == 0})
            .result(30)
            .job_id
            for i in range(30)
        ]
    with running_worker(app, settings):
        wait_for(lambda: all_in(db, ids, {"succeeded", "dead"}), timeout=60, what="terminal")
        wait_for(lambda: "tenantq_worker_utilization_ratio" in scrape(port), timeout=10)
        text = scrape(port)
    for spec in SPECS:
        # A supervisor's: test_supervisor_metrics.py; the console's: test_web_hardening.py.
        if spec.source in ("worker", "postgres"):
            assert f"# TYPE {spec.name}" in text, spec.name
    tenant_labels = {
        part.split('tenant="')[1].split('"')[0]
        for line in text.splitlines()
        if line.startswith("tenantq_jobs_finished_total") and 'tenant="' in line
        for part in [line]
    }
    assert "other" in tenant_labels
    assert len(tenant_labels) <= 4  # three named tenants plus "other"
    # Every job's message was read from the main topic at least once, and timed from its
    # Kafka timestamp.
    read = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith('tenantq_read_delay_seconds_count{queue="default",source="main"}')
    ]
    assert read and read[0] >= len(ids)
