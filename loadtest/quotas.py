"""The quota load test: tenants' limits held across real ``tenantq worker`` processes, measured
from the handlers' own notes (``quota_app``: when each attempt began and ended).

    .venv/bin/python loadtest/quotas.py                       # cap, rate, weights, crash
    .venv/bin/python loadtest/quotas.py --scenario weights --repeat 3
    .venv/bin/python loadtest/quotas.py --scenario backlog    # CPU while a backlog waits

The tool works in a database of its own on the servers' PostgreSQL (``quotas_<time>``, created,
migrated, and dropped at the end unless ``--keep``), never in the shared one. Each run: its own
topic prefix and queue (12 partitions, default queue settings), the limits
set with ``tenantq.Tenants``, two ``tenantq worker quota_app:APP --processes 2 --concurrency
8`` (four members, 32 slots; default settings otherwise, metrics off), a warm-up that proves
every member runs, then the scenario's jobs enqueued at once (``enqueue_batch``), so the
tenants' jobs wait together. The workers are stopped (SIGTERM) once every job succeeded.

| scenario | limits                          | jobs                                          |
| -------- | ------------------------------- | --------------------------------------------- |
| cap      | capped: --max-running 5         | 300 of 200 ms                                 |
| rate     | paced: --rate 40 --burst 10     | 600 instant                                   |
| weights  | heavy: --weight 4 (light: 1)    | 3,000 of 50 ms each                           |
| crash    | capped: --max-running 5         | 200 of 2 s; a member running some is killed   |
|          |                                 | with SIGKILL once the tenant is at its cap    |
| backlog  | capped: --max-running 5         | 5 of 90 s, the workers' CPU sampled; then     |
|          |                                 | 10,000 more of 1 s (held back: the cap is     |
|          |                                 | reached), the CPU sampled again               |

Writes ``report.md``, ``summary.json`` and the plots (running against the cap, starts per
second against the rate, shares against the weights) to ``--report-dir`` (default
``reports/quotas-<time>/``). Exit status 0 when every target held, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import psycopg  # noqa: E402
import quota_report as report  # noqa: E402
from bench_cpu import children, command_line, read_ticks  # noqa: E402
from exit_with_parent import exiting_with_this_process  # noqa: E402
from pydantic import SecretStr  # noqa: E402
from quota_app import JOB_TYPE, QUEUE_VARIABLE, RECORDS_VARIABLE  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

import tenantq  # noqa: E402
from tenantq.producer.producer import EnqueueRequest, Producer  # noqa: E402
from tenantq.settings import QueueSettings, Settings, load_settings  # noqa: E402
from tenantq.store import migrate  # noqa: E402
from tenantq.store.engine import psycopg_url  # noqa: E402
from tenantq.store.statements import QUEUE_JOBS_DELETE  # noqa: E402
from tenantq.topic_admin import declared_topics, delete_topics, ensure_topics  # noqa: E402

WORKERS = 2
PROCESSES = 2
CONCURRENCY = 8
#: A run that has not finished its jobs in this long failed.
RUN_TIMEOUT = 600.0
#: How long the CPU of the workers is sampled, with the backlog waiting and with no job.
CPU_SECONDS = 20.0


@dataclass(frozen=True)
class Scenario:
    name: str
    #: tenant -> limits for ``Tenants.set``.
    limits: dict[str, dict[str, Any]]
    #: (tenant, jobs, ms), enqueued interleaved.
    jobs: tuple[tuple[str, int, float], ...]

    def scaled(self, factor: float) -> Scenario:
        """The scenario with ``factor`` times its jobs (at least 20 per tenant)."""
        if factor == 1.0:
            return self
        jobs = tuple(
            (tenant, max(20, round(count * factor)), ms) for tenant, count, ms in self.jobs
        )
        return Scenario(self.name, self.limits, jobs)


SCENARIOS = {
    "cap": Scenario("cap", {"capped": {"max_running": 5}}, (("capped", 300, 200.0),)),
    "rate": Scenario("rate", {"paced": {"rate": 40.0, "burst": 10}}, (("paced", 600, 0.0),)),
    "weights": Scenario(
        "weights", {"heavy": {"weight": 4}}, (("heavy", 3000, 50.0), ("light", 3000, 50.0))
    ),
    "weights-off": Scenario("weights-off", {}, (("heavy", 3000, 50.0), ("light", 3000, 50.0))),
    "crash": Scenario("crash", {"capped": {"max_running": 5}}, (("capped", 200, 2000.0),)),
    "backlog": Scenario("backlog", {"capped": {"max_running": 5}}, (("capped", 10_000, 1000.0),)),
}
DEFAULT_SCENARIOS = ("cap", "rate", "weights", "crash")


class Worker:
    """``tenantq worker quota_app:APP --processes 2 --concurrency 8`` in a session of its own,
    its output in a log file; SIGTERM if the tool's process dies."""

    def __init__(self, environment: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        self._log: IO[bytes] = log_path.open("ab")
        command = [sys.executable, "-m", "tenantq.cli", "worker", "quota_app:APP"]
        command += ["--processes", str(PROCESSES), "--concurrency", str(CONCURRENCY)]
        self.process = subprocess.Popen(
            exiting_with_this_process(command),
            env=environment,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def processes(self) -> list[int]:
        """The worker's process and every descendant (members, handler processes)."""
        found, todo = [], [self.process.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo += children(pid)
        return found

    def stop(self, timeout: float = 60.0) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        self._log.close()


def cpu_seconds(pids: list[int]) -> float:
    ticks = sum(read_ticks(pid, with_reaped=False) or 0 for pid in pids)
    return ticks / os.sysconf("SC_CLK_TCK")


def sample_cpu(workers: list[Worker], seconds: float) -> float:
    """Cores the workers' processes used over ``seconds``."""
    pids = [pid for worker in workers for pid in worker.processes()]
    before = cpu_seconds(pids)
    time.sleep(seconds)
    return (cpu_seconds(pids) - before) / seconds


class Run:
    """One scenario on fresh topics and a fresh queue."""

    def __init__(self, scenario: Scenario, base: Settings, folder: Path) -> None:
        self.scenario = scenario
        self.folder = folder
        self.records = folder / "records"
        self.records.mkdir(parents=True, exist_ok=True)
        tag = uuid.uuid4().hex[:8]
        self.queue = f"quota-{tag}"
        self.settings = base.model_copy(
            update={
                "topic_prefix": f"qt{tag}",
                "queues": {self.queue: QueueSettings()},
                "metrics_port": 0,
            }
        )
        self.url = psycopg_url(self.settings.require_database_url())
        self.killed_at: float | None = None
        #: (member pid, the tenant's attempts its handler process ran) of the member killed.
        self.killed: tuple[int, int] | None = None
        self.cpu: dict[str, float] = {}

    def environment(self) -> dict[str, str]:
        settings = self.settings
        environment = {k: v for k, v in os.environ.items() if not k.startswith("TENANTQ_")}
        environment.update(
            {
                "TENANTQ_KAFKA_BOOTSTRAP_SERVERS": settings.require_bootstrap_servers(),
                "TENANTQ_DATABASE_URL": settings.require_database_url(),
                "TENANTQ_TOPIC_PREFIX": settings.topic_prefix,
                "TENANTQ_QUEUES": json.dumps({self.queue: {}}),
                "TENANTQ_METRICS_PORT": "0",
                **{
                    k.removeprefix("QUOTA_TEST_"): v
                    for k, v in os.environ.items()
                    if k.startswith("QUOTA_TEST_TENANTQ_")
                },
                QUEUE_VARIABLE: self.queue,
                RECORDS_VARIABLE: str(self.records),
                "PYTHONPATH": os.pathsep.join(
                    part for part in (str(HERE), os.environ.get("PYTHONPATH", "")) if part
                ),
            }
        )
        if settings.kafka_config:
            # The client's security settings as they are (a dump masks the password).
            environment["TENANTQ_KAFKA_CONFIG"] = json.dumps(settings.kafka_config)
        return environment

    def succeeded(self, connection: psycopg.Connection[Any]) -> int:
        row = connection.execute(
            "SELECT count(*) FROM tenantq_jobs WHERE deployment = %s AND queue = %s "
            "AND state = 'succeeded' AND tenant_id <> 'warmup'",
            (self.settings.topic_prefix, self.queue),
        ).fetchone()
        return int(row[0]) if row else 0

    def enqueue(self, requests: list[EnqueueRequest]) -> None:
        with Producer(self.settings) as producer:
            for start in range(0, len(requests), 500):
                producer.enqueue_batch(requests[start : start + 500]).result(120)

    def run(self) -> report.Figures:
        ensure_topics(self.settings)
        tenants = tenantq.Tenants(settings=self.settings)
        for tenant, limits in self.scenario.limits.items():
            tenants.set(tenant, **limits)
        environment = self.environment()
        workers = [
            Worker(environment, self.folder / f"worker-{index}.log") for index in range(WORKERS)
        ]
        try:
            with psycopg.connect(self.url, autocommit=True) as connection:
                self.warm_up(connection)
                if self.scenario.name == "backlog":
                    self.cpu["idle_cores"] = sample_cpu(workers, CPU_SECONDS)
                    # The same five running, with nothing waiting: what the backlog adds to.
                    first = [
                        EnqueueRequest(JOB_TYPE, "capped", {"ms": 90_000.0}, queue=self.queue)
                        for _ in range(5)
                    ]
                    self.enqueue(first)
                    time.sleep(5.0)
                    self.cpu["five_running_cores"] = sample_cpu(workers, CPU_SECONDS)
                self.enqueue(self.requests())
                self.wait(connection, workers)
        finally:
            for worker in workers:
                worker.stop()
        return self.figures()

    def requests(self) -> list[EnqueueRequest]:
        queues = [
            [EnqueueRequest(JOB_TYPE, tenant, {"ms": ms}, queue=self.queue)] * count
            for tenant, count, ms in self.scenario.jobs
        ]
        interleaved: list[EnqueueRequest] = []
        for index in range(max(len(jobs) for jobs in queues)):
            interleaved += [jobs[index] for jobs in queues if index < len(jobs)]
        # A fresh job id each: the lists above repeat one request.
        return [EnqueueRequest(r.job_type, r.tenant, r.payload, queue=r.queue) for r in interleaved]

    def warm_up(self, connection: psycopg.Connection[Any]) -> None:
        """Every member registered and running jobs before the scenario's are enqueued."""
        deadline = time.monotonic() + 120
        prefix = self.settings.topic_prefix
        while time.monotonic() < deadline:
            row = connection.execute(
                "SELECT count(*) FROM tenantq_workers WHERE deployment = %s "
                "AND stopped_at IS NULL AND heartbeat_at > now() - interval '10 seconds'",
                (prefix,),
            ).fetchone()
            if row and row[0] >= WORKERS * PROCESSES:
                break
            time.sleep(0.5)
        else:
            raise RuntimeError("the workers' members did not all register")
        warm = [EnqueueRequest(JOB_TYPE, "warmup", {"ms": 0}, queue=self.queue) for _ in range(48)]
        self.enqueue(warm)
        while time.monotonic() < deadline:
            row = connection.execute(
                "SELECT count(*) FROM tenantq_jobs WHERE deployment = %s AND queue = %s "
                "AND tenant_id = 'warmup' AND state = 'succeeded'",
                (prefix, self.queue),
            ).fetchone()
            if row and row[0] >= len(warm):
                time.sleep(2.0)  # the group settles (its notes are of tenant warmup: left out)
                return
            time.sleep(0.2)
        raise RuntimeError("the warm-up jobs did not finish")

    def wait(self, connection: psycopg.Connection[Any], workers: list[Worker]) -> None:
        total = sum(count for _, count, _ in self.scenario.jobs)
        deadline = time.monotonic() + RUN_TIMEOUT
        if self.scenario.name == "backlog":
            time.sleep(10.0)  # the backlog is read and held back
            self.cpu["five_running_backlog_waiting_cores"] = sample_cpu(workers, CPU_SECONDS)
            return
        while time.monotonic() < deadline:
            if self.scenario.name == "crash" and self.killed_at is None:
                self.kill_at_cap(workers)
            if self.succeeded(connection) >= total:
                return
            time.sleep(0.2)
        raise RuntimeError(f"the {total} jobs did not all succeed in {RUN_TIMEOUT:g}s")

    def kill_at_cap(self, workers: list[Worker]) -> None:
        """Once the tenant runs at its cap, SIGKILL a member whose handler process runs some
        of its attempts."""
        cap = self.scenario.limits["capped"]["max_running"]
        running: dict[int, int] = {}
        for path in self.records.glob("*.txt"):
            began, ended = set(), set()
            for line in path.read_text().splitlines():
                parts = line.split()
                if len(parts) == 5 and parts[3] == "capped":
                    (began if parts[0] == "b" else ended).add(parts[1])
            if began - ended:
                running[int(path.stem)] = len(began - ended)
        if sum(running.values()) < cap:
            return
        members = {
            handler: member
            for worker in workers
            for member in children(worker.process.pid)
            for handler in children(member)
        }
        for handler in sorted(running, key=lambda pid: -running[pid]):
            member = members.get(handler)
            if member is not None and "--member" in command_line(member):
                os.kill(member, signal.SIGKILL)
                self.killed_at = time.time()
                self.killed = (member, running[handler])
                return

    def figures(self) -> report.Figures:
        attempts = report.read_attempts(self.records)
        name = self.scenario.name
        limits = self.scenario.limits
        plots = report.PlotFolder.open(self.folder)
        end = max((a.ended or a.began for a in attempts), default=0.0)
        if name in ("cap", "backlog"):
            cap = limits["capped"]["max_running"]
            figures = report.cap_figures(attempts, "capped", cap, end)
            figures.scenario = name
            if plots is not None:
                steps = report.running_steps(attempts, "capped", end)
                origin = attempts[0].began if attempts else 0.0
                report.plot_running(plots, f"{name}_running.png", steps, cap, origin)
            if name == "backlog":
                figures.numbers.update({k: round(v, 3) for k, v in self.cpu.items()})
                waiting = self.cpu.get("five_running_backlog_waiting_cores", 1.0)
                figures.targets = {
                    "the backlog held back adds < 0.2 cores to the five running": (
                        waiting - self.cpu.get("five_running_cores", 0.0) < 0.2
                    )
                }
        elif name == "rate":
            rate, burst = limits["paced"]["rate"], limits["paced"]["burst"]
            figures = report.rate_figures(attempts, "paced", rate, burst)
            if plots is not None:
                report.plot_rate(plots, figures.numbers["starts_per_second"], rate, burst)
        elif name in ("weights", "weights-off"):
            weight = limits["heavy"]["weight"] if limits else 1
            figures = report.weight_figures(attempts, "heavy", "light", weight)
            if plots is not None:
                report.plot_shares(plots, attempts, "heavy", "light", weight)
        else:
            cap = limits["capped"]["max_running"]
            assert self.killed_at is not None, "no member was killed"
            lease = self.settings.worker.lease_seconds
            figures = report.crash_figures(attempts, "capped", cap, self.killed_at, lease)
            assert self.killed is not None
            figures.numbers["member_killed_running"] = self.killed[1]
            if plots is not None:
                steps = report.running_steps(attempts, "capped", self.killed_at)
                origin = attempts[0].began if attempts else 0.0
                report.plot_running(plots, "crash_running.png", steps, cap, origin, self.killed_at)
        self.plots = plots.written if plots is not None else []
        return figures

    def clean_up(self) -> None:
        settings = self.settings
        with contextlib.suppress(Exception):
            delete_topics(settings, [spec.name for spec in declared_topics(settings)], timeout=30)
        with psycopg.connect(self.url, autocommit=True) as connection:
            connection.execute(
                QUEUE_JOBS_DELETE, {"deployment": settings.topic_prefix, "queue": self.queue}
            )
            for table in ("tenantq_tenants", "tenantq_tenant_usage", "tenantq_workers"):
                connection.execute(
                    f"DELETE FROM {table} WHERE deployment = %s",  # noqa: S608 - fixed names
                    (settings.topic_prefix,),
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--repeat", type=int, default=1, help="runs of each scenario")
    parser.add_argument("--report-dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the runs' topics and rows")
    parser.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="the scenarios' job counts times this (at least 20 each; the tests use 0.1-0.3)",
    )
    arguments = parser.parse_args(argv)
    server = load_settings()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder = arguments.report_dir or Path("reports") / f"quotas-{stamp}"
    folder.mkdir(parents=True, exist_ok=True)
    database = f"quotas_{stamp.replace('-', '_')}_{uuid.uuid4().hex[:6]}"
    server_url = psycopg_url(server.require_database_url())
    with psycopg.connect(server_url, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{database}"')
    url = make_url(server_url).set(database=database).render_as_string(hide_password=False)
    base = server.model_copy(update={"database_url": SecretStr(url)})
    try:
        migrate.upgrade_database(base)
        return run_all(arguments, base, folder)
    finally:
        if not arguments.keep:
            with psycopg.connect(server_url, autocommit=True) as connection:
                connection.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def run_all(arguments: argparse.Namespace, base: Settings, folder: Path) -> int:
    results: list[report.Figures] = []
    plots: list[str] = []
    for name in arguments.scenario or DEFAULT_SCENARIOS:
        for round_number in range(1, arguments.repeat + 1):
            label = name if arguments.repeat == 1 else f"{name}-{round_number}"
            run = Run(SCENARIOS[name].scaled(arguments.scale), base, folder / label)
            try:
                figures = run.run()
            finally:
                if not arguments.keep:
                    run.clean_up()
            figures.scenario = label
            results.append(figures)
            plots += [f"{label}/{plot}" for plot in run.plots]
            verdict = "passed" if figures.passed else "FAILED"
            print(f"{label}: {verdict} {json.dumps(figures.numbers)}", flush=True)
    header = [
        f"Two `tenantq worker quota_app:APP --processes {PROCESSES} --concurrency "
        f"{CONCURRENCY}` ({WORKERS * PROCESSES} members, {WORKERS * PROCESSES * CONCURRENCY} "
        "slots), default settings otherwise; figures from the handlers' own notes.",
        f"Command: `.venv/bin/python loadtest/quotas.py {' '.join(sys.argv[1:])}`",
    ]
    report.write_report(folder, results, header, plots, "" if plots else report.NO_PLOTS)
    print(f"report: {folder}/report.md")
    return 0 if all(figures.passed for figures in results) else 1


if __name__ == "__main__":
    sys.exit(main())
