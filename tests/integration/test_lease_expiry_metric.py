"""Guarantee: a worker that loses a lease (frozen past it while another member takes the job
over) counts it on its /metrics as ``tenantq_lease_expirations_total`` — the series the
lease-expiry alert reads — once per lost lease, next to the stale result refused."""

from __future__ import annotations

import signal
from typing import Any

import psycopg
from apps import APP
from support import (
    all_in,
    free_port,
    leased_by_a_worker_process,
    running_worker,
    sample_value,
    scrape,
    short_leases,
    wait_for,
)


def sample(port: int, name: str) -> float:
    return sample_value(scrape(port), name, queue="default") or 0.0


def test_lost_lease_is_counted_as_an_expiry(
    make_settings: Any, db: psycopg.Connection[Any]
) -> None:
    port = free_port()
    settings = make_settings(metrics_port=port, worker=short_leases())
    with leased_by_a_worker_process(settings, db) as (job_id, frozen):
        assert sample(port, "tenantq_lease_expirations_total") == 0
        frozen.signal(signal.SIGSTOP)
        successor_settings = settings.model_copy(update={"metrics_port": 0})
        with running_worker(APP, successor_settings, concurrency=2):
            wait_for(lambda: all_in(db, [job_id], {"succeeded"}), timeout=90, what="takeover")
            frozen.signal(signal.SIGCONT)
            wait_for(
                lambda: sample(port, "tenantq_stale_results_refused_total") == 1,
                timeout=60,
                what="the stale result refused",
            )
        assert sample(port, "tenantq_lease_expirations_total") == 1
