"""What one measured run of the throughput benchmark yields, for either system, and the few
things both sides share: the servers and their pids, how PostgreSQL's processes are named,
worker processes started and stopped as a user would, and the figures drawn from the
database's timestamps and the CPU samples.

The measured window runs from the first job started to the last job finished, both stamped
by PostgreSQL (``now()``), so it costs nothing while jobs run and needs no clock but the
host's: the CPU samples are taken with the same wall clock (``time.time()``).
"""

from __future__ import annotations

import bisect
import statistics
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from bench_cpu import (
    CpuSampler,
    CpuWindow,
    Labeler,
    Postmaster,
    ProcessGroup,
    ProcessTree,
    SingleProcess,
)
from exit_with_parent import exiting_with_this_process

from tenantq.demo.pool import stop_process

#: Group names, in the order the report shows them.
WORKER = "worker"
KAFKA = "kafka"
POSTGRES = "postgres"
#: The systems whose runs use the Kafka broker (its CPU counts in their figures): the
#: consumer-group worker and the share-group spike (``bench_share``).
KAFKA_SYSTEMS = ("tenantq", "share")
#: Roles of PostgreSQL processes that a run's jobs cause; the others (backends of other
#: databases, the postmaster with the backends it reaped) are the shared server's noise.
THIS_RUN = "this run: "
SERVER_PROCESSES = "server processes (WAL writer, checkpointer, I/O workers, launchers)"
#: Other databases' backends, autovacuum workers and the postmaster, which holds the CPU of
#: every child that ended: one role, as a child's CPU moves to the postmaster when it ends.
SHARED = "shared: other databases, autovacuum, postmaster, ended backends"


@dataclass(frozen=True)
class Servers:
    """The dev stack's servers and the pids whose CPU is counted (None: not on this host or
    not known; the figure is then left out and the report says so)."""

    bootstrap_servers: str
    database_url: str
    kafka_pid: int | None
    postmaster_pid: int | None


@dataclass(frozen=True)
class RunOptions:
    """What both sides of the benchmark run: the backlog, then the latency phase."""

    jobs: int
    latency_seconds: float
    sample_interval: float
    report_dir: Path
    #: jobs/s of the latency phase; None: half the measured rate.
    latency_rate: float | None = None
    #: Jobs of the end-to-end phase (0: none), enqueued as fast as the system takes them
    #: while its workers, already running, are idle (``EndToEnd``).
    end_to_end: int = 0
    #: tenantq's start path traced through the latency phase into this folder
    #: (``bench_start_trace``); None: not traced.
    start_trace: Path | None = None

    def half_load(self, measured_rate: float) -> tuple[float, int]:
        """The latency phase after a backlog drained at ``measured_rate`` jobs/s: its rate
        and how many jobs it enqueues."""
        rate = self.latency_rate or measured_rate / 2
        return rate, max(1, int(rate * self.latency_seconds))


@dataclass(frozen=True)
class Latency:
    """Enqueue-to-start at a steady offered rate, from the database's timestamps."""

    rate: float
    jobs: int
    p50: float
    p99: float
    max: float


@dataclass(frozen=True)
class EndToEnd:
    """Jobs enqueued while the workers already ran idle, from the first enqueue call
    (``started``, the host's clock) to the last job finished (the database's, same host)."""

    jobs: int
    seconds: float
    cpu: CpuWindow | None
    cpu_jobs: int

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else 0.0


@dataclass
class Measured:
    """One run: the capacity window, its CPU, and the latency phase that followed."""

    system: str
    label: str
    command: str
    jobs: int
    first_start: float
    last_finish: float
    #: When each job finished (epoch seconds), for the throughput plot.
    finishes: list[float]
    #: From launching the worker to its first job started (import, connect, join the group).
    startup_seconds: float
    cpu: CpuWindow | None
    cpu_jobs: int
    latency: Latency | None = None
    half_load_cpu: CpuWindow | None = None
    half_load_cpu_jobs: int = 0
    round_number: int = 1
    end_to_end: EndToEnd | None = None
    #: The servers' CPU seconds per second just before the worker started, by group.
    background: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def of_window(
        cls,
        sampler: CpuSampler,
        *,
        system: str,
        label: str,
        command: str,
        first_start: float,
        finishes: list[float],
        launched: float,
        background: dict[str, float],
    ) -> Measured:
        """The capacity run from its first job started to its last finished (``finishes``
        sorted), with the sampler's CPU of that window; ``launched``: when the worker was."""
        cpu = sampler.window(first_start, finishes[-1])
        return cls(
            system=system,
            label=label,
            command=command,
            jobs=len(finishes),
            first_start=first_start,
            last_finish=finishes[-1],
            finishes=finishes,
            startup_seconds=first_start - launched,
            cpu=cpu,
            cpu_jobs=jobs_between(finishes, cpu),
            background=background,
        )

    def sample_half_load(
        self, sampler: CpuSampler, phase_start: float, finishes: list[float]
    ) -> None:
        """The CPU of the latency phase, from its start to its last job finished (none: no
        window)."""
        if finishes:
            window = sampler.window(phase_start, finishes[-1])
            self.half_load_cpu = window
            self.half_load_cpu_jobs = jobs_between(finishes, window)

    def record_end_to_end(
        self, sampler: CpuSampler, started: float, finishes: list[float], expected: int
    ) -> None:
        """The end-to-end phase: ``expected`` jobs enqueued from ``started`` on, ``finishes``
        (sorted) those recorded succeeded; a note if some are missing."""
        if len(finishes) != expected:
            self.notes.append(f"end to end: {len(finishes):,} of {expected:,} jobs succeeded")
        if finishes:
            window = sampler.window(started, finishes[-1])
            self.end_to_end = EndToEnd(
                len(finishes), finishes[-1] - started, window, jobs_between(finishes, window)
            )

    @property
    def seconds(self) -> float:
        return self.last_finish - self.first_start

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else 0.0

    def micros_per_job(self, *, half_load: bool = False) -> dict[str, float]:
        """CPU microseconds per job of each group, PostgreSQL both as a whole (``postgres
        (all)``) and as what this run caused (its database's backends and the server's own
        processes); ``total`` adds worker, Kafka and this run's PostgreSQL."""
        window, jobs = (
            (self.half_load_cpu, self.half_load_cpu_jobs)
            if half_load
            else (self.cpu, self.cpu_jobs)
        )
        return cpu_micros(self.system, window, jobs)

    def end_to_end_micros(self) -> dict[str, float]:
        """``micros_per_job`` of the end-to-end phase (none: no figures)."""
        phase = self.end_to_end
        return {} if phase is None else cpu_micros(self.system, phase.cpu, phase.cpu_jobs)

    def kafka_background(self) -> float | None:
        """CPU seconds per second of the broker in the window of a run that does not use it
        (the shared broker's background, which tenantq's Kafka figure also holds)."""
        window = self.cpu
        if self.system in KAFKA_SYSTEMS or window is None or KAFKA not in window.by_group:
            return None
        return window.by_group[KAFKA] / max(window.ended - window.started, 1e-9)

    def as_dict(self) -> dict[str, Any]:
        def roles(window: CpuWindow | None, jobs: int) -> dict[str, float]:
            if window is None or not jobs:
                return {}
            return {
                f"{group} / {role}": round(seconds * 1e6 / jobs, 1)
                for (group, role), seconds in sorted(window.by_role.items())
            }

        return {
            "system": self.system,
            "label": self.label,
            "round": self.round_number,
            "command": self.command,
            "jobs": self.jobs,
            "seconds": round(self.seconds, 3),
            "jobs_per_second": round(self.rate, 1),
            "startup_seconds": round(self.startup_seconds, 2),
            "cpu_us_per_job": {k: round(v, 1) for k, v in self.micros_per_job().items()},
            "cpu_us_per_job_by_role": roles(self.cpu, self.cpu_jobs),
            "cpu_window_jobs": self.cpu_jobs,
            "background_cpu_ms_per_s": {k: round(v * 1000, 1) for k, v in self.background.items()},
            "latency": None if self.latency is None else vars(self.latency),
            "half_load_cpu_us_per_job": {
                k: round(v, 1) for k, v in self.micros_per_job(half_load=True).items()
            },
            "end_to_end": None
            if (phase := self.end_to_end) is None
            else {
                "jobs": phase.jobs,
                "seconds": round(phase.seconds, 3),
                "jobs_per_second": round(phase.rate, 1),
                "cpu_us_per_job": {k: round(v, 1) for k, v in self.end_to_end_micros().items()},
            },
            "notes": self.notes,
        }


def cpu_micros(system: str, window: CpuWindow | None, jobs: int) -> dict[str, float]:
    """CPU microseconds per job of each group in ``window`` of a run of ``system``
    (``Measured.micros_per_job``)."""
    if window is None or jobs == 0:
        return {}
    scale = 1e6 / jobs
    # PgQueuer has no broker: the shared broker's CPU in its window is background only.
    groups = (WORKER, KAFKA) if system in KAFKA_SYSTEMS else (WORKER,)
    figures = {
        group: window.by_group[group] * scale for group in groups if group in window.by_group
    }
    if POSTGRES in window.by_group:
        figures["postgres (all)"] = window.by_group[POSTGRES] * scale
        figures[POSTGRES] = scale * sum(
            seconds
            for (group, role), seconds in window.by_role.items()
            if group == POSTGRES and (role.startswith(THIS_RUN) or role == SERVER_PROCESSES)
        )
    figures["total"] = sum(figures.get(group, 0.0) for group in (WORKER, KAFKA, POSTGRES))
    return figures


#: Jobs per enqueue call when the jobs are enqueued all at once.
ENQUEUE_CHUNK = 1000


def paced_chunks(count: int, rate: float | None) -> Iterator[tuple[int, int]]:
    """(first, size) of each enqueue call for ``count`` jobs: chunks of ``ENQUEUE_CHUNK`` all at
    once, or about 50 calls a second at ``rate`` jobs/s (the pause follows each chunk, so the
    caller's enqueue of it is paced too). Both sides of the benchmark enqueue through this."""
    chunk = ENQUEUE_CHUNK if rate is None else max(1, round(rate / 50))
    started = time.monotonic()
    for first in range(0, count, chunk):
        size = min(chunk, count - first)
        yield first, size
        if rate is not None:
            pause = started + (first + size) / rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)


def jobs_between(finishes: list[float], window: CpuWindow | None) -> int:
    """Jobs finished inside the CPU window (``finishes`` sorted)."""
    if window is None:
        return 0
    return bisect.bisect_right(finishes, window.ended) - bisect.bisect_right(
        finishes, window.started
    )


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


def latency_of(rate: float, delays: list[float]) -> Latency | None:
    if not delays:
        return None
    return Latency(
        rate=round(rate, 1),
        jobs=len(delays),
        p50=percentile(delays, 0.5),
        p99=percentile(delays, 0.99),
        max=max(delays),
    )


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


# -- processes --------------------------------------------------------------------------------


def postgres_labeler(run_databases: set[str]) -> Labeler:
    """Role of a child of the postmaster, from its process title: ``postgres: user db
    host(port) activity`` for a backend, the auxiliary's name otherwise."""

    def label(pid: int, cmdline: str) -> str:
        if "autovacuum worker" in cmdline:
            # Short-lived: its CPU moves to the postmaster when it ends, so it is counted
            # where it ends up (in Postgres (all) only), never as a negative elsewhere.
            return SHARED
        words = cmdline.removeprefix("postgres: ").split()
        is_backend = len(words) >= 3 and ("(" in words[2] or words[2] == "[local]")
        if not is_backend:
            return SERVER_PROCESSES
        if words[1] in run_databases:
            return f"{THIS_RUN}backend"
        return SHARED

    return label


def worker_labeler(root: int | None, member_marker: str = "--member") -> Labeler:
    """Role in a worker's process tree: the supervisor (``root``; None: there is none), its
    members (a command line naming ``member_marker``), their handler processes
    (multiprocessing spawn) and multiprocessing's resource tracker."""

    def label(pid: int, cmdline: str) -> str:
        if pid == root:
            return "supervisor"
        if member_marker in cmdline:
            return "member"
        if "resource_tracker" in cmdline:
            return "resource tracker"
        if "spawn_main" in cmdline:
            return "handler process"
        return "other"

    return label


#: Seconds the servers are sampled before a worker starts: their background CPU (other users
#: of the shared dev stack, the broker's own housekeeping), reported beside each run.
BACKGROUND_SECONDS = 1.0


def server_sampler(
    servers: Servers, database: str, interval: float, monitor: psycopg.Connection[Any]
) -> CpuSampler:
    """A sampler of the broker and PostgreSQL (the parts known here), ``database``'s backends
    as the run's but the benchmark's own connection (``monitor``) left out; the worker's
    processes are added once started."""
    groups: list[ProcessGroup] = []
    if servers.kafka_pid is not None:
        groups.append(SingleProcess(KAFKA, servers.kafka_pid))
    if servers.postmaster_pid is not None:
        postmaster = Postmaster(
            POSTGRES, servers.postmaster_pid, postgres_labeler({database}), SHARED
        )
        postmaster.excluded.add(int(monitor.info.backend_pid))
        groups.append(postmaster)
    return CpuSampler(groups, interval=interval)


def background(sampler: CpuSampler) -> dict[str, float]:
    """Sample the servers for ``BACKGROUND_SECONDS`` (the sampler running); their CPU
    seconds per second of wall time meanwhile, by group."""
    started = time.time()
    time.sleep(BACKGROUND_SECONDS)
    window = sampler.window(started, time.time())
    if window is None:
        return {}
    wall = max(window.ended - window.started, 1e-9)
    return {group: seconds / wall for group, seconds in window.by_group.items()}


def add_workers(sampler: CpuSampler, roots: list[int], labeler: Labeler) -> None:
    sampler.add(ProcessTree(WORKER, roots, labeler))


def start_sampled(
    sampler: CpuSampler, command: list[str], environment: dict[str, str], logs: list[Path]
) -> tuple[dict[str, float], float, list[subprocess.Popen[bytes]]]:
    """Start ``sampler``, read the servers' background CPU, then start one ``command`` process
    per log path; returns the background, the wall-clock launch time and the processes (to
    be added to the sampler with their labeler)."""
    sampler.start()
    idle = background(sampler)
    launched = time.time()
    return idle, launched, [start_process(command, environment, log) for log in logs]


def monitor_connection(url: str) -> psycopg.Connection[Any]:
    """The benchmark's own connection (its backend is left out of the CPU figures); a query
    of its that runs away fails after a minute instead of hanging the benchmark."""
    return psycopg.connect(
        url,
        autocommit=True,
        application_name="throughput-bench",
        options="-c statement_timeout=60000",
    )


def start_process(
    command: list[str], environment: dict[str, str], log_path: Path
) -> subprocess.Popen[bytes]:
    """Start ``command`` in a session of its own, its output appended to ``log_path``; it
    gets SIGTERM if the benchmark's process dies (``exiting_with_this_process``)."""
    with log_path.open("ab") as log:
        return subprocess.Popen(
            exiting_with_this_process(command),
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
            # A session of its own: stopped as a whole if it does not stop when asked.
            start_new_session=True,
        )


def stop_all(
    sampler: CpuSampler,
    processes: list[subprocess.Popen[bytes]],
    *connections: psycopg.Connection[Any],
) -> list[int | None]:
    """The end of a measured run: sampling stopped, then each worker process
    (``stop_process``: asked, then killed), then the benchmark's connections closed; returns
    the processes' exit statuses."""
    sampler.stop()
    statuses = [stop_process(process) for process in processes]
    for connection in connections:
        connection.close()
    return statuses


def note_exits(measured: Measured, statuses: list[int | None], who: str) -> None:
    """A note in ``measured`` for each process that did not exit cleanly when stopped."""
    for status in statuses:
        if status not in (0, None):
            measured.notes.append(f"{who} exited with status {status} when stopped")


def wait_until(
    done: Any, processes: list[subprocess.Popen[bytes]], timeout: float, what: str
) -> None:
    """Call ``done()`` every 0.5 s until true; fail if a worker exits or time runs out."""
    deadline = time.monotonic() + timeout
    while not done():
        for process in processes:
            if process.poll() is not None:
                raise SystemExit(
                    f"a worker exited with status {process.returncode} (waiting for: {what})"
                )
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f}s: {what}")
        time.sleep(0.5)
