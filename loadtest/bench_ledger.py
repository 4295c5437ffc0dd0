"""What the throughput benchmark reads and writes of tenantq's ledger around a run, shared by
the consumer-group worker's side (``bench_tenantq``) and the share-group spike's
(``bench_share``): the database made ready for a run, the jobs counted and timed, the run's
queue emptied after it, and the worker processes' environment."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import psycopg
from bench_run import Measured, RunOptions, Servers, latency_of
from bench_topics import bench_settings
from pydantic import SecretStr
from sqlalchemy.engine import make_url
from throughput_app import ASYNC_HANDLER_VARIABLE, QUEUE

import tenantq
from tenantq.demo.pool import worker_environment
from tenantq.store.engine import psycopg_url
from tenantq.store.statements import QUEUE_JOBS_DELETE

HERE = Path(__file__).resolve().parent

#: The window of a run: when each succeeded job of the queue started and finished.
SUCCEEDED_TIMES = (
    "SELECT extract(epoch FROM started_at)::float8,"
    " extract(epoch FROM finished_at)::float8"
    " FROM tenantq_jobs WHERE queue = %s AND state = 'succeeded'"
)

#: The half-load phase: enqueue-to-start and finish of each job enqueued since a moment.
HALF_LOAD_TIMES = (
    "SELECT extract(epoch FROM started_at - enqueued_at)::float8,"
    " extract(epoch FROM finished_at)::float8"
    " FROM tenantq_jobs WHERE queue = %s AND enqueued_at >= to_timestamp(%s)"
)

#: The end-to-end phase: when each succeeded job enqueued since a moment finished.
SUCCEEDED_SINCE = (
    "SELECT extract(epoch FROM finished_at)::float8 FROM tenantq_jobs"
    " WHERE queue = %s AND state = 'succeeded' AND enqueued_at >= to_timestamp(%s)"
)


def url_of(servers: Servers, name: str) -> str:
    """The dev database's URL with another database name."""
    return make_url(servers.database_url).set(database=name).render_as_string(hide_password=False)


class KafkaSide:
    """What a side that runs tenantq's ledger behind Kafka (the consumer-group worker, the
    share-group spike) runs against: the servers, the benchmark's own database, the run's
    options and the partitions of its topic."""

    def __init__(
        self, servers: Servers, database: str, options: RunOptions, partitions: int
    ) -> None:
        self.servers = servers
        self.database = database
        self.url = url_of(servers, database)
        self.options = options
        self.partitions = partitions

    @contextlib.contextmanager
    def run_settings(
        self, prefix_stem: str, **fields: Any
    ) -> Iterator[tuple[tenantq.Settings, dict[str, str]]]:
        """The database made ready (``make_ready``), then settings of fresh topics on the
        benchmark's database, and the user's Kafka configuration: the benchmark's own clients
        log librdkafka warnings only (not its info lines about a purged queue at close), the
        workers get the user's configuration untouched. The run's jobs are deleted on exit."""
        make_ready(self.url)
        user_kafka_config = tenantq.load_settings().kafka_config
        with bench_settings(
            prefix_stem,
            QUEUE,
            self.partitions,
            keep_topics=False,
            database_url=SecretStr(self.url),
            kafka_config={**user_kafka_config, "log_level": "4"},
            **fields,
        ) as settings:
            try:
                yield settings, user_kafka_config
            finally:
                delete_run_jobs(self.url, settings)


def make_ready(url: str) -> None:
    """The previous runs' workers gone (their jobs went with them, the history stays), and
    statistics as a deployment's."""
    with psycopg.connect(psycopg_url(url), autocommit=True) as connection:
        connection.execute("DELETE FROM tenantq_workers")
        connection.execute("VACUUM ANALYZE tenantq_jobs, tenantq_attempt_log")


def delete_run_jobs(url: str, settings: tenantq.Settings) -> None:
    """The run's jobs of the benchmark's queue deleted, so the next run starts without them."""
    with psycopg.connect(psycopg_url(url), autocommit=True) as connection:
        connection.execute(QUEUE_JOBS_DELETE, {"deployment": settings.topic_prefix, "queue": QUEUE})


def succeeded(connection: psycopg.Connection[Any]) -> int:
    """How many jobs of the benchmark's queue have succeeded."""
    row = connection.execute(
        "SELECT count(*) FROM tenantq_jobs WHERE queue = %s AND state = 'succeeded'", (QUEUE,)
    ).fetchone()
    return int(row[0]) if row else 0


def succeeded_window(connection: psycopg.Connection[Any]) -> tuple[float, list[float]]:
    """The first start of the queue's succeeded jobs, and their finishes in order."""
    rows = connection.execute(SUCCEEDED_TIMES, (QUEUE,)).fetchall()
    return min(row[0] for row in rows), sorted(row[1] for row in rows)


def succeeded_since(connection: psycopg.Connection[Any], moment: float) -> list[float]:
    """When each succeeded job of the queue enqueued since ``moment`` finished, in order."""
    rows = connection.execute(SUCCEEDED_SINCE, (QUEUE, moment)).fetchall()
    return sorted(row[0] for row in rows)


def record_half_load(
    measured: Measured,
    connection: psycopg.Connection[Any],
    sampler: Any,
    rate: float,
    phase_start: float,
) -> None:
    """Enqueue-to-start of the jobs enqueued since ``phase_start`` (``enqueued_at``: the
    producer's stamp at enqueue, ``started_at``: PostgreSQL's ``now()`` at the claim; one
    host, one clock) into ``measured``, with the CPU of the phase's window."""
    rows = connection.execute(HALF_LOAD_TIMES, (QUEUE, phase_start)).fetchall()
    measured.latency = latency_of(rate, [row[0] for row in rows])
    finishes = sorted(row[1] for row in rows if row[1] is not None)
    measured.sample_half_load(sampler, phase_start, finishes)


class HandlerChoice(Protocol):
    """How a configuration runs the no-op handler."""

    @property
    def threads(self) -> bool:
        """In threads of the member instead of a handler process."""

    @property
    def asynchronous(self) -> bool:
        """The ``async def`` no-op."""


def handler_environment(
    settings: tenantq.Settings, kafka_config: dict[str, str], config: HandlerChoice
) -> dict[str, str]:
    """A worker process's environment: the settings as ``TENANTQ_*`` variables, the
    throughput app importable (from this folder), its handler run as ``config`` says."""
    environment = worker_environment(settings, dict(kafka_config))
    environment["PYTHONPATH"] = str(HERE)
    if config.threads:
        environment["TENANTQ_WORKER__HANDLER_PROCESS"] = "false"
    if config.asynchronous:
        environment[ASYNC_HANDLER_VARIABLE] = "1"
    return environment
