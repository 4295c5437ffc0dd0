"""``tenantq demo``: the whole system on one machine, end to end, with a verdict.

Steps: servers (the dev stack, or the ``TENANTQ_*`` ones, which are then used as they are),
migrations, a fresh topic prefix (``demo<timestamp>``) so runs never mix, topics with short
retry tiers, a supervised pool of worker processes, a planned multi-tenant workload
(``tenantq.demo.plan``) enqueued at a steady rate while progress is drawn live, then a summary
checked against the plan and a report folder. Exit status 0 only when every job is terminal
and both the dead jobs and the DLQ are exactly the planned permanent failures plus the poison.
"""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import Future
from pathlib import Path

from rich.console import Console
from rich.live import Live

from tenantq.demo.kafka import LagProbe, read_dead_letters
from tenantq.demo.monitor import Monitor
from tenantq.demo.plan import Workload, plan_workload
from tenantq.demo.pool import WorkerPool
from tenantq.demo.record import DemoOptions, DemoRun
from tenantq.demo.report import print_summary, summarize, write_report
from tenantq.demo.workload import APP
from tenantq.devstack.stack import DevStack, external_endpoints
from tenantq.job_ids import new_job_id
from tenantq.producer.producer import JobRef, Producer
from tenantq.settings import QueueSettings, Settings, WorkerSettings, load_settings
from tenantq.store import migrate
from tenantq.store.engine import connect
from tenantq.store.job_sets import job_set_outcomes
from tenantq.topic_admin import declared_topics, delete_topics, ensure_topics, queue_topics
from tenantq.topics import consumer_group

QUEUE = "default"
#: Retry tiers shortened so that a retried job finishes within the demo.
RETRY_DELAYS_SECONDS = (1.0, 3.0, 10.0)
#: Jobs published per second; about what two worker processes on two cores keep up with, so
#: the backlog builds and drains visibly instead of arriving as one burst.
ARRIVAL_RATE = 300.0
ENQUEUE_CHUNK = 50
SAMPLE_INTERVAL = 0.5


def prepare_settings(console: Console) -> Settings:
    """The servers: those named by ``TENANTQ_*`` as they are, the dev stack for the rest."""
    kafka, database = external_endpoints()
    base = load_settings()
    if kafka is None or database is None:
        console.print("[dim]starting the dev stack (Kafka + PostgreSQL) if needed...[/]")
        DevStack(base.dev_home).up(external_kafka=kafka, external_database=database)
        base = load_settings()
    return base


def demo_settings(base: Settings, prefix: str, concurrency: int) -> Settings:
    """The run's settings: its own topic prefix, the demo queue, and leases short enough that
    a crashed worker's jobs come back within seconds."""
    return base.model_copy(
        update={
            "topic_prefix": prefix,
            "queues": {
                QUEUE: QueueSettings(partitions=12, retry_delays_seconds=RETRY_DELAYS_SECONDS)
            },
            "metrics_port": 0,
            "worker": WorkerSettings(
                concurrency=concurrency,
                lease_seconds=5.0,
                heartbeat_interval_seconds=1.0,
                stale_owner_seconds=5.0,
                drain_seconds=10.0,
                revoke_grace_seconds=2.0,
            ),
        }
    )


class Enqueuer(threading.Thread):
    """Publishes the planned jobs at ``ARRIVAL_RATE`` with the producer SDK."""

    def __init__(self, settings: Settings, workload: Workload, job_ids: list[uuid.UUID]) -> None:
        super().__init__(name="tenantq-demo-enqueue", daemon=True)
        self.settings = settings
        self.workload = workload
        self.job_ids = job_ids
        self.published = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with Producer(self.settings, APP) as producer:
                started = time.monotonic()
                futures: list[Future[JobRef]] = []
                jobs = self.workload.jobs
                for start in range(0, len(jobs), ENQUEUE_CHUNK):
                    chunk = jobs[start : start + ENQUEUE_CHUNK]
                    futures += producer.enqueue_many(
                        {
                            "job_type": job.job_type,
                            "tenant": job.tenant,
                            "payload": job.payload,
                            "job_id": self.job_ids[job.seq],
                            "max_attempts": job.max_attempts,
                        }
                        for job in chunk
                    )
                    self.published = start + len(chunk)
                    pause = started + self.published / ARRIVAL_RATE - time.monotonic()
                    if pause > 0:
                        time.sleep(pause)
                for future in futures:
                    future.result(60)
        except BaseException as error:  # reported by the main thread
            self.error = error


def run_demo(options: DemoOptions, console: Console) -> int:
    """Run the demo; returns the exit status (0: every check passed)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    report_dir = options.report_dir or Path("reports") / f"demo-{stamp}"
    report_dir.mkdir(parents=True, exist_ok=True)
    base = prepare_settings(console)
    prefix = f"demo{stamp.replace('-', '')}{uuid.uuid4().hex[:4]}"
    settings = demo_settings(base, prefix, options.concurrency)
    migrate.upgrade_database(settings)
    ensure_topics(settings)
    topics = queue_topics(settings, QUEUE)
    workload = plan_workload(options.jobs, options.tenants, options.seed)
    job_ids = [new_job_id() for _ in workload.jobs]
    console.print(
        f"[bold]tenantq demo[/]: {options.jobs:,} jobs, {options.tenants} tenants, "
        f"{options.processes} worker processes, topics {topics.main}.*, seed {options.seed}"
    )
    console.print(f"servers: Kafka {settings.kafka_bootstrap_servers}; report in {report_dir}")
    worker_kafka = dict(settings.kafka_config)
    pool = WorkerPool(settings, options.processes, report_dir / "workers.log", worker_kafka)
    probe = LagProbe(settings, topics.main, topics.dlq, consumer_group(prefix, QUEUE))
    enqueuer = Enqueuer(settings, workload, job_ids)
    timed_out = False
    with connect(settings, autocommit=True, application_name="tenantq-demo") as connection:
        monitor = Monitor(connection, probe, job_ids, lambda: enqueuer.published)
        pool.start()
        try:
            enqueuer.start()
            deadline = time.monotonic() + options.timeout
            title = f"tenantq demo ({prefix})"
            with Live(
                monitor.render(len(job_ids), title), console=console, refresh_per_second=4
            ) as live:
                while True:
                    sample = monitor.sample()
                    live.update(monitor.render(len(job_ids), title))
                    if enqueuer.error is not None:
                        raise enqueuer.error
                    if not enqueuer.is_alive() and sample.terminal >= len(job_ids):
                        break
                    if time.monotonic() > deadline:
                        timed_out = True
                        break
                    if not pool.alive():
                        raise RuntimeError(f"the worker pool exited; see {pool.log_path}")
                    time.sleep(SAMPLE_INTERVAL)
        finally:
            console.print("stopping the worker pool (SIGTERM, graceful drain)...")
            stopped = pool.stop(timeout=settings.worker.drain_seconds + 20)
            probe.close()
        outcomes = job_set_outcomes(connection, job_ids)
    dead_letters = read_dead_letters(settings, QUEUE)
    run = DemoRun(
        options=options,
        prefix=prefix,
        workload=workload,
        job_ids=job_ids,
        outcomes=outcomes,
        dead_letters=dead_letters,
        samples=monitor.samples,
        crashes=pool.crashes(),
        pool_exit=stopped,
        timed_out=timed_out,
        started_wall=monitor.started_wall,
    )
    summary = summarize(run)
    print_summary(summary, console)
    path = write_report(run, summary, report_dir)
    console.print(f"report: [bold]{path}[/]")
    if options.delete_topics:
        delete_topics(settings, [spec.name for spec in declared_topics(settings)])
    else:
        console.print(f"inspect the dead letters: TENANTQ_TOPIC_PREFIX={prefix} tenantq dlq list")
    return 0 if summary.ok else 1
