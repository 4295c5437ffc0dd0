"""The fault-scenario suite: inject each fault several times while jobs flow, then check from
Postgres and Kafka alone that nothing was lost, doubled or left behind.

    .venv/bin/python loadtest/faults.py                      # every scenario (make faults)
    .venv/bin/python loadtest/faults.py --scenario postgres-kill --repeat 2 --jobs 600
    .venv/bin/python loadtest/faults.py --list

Everything runs on a PRIVATE stack (a Kafka broker and a PostgreSQL of the suite's own, under a
temporary directory, on free ports, torn down at the end): the suite kills and stops servers,
and the shared dev stack serves everyone else's tests. Each scenario gets a fresh database and
a fresh topic prefix (queue ``default``, 12 partitions, retry tiers 1 s, 3 s, 10 s); each
stack first runs ``warm-up`` (jobs and no fault, judged all the same), so that no measured
scenario measures a cold broker instead of its fault. The scenarios of a real deployment's
topology (three brokers, a PostgreSQL standby) live in ``fault_scenarios_cluster.py`` and
bring a private stack of that shape.

A scenario: ``--workers`` (3) ``tenantq worker fault_app:APP`` processes at the worker's default
concurrency (``--concurrency N`` passes one on), each
in a process group of its own; a producer enqueues a Zipf multi-tenant workload (tenants and
work times from ``tenantq.demo.plan``, fixed seed) at a steady rate; the fault is injected
``repeat`` times, ``interval`` seconds apart, after a warm-up; then the suite waits for every
acknowledged job to end, stops the workers gracefully and checks:

* workers: no worker process exited unless the suite stopped or killed it (and none was
  started again by hand, except where the fault is "the service died": see worker-kill);
* every acknowledged job has exactly one row, in a terminal state (never two terminal attempt
  outcomes), and the state it must have (succeeded; the poison jobs dead; of two jobs with one
  idempotency key, exactly one holds the key and ran);
* every job ran at least once (a row in ``fault_executions``, the handlers' crash-proof ledger);
* duplicate executions (a job whose handler completed more than once): counted and printed;
  they must be 0 where no process died and no lease expired (graceful churn, a slow or cut
  database, an operator's locks), and where a lease expired (the forced race) each must be
  accounted for, by a result the fence refused as stale, a crash, or a lease taken over;
* nothing left leased, no job not terminal;
* Kafka: the group's committed offsets reach the end of the main topic and every retry tier;
  the dead-letter topic holds exactly the dead jobs;
* where the fault needs something to act on (a statement to cut or hold, running and
  retrying jobs to lock), that it found it every time; where the scenario promises it, the
  worst stall and the time until the rate is back within their budgets.

The database faults go through ``postgres_proxy`` (a TCP proxy per worker, between it and
Postgres; the handlers' ledger bypasses it): latency added to every round trip, a claim or a
result statement cut mid-flight (after the server ran it, or before it got there), or one
worker's statements held from its next result statement on. An operator's locks are a
transaction of the suite's own on the database (``SELECT ... FOR UPDATE``, held, committed).

Recovery, per injected fault (``at`` is the kill, the SIGSTOP, the SIGTERM, the enqueue of the
duplicate pair, the poison job's crash as its handler recorded it, the latency switched on,
the cut, the hold, or the lock taken):

* back: the fault until the server / worker is up again (restart returned, SIGCONT, the new
  worker process started, the latency removed, the held statements released, the lock's
  transaction committed);
* first done: the fault until the first job finished after it (Postgres ``finished_at``);
* stall: the longest time, within 60 s of the fault, that any main-topic partition holding
  work not yet started went without a job of it starting (faults closer together than their
  recovery share the window: a stall can run on into the next fault);
* rate back: the fault until throughput (jobs finished in a 2 s window) is back to 80% of its
  rate over the 5 s before the fault (or of the rate jobs are enqueued at, when that is lower).

Output: a progress bar while it runs, a table per scenario, and ``report.md`` +
``summary.json`` (+ the workers' logs) in ``--report-dir`` (default ``reports/faults-<time>``).
Exit status 0 only when every check of every scenario passed.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import datetime as dt
import functools
import json
import logging
import os
import random
import signal
import sys
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# The private stack and the worker-process helper are shared with the regression tests.
sys.path[:0] = [str(HERE), str(ROOT / "tests" / "integration")]

import psycopg  # noqa: E402
from confluent_kafka import ConsumerGroupState  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402
from fault_app import LEDGER_TABLE  # noqa: E402
from postgres_proxy import PostgresProxy  # noqa: E402
from private_stack import PrivateStack  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import (  # noqa: E402
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table  # noqa: E402
from support import (  # noqa: E402
    LoggedWorkerProcess,
    committed_offsets,
    end_offsets,
    settings_environment,
)

import tenantq  # noqa: E402
from tenantq.demo.plan import plan_workload  # noqa: E402
from tenantq.settings import QueueSettings  # noqa: E402
from tenantq.topic_admin import ensure_topics  # noqa: E402
from tenantq.topics import consumer_group  # noqa: E402

APP_REFERENCE = "fault_app:APP"
PARTITIONS = 12
RETRY_DELAYS = (1.0, 3.0, 10.0)
#: Worker settings under which a stopped or killed worker's leases run out quickly; used by
#: the scenarios whose point is what happens when a lease is lost.
SHORT_LEASES = {"lease_seconds": 5.0, "heartbeat_interval_seconds": 1.0, "stale_owner_seconds": 5.0}
WARMUP_SECONDS = 6.0
#: How long after the last fault the producer keeps going (so recovery is measured under load).
TAIL_SECONDS = 5.0
SETTLE_TIMEOUT = 300.0
STALL_WINDOW = 60.0
RATE_BEFORE = 5.0
RATE_WINDOW = 2.0
RATE_SHARE = 0.8

#: How long the suite waits for the workers' consumer group to settle before the flow, and
#: how long it must stay settled (a group still forming looks like a stall of its own).
GROUP_PATIENCE = 90.0
GROUP_STEADY_SECONDS = 3.0
#: How much of its interval a slow-database fault lasts.
LATENCY_SHARE = 0.6
#: How the proxy recognises the worker's statements: a line of ``JOB_CLAIM_BATCH``, and of
#: ``JOB_COMPLETE_BATCH`` (and its ``_AGAIN`` form) in ``tenantq.store.statements``.
STATEMENT_MARKS = {"claim": "INSERT INTO tenantq_jobs AS j", "result": "applied AS ("}
#: The database-cut faults, in turn: (statement, whether the server ran it before the cut).
CUTS = (("claim", True), ("result", True), ("claim", False), ("result", False))
#: How long a cut or a hold waits for its statement to come by.
CUT_PATIENCE = 30.0
#: The worst partition stall, and the longest time until the rate is back, that a slow or cut
#: database or an operator's locks may cost (the bar the issue sets for a broker leader's
#: death): well past what a loaded shared machine adds on its own (up to ~5 s seen), well
#: short of what a stalled lane costs (the lock's whole minute).
DATABASE_FAULT_BUDGET = 10.0
#: How long a frozen worker's jobs may take to be taken over (session timeout + lease).
TAKEOVER_PATIENCE = 60.0
#: What is enqueued before each operator lock, as (job type, count, work ms): slow jobs, to
#: be running when the lock is taken, and flaky ones (the first attempt fails, retried 3 s
#: later), to be retrying.
JOBS_BEFORE_LOCK = [("work", 12, 8000.0), ("flaky", 24, 200.0)]


def _owners_of(pid: int) -> str:
    """A LIKE pattern of the lease owners of worker ``pid``: its members' ids carry the
    pid of the worker (their supervisor): ``host-<pid>-m<slot>-<random>``."""
    return f"%-{pid}-m%"


LEASED_BY_WORKER = "SELECT id FROM tenantq_jobs WHERE state = 'leased' AND lease_owner LIKE %s"
STILL_LEASED_BY_WORKER = (
    "SELECT count(*) FROM tenantq_jobs WHERE id = ANY(%s) AND state = 'leased' "
    "AND lease_owner LIKE %s"
)
#: The operator's statement: every running and retrying job, and two tenants' jobs.
OPERATOR_LOCK = (
    "SELECT id, state::text FROM tenantq_jobs "
    "WHERE state IN ('leased', 'retrying') OR tenant_id = ANY(%s) FOR UPDATE"
)

# Wide enough for the fault tables when the output is a file or a CI log.
console = Console(width=None if sys.stdout.isatty() else 150)


# -- scenarios --


@dataclass(frozen=True)
class Scenario:
    name: str
    fault: str
    summary: str
    repeat: int
    interval: float
    jobs: int
    #: What duplicate executions may be: "counted" (a process died: they are counted),
    #: "none" (nothing died and no lease expired: there must be none), "accounted" (a lease
    #: expired: each must show why, as a refused stale result, a crash or a lease taken over).
    duplicates: str = "counted"
    worker: dict[str, Any] = field(default_factory=dict)
    #: The recovery the issue promises for this fault: no partition with waiting work may
    #: stall longer (seconds); None when it promises none.
    stall_budget: float | None = None
    #: Throughput (jobs finished) must be back to 80% of its rate before the fault within
    #: this many seconds of it; None when not promised.
    rate_budget: float | None = None
    #: The workers reach Postgres through a proxy each (``postgres_proxy``), the faults'
    #: lever; their handlers' ledger does not.
    proxy: bool = False
    #: Seconds added to each round trip to the database while the fault lasts.
    latency_seconds: float = 0.0
    #: How long the operator's transaction holds its row locks.
    lock_seconds: float = 0.0


def slow_database(milliseconds: int) -> Scenario:
    """``milliseconds`` added to every round trip between the workers and Postgres, 12 s at a
    time: nothing may run twice, and stalls and the rate recover within the database budget."""
    return Scenario(
        f"database-slow-{milliseconds}ms",
        "database-latency",
        f"a slow database: {milliseconds} ms added to every round trip between the workers and "
        "Postgres (a TCP proxy) for 12 s at a time",
        repeat=2,
        interval=20.0,
        jobs=1500,
        proxy=True,
        latency_seconds=milliseconds / 1000,
        duplicates="none",
        stall_budget=DATABASE_FAULT_BUDGET,
        rate_budget=DATABASE_FAULT_BUDGET,
    )


def scenarios_by_name(*scenarios: Scenario) -> dict[str, Scenario]:
    """``scenarios`` keyed by name (``--scenario``); a name given twice is refused, not
    silently overwritten."""
    table: dict[str, Scenario] = {}
    for scenario in scenarios:
        if scenario.name in table:
            raise ValueError(f"two fault scenarios are named {scenario.name!r}")
        table[scenario.name] = scenario
    return table


SCENARIOS: dict[str, Scenario] = scenarios_by_name(
    Scenario(
        "worker-kill",
        "worker-kill",
        "kill -9 of the tenantq worker process (what `kill -9 PID` does), started again "
        "1 s later as a service manager would; nothing it started may outlive it",
        repeat=3,
        interval=10.0,
        jobs=1500,
        worker=SHORT_LEASES,
    ),
    Scenario(
        "member-kill",
        "member-kill",
        "kill -9 of one member process of a worker (as the OOM killer would pick it); the "
        "worker replaces it, nothing restarted by hand (default worker settings)",
        repeat=3,
        interval=8.0,
        jobs=1500,
        # A member's own death (not a handler's: those stay in its handler process) leaves
        # its partitions to it until the broker's session timeout (6 s on the dev and
        # private stacks; KIP-848 static membership does not let the replacement take them
        # back sooner with this client); its leases are free at once. 6 s + 2 s to resume.
        stall_budget=8.0,
    ),
    Scenario(
        "worker-stop",
        "worker-stop",
        "SIGSTOP of a whole worker past its lease and the group's session (8 s), then SIGCONT",
        repeat=3,
        interval=14.0,
        jobs=1500,
        worker=SHORT_LEASES,
    ),
    Scenario(
        "member-churn",
        "member-churn",
        "graceful churn: SIGTERM to a worker, wait for it to drain and exit, start it again",
        repeat=3,
        interval=8.0,
        jobs=1500,
        duplicates="none",
    ),
    Scenario(
        "kafka-kill",
        "kafka-kill",
        "kill -9 of the Kafka broker, started again at once (same ports and data)",
        repeat=3,
        interval=25.0,
        jobs=1500,
    ),
    Scenario(
        "postgres-kill",
        "postgres-kill",
        "kill -9 of the Postgres postmaster, started again at once",
        repeat=3,
        interval=8.0,
        jobs=1500,
    ),
    Scenario(
        "handler-exit",
        "handler-exit",
        "a poison job whose handler calls os._exit(1) (dead after 3 leases), enqueued "
        "for a light tenant amid the traffic",
        repeat=3,
        interval=8.0,
        jobs=1500,
        # A poison crash costs seconds: no partition with lag goes more than 3 s
        # without progress around it.
        stall_budget=3.0,
    ),
    Scenario(
        "duplicate-key",
        "duplicate-key",
        "two new jobs with one idempotency key enqueued back to back (one produce batch, "
        "one partition, one claim)",
        repeat=5,
        interval=3.0,
        jobs=1500,
    ),
    slow_database(50),
    slow_database(500),
    Scenario(
        "database-cut",
        "database-cut",
        "the proxy resets a worker's database connection while a claim or a result "
        "statement is in flight, in turn after the server ran it (its answer withheld) "
        "and before it reached the server",
        repeat=8,
        interval=5.0,
        jobs=1500,
        proxy=True,
        duplicates="none",
        stall_budget=DATABASE_FAULT_BUDGET,
    ),
    Scenario(
        "lease-expiry-race",
        "lease-expiry-race",
        "the race forced: a worker's result statement held in the proxy while the worker "
        "is frozen (SIGSTOP) past its lease and session, until other workers have taken "
        "its jobs over; then it goes on and the fence must refuse it",
        repeat=3,
        interval=20.0,
        jobs=1500,
        proxy=True,
        worker=SHORT_LEASES,
        duplicates="accounted",
    ),
    Scenario(
        "operator-row-locks",
        "operator-row-locks",
        "an operator's transaction holds FOR UPDATE row locks on every running and "
        "retrying job (and the jobs of two tenants) for 60 s, then commits",
        repeat=2,
        interval=70.0,
        jobs=4000,
        lock_seconds=60.0,
        duplicates="none",
        stall_budget=DATABASE_FAULT_BUDGET,
        rate_budget=DATABASE_FAULT_BUDGET,
    ),
    Scenario(
        "postgres-kill-5000",
        "postgres-kill",
        "the issue's measurement: Postgres killed with -9 every 8 s, six times, while "
        "5,000 jobs flow through three workers (default worker settings)",
        repeat=6,
        interval=8.0,
        jobs=5000,
    ),
)

#: Run first on each stack the suite opens, and judged like any scenario (nothing lost, one
#: terminal state each, nothing run twice): a fresh stack's servers are slow at first (the
#: brokers' JVMs still compiling, the offsets topic's first loads), and a measured scenario
#: that came first would measure that instead of its fault. On a shared machine at a load of
#: 20-30 the first scenario on a fresh broker saw its offset commits time out for minutes
#: and its jobs wait 10 s to start, with or without its fault.
WARM_UP = Scenario(
    "warm-up",
    "none",
    "no fault: a burst of jobs through the workers of a fresh stack before the measured scenarios",
    repeat=0,
    interval=0.0,
    jobs=600,
    duplicates="none",
)


# -- measurements --


def given_back_attempts(db: psycopg.Connection[Any]) -> dict[uuid.UUID, set[int]]:
    """The attempts a worker gave back when it lost the job's partition (its group session
    ran out, as when it was frozen past its lease), per job."""
    given_back: dict[uuid.UUID, set[int]] = defaultdict(set)
    for job_id, attempt in db.execute(
        "SELECT job_id, attempt FROM tenantq_job_attempts "
        "WHERE outcome = 'released' AND error_message = 'partition lost'"
    ).fetchall():
        given_back[job_id].add(attempt)
    return given_back


@dataclass
class FaultEvent:
    index: int
    kind: str
    at: float
    detail: str
    back: float | None = None
    first_done: float | None = None
    stall: float | None = None
    rate_back: float | None = None


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class ScenarioResult:
    scenario: str
    summary: str
    jobs: int
    acknowledged: int
    unacknowledged: int
    seconds: float
    faults: list[FaultEvent]
    checks: list[Check]
    figures: dict[str, Any]
    #: When the producer started (epoch): the fault times in the tables count from here.
    flow_started: float = 0.0

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    @property
    def worst_stall(self) -> float | None:
        """The longest stall after any of the faults (None: none measured)."""
        return max((f.stall for f in self.faults if f.stall is not None), default=None)

    @property
    def slowest_rate_back(self) -> float | None:
        """The longest time until the rate was back after any of the faults."""
        return max((f.rate_back for f in self.faults if f.rate_back is not None), default=None)


@dataclass
class Enqueued:
    """One job handed to the producer: when, and (once acknowledged) where."""

    seq: int
    tenant: str
    at: float
    #: Dropped once settled: a pending future keeps its producer's Kafka client alive.
    future: Future[Any] | None
    kind: str = "work"
    job_id: uuid.UUID | None = None
    partition: int | None = None


# -- the workers --


class Workers:
    """A worker slot per environment (each slot's ``TENANTQ_*`` variables), each ``tenantq
    worker`` in a process group of its own; remembers which exits the suite caused and every
    group it started."""

    def __init__(
        self,
        environments: list[dict[str, str]],
        log_dir: Path,
        concurrency: int | None = None,
        processes: int | None = None,
    ) -> None:
        self.environments = environments
        #: Extra CLI flags of every worker: none by default, as a user starts it.
        self.flags = [] if concurrency is None else ["--concurrency", str(concurrency)]
        self.processes = processes
        self.log_dir = log_dir
        self.slots: list[LoggedWorkerProcess] = []
        #: pid -> what the suite did to it ("killed", "stopped gracefully").
        self.caused: dict[int, str] = {}
        self.unexpected: list[str] = []
        #: Process groups started (a worker's pid is its group's id): cleaned up at the end.
        self.groups: list[int] = []
        self.generation = 0
        for slot in range(len(environments)):
            self.slots.append(self._start(slot))

    def _start(self, slot: int) -> LoggedWorkerProcess:
        self.generation += 1
        worker = LoggedWorkerProcess(
            self.environments[slot],
            APP_REFERENCE,
            *self.flags,
            log_path=self.log_dir / f"worker{slot}-{self.generation}.log",
            new_session=True,
            members=self.processes,
        )
        self.groups.append(worker.pid)
        return worker

    def restart(self, slot: int) -> None:
        self.slots[slot] = self._start(slot)

    def kill(self, slot: int) -> int:
        """kill -9 of the process the user started (not its group); returns how many of its
        processes were still running a moment later."""
        worker = self.slots[slot]
        self.caused[worker.pid] = "killed"
        worker.signal(signal.SIGKILL)
        worker.process.wait(30)
        time.sleep(0.5)
        return len(_group_processes([worker.pid]))

    def kill_member(self, slot: int) -> str:
        """kill -9 of one process the worker started (a member), as the OOM killer would
        pick it; a worker that is its own member is killed itself, and that exit is not the
        suite's doing: it counts as a worker that died."""
        worker = self.slots[slot]
        children = _children(worker.pid)
        # Members, not the services a worker may run beside them (their command says so).
        members = [pid for pid, command in children if "--member" in command] or [
            pid for pid, _ in children
        ]
        target = members[0] if members else worker.pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, signal.SIGKILL)
        if target == worker.pid:
            return f"kill -9 of worker {worker.pid} (it has no member processes)"
        return f"kill -9 of member {target} of worker {worker.pid}"

    def terminate(self, slot: int, timeout: float = 60.0) -> int | None:
        worker = self.slots[slot]
        self.caused[worker.pid] = "stopped gracefully"
        status = worker.terminate(timeout)
        if status != 0:
            self.unexpected.append(
                f"worker {worker.pid} (slot {slot}) ended with {status} on SIGTERM"
            )
        return status

    def watch(self) -> None:
        """Note workers that exited without the suite's doing (never started again)."""
        for slot, worker in enumerate(self.slots):
            code = worker.process.poll()
            if code is not None and worker.pid not in self.caused:
                self.caused[worker.pid] = "exited"
                self.unexpected.append(
                    f"worker {worker.pid} (slot {slot}) exited with {code}: "
                    f"{_last_error(worker.output())}"
                )

    def any_alive(self) -> bool:
        return any(worker.alive() for worker in self.slots)

    def stop_all(self) -> None:
        for slot, worker in enumerate(self.slots):
            if worker.alive():
                self.terminate(slot)

    def leftovers(self) -> list[str]:
        """Processes of the suite's workers still running after every worker ended."""
        return [f"{pid} {command}" for pid, command in _group_processes(self.groups)]

    def kill_all(self) -> None:
        """kill -9 of every process group started, orphans included (clean-up)."""
        for worker in self.slots:
            if worker.alive():
                self.caused.setdefault(worker.pid, "killed at the end")
        for group in self.groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        for worker in self.slots:
            with contextlib.suppress(Exception):
                worker.process.wait(30)


def _proc_stats() -> Iterator[tuple[int, int, int, str]]:
    """(pid, parent pid, process group, command line) of every process, from /proc."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if fields[0] == "Z":
            continue
        yield int(entry.name), int(fields[1]), int(fields[2]), command.strip()


def _children(pid: int) -> list[tuple[int, str]]:
    return sorted((child, command) for child, parent, _, command in _proc_stats() if parent == pid)


def _group_processes(groups: list[int]) -> list[tuple[int, str]]:
    wanted = set(groups)
    return [(pid, command[:160]) for pid, _, group, command in _proc_stats() if group in wanted]


# -- one scenario --


@dataclass(frozen=True)
class SuiteOptions:
    """What every scenario of a suite runs with, and where its report and logs go."""

    report_dir: Path
    #: ``tenantq worker`` processes.
    workers: int = 3
    #: Each worker's ``--concurrency``; None passes none (the worker's own default).
    concurrency: int | None = None
    #: Each worker's ``--processes`` (members); None passes none (the worker's own default).
    processes: int | None = None
    #: Seed of the workload and of the faults' choices.
    seed: int = 7
    #: Tenants of the Zipf workload.
    tenants: int = 40


class Run:
    """One scenario on the private stack: its database, topics, workers, producer and faults."""

    def __init__(self, scenario: Scenario, stack: PrivateStack, options: SuiteOptions) -> None:
        self.scenario = scenario
        self.stack = stack
        self.rng = random.Random(options.seed)
        database_url = stack.create_database(scenario.name.replace("-", "_"))
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(LEDGER_TABLE)
        self.settings = tenantq.Settings(
            kafka_bootstrap_servers=stack.bootstrap_servers,
            database_url=database_url,
            topic_prefix=f"faults{uuid.uuid4().hex[:8]}",
            queues={
                "default": QueueSettings(partitions=PARTITIONS, retry_delays_seconds=RETRY_DELAYS)
            },
            metrics_port=0,
            worker=scenario.worker,
        )
        ensure_topics(self.settings)
        self.log_dir = options.report_dir / scenario.name
        self.log_dir.mkdir(parents=True, exist_ok=True)
        environment = settings_environment(self.settings)
        environment["PYTHONPATH"] = str(HERE)
        self.worker_count = options.workers
        #: One proxy per worker slot (a fault can then pick one worker's connections).
        self.proxies: list[PostgresProxy] = []
        environments = [environment] * self.worker_count
        if scenario.proxy:
            server = urlsplit(database_url)
            upstream = (server.hostname or "127.0.0.1", server.port or 5432)
            self.proxies = [PostgresProxy(upstream).start() for _ in range(self.worker_count)]
            environments = [
                {
                    **environment,
                    "TENANTQ_DATABASE_URL": proxy.url(database_url),
                    "FAULT_LEDGER_URL": database_url,
                }
                for proxy in self.proxies
            ]
        self.workers = Workers(environments, self.log_dir, options.concurrency, options.processes)
        self.workload = plan_workload(max(scenario.jobs, 10), max(options.tenants, 3), options.seed)
        self.light = [t for t, c in self.workload.tenant_classes.items() if c == "light"]
        self.enqueued: list[Enqueued] = []
        self.injected: list[Enqueued] = []
        self.pairs: list[tuple[str, Enqueued, Enqueued]] = []
        self.events: list[FaultEvent] = []
        #: Faults that could not be injected as planned (a cut that found no statement).
        self.misses: list[str] = []
        #: Per race fault: the jobs its frozen worker held, and that worker's pid.
        self.raced: list[tuple[int, set[uuid.UUID]]] = []
        #: Per operator lock: the jobs it held and when it was released.
        self.locked: list[tuple[set[uuid.UUID], float]] = []
        self.producer_error: str | None = None
        #: Processes of the workers still running once every worker ended.
        self.leftovers: list[str] = []
        self._lock = threading.Lock()
        self.flow_seconds = WARMUP_SECONDS + scenario.repeat * scenario.interval + TAIL_SECONDS
        self.started = time.time()

    # -- the flow --

    def produce(self, stop: threading.Event) -> None:
        """The planned jobs at a steady rate over ``flow_seconds``, in 100 ms steps; futures
        are collected later, so an outage of Kafka does not pause the schedule."""
        try:
            self._produce(stop)
        except Exception as error:  # reported as a failed check, not a dead thread
            self.producer_error = f"{type(error).__name__}: {error}"

    def _produce(self, stop: threading.Event) -> None:
        jobs = self.workload.jobs[: self.scenario.jobs]
        steps = max(1, int(self.flow_seconds * 10))
        per_step = len(jobs) / steps
        with _producer(self.settings) as producer:
            sent = 0
            for step in range(steps):
                if stop.is_set():
                    break
                due = self.started + step * 0.1
                time.sleep(max(0.0, due - time.time()))
                upto = min(len(jobs), round((step + 1) * per_step))
                batch = jobs[sent:upto]
                if not batch:
                    continue
                requests = [
                    {
                        "job_type": "work",
                        "tenant": job.tenant,
                        "payload": {"seq": job.seq, "work_ms": job.payload["work_ms"]},
                    }
                    for job in batch
                ]
                futures = self._hand_over(producer, requests)
                now = time.time()
                with self._lock:
                    self.enqueued.extend(
                        Enqueued(job.seq, job.tenant, now, future)
                        for job, future in zip(batch, futures, strict=True)
                    )
                sent = upto
            producer.flush(120)
            # One deadline for all: a future that never settles must not cost 120 s each.
            deadline = time.monotonic() + 120
            for item in self.enqueued:
                _settle(item, max(0.1, deadline - time.monotonic()))

    @staticmethod
    def _hand_over(producer: Any, requests: list[dict[str, Any]]) -> list[Future[Any]]:
        for _ in range(60):
            try:
                return list(producer.enqueue_many(requests))
            except tenantq.QueueFull:
                time.sleep(1.0)
        raise RuntimeError("the producer's buffer stayed full for a minute")

    # -- faults --

    def inject(self, index: int) -> FaultEvent:
        kind = self.scenario.fault
        own = _hook(self.scenario, "inject")
        injector: Callable[[int], FaultEvent] = (
            functools.partial(own, self) if own else getattr(self, "_" + kind.replace("-", "_"))
        )
        event = injector(index)
        self.events.append(event)
        return event

    def _event(self, index: int, at: float, detail: str, back: float | None = None) -> FaultEvent:
        """Fault ``index``, injected at ``at``: of the scenario's kind, which chose the
        injector (``inject``)."""
        return FaultEvent(index, self.scenario.fault, at, detail, back=back)

    def _over_now(self, index: int, at: float, detail: str) -> FaultEvent:
        """A fault injected at ``at`` that is over as its injector returns: ``back`` is how
        long it lasted."""
        return self._event(index, at, detail, back=time.time() - at)

    def _slot(self, index: int) -> int:
        return index % self.worker_count

    def _worker_kill(self, index: int) -> FaultEvent:
        slot = self._slot(index)
        pid = self.workers.slots[slot].pid
        at = time.time()
        survivors = self.workers.kill(slot)
        time.sleep(max(0.0, at + 1.0 - time.time()))
        self.workers.restart(slot)
        return self._over_now(
            index,
            at,
            f"kill -9 of worker {pid}"
            + (f" ({survivors} of its processes ran on)" if survivors else "")
            + "; started again",
        )

    def _member_kill(self, index: int) -> FaultEvent:
        slot = self._slot(index)
        at = time.time()
        detail = self.workers.kill_member(slot)
        return self._event(index, at, detail)

    def _worker_stop(self, index: int) -> FaultEvent:
        slot = self._slot(index)
        worker = self.workers.slots[slot]
        lease = float(self.settings.worker.lease_seconds)
        pause = max(8.0, lease + 3.0)
        at = time.time()
        worker.signal_group(signal.SIGSTOP)
        time.sleep(pause)
        worker.signal_group(signal.SIGCONT)
        return self._over_now(
            index,
            at,
            f"SIGSTOP of worker {worker.pid} for {pause:.0f}s (lease {lease:.0f}s), SIGCONT",
        )

    def _member_churn(self, index: int) -> FaultEvent:
        slot = self._slot(index)
        pid = self.workers.slots[slot].pid
        at = time.time()
        status = self.workers.terminate(slot)
        self.workers.restart(slot)
        return self._over_now(
            index,
            at,
            f"SIGTERM to worker {pid} (exit {status}), started again",
        )

    def _kafka_kill(self, index: int) -> FaultEvent:
        return self._server_kill(index, "broker", self.stack.kill_kafka)

    def _postgres_kill(self, index: int) -> FaultEvent:
        return self._server_kill(index, "postmaster", self.stack.kill_postgres)

    def _server_kill(self, index: int, server: str, kill: Callable[[], float]) -> FaultEvent:
        """``kill`` (a kill -9 that returns when it was), then the stack restarted."""
        at = kill()
        took = self.stack.restart()
        return self._over_now(index, at, f"{server} kill -9, back in {took:.1f}s")

    def _handler_exit(self, index: int) -> FaultEvent:
        tenant = self.rng.choice(self.light or ["poisoned"])
        with _producer(self.settings) as producer:
            future = producer.enqueue("poison", tenant=tenant, payload={"seq": 0})
            item = Enqueued(-1, tenant, time.time(), future, kind="poison")
            _settle(item, 60)
        self.injected.append(item)
        # ``at`` becomes the crash time once the handler's ledger row is read.
        return self._event(index, item.at, f"poison job {item.job_id} ({tenant})")

    def _duplicate_key(self, index: int) -> FaultEvent:
        tenant = self.rng.choice(self.light or ["duplicated"])
        key = f"dup-{uuid.uuid4().hex[:10]}"
        # A producer without database access: one with it collapses a key it already sees
        # (producer/unique.py), which would hide the claim-time case this fault is about.
        kafka_only = self.settings.model_copy(update={"database_url": None})
        with _producer(kafka_only) as producer:
            at = time.time()
            futures = producer.enqueue_many(
                [
                    {
                        "job_type": "work",
                        "tenant": tenant,
                        "payload": {"seq": 0, "work_ms": 5.0},
                        "idempotency_key": key,
                    }
                    for _ in range(2)
                ]
            )
            first, second = (Enqueued(-1, tenant, at, f, kind="duplicate") for f in futures)
            _settle(first, 60)
            _settle(second, 60)
        self.pairs.append((key, first, second))
        return self._over_now(
            index,
            at,
            f"key {key}: jobs {first.job_id} and {second.job_id} (partition {first.partition})",
        )

    # -- faults between the workers and Postgres --

    def _database_latency(self, index: int) -> FaultEvent:
        """Every worker's proxy adds the scenario's latency for most of the interval."""
        latency = self.scenario.latency_seconds
        lasting = self.scenario.interval * LATENCY_SHARE
        at = time.time()
        for proxy in self.proxies:
            proxy.latency = latency
        time.sleep(lasting)
        for proxy in self.proxies:
            proxy.latency = 0.0
        return self._event(
            index,
            at,
            f"+{latency * 1000:.0f} ms per round trip for {lasting:.0f}s",
        )

    def _database_cut(self, index: int) -> FaultEvent:
        """The next claim or result statement of one worker cut, after the server ran it or
        before it reached it (``CUTS``, in turn)."""
        statement, applied = CUTS[index % len(CUTS)]
        slot = self._slot(index)
        pid = self.workers.slots[slot].pid
        proxy = self.proxies[slot]
        armed = time.time()
        order = proxy.cut_next(STATEMENT_MARKS[statement], applied=applied)
        when = "after the server ran it" if applied else "before it reached the server"
        if not order.done.wait(CUT_PATIENCE):
            proxy.cancel_cuts()
            self.misses.append(f"fault {index + 1}: no {statement} statement in {CUT_PATIENCE}s")
            return self._event(index, armed, f"no {statement} statement to cut")
        return self._event(
            index,
            order.cut_at or armed,
            f"{statement} statement of worker {pid} cut {when}",
        )

    def _lease_expiry_race(self, index: int) -> FaultEvent:
        """Hold one worker's statements in its proxy from its next result statement on;
        freeze the worker until every job it held is leased by another; thaw it and let the
        held statements go on, so its results reach Postgres after the takeover."""
        slot = self._slot(index)
        worker = self.workers.slots[slot]
        proxy = self.proxies[slot]
        armed = time.time()
        if not proxy.hold(STATEMENT_MARKS["result"]).wait(CUT_PATIENCE):
            proxy.release()
            self.misses.append(f"fault {index + 1}: no result statement in {CUT_PATIENCE}s")
            return self._event(index, armed, "no result statement to hold")
        at = time.time()
        # Whatever it sends while frozen waits too: its result statement is on its way.
        time.sleep(0.5)
        held = proxy.held_statements()
        url = self.settings.require_database_url()
        with psycopg.connect(url, autocommit=True) as db:
            jobs = {row[0] for row in db.execute(LEASED_BY_WORKER, (_owners_of(worker.pid),))}
            worker.signal_group(signal.SIGSTOP)
            frozen = time.time()
            taken = False
            while time.time() < frozen + TAKEOVER_PATIENCE:
                row = db.execute(STILL_LEASED_BY_WORKER, (list(jobs), _owners_of(worker.pid)))
                still = row.fetchone()
                if still is not None and still[0] == 0:
                    taken = True
                    break
                time.sleep(0.2)
        took = time.time() - frozen
        worker.signal_group(signal.SIGCONT)
        proxy.release()
        self.raced.append((worker.pid, jobs))
        if not taken:
            self.misses.append(
                f"fault {index + 1}: the jobs of worker {worker.pid} were not all taken over "
                f"in {TAKEOVER_PATIENCE:.0f}s"
            )
        results = sum(STATEMENT_MARKS["result"] in sql for sql in held)
        return self._over_now(
            index,
            at,
            f"worker {worker.pid}: {len(held)} statements held ({results} of results), "
            f"{len(jobs)} jobs leased; SIGSTOP, taken over in {took:.1f}s; SIGCONT, released",
        )

    def _operator_row_locks(self, index: int) -> FaultEvent:
        """Flaky jobs enqueued and left 'retrying' (their retry messages on the way), and slow
        ones left running (their results to come); then an operator's transaction locks every
        running and retrying job and the jobs of two tenants with ``SELECT ... FOR UPDATE``,
        holds them ``lock_seconds`` and commits."""
        url = self.settings.require_database_url()
        slow, flaky = self._enqueue(JOBS_BEFORE_LOCK)
        with psycopg.connect(url, autocommit=True) as db:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                row = db.execute(
                    "SELECT count(*) FILTER (WHERE id = ANY(%s) AND state = 'retrying'), "
                    "count(*) FILTER (WHERE id = ANY(%s) AND state = 'leased') "
                    "FROM tenantq_jobs",
                    (_ids(flaky), _ids(slow)),
                ).fetchone()
                if row and row[0] >= len(flaky) // 2 and row[1] >= len(slow) // 2:
                    break
                time.sleep(0.1)
        tenants = self.rng.sample(sorted(self.workload.tenant_classes), 2)
        with psycopg.connect(url) as operator:
            at = time.time()
            rows = operator.execute(OPERATOR_LOCK, (tenants,)).fetchall()
            time.sleep(max(0.0, at + self.scenario.lock_seconds - time.time()))
            operator.commit()
            released = time.time()
        states: dict[str, int] = defaultdict(int)
        for _, state in rows:
            states[state] += 1
        self.locked.append(({row[0] for row in rows}, released))
        if not states["leased"] or not states["retrying"]:
            self.misses.append(
                f"fault {index + 1}: the lock held {states['leased']} running and "
                f"{states['retrying']} retrying jobs (wanted some of each)"
            )
        return self._event(
            index,
            at,
            f"{len(rows)} jobs locked ("
            + ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
            + f") for {released - at:.0f}s",
            back=released - at,
        )

    def _enqueue(self, batches: list[tuple[str, int, float]]) -> list[list[Enqueued]]:
        """Per (job type, count, work ms), that many jobs beside the planned flow (light
        tenants), in one produce; they must succeed like the planned ones."""
        tenants = self.light or ["extra"]
        with _producer(self.settings) as producer:
            enqueued = []
            for job_type, count, work_ms in batches:
                items = []
                for n in range(count):
                    tenant = tenants[n % len(tenants)]
                    future = producer.enqueue(
                        job_type, tenant=tenant, payload={"seq": n, "work_ms": work_ms}
                    )
                    items.append(Enqueued(-1, tenant, time.time(), future, kind="extra"))
                enqueued.append(items)
            for item in (item for items in enqueued for item in items):
                _settle(item, 60)
        for items in enqueued:
            self.injected.extend(items)
        return enqueued

    # -- progress --

    def finished(self, conn: psycopg.Connection[Any]) -> int:
        row = conn.execute("SELECT count(*) FROM tenantq_jobs WHERE finished_at IS NOT NULL")
        value = row.fetchone()
        return int(value[0]) if value else 0


def _producer(settings: tenantq.Settings) -> tenantq.Producer:
    """The suite's producers: librdkafka's own log lines off, since the broker going away is
    the point of some scenarios (a failed enqueue is counted, not logged)."""
    quiet = {**settings.kafka_config, "log_level": "0"}
    return tenantq.Producer(settings.model_copy(update={"kafka_config": quiet}))


def _last_error(output: str) -> str:
    """The line of a worker's output that says why it ended (its last error line)."""
    lines = [line for line in output.splitlines() if line.strip()]
    tracebacks = [i for i, line in enumerate(lines) if line.startswith("Traceback")]
    if tracebacks:
        # The exception line: the last unindented line of the last traceback.
        tail = [line for line in lines[tracebacks[-1] + 1 :] if not line[0].isspace()]
        if tail:
            return tail[-1][:240]
    errors = [line for line in lines if "error" in line.lower() or "exception" in line.lower()]
    return ((errors or lines or [""])[-1]).strip()[:240]


def _settle(item: Enqueued, timeout: float) -> None:
    """Wait for the job's acknowledgement; an enqueue that failed stays unacknowledged."""
    future, item.future = item.future, None
    if future is None:
        return
    try:
        ref = future.result(timeout)
    except Exception:
        return
    item.job_id = ref.job_id
    item.partition = ref.partition


@contextlib.contextmanager
def _database(url: str) -> Iterator[psycopg.Connection[Any] | None]:
    """A connection for polling that tolerates the database being away."""
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=3)
    except psycopg.Error:
        yield None
        return
    try:
        yield conn
    finally:
        conn.close()


def run_scenario(run: Run, progress: Progress | None = None) -> ScenarioResult:
    """Run the scenario of ``run`` (made for it on its stack) and judge it."""
    scenario = run.scenario
    # The suite's producers warn on every reconnect while a broker is down, by design.
    logging.getLogger("tenantq.producer").setLevel(logging.ERROR)
    prepare = _hook(scenario, "prepare")
    if prepare:
        prepare(run)
    task = (
        progress.add_task(f"{scenario.name}: starting", total=scenario.jobs) if progress else None
    )

    def show(phase: str, done: int | None = None) -> None:
        if progress is not None and task is not None:
            progress.update(task, description=f"{scenario.name}: {phase}", completed=done)

    stop = threading.Event()
    database_url = run.settings.require_database_url()
    last_done = [0]

    def poll() -> int:
        run.workers.watch()
        with _database(database_url) as conn:
            if conn is not None:
                with contextlib.suppress(psycopg.Error):
                    last_done[0] = run.finished(conn)
        return last_done[0]

    producer = threading.Thread(target=run.produce, args=(stop,), name="producer", daemon=True)
    try:
        _wait_for_members(run, show)
        run.started = time.time()
        producer.start()
        for index in range(scenario.repeat):
            due = run.started + WARMUP_SECONDS + index * scenario.interval
            while time.time() < due:
                show(
                    f"flowing, fault {index + 1}/{scenario.repeat} at +{due - run.started:.0f}s",
                    poll(),
                )
                time.sleep(min(1.0, max(0.0, due - time.time())))
            show(f"injecting {scenario.fault} {index + 1}/{scenario.repeat}", poll())
            run.inject(index)
        while producer.is_alive():
            show("flowing after the last fault", poll())
            producer.join(1.0)
        deadline = time.time() + SETTLE_TIMEOUT
        expected = len([e for e in run.enqueued if e.job_id]) + len(run.injected) + len(run.pairs)
        while time.time() < deadline and run.workers.any_alive():
            done = poll()
            show("settling", done)
            if done >= expected and _all_terminal(database_url, run):
                break
            time.sleep(1.0)
        show("stopping the workers", poll())
        run.workers.watch()
        run.workers.stop_all()
        time.sleep(1.0)
        run.leftovers = run.workers.leftovers()
    finally:
        stop.set()
        if producer.is_alive():
            producer.join(30)
        run.workers.kill_all()
        for proxy in run.proxies:
            proxy.stop()
    show("checking", last_done[0])
    result = evaluate(run)
    judge = _hook(scenario, "judge")
    if judge:
        judge(run, result)
    show("done" if result.ok else "FAILED", last_done[0])
    return result


def _wait_for_members(run: Run, show: Callable[[str], None]) -> None:
    """Until every worker slot has a member registered in Postgres (they take a few seconds
    to import, connect and join) and the group has settled (``_group_settled``), so the
    first fault hits a running pool, not a group still forming."""
    deadline = time.time() + 60
    while time.time() < deadline:
        show("workers starting")
        run.workers.watch()
        with _database(run.settings.require_database_url()) as conn:
            if conn is not None:
                row = conn.execute("SELECT count(*) FROM tenantq_workers").fetchone()
                if row and row[0] >= run.worker_count:
                    break
        time.sleep(0.5)
    admin = AdminClient(run.settings.kafka_client_config())
    deadline = time.time() + GROUP_PATIENCE
    settled_since: float | None = None
    while time.time() < deadline:
        show("consumer group forming")
        run.workers.watch()
        if not _group_settled(admin, run):
            settled_since = None
        elif settled_since is None:
            settled_since = time.time()
        elif time.time() - settled_since >= GROUP_STEADY_SECONDS:
            return
        time.sleep(0.5)


def _group_settled(admin: AdminClient, run: Run) -> bool:
    """The group is stable, with a member per worker, and owns every main-topic partition."""
    prefix = run.settings.topic_prefix
    group = consumer_group(prefix, "default")
    try:
        found = admin.describe_consumer_groups([group], request_timeout=5)[group].result(10)
    except Exception:  # the coordinator is still loading, or the broker is slow: not yet
        return False
    main = f"{prefix}.default"
    owned = {
        tp.partition
        for member in found.members
        for tp in member.assignment.topic_partitions
        if tp.topic == main
    }
    return (
        found.state == ConsumerGroupState.STABLE
        and len(found.members) >= run.worker_count
        and owned == set(range(PARTITIONS))
    )


def _all_terminal(url: str, run: Run) -> bool:
    ids = [e.job_id for e in [*run.enqueued, *run.injected] if e.job_id]
    with _database(url) as conn:
        if conn is None:
            return False
        row = conn.execute(
            "SELECT count(*) FROM tenantq_jobs WHERE id = ANY(%s) AND finished_at IS NOT NULL",
            (ids,),
        ).fetchone()
        return row is not None and row[0] == len(ids)


# -- the checks --


def evaluate(run: Run) -> ScenarioResult:
    scenario = run.scenario
    checks: list[Check] = []
    figures: dict[str, Any] = {}
    planned_work = [e for e in run.enqueued if e.job_id]
    poison = [e for e in run.injected if e.job_id and e.kind == "poison"]
    extra = [e for e in run.injected if e.job_id and e.kind == "extra"]
    # Jobs enqueued beside the plan are work too: they must succeed and run.
    work = planned_work + extra
    pair_items = [item for _, a, b in run.pairs for item in (a, b) if item.job_id]
    acknowledged = len(work) + len(poison) + len(pair_items)
    unacknowledged = (
        len(run.enqueued)
        + len(run.injected)
        - len(work)
        - len(poison)
        + 2 * len(run.pairs)
        - len(pair_items)
    )
    url = run.settings.require_database_url()
    with psycopg.connect(url, autocommit=True) as db:
        states = {
            row[0]: (row[1], row[2], row[3], row[4], row[5])
            for row in db.execute(
                "SELECT id, state::text, attempts, finished_at, idempotency_key, started_at "
                "FROM tenantq_jobs"
            ).fetchall()
        }
        executions: dict[uuid.UUID, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for job_id, note, at in db.execute(
            "SELECT job_id, note, at FROM fault_executions ORDER BY at"
        ).fetchall():
            executions[job_id][note].append(at.timestamp())
        terminal_twice = db.execute(
            "SELECT count(*) FROM (SELECT job_id FROM tenantq_job_attempts "
            "WHERE outcome IN ('succeeded', 'dead') GROUP BY job_id HAVING count(*) > 1) x"
        ).fetchone()
        outcomes: dict[str, int] = dict(
            db.execute(
                "SELECT outcome, count(*) FROM tenantq_job_attempts GROUP BY outcome"
            ).fetchall()
        )
        leased_or_open = db.execute(
            "SELECT state::text, count(*) FROM tenantq_jobs WHERE finished_at IS NULL "
            "GROUP BY state"
        ).fetchall()
        dead_count = sum(1 for s in states.values() if s[0] == "dead")
        #: Why a job's attempt ended without its result: 'stale' (a result refused, its lease
        #: gone) and 'crashed' (its process died), per job, with the worker.
        unfinished_attempts: dict[uuid.UUID, list[tuple[str, str]]] = defaultdict(list)
        for job_id, outcome, worker_id in db.execute(
            "SELECT job_id, outcome, worker_id FROM tenantq_job_attempts "
            "WHERE outcome IN ('stale', 'crashed')"
        ).fetchall():
            unfinished_attempts[job_id].append((outcome, worker_id or ""))
        #: The attempts a worker gave back, and the attempts under which each job's handler
        #: completed: a completed run of a given-back attempt runs again.
        given_back = given_back_attempts(db)
        done_attempts: dict[uuid.UUID, list[int]] = defaultdict(list)
        for job_id, attempt in db.execute(
            "SELECT job_id, attempt FROM fault_executions WHERE note = 'done' ORDER BY at"
        ).fetchall():
            done_attempts[job_id].append(attempt)

    planned = min(scenario.jobs, len(run.workload.jobs))
    checks.append(
        Check(
            "every planned job enqueued and acknowledged",
            run.producer_error is None and len(planned_work) == planned,
            f"{len(planned_work)} of {planned} acknowledged"
            + (f"; the producer failed: {run.producer_error}" if run.producer_error else ""),
        )
    )
    # Workers.
    run.workers.watch()
    checks.append(
        Check(
            "workers stayed up",
            not run.workers.unexpected,
            "; ".join(run.workers.unexpected) or f"{run.worker_count} workers, none died uninvited",
        )
    )
    checks.append(
        Check(
            "no process outlived its worker",
            not run.leftovers,
            f"left running: {'; '.join(run.leftovers[:4])}"
            if run.leftovers
            else "every process of every worker ended",
        )
    )
    # One terminal state each, and the right one.
    missing = [e.job_id for e in [*work, *poison] if e.job_id not in states]
    not_terminal = [
        e.job_id for e in [*work, *poison] if e.job_id in states and states[e.job_id][2] is None
    ]
    wrong_work = [
        (e.job_id, states.get(e.job_id, ("missing",))[0])
        for e in work
        if states.get(e.job_id, ("missing",))[0] != "succeeded"
    ]
    wrong_poison = [
        (e.job_id, states.get(e.job_id, ("missing",))[0])
        for e in poison
        if states.get(e.job_id, ("missing",))[0] != "dead"
    ]
    twice = int(terminal_twice[0]) if terminal_twice else 0
    checks.append(
        Check(
            "every acknowledged job ends in exactly one terminal state",
            not missing and not not_terminal and not twice,
            f"{acknowledged} acknowledged; missing {len(missing)}, not terminal "
            f"{len(not_terminal)}, two terminal attempt rows {twice}"
            + (f" e.g. {(missing + not_terminal)[:3]}" if missing or not_terminal else ""),
        )
    )
    pair_problems = _pair_problems(run, states, executions)
    checks.append(
        Check(
            "end states as planned",
            not wrong_work and not wrong_poison and not pair_problems,
            f"work succeeded: {len(work) - len(wrong_work)}/{len(work)}"
            + (f", poison dead: {len(poison) - len(wrong_poison)}/{len(poison)}" if poison else "")
            + (
                f", duplicate-key pairs right: {len(run.pairs) - len(pair_problems)}"
                f"/{len(run.pairs)}"
                if run.pairs
                else ""
            )
            + (f"; wrong: {(wrong_work + wrong_poison)[:3]}" if wrong_work or wrong_poison else "")
            + (f"; {pair_problems[:2]}" if pair_problems else ""),
        )
    )
    never_ran = [e.job_id for e in work if e.job_id and not executions[e.job_id].get("done")]
    never_ran += [e.job_id for e in poison if e.job_id and not executions[e.job_id].get("exit")]
    checks.append(
        Check(
            "every job ran at least once",
            not never_ran,
            f"{len(never_ran)} never ran" + (f", e.g. {never_ran[:3]}" if never_ran else ""),
        )
    )
    duplicates = sum(
        len(notes.get("done", [])) - 1 for notes in executions.values() if notes.get("done")
    )
    doubled = [job_id for job_id, notes in executions.items() if len(notes.get("done", [])) > 1]
    checks.append(
        Check(
            "duplicate executions"
            + (
                " (must be 0: no process died, no lease expired)"
                if scenario.duplicates == "none"
                else ""
            ),
            duplicates == 0 or scenario.duplicates != "none",
            f"{duplicates} duplicate executions of {len(doubled)} jobs",
        )
    )
    if scenario.duplicates == "accounted":
        checks.append(_accounted(doubled, states, unfinished_attempts, given_back, done_attempts))
    if run.raced:
        checks.append(_race_check(run, unfinished_attempts))
    unused = [n for n, proxy in enumerate(run.proxies) if not proxy.accepted]
    if unused:
        run.misses.append(f"workers {unused} never connected through their proxy")
    if run.misses or scenario.fault in ("database-cut", "lease-expiry-race", "operator-row-locks"):
        checks.append(
            Check(
                "every fault injected as planned",
                not run.misses,
                "; ".join(run.misses) or f"{len(run.events)} of {scenario.repeat}",
            )
        )
    checks.append(
        Check(
            "nothing left leased or open",
            not leased_or_open,
            ", ".join(f"{n} {s}" for s, n in leased_or_open) or "0 leased, 0 open",
        )
    )
    checks.extend(_kafka_checks(run, dead_count))
    # Recovery.
    finishes = sorted(
        states[e.job_id][2].timestamp()
        for e in work
        if e.job_id in states and states[e.job_id][2] is not None
    )
    # When each job started (its first lease): a stall is waiting work that does not start,
    # not work that runs long.
    timings = [
        (
            e.partition,
            e.at,
            states[e.job_id][4].timestamp()
            if states.get(e.job_id) and states[e.job_id][4]
            else None,
        )
        for e in work
    ]
    for event in run.events:
        if event.kind == "handler-exit":
            crash = _crash_time(run, event, executions)
            if crash is not None:
                event.at = crash
        _measure(event, finishes, timings, planned / run.flow_seconds)
    checks += _recovery_checks(scenario, run.events)
    if run.locked:
        figures["locked_jobs_finished_after_release_s"] = _locked_recovery(run, states)
    if run.proxies:
        figures["proxy_connections"] = [proxy.accepted for proxy in run.proxies]
        figures["proxy_cuts"] = sum(proxy.cuts for proxy in run.proxies)
    if scenario.latency_seconds:
        figures["start_wait_ms"] = _start_waits(run.events, timings)
    if not scenario.repeat:
        # What the machine and the stack cost on their own: the worst stall of a run with no
        # fault, over the window a first fault would have.
        figures["stall_without_fault_s"] = round(_stall(run.started + WARMUP_SECONDS, timings), 2)
    figures.update(
        duplicates=duplicates,
        jobs_run_twice=len(doubled),
        attempt_outcomes=outcomes,
        retried_jobs=sum(1 for s in states.values() if s[1] > 1),
        dead=dead_count,
        throughput_per_second=round(len(finishes) / max(1e-9, finishes[-1] - finishes[0]), 1)
        if len(finishes) > 1
        else None,
    )
    return ScenarioResult(
        scenario=scenario.name,
        summary=scenario.summary,
        jobs=scenario.jobs,
        acknowledged=acknowledged,
        unacknowledged=unacknowledged,
        seconds=round(time.time() - run.started, 1),
        faults=run.events,
        checks=checks,
        figures=figures,
        flow_started=run.started,
    )


def _recovery_checks(scenario: Scenario, events: list[FaultEvent]) -> list[Check]:
    """The recovery the scenario promises, each where it names a budget: throughput back to
    80% of its rate, and no partition with waiting work stalled, within that many seconds of
    every fault (each fault's figure measured; no fault at all passes nothing)."""
    promises: list[tuple[float | None, str, Callable[[FaultEvent], float | None], str]] = [
        (
            scenario.rate_budget,
            "throughput kept (back to 80% within {budget:.0f}s)",
            lambda event: event.rate_back,
            "slowest",
        ),
        (
            scenario.stall_budget,
            "recovery within budget (partition stall <= {budget:.0f}s)",
            lambda event: event.stall,
            "worst stall",
        ),
    ]
    checks = []
    for budget, name, figure, worst_is in promises:
        if budget is None:
            continue
        per_fault = {event.index + 1: figure(event) for event in events}
        worst = max((v for v in per_fault.values() if v is not None), default=None)
        checks.append(
            Check(
                name.format(budget=budget),
                all(v is not None for v in per_fault.values())
                and worst is not None
                and worst <= budget,
                f"{worst_is} {_seconds(worst)}s; per fault {per_fault}",
            )
        )
    return checks


def _start_waits(
    events: list[FaultEvent], timings: list[tuple[int | None, float, float | None]]
) -> dict[str, dict[str, float | None]]:
    """Enqueue-to-start waits (p50, p99, ms) of the jobs enqueued while a fault lasted
    (``at`` to ``at + back``), and of the others."""
    spans = [(event.at, event.at + (event.back or 0.0)) for event in events]
    during: list[float] = []
    otherwise: list[float] = []
    for _, enqueued, started in timings:
        if started is None:
            continue
        inside = any(start <= enqueued <= end for start, end in spans)
        (during if inside else otherwise).append((started - enqueued) * 1000)

    def percentiles(waits: list[float]) -> dict[str, float | None]:
        waits.sort()
        if not waits:
            return {"p50": None, "p99": None}
        return {
            "p50": round(waits[len(waits) // 2], 1),
            "p99": round(waits[min(len(waits) - 1, int(len(waits) * 0.99))], 1),
        }

    return {"during": percentiles(during), "otherwise": percentiles(otherwise)}


def _ids(items: list[Enqueued]) -> list[uuid.UUID]:
    return [item.job_id for item in items if item.job_id]


def _accounted(
    doubled: list[uuid.UUID],
    states: dict[uuid.UUID, tuple[str, int, Any, Any, Any]],
    unfinished_attempts: dict[uuid.UUID, list[tuple[str, str]]],
    given_back: dict[uuid.UUID, set[int]],
    done_attempts: dict[uuid.UUID, list[int]],
) -> Check:
    """Each job that ran twice shows why: a result refused as stale (its lease had expired
    and another worker took the job), a crash, a run whose attempt its worker gave back on
    losing the partition (the worker frozen past its lease and its group session: an earlier
    completed run's attempt has a 'released' row saying 'partition lost'), or a second lease
    (attempts > 1)."""
    reasons: dict[str, int] = defaultdict(int)
    unexplained = []
    for job_id in doubled:
        outcomes = {outcome for outcome, _ in unfinished_attempts.get(job_id, [])}
        if "stale" in outcomes:
            reasons["a stale result refused"] += 1
        elif "crashed" in outcomes:
            reasons["a crash"] += 1
        elif any(a in given_back.get(job_id, set()) for a in done_attempts[job_id][:-1]):
            reasons["its run given back with the lost partition"] += 1
        elif job_id in states and states[job_id][1] > 1:
            reasons["a lease taken over"] += 1
        else:
            unexplained.append(job_id)
    return Check(
        "every duplicate accounted for",
        not unexplained,
        ", ".join(f"{n} by {reason}" for reason, n in sorted(reasons.items()))
        + (f"; unexplained: {len(unexplained)}, e.g. {unexplained[:3]}" if unexplained else "")
        if doubled
        else "no duplicates",
    )


def _race_check(run: Run, unfinished_attempts: dict[uuid.UUID, list[tuple[str, str]]]) -> Check:
    """The forced race happened: in each fault, results of the frozen worker reached the
    database after the takeover and the fence refused them ('stale' attempt rows)."""
    per_fault = []
    for pid, jobs in run.raced:
        marker = f"-{pid}-m"
        per_fault.append(
            sum(
                1
                for job_id in jobs
                for outcome, worker_id in unfinished_attempts.get(job_id, [])
                if outcome == "stale" and marker in worker_id
            )
        )
    return Check(
        "the held results were refused by the fence",
        bool(per_fault) and all(n > 0 for n in per_fault),
        f"stale results refused per fault: {per_fault}",
    )


def _locked_recovery(
    run: Run, states: dict[uuid.UUID, tuple[str, int, Any, Any, Any]]
) -> list[float | None]:
    """Per operator lock: seconds from its release until the last job it held that was not
    finished yet finished."""
    recoveries: list[float | None] = []
    for jobs, released in run.locked:
        finished = [
            states[job_id][2].timestamp()
            for job_id in jobs
            if job_id in states and states[job_id][2] is not None
        ]
        late = [at - released for at in finished if at > released - run.scenario.lock_seconds]
        recoveries.append(round(max(late), 2) if late else None)
    return recoveries


def _pair_problems(
    run: Run,
    states: dict[uuid.UUID, tuple[str, int, Any, Any, Any]],
    executions: dict[uuid.UUID, dict[str, list[float]]],
) -> list[str]:
    problems = []
    for key, first, second in run.pairs:
        ids = [item.job_id for item in (first, second) if item.job_id]
        holders = [job_id for job_id, s in states.items() if s[3] == key]
        if len(holders) != 1:
            problems.append(f"key {key}: {len(holders)} jobs hold it")
            continue
        winner = holders[0]
        if states[winner][0] != "succeeded" or len(executions.get(winner, {}).get("done", [])) < 1:
            problems.append(f"key {key}: its job {winner} is {states[winner][0]}")
        for loser in (job_id for job_id in ids if job_id != winner):
            if executions.get(loser):
                problems.append(f"key {key}: the duplicate {loser} ran")
            elif loser in states and states[loser][2] is None:
                problems.append(f"key {key}: the duplicate {loser} is {states[loser][0]}")
    return problems


def _kafka_checks(run: Run, dead: int) -> list[Check]:
    settings = run.settings
    topics = [f"{settings.topic_prefix}.default"] + [
        f"{settings.topic_prefix}.default.retry.{i}" for i in range(len(RETRY_DELAYS))
    ]
    group = consumer_group(settings.topic_prefix, "default")
    behind: list[str] = []
    try:
        for topic in topics:
            ends = end_offsets(settings, topic)
            committed = committed_offsets(settings, group, topic)
            behind += [
                f"{topic.rsplit('.', 2)[-1] if 'retry' in topic else 'main'}[{p}] "
                f"{committed.get(p)}/{end}"
                for p, end in ends.items()
                if end > 0 and committed.get(p) != end
            ]
        dlq = sum(end_offsets(settings, f"{settings.topic_prefix}.default.dlq").values())
    except Exception as error:  # the broker itself is what failed: say so
        return [Check("Kafka consumed to the end", False, f"cannot read offsets: {error}")]
    return [
        Check(
            "Kafka consumed to the end",
            not behind,
            "committed = end on the main topic and every retry tier"
            if not behind
            else f"behind: {', '.join(behind[:6])}",
        ),
        Check("the DLQ holds exactly the dead jobs", dlq == dead, f"{dlq} in the DLQ, {dead} dead"),
    ]


def _crash_time(
    run: Run, event: FaultEvent, executions: dict[uuid.UUID, dict[str, list[float]]]
) -> float | None:
    poison = run.injected[event.index] if event.index < len(run.injected) else None
    if poison is None or poison.job_id is None:
        return None
    exits = executions.get(poison.job_id, {}).get("exit", [])
    if exits:
        event.detail += f", {len(exits)} crashes"
    return exits[0] if exits else None


def _measure(
    event: FaultEvent,
    finishes: list[float],
    timings: list[tuple[int | None, float, float | None]],
    enqueue_rate: float,
) -> None:
    at = event.at
    index = bisect.bisect_right(finishes, at)
    if index < len(finishes):
        event.first_done = round(finishes[index] - at, 2)
    before = index - bisect.bisect_left(finishes, at - RATE_BEFORE)
    # No higher than the rate jobs come in at: the backlog of the workers' start, worked off
    # just before an early fault, is not a rate they can be expected to keep.
    baseline = min(before / RATE_BEFORE, enqueue_rate)
    if baseline > 0:
        step = at
        while step < at + STALL_WINDOW:
            count = bisect.bisect_left(finishes, step + RATE_WINDOW) - bisect.bisect_left(
                finishes, step
            )
            if count / RATE_WINDOW >= RATE_SHARE * baseline:
                event.rate_back = round(step - at, 2)
                break
            step += 0.1
    event.stall = round(_stall(at, timings), 2)


def _stall(at: float, timings: list[tuple[int | None, float, float | None]]) -> float:
    """The longest time within ``STALL_WINDOW`` of ``at`` that a partition had a job waiting
    (enqueued, not started) while no job of it started. ``timings``: (partition, enqueued,
    started) per job."""
    end = at + STALL_WINDOW
    by_partition: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for partition, enqueued, finished in timings:
        if partition is None or enqueued > end:
            continue
        if finished is not None and finished <= at:
            continue
        by_partition[partition].append((enqueued, finished if finished is not None else end))
    worst = 0.0
    for jobs in by_partition.values():
        marks = sorted({f for _, f in jobs if f <= end})
        cursor = at
        for mark in [*marks, end]:
            # Waiting since the earliest enqueue of a job not yet finished at ``mark``.
            since = min((e for e, f in jobs if e < mark and f >= mark), default=None)
            if since is not None:
                worst = max(worst, mark - max(cursor, since))
            cursor = mark
    return worst


# -- output --


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def scenario_table(result: ScenarioResult) -> Table:
    verdict = "[green]passed[/]" if result.ok else "[red]FAILED[/]"
    table = Table(
        title=f"{result.scenario} ({verdict}): {result.summary}",
        title_justify="left",
        show_lines=False,
    )
    for column in (
        "#",
        "fault",
        "at +s",
        "detail",
        "back s",
        "first done s",
        "stall s",
        "rate back s",
    ):
        table.add_column(column, justify="right" if column.endswith("s") else "left")
    start = result.flow_started
    for event in result.faults:
        table.add_row(
            str(event.index + 1),
            event.kind,
            f"{event.at - start:.1f}",
            event.detail,
            _seconds(event.back),
            _seconds(event.first_done),
            _seconds(event.stall),
            _seconds(event.rate_back),
        )
    return table


def checks_table(result: ScenarioResult) -> Table:
    table = Table(show_header=False, box=None, padding=(0, 1))
    for check in result.checks:
        mark = "[green]ok[/]" if check.ok else "[red]FAIL[/]"
        table.add_row(mark, check.name, check.detail)
    return table


def summary_table(results: list[ScenarioResult]) -> Table:
    table = Table(title="fault scenarios", title_justify="left")
    for column in (
        "scenario",
        "faults",
        "jobs acked",
        "duplicates",
        "max stall s",
        "max rate back s",
        "verdict",
    ):
        table.add_column(column)
    for result in results:
        table.add_row(
            result.scenario,
            str(len(result.faults)),
            str(result.acknowledged),
            str(result.figures.get("duplicates", "-")),
            _seconds(result.worst_stall),
            _seconds(result.slowest_rate_back),
            "[green]passed[/]" if result.ok else "[red]FAILED[/]",
        )
    return table


def write_report(results: list[ScenarioResult], report_dir: Path, meta: dict[str, Any]) -> None:
    report_dir.mkdir(parents=True, exist_ok=True)
    summary = {
        **meta,
        "passed": all(r.ok for r in results),
        "scenarios": [
            {**asdict(r), "ok": r.ok, "checks": [asdict(c) for c in r.checks]} for r in results
        ],
    }
    (report_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    lines = [
        "# tenantq fault scenarios",
        "",
        f"{meta['started']}; seed {meta['seed']}, {meta['workers']} workers, "
        f"{meta['tenants']} tenants; private stack (Kafka {meta['kafka']}, Postgres "
        f"{meta['postgres']}).",
        "",
        "Definitions: *back* = fault until the server or worker is up again; *first done* = "
        "fault until the next job finished; *stall* = longest time within 60 s that a "
        "main-topic partition with work not yet started started nothing; *rate back* = fault "
        "until "
        "throughput (2 s window) is back to 80% of the 5 s before it (at most of the enqueue "
        "rate). A handler-exit fault is "
        "timed from the poison job's first crash. Faults closer together than their recovery "
        "share their windows: a stall can run on into the next fault.",
        "",
        "| scenario | faults | jobs acknowledged | duplicates | max stall s | max rate back s "
        "| verdict |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lines.append(
            f"| {r.scenario} | {len(r.faults)} | {r.acknowledged} | "
            f"{r.figures.get('duplicates')} | {_seconds(r.worst_stall)} | "
            f"{_seconds(r.slowest_rate_back)} | {'passed' if r.ok else '**FAILED**'} |"
        )
    for r in results:
        lines += [
            "",
            f"## {r.scenario}: {'passed' if r.ok else 'FAILED'}",
            "",
            f"{r.summary}. {r.jobs} jobs planned, {r.acknowledged} acknowledged"
            + (f" ({r.unacknowledged} enqueues not acknowledged)" if r.unacknowledged else "")
            + f", {r.seconds:.0f} s.",
            "",
            "| check | result | detail |",
            "| --- | --- | --- |",
        ]
        lines += [f"| {c.name} | {'ok' if c.ok else '**FAIL**'} | {c.detail} |" for c in r.checks]
        lines += [
            "",
            "| # | fault | at +s | detail | back s | first done s | stall s | rate back s |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| {f.index + 1} | {f.kind} | {f.at - r.flow_started:.1f} | {f.detail} | "
            f"{_seconds(f.back)} | "
            f"{_seconds(f.first_done)} | {_seconds(f.stall)} | {_seconds(f.rate_back)} |"
            for f in r.faults
        ]
        lines += ["", f"Figures: `{json.dumps(r.figures, default=str)}`"]
    (report_dir / "report.md").write_text("\n".join(lines) + "\n")


# -- main --


def run_suite(
    names: list[str],
    options: SuiteOptions,
    *,
    jobs: int | None = None,
    repeat: int | None = None,
    interval: float | None = None,
) -> list[ScenarioResult]:
    """Run the named scenarios on private stacks (one per kind: a scenario of a module of its
    own may bring its stack), each stack's ``WARM_UP`` first; print and write the report."""
    chosen = []
    for name in names:
        scenario = SCENARIOS[name]
        overrides: dict[str, Any] = {}
        if jobs is not None:
            overrides["jobs"] = jobs
        if repeat is not None:
            overrides["repeat"] = repeat
        if interval is not None:
            overrides["interval"] = interval
        chosen.append(replace(scenario, **overrides))
    report_dir = options.report_dir
    report_dir.mkdir(parents=True, exist_ok=True)
    results: list[ScenarioResult] = []
    started = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    # Each stack runs only while its scenarios do: two at once would share two cores.
    by_stack: dict[Callable[[], Any], list[Scenario]] = {}
    for scenario in chosen:
        by_stack.setdefault(_hook(scenario, "open_stack") or PrivateStack, []).append(scenario)
    meta: dict[str, Any] = {
        "started": started,
        "seed": options.seed,
        "workers": options.workers,
        "concurrency": options.concurrency or "default",
        "processes": options.processes or "default",
        "tenants": options.tenants,
        "kafka": "",
        "postgres": "",
    }
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        for open_stack, scenarios in by_stack.items():
            with open_stack() as stack:
                for key, value in (
                    ("kafka", stack.bootstrap_servers),
                    ("postgres", stack.server_url),
                ):
                    meta[key] = "; ".join(filter(None, (meta[key], value)))
                progress.console.print(
                    f"private stack: Kafka {stack.bootstrap_servers}, Postgres {stack.server_url}"
                )
                for scenario in [WARM_UP, *scenarios]:
                    result = run_scenario(Run(scenario, stack, options), progress)
                    results.append(result)
                    progress.console.print(scenario_table(result))
                    progress.console.print(checks_table(result))
                    write_report(results, report_dir, meta)
    console.print(summary_table(results))
    console.print(f"report: {report_dir / 'report.md'}")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scenario",
        action="append",
        choices=sorted(SCENARIOS),
        help="a scenario to run (repeatable; default: all)",
    )
    parser.add_argument("--jobs", type=int, help="jobs per scenario (default: the scenario's)")
    parser.add_argument("--repeat", type=int, help="faults per scenario (default: the scenario's)")
    parser.add_argument("--interval", type=float, help="seconds between faults")
    parser.add_argument("--workers", type=int, default=3, help="tenantq worker processes")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="each worker's --concurrency (default: none passed, the worker's own default)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=None,
        help="each worker's --processes (default: none passed, the worker's own default)",
    )
    parser.add_argument("--tenants", type=int, default=40, help="tenants of the Zipf workload")
    parser.add_argument("--seed", type=int, default=7, help="seed of the workload")
    parser.add_argument("--report-dir", type=Path, help="default: reports/faults-<time>")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = parser.parse_args(argv)
    if args.list:
        for scenario in SCENARIOS.values():
            print(
                f"{scenario.name:20} {scenario.repeat} x every {scenario.interval:.0f}s, "
                f"{scenario.jobs} jobs: {scenario.summary}"
            )
        return 0
    report_dir = args.report_dir or ROOT / "reports" / (
        "faults-" + dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    )
    options = SuiteOptions(
        report_dir,
        workers=args.workers,
        concurrency=args.concurrency,
        processes=args.processes,
        seed=args.seed,
        tenants=args.tenants,
    )
    results = run_suite(
        args.scenario or list(SCENARIOS),
        options,
        jobs=args.jobs,
        repeat=args.repeat,
        interval=args.interval,
    )
    return 0 if results and all(r.ok for r in results) else 1


def _hook(scenario: Scenario, name: str) -> Any:
    """What a scenario of a module of its own does its way (``open_stack``, ``prepare``,
    ``inject``, ``judge``), or None for this module's scenarios."""
    return getattr(scenario, name, None)


# The cluster's scenarios (three brokers, a Postgres failover) live in a module of their own,
# which adds them to SCENARIOS. Run as a script this module is ``__main__``: under its import
# name too, so that module extends this very one, not a second copy.
sys.modules.setdefault("faults", sys.modules[__name__])
import fault_scenarios_cluster  # noqa: E402,F401

if __name__ == "__main__":
    sys.exit(main())
