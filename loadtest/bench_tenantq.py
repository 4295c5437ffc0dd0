"""tenantq's side of the throughput benchmark: no-op jobs through ``tenantq worker``.

One run: fresh topics (``bench_settings``), the benchmark's own database without the previous
run's jobs (its history of finished jobs kept, see ``HISTORY_JOBS``), N jobs enqueued with
``Producer.enqueue_batch`` before any worker exists, then
``python -m tenantq.cli worker throughput_app:APP [--concurrency C] [--processes P]`` started
as a user would (its settings as ``TENANTQ_*`` variables, metrics served, background
services on), CPU sampled, and, when the backlog is drained, a latency phase at half the
measured rate while the same workers run.

The completion check reads the worker group's committed offsets of the main topic (one
``OffsetFetch`` to the broker every 0.5 s, from the benchmark's own admin client) against
the topic's end offsets, read once after the enqueue: no query reaches PostgreSQL while jobs
run. Offsets are committed only behind durable results, so when they reach the end every
job row is written; one count then confirms all succeeded, and the window is read from the
rows' own timestamps.
"""

from __future__ import annotations

import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

import confluent_kafka
import psycopg
from bench_ledger import (
    KafkaSide,
    handler_environment,
    record_half_load,
    succeeded,
    succeeded_since,
    succeeded_window,
    url_of,
)
from bench_run import (
    POSTGRES,
    THIS_RUN,
    Measured,
    RunOptions,
    Servers,
    add_workers,
    monitor_connection,
    note_exits,
    paced_chunks,
    server_sampler,
    start_sampled,
    stop_all,
    wait_until,
    worker_labeler,
)
from bench_start_trace import ActivitySampler, save_jobs
from bench_topics import reading_rate
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]
from start_trace import START_TRACE_VARIABLE
from throughput_app import APP, JOB_TYPE, QUEUE

import tenantq
from tenantq.group_reader import group_reader
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.producer.producer import BatchFuture, EnqueueRequest, Producer
from tenantq.settings import WorkerSettings
from tenantq.store import migrate
from tenantq.store.engine import psycopg_url
from tenantq.topics import consumer_group

TENANTS = 200
_LATEST = OffsetSpec.latest()  # type: ignore[no-untyped-call]
DEFAULT_METRICS_PORT = int(tenantq.Settings.model_fields["metrics_port"].default)


@dataclass(frozen=True)
class TenantqConfig:
    """``--concurrency`` and ``--processes`` (None: the defaults) of ``tenantq worker``,
    whether handlers run in threads of the member instead of a handler process, and whether
    the no-op handler is ``async def``."""

    concurrency: int | None
    processes: int | None
    threads: bool = False
    asynchronous: bool = False
    #: OpenTelemetry tracing on: the jobs enqueued in a traced publication, the worker
    #: exporting an attempt span per job (OTLP/HTTP to ``otlp_sink``).
    traced: bool = False
    #: A ``tenantq_tenants`` row for each of the ``TENANTS`` tenants, with limits the run
    #: never reaches (``write_tenant_rows``): what the claim's quota check costs.
    tenant_rows: bool = False

    @classmethod
    def parse(cls, text: str) -> TenantqConfig:
        """``32x1`` (concurrency x processes), ``128x2``; ``default`` for no flags; a ``t``
        (``128x2t``) runs handlers in threads (``TENANTQ_WORKER__HANDLER_PROCESS=false``):
        what the handler process's crash isolation costs; an ``a`` (``128x2a``, ``128x2ta``)
        makes the no-op an ``async def`` handler, as PgQueuer's is; an ``o`` at the end
        (``default o`` is ``defaulto``, ``512x2o``, ``512x2tao``) turns tracing on; a ``q`` after
        everything (``2048x2tq``, ``defaultq``) writes a row of limits for every tenant first."""
        tenant_rows = text.endswith("q")
        text = text.removesuffix("q")
        traced = text.endswith("o")
        text = text.removesuffix("o")
        if text == "default":
            return cls(None, None, traced=traced, tenant_rows=tenant_rows)
        asynchronous = text.endswith("a")
        text = text.removesuffix("a")
        threads = text.endswith("t")
        concurrency, _, processes = text.removesuffix("t").partition("x")
        return cls(
            int(concurrency), int(processes or 1), threads, asynchronous, traced, tenant_rows
        )

    def label(self, worker: WorkerSettings) -> str:
        """``tenantq c32 p2 (defaults)``; the defaults are the settings' (the workers get the
        benchmark's ``TENANTQ_WORKER__*``)."""
        concurrency = self.concurrency or worker.concurrency
        default_processes = worker.member_processes()
        processes = self.processes or default_processes
        defaults = concurrency == worker.concurrency and processes == default_processes
        label = f"tenantq c{concurrency} p{processes}"
        if self.threads:
            label += " threads"
        if self.asynchronous:
            label += ", async handler"
        elif defaults and not self.threads:
            label += " (defaults)"
        label += ", traced" if self.traced else ""
        return label + (f", {TENANTS} tenant rows" if self.tenant_rows else "")

    def arguments(self) -> list[str]:
        flags = [] if self.concurrency is None else ["--concurrency", str(self.concurrency)]
        return flags + ([] if self.processes is None else ["--processes", str(self.processes)])


def prepare_database(servers: Servers, name: str) -> str:
    """Create database ``name`` on the dev stack's server and migrate it; returns its URL."""
    with psycopg.connect(psycopg_url(servers.database_url), autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    url = url_of(servers, name)
    migrate.upgrade_database(tenantq.Settings(database_url=url))
    return url


#: Finished jobs of another queue, each with its success recorded as a worker records it (on
#: the job row, migration 0008): the ledger a running deployment has
#: (``TENANTQ_RETENTION__SUCCEEDED`` keeps a day of them), so that the planner sees a table of
#: a real size rather than an empty one. (The worker's own plans no longer depend on it: they
#: are made without sequential scans, ``tenantq.store.engine.connect``; a run with
#: ``--history 0`` measures a new deployment.)
HISTORY_JOBS = """
INSERT INTO tenantq_jobs (
    id, deployment, queue, job_type, tenant_id, partition_key, state, payload, payload_sha256,
    attempts, max_attempts, origin_topic, origin_partition, origin_offset, enqueued_at,
    started_at, finished_at, created_at, updated_at, success_worker_id, success_started_at,
    success_duration_ms)
SELECT gen_random_uuid(), 'history', 'history', 'noop', 'tenant-' || mod(i, 200),
       'tenant-' || mod(i, 200), 'succeeded', decode('00', 'hex'), sha256(decode('00', 'hex')),
       1, 25, 'history', mod(i, 12), i, now() - interval '1 hour', now() - interval '1 hour',
       now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 hour',
       'history', now() - interval '1 hour', 0
FROM generate_series(1, %(count)s) AS i
"""


def seed_history(url: str, count: int) -> None:
    """``count`` finished jobs in the ledger, analysed (see ``HISTORY_JOBS``)."""
    with psycopg.connect(psycopg_url(url), autocommit=True) as connection:
        if count:
            connection.execute(HISTORY_JOBS, {"count": count})
        connection.execute("VACUUM ANALYZE tenantq_jobs, tenantq_attempt_log")


#: The limits of each tenant row (``TenantqConfig.tenant_rows``): a cap and a rate no run
#: comes near (200 tenants share at most a few thousand slots and some 40,000 starts a
#: second), so every claim checks them and none holds a job back.
ROW_MAX_RUNNING = 100_000
ROW_RATE = 1_000_000.0
ROW_BURST = 1_000_000


def write_tenant_rows(settings: tenantq.Settings) -> None:
    """A row of limits for each of the ``TENANTS`` tenants of ``settings``' deployment,
    written as an operator would (``tenantq.Tenants``, what ``tenantq tenants set`` calls)."""
    tenants = tenantq.Tenants(settings=settings)
    for index in range(TENANTS):
        tenants.set(
            f"tenant-{index}",
            max_running=ROW_MAX_RUNNING,
            rate=ROW_RATE,
            burst=ROW_BURST,
            updated_by="throughput-bench",
        )


class GroupProgress:
    """The completion check: the workers' committed offsets of the main topic, read by a
    consumer of their group that never subscribes (``tenantq.group_reader``)."""

    def __init__(self, settings: tenantq.Settings, topic: str) -> None:
        self.topic = topic
        self.partitions = settings.queue(QUEUE).partitions
        self.admin = AdminClient(settings.kafka_client_config(**{"client.id": "throughput-bench"}))
        self.reader = group_reader(
            settings, consumer_group(settings.topic_prefix, QUEUE), "throughput-bench"
        )

    def ends(self) -> dict[int, int]:
        asked = {TopicPartition(self.topic, p): _LATEST for p in range(self.partitions)}
        futures = self.admin.list_offsets(asked, request_timeout=10)
        return {tp.partition: int(f.result(10).offset) for tp, f in futures.items()}

    def reached(self, ends: dict[int, int]) -> bool:
        answer = self.reader.committed([TopicPartition(self.topic, p) for p in ends], timeout=10)
        committed = {tp.partition: tp.offset for tp in answer if tp.error is None}
        return all(committed.get(p, -1) >= end for p, end in ends.items())

    def close(self) -> None:
        self.reader.close()


def enqueue(
    settings: tenantq.Settings,
    count: int,
    rate: float | None = None,
    sink: Any = None,
    *,
    warm: bool = False,
) -> float:
    """``count`` no-op jobs of ``TENANTS`` tenants, all at once or at ``rate`` jobs/s; returns
    the wall-clock time at which the first of them was enqueued. With an OTLP ``sink``, in
    traced publications (one span per call), so the jobs carry a trace context.

    At a rate, or when timed from the first call (``warm``), one more job goes first and is
    waited for: a new producer's first messages wait for its idempotent-producer id, up to
    0.5 s when they race librdkafka's start (its retry timer), and that is the producer
    starting, not the queue's latency under load."""
    if sink is None:
        return _enqueue(settings, count, rate, warm)
    from tenantq.observability import tracing

    provider = sink.tracer_provider()
    tracing.use_provider(provider)
    try:
        return _enqueue(settings, count, rate, warm)
    finally:
        tracing.use_provider(None)
        provider.shutdown()


def _enqueue(settings: tenantq.Settings, count: int, rate: float | None, warm: bool) -> float:
    # No placement table: the producer's database lookups are not what is measured.
    with Producer(settings, APP, placement_book=PlacementBook(None, 60.0)) as producer:
        if rate is not None or warm:
            producer.enqueue_batch([EnqueueRequest(JOB_TYPE, "tenant-0", {})]).result(30)
        started = time.time()
        batches: list[BatchFuture] = []
        for first, size in paced_chunks(count, rate):
            requests = [
                EnqueueRequest(JOB_TYPE, f"tenant-{(first + i) % TENANTS}", {}) for i in range(size)
            ]
            batches.append(producer.enqueue_batch(requests))
        producer.flush(120)
        acknowledged = sum(len(batch.result(120)) for batch in batches)
    if acknowledged != count:
        raise SystemExit(f"enqueue: {acknowledged} of {count} jobs acknowledged")
    return started


def raw_consume_rate(settings: tenantq.Settings, topic: str, count: int) -> float:
    """Messages/s of a bare consumer reading ``count`` messages of ``topic`` in a fresh group:
    no decoding, no database (the ceiling any worker on this broker can reach)."""
    consumer = confluent_kafka.Consumer(
        settings.kafka_client_config(
            **{
                "group.id": f"bench-raw-{uuid.uuid4().hex[:8]}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "fetch.max.bytes": 16 * 1024 * 1024,
            }
        )
    )
    consumer.subscribe([topic])
    return reading_rate(
        lambda: consumer.consume(num_messages=500, timeout=0.5), consumer.close, count, 120
    )


class TenantqSide(KafkaSide):
    """Runs tenantq configurations against the benchmark's own database."""

    def __init__(
        self, servers: Servers, database: str, options: RunOptions, partitions: int
    ) -> None:
        super().__init__(servers, database, options, partitions)
        #: The stand-in collector of the traced configurations, started at the first.
        self.sink: Any = None

    def close(self) -> None:
        if self.sink is not None:
            self.sink.__exit__(None, None, None)

    def _sink(self) -> Any:
        if self.sink is None:
            from otlp_sink import OtlpSink

            self.sink = OtlpSink().__enter__()
        return self.sink

    def run(self, config: TenantqConfig, tag: str, *, raw: bool) -> tuple[Measured, float | None]:
        """One measured run; with ``raw``, the raw consumer's rate on the same topic too."""
        options = self.options
        with self.run_settings("tput", metrics_port=DEFAULT_METRICS_PORT) as (
            settings,
            user_kafka_config,
        ):
            topic = f"{settings.topic_prefix}.{QUEUE}"
            if config.tenant_rows:
                write_tenant_rows(settings)
            enqueue(settings, options.jobs, sink=self._sink() if config.traced else None)
            progress = GroupProgress(settings, topic)
            try:
                measured = self._measure(config, settings, progress, tag, user_kafka_config)
            finally:
                progress.close()
            rate = raw_consume_rate(settings, topic, options.jobs) if raw else None
        return measured, rate

    def _measure(
        self,
        config: TenantqConfig,
        settings: tenantq.Settings,
        progress: GroupProgress,
        tag: str,
        kafka_config: dict[str, str],
    ) -> Measured:
        options = self.options
        environment = handler_environment(settings, kafka_config, config)
        if options.start_trace is not None:
            environment[START_TRACE_VARIABLE] = str(options.start_trace / tag)
        spans_before = 0
        if config.traced:
            environment.update(self._sink().environment())
            spans_before = self._sink().spans()
        command = [
            sys.executable,
            "-m",
            "tenantq.cli",
            "worker",
            "throughput_app:APP",
            *config.arguments(),
        ]
        ends = progress.ends()
        # The benchmark's own connection: excluded from PostgreSQL's CPU by its pid.
        monitor = monitor_connection(psycopg_url(self.url))
        sampler = server_sampler(self.servers, self.database, options.sample_interval, monitor)
        idle, launched, (worker,) = start_sampled(
            sampler, command, environment, [options.report_dir / f"{tag}.log"]
        )
        add_workers(sampler, [worker.pid], worker_labeler(worker.pid))
        try:
            wait_until(lambda: progress.reached(ends), [worker], 600, "backlog drained")
            wait_until(
                lambda: succeeded(monitor) >= options.jobs, [worker], 60, "all jobs succeeded"
            )
            _label_backends(monitor, sampler)
            first_start, finishes = succeeded_window(monitor)
            measured = Measured.of_window(
                sampler,
                system="tenantq",
                label=config.label(settings.worker),
                command=" ".join(["tenantq worker throughput_app:APP", *config.arguments()]),
                first_start=first_start,
                finishes=finishes,
                launched=launched,
                background=idle,
            )
            if options.latency_seconds > 0:
                self._half_load(
                    measured, settings, progress, monitor, worker, sampler, config.traced, tag
                )
            if options.end_to_end > 0:
                # The drained worker waits for work; the jobs of the backlog's tenants are
                # enqueued as fast as the producer takes them (all acknowledged before the end
                # offsets are read), timed from the first call to the last recorded succeeded.
                count = options.end_to_end
                sink = self._sink() if config.traced else None
                started = enqueue(settings, count, sink=sink, warm=True)
                ends = progress.ends()
                wait_until(lambda: progress.reached(ends), [worker], 600, "end-to-end jobs")
                finishes = succeeded_since(monitor, started)
                measured.record_end_to_end(sampler, started, finishes, count)
        finally:
            statuses = stop_all(sampler, [worker], monitor)
        note_exits(measured, statuses, "the worker")
        if config.traced:
            measured.notes.append(f"{self._sink().spans() - spans_before:,} spans exported")
        return measured

    def _half_load(
        self,
        measured: Measured,
        settings: tenantq.Settings,
        progress: GroupProgress,
        monitor: psycopg.Connection[Any],
        worker: Any,
        sampler: Any,
        traced: bool,
        tag: str,
    ) -> None:
        """Enqueue at half the measured rate (or ``latency_rate``) for ``latency_seconds``
        while the workers run; enqueue-to-start per job from the rows
        (``bench_ledger.record_half_load``)."""
        rate, count = self.options.half_load(measured.rate)
        trace = self.options.start_trace
        activity = None if trace is None else ActivitySampler(psycopg_url(self.url), trace / tag)
        try:
            phase_start = enqueue(settings, count, rate, self._sink() if traced else None)
            ends = progress.ends()
            wait_until(lambda: progress.reached(ends), [worker], 300, "half-load jobs drained")
        finally:
            if activity is not None:
                activity.stop()
        record_half_load(measured, monitor, sampler, rate, phase_start)
        if trace is not None:
            save_jobs(monitor, QUEUE, phase_start, trace / tag)


def _label_backends(connection: psycopg.Connection[Any], sampler: Any) -> None:
    """Name this run's backends by the connection's application name (its role in tenantq:
    ``tenantq-worker-claim``, ``tenantq-metrics``, ...; the owner part dropped)."""
    rows = connection.execute(
        "SELECT pid, application_name FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    ).fetchall()
    for pid, name in rows:
        sampler.relabel(int(pid), POSTGRES, THIS_RUN + ((name or "").split(" ")[0] or "unnamed"))
