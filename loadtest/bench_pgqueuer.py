"""PgQueuer's side of the throughput benchmark, on the same PostgreSQL server in a database of
its own, measured the way tenantq is.

One run: PgQueuer's tables emptied, N no-op jobs enqueued (``SyncQueries.enqueue``, batches
of 1,000) before the worker exists, then ``python loadtest/pgqueuer_app.py --batch-size B``
(what ``pgq run`` does: one QueueManager, one asyncpg connection, uvloop, every other setting
PgQueuer's default: durable tables, no concurrency limit, 30 s heartbeat, log aggregation
every 30 s), CPU sampled, and the same latency phase at half its measured rate.

The window comes from PgQueuer's own log table, written by its queries in any case: a job's
``picked`` row (stamped ``now()`` by the dequeue) and ``successful`` row (stamped by the
batched completion that also deletes the job), so the same database clock as tenantq's
``started_at`` / ``finished_at``. Enqueue-to-start is ``picked`` minus ``queued``.
The completion check asks every 0.5 s whether the queue table still holds a row (``SELECT
EXISTS``, stops at the first live row) on the benchmark's own connection, whose backend is
left out of PostgreSQL's CPU.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from bench_run import (
    POSTGRES,
    THIS_RUN,
    Measured,
    RunOptions,
    Servers,
    add_workers,
    latency_of,
    monitor_connection,
    note_exits,
    paced_chunks,
    server_sampler,
    start_sampled,
    stop_all,
    wait_until,
)
from sqlalchemy.engine import make_url

HERE = Path(__file__).resolve().parent
#: PgQueuer's default ``--batch-size``.
DEFAULT_BATCH = 10

try:
    import asyncpg  # type: ignore[import-untyped]
    from pgqueuer.db import AsyncpgDriver, SyncPsycopgDriver
    from pgqueuer.queries import Queries, SyncQueries
    from pgqueuer_app import ENTRYPOINT

    MISSING: str | None = None
except ImportError as error:  # the optional extra: the benchmark runs without this side
    MISSING = f"{error.name or error} is not installed (pip install -e '.[bench]')"


@dataclass(frozen=True)
class PgqueuerConfig:
    """``--batch-size`` of each worker process, and how many run side by side."""

    batch_size: int
    processes: int = 1

    @classmethod
    def parse(cls, text: str) -> PgqueuerConfig:
        """``100`` (batch size), ``100x2`` (two processes), ``default`` (batch 10)."""
        batch, _, processes = text.partition("x")
        return cls(DEFAULT_BATCH if batch == "default" else int(batch), int(processes or 1))

    @property
    def label(self) -> str:
        suffix = " (default)" if self.batch_size == DEFAULT_BATCH and self.processes == 1 else ""
        processes = f" x{self.processes} processes" if self.processes > 1 else ""
        return f"PgQueuer batch {self.batch_size}{processes}{suffix}"

    @property
    def command(self) -> str:
        run = f"pgq run pgqueuer_app:create --batch-size {self.batch_size}"
        return run if self.processes == 1 else f"{self.processes} x {run}"


class PgqueuerSide:
    def __init__(self, servers: Servers, database: str, options: RunOptions) -> None:
        self.servers = servers
        self.database = database
        self.options = options
        url = make_url(servers.database_url).set(database=database)
        self.url = url.set(drivername="postgresql").render_as_string(hide_password=False)
        # How PgQueuer's worker finds the database: the libpq variables of its quick start.
        self.environment = {
            "PGHOST": url.host or "127.0.0.1",
            "PGPORT": str(url.port or 5432),
            "PGUSER": url.username or "postgres",
            "PGDATABASE": database,
            "PYTHONPATH": str(HERE),
        }
        if url.password:
            self.environment["PGPASSWORD"] = url.password

    def install(self) -> None:
        """``pgq install``: PgQueuer's tables, at its default durability."""

        async def install() -> None:
            connection = await asyncpg.connect(self.url)
            try:
                await Queries(AsyncpgDriver(connection)).install()
            finally:
                await connection.close()

        asyncio.run(install())

    def run(self, config: PgqueuerConfig, tag: str) -> Measured:
        options = self.options
        with psycopg.connect(self.url, autocommit=True) as connection:
            connection.execute("TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics")
            _enqueue(connection, options.jobs)
            # Statistics as a running deployment has them (autovacuum's): fresh from the
            # TRUNCATE they say the table is empty, and at 150,000 jobs PgQueuer's dequeue
            # then ran 7,074 jobs/s at 101 us of Postgres per job against 12,540 and 45.
            connection.execute("ANALYZE pgqueuer")
        monitor = monitor_connection(self.url)
        enqueuer = psycopg.connect(self.url, autocommit=True, application_name="bench-enqueue")
        command = [sys.executable, str(HERE / "pgqueuer_app.py")]
        command += ["--batch-size", str(config.batch_size)]
        environment = {**os.environ, **self.environment}
        sampler = server_sampler(self.servers, self.database, options.sample_interval, monitor)
        # Its enqueues at half load are work of the run (as the broker's are for tenantq); it
        # stays connected until the last sample, so its CPU never moves to the postmaster's.
        sampler.relabel(int(enqueuer.info.backend_pid), POSTGRES, THIS_RUN + "enqueue")
        # As many `pgq run` processes as asked, each its own session and log.
        logs = [options.report_dir / f"{tag}-{index}.log" for index in range(config.processes)]
        idle, launched, workers = start_sampled(sampler, command, environment, logs)
        add_workers(sampler, [worker.pid for worker in workers], lambda pid, cmdline: "worker")
        try:
            wait_until(lambda: not _waiting(monitor), workers, 600, "backlog drained")
            _label_backends(monitor, sampler, int(enqueuer.info.backend_pid))
            picks, finishes = _log_times(monitor, since=0.0)
            measured = Measured.of_window(
                sampler,
                system="pgqueuer",
                label=config.label,
                command=config.command,
                first_start=picks[0],
                finishes=finishes,
                launched=launched,
                background=idle,
            )
            if measured.jobs != options.jobs:
                measured.notes.append(f"{measured.jobs} of {options.jobs} jobs logged successful")
            if options.latency_seconds > 0:
                self._half_load(measured, monitor, enqueuer, workers, sampler)
            if options.end_to_end > 0:
                # The drained workers wait for work; the jobs go in through PgQueuer's enqueue
                # on the half load's connection, timed from the first call to the last
                # ``successful`` row once the queue table is empty (as the backlog's check).
                count = options.end_to_end
                started = time.time()
                _enqueue(enqueuer, count)
                wait_until(lambda: not _waiting(monitor), workers, 600, "end-to-end jobs")
                finishes = _log_times(monitor, since=started)[1]
                measured.record_end_to_end(sampler, started, finishes, count)
        finally:
            statuses = stop_all(sampler, workers, monitor, enqueuer)
        note_exits(measured, statuses, "a worker")
        return measured

    def _half_load(
        self,
        measured: Measured,
        monitor: psycopg.Connection[Any],
        enqueuer: psycopg.Connection[Any],
        workers: list[Any],
        sampler: Any,
    ) -> None:
        rate, count = self.options.half_load(measured.rate)
        phase_start = time.time()
        _enqueue(enqueuer, count, rate)
        wait_until(lambda: not _waiting(monitor), workers, 300, "half-load jobs drained")
        # One pass grouped by job (hashed): a self-join planned from the statistics of a
        # table truncated minutes ago ran nested loops over 200,000 rows for minutes.
        rows = monitor.execute(
            "SELECT extract(epoch FROM min(created) FILTER (WHERE status = 'picked')"
            " - min(created) FILTER (WHERE status = 'queued'))::float8"
            " FROM pgqueuer_log WHERE status IN ('queued', 'picked')"
            " AND created >= to_timestamp(%s) GROUP BY job_id"
            " HAVING count(*) FILTER (WHERE status = 'queued') = 1"
            " AND count(*) FILTER (WHERE status = 'picked') >= 1",
            (phase_start,),
        ).fetchall()
        measured.latency = latency_of(rate, [row[0] for row in rows])
        _, finishes = _log_times(monitor, since=phase_start)
        measured.sample_half_load(sampler, phase_start, finishes)


def _enqueue(connection: psycopg.Connection[Any], count: int, rate: float | None = None) -> None:
    """``count`` no-op jobs through PgQueuer's enqueue, all at once or at ``rate`` jobs/s."""
    queries = SyncQueries(SyncPsycopgDriver(connection))
    for _, size in paced_chunks(count, rate):
        queries.enqueue([ENTRYPOINT] * size, [b""] * size, [0] * size)


def _waiting(connection: psycopg.Connection[Any]) -> bool:
    """Whether PgQueuer's queue table holds a job (queued or picked, not yet completed)."""
    row = connection.execute("SELECT EXISTS (SELECT 1 FROM pgqueuer)").fetchone()
    return bool(row and row[0])


def _log_times(
    connection: psycopg.Connection[Any], since: float
) -> tuple[list[float], list[float]]:
    """Sorted moments of the ``picked`` and ``successful`` log rows after ``since``."""
    rows = connection.execute(
        "SELECT extract(epoch FROM created)::float8, status::text FROM pgqueuer_log"
        " WHERE status IN ('picked', 'successful') AND created >= to_timestamp(%s)",
        (since,),
    ).fetchall()
    picks = sorted(at for at, status in rows if status == "picked")
    finishes = sorted(at for at, status in rows if status == "successful")
    return picks, finishes


def _label_backends(connection: psycopg.Connection[Any], sampler: Any, enqueuer: int) -> None:
    rows = connection.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND pid <> pg_backend_pid() AND pid <> %s",
        (enqueuer,),
    ).fetchall()
    for (pid,) in rows:
        sampler.relabel(int(pid), POSTGRES, THIS_RUN + "pgqueuer worker (asyncpg)")
