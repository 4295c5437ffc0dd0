"""Guarantee: two ``tenantq worker`` processes with default settings on one host both run and
both process jobs. The metrics port (9464 by default) can be held by only one of them; the
second says in its log where it serves ``/metrics`` instead, or that it serves nowhere, and
keeps working."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import psycopg
from support import (
    LoggedWorkerProcess,
    assert_alive,
    descendants,
    scrape,
    settings_environment,
    wait_for,
    while_alive,
)

import tenantq
from tenantq.devstack.processes import port_free

#: The port ``TENANTQ_METRICS_PORT`` defaults to; the test leaves the variable unset.
DEFAULT_METRICS_PORT = 9464
#: host:port as a start-up line would name an endpoint (``127.0.0.1:9465``, ``[::1]:9465``).
_ENDPOINT = re.compile(r"(?:\d{1,3}(?:\.\d{1,3}){3}|localhost|\[[0-9a-fA-F:]+\]):(\d{2,5})")
#: Words with which a line would say that it serves no metrics.
_NOWHERE = re.compile(r"\b(not|no|nowhere|disabled|taken|in use|skipp\w*)\b", re.IGNORECASE)


def test_two_default_workers_on_one_host_both_run_and_process_jobs(
    make_settings: Any, db: psycopg.Connection[Any], tmp_path: Path
) -> None:
    assert tenantq.Settings.model_fields["metrics_port"].default == DEFAULT_METRICS_PORT
    # Another program on this host may hold the port for a while (a demo, a worker someone
    # runs by hand); the test needs it free, or the first worker would not get it either.
    wait_for(
        lambda: port_free(DEFAULT_METRICS_PORT),
        timeout=120,
        interval=1.0,
        what=f"port {DEFAULT_METRICS_PORT} to be free (held by another process on this host)",
    )
    settings = make_settings()
    environment = settings_environment(settings)
    environment.pop("TENANTQ_METRICS_PORT")
    unset = ("TENANTQ_METRICS_PORT", "TENANTQ_METRICS_HOST")
    first = LoggedWorkerProcess(
        environment, "apps:APP", log_path=tmp_path / "first.log", unset=unset
    )
    second: LoggedWorkerProcess | None = None
    try:
        wait_for(
            while_alive(lambda: _serves(DEFAULT_METRICS_PORT), first),
            timeout=60,
            what=f"the first worker's /metrics on the default port {DEFAULT_METRICS_PORT}",
        )
        second = LoggedWorkerProcess(
            environment, "apps:APP", log_path=tmp_path / "second.log", unset=unset
        )
        workers = (first, second)
        done_by = _run_until_both_worked(settings, db, workers)
        assert_alive(*workers)
        # The second one's log says where its /metrics is, or that it has none.
        lines = [line for line in second.output().splitlines() if "metrics" in line.lower()]
        ports = {int(match.group(1)) for line in lines for match in _ENDPOINT.finditer(line)}
        said = [line for line in lines if _ENDPOINT.search(line) or _NOWHERE.search(line)]
        assert said, (
            "the second worker does not say where it serves /metrics:\n" + (second.output()[-3000:])
        )
        for port in ports:
            if port != DEFAULT_METRICS_PORT:
                assert _serves(port), f"the second worker names port {port} but does not serve"
        assert _serves(DEFAULT_METRICS_PORT), "the first worker stopped serving /metrics"
    finally:
        statuses = [worker.terminate(60) for worker in (first, second) if worker is not None]
    assert statuses == [0, 0], first.output()[-3000:] + (second.output()[-3000:] if second else "")
    print(f"two workers on one host: jobs done per worker command {done_by}; second said {said}")


def _run_until_both_worked(
    settings: tenantq.Settings,
    db: psycopg.Connection[Any],
    workers: tuple[LoggedWorkerProcess, LoggedWorkerProcess],
) -> list[int]:
    """Enqueue rounds of jobs over many tenants (so over every partition) until each worker
    command has a member that finished some; returns the jobs done per command."""
    job_ids: list[uuid.UUID] = []
    counts = [0, 0]

    def both_worked() -> bool:
        with tenantq.Producer(settings) as producer:
            futures = producer.enqueue_many(
                [
                    {"job_type": "sleepy", "tenant": f"t{n}", "payload": {"seconds": 0.02}}
                    for n in range(24)
                ]
            )
            job_ids.extend(future.result(30).job_id for future in futures)
        rows = db.execute(
            "SELECT w.pid, count(*) FROM tenantq_job_attempts a "
            "JOIN tenantq_workers w ON w.id = a.worker_id "
            "WHERE a.job_id = ANY(%s) AND a.outcome = 'succeeded' GROUP BY w.pid",
            (job_ids,),
        ).fetchall()
        families = [{worker.pid, *descendants(worker.pid)} for worker in workers]
        for index, family in enumerate(families):
            counts[index] = sum(int(n) for pid, n in rows if pid in family)
        return all(counts)

    wait_for(while_alive(both_worked, *workers), timeout=90, interval=1.0, what="both working")
    return counts


def _serves(port: int) -> bool:
    try:
        return "tenantq_" in scrape(port)
    except OSError:
        return False
