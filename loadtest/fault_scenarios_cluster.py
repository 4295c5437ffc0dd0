"""The fault suite's scenarios of a real deployment's topology (``faults.py`` runs them with its
own): three brokers, and a PostgreSQL primary that fails over to its standby.

    .venv/bin/python loadtest/faults.py --scenario leader-kill --scenario postgres-failover

They run on a private stack of their own (``ClusterStack``: ``tenantq dev up --brokers 3
--standby`` in a temporary home, torn down at the end; the shared dev stack is never
touched): a KRaft cluster of three combined broker/controller nodes, topics with three
replicas and min.insync.replicas=2, and a PostgreSQL primary streaming asynchronously to a
standby, the workers' URL naming both hosts with target_session_attrs=read-write.

The scenarios, each under the suite's Zipf workload, and what each promises:

* ``leader-kill``: kill -9 of the broker leading the most main-topic partitions, down 10 s,
  then started again; 0 lost, worst stall <= 10 s.
* ``rolling-restart``: each broker in turn stopped with SIGTERM (a controlled shutdown),
  started again, every replica back in sync before the next; 0 lost, stall <= 10 s.
* ``postgres-failover``: replication to the standby cut for 2 s, then the primary stopped as
  a crash and the standby promoted (``tenantq dev failover --immediate``), the old primary
  cloned back as the standby; 0 acknowledged jobs lost, recovery <= 15 s, duplicates only of
  runs the failover took back.
* ``hot-lane-leader-kill``: the hot tenant in its queue's hot lane (an operator's placement);
  kill -9 of the broker leading the most lane partitions; 0 lost, the lane tenant's stall
  <= 10 s.

No process dies and no lease runs out in these scenarios: a duplicate execution is allowed
only where a failover took a run back, or where a member lost its partitions (its group
session expired while a dead broker's groups moved) and gave a running job back; each is
accounted for from the executions files and the attempt log.

Each verdict adds to the suite's checks (``faults.evaluate``): *lost* (acknowledged jobs that
did not end succeeded), *duplicates* counted from the executions files (``fault_app``: a line
per completed run in a file of its process, which a failover cannot take back, unlike the
ledger table) and each accounted for, the worst stall and the recovery time (throughput back
to 80%). The failover also says what the standby never had: the WAL it had not received, and
the job rows, results and ledger rows the old primary took with it.

Importing either module registers these scenarios in ``faults.SCENARIOS``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import faults
import psycopg
from confluent_kafka.admin import AdminClient
from faults import Check, FaultEvent, Run, Scenario, ScenarioResult
from private_stack import PrivateStack, shared_pids
from sqlalchemy.engine import make_url
from topology_stack import cut_replication, fail_over_after_cut, link_jars, node_url

import tenantq
from tenantq.devstack.processes import pid_alive, port_free, wait_until
from tenantq.devstack.state import PRIMARY, STANDBY, kafka_nodes, kafka_pids, postgres_nodes
from tenantq.errors import DevStackError
from tenantq.partitioner.placement import Placement
from tenantq.store.engine import connect, psycopg_url
from tenantq.store.placement import placement_upsert
from tenantq.topic_admin import declared_topics
from tenantq.topics import consumer_group

BROKERS = 3
#: Starts of the stack tried before giving up.
STACK_START_TRIES = 3
#: Where the workers' handlers append their executions (``fault_app``).
EXECUTIONS_DIR = "FAULT_EXECUTIONS_DIR"
#: How long a broker may take to stop on SIGTERM (a controlled shutdown moves its leaders).
BROKER_STOP_SECONDS = 120.0
IN_SYNC_TIMEOUT = 180.0


# -- the stack --


class ClusterStack(PrivateStack):
    """A ``PrivateStack`` (a temporary home, its own pids, torn down at the end) of three
    brokers and a PostgreSQL primary with a streaming standby."""

    def up(self, timeout: float = 300.0) -> dict[str, float]:
        """Start the stack; once more from scratch if a server fails to start (on a shared,
        busy machine a port can be taken between the check and the bind)."""
        link_jars(self.home, None)
        for attempt in range(STACK_START_TRIES):
            self._choose_ports()
            try:
                return self.stack.up(timeout=timeout, brokers=BROKERS, standby=True)
            except DevStackError as error:
                if attempt + 1 == STACK_START_TRIES:
                    raise
                print(f"the cluster stack did not start ({error}); starting it afresh")
                self.stack.down()
                for name in ("state.json", "kafka", "postgres"):
                    path = self.home / name
                    if path.is_dir():
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        path.unlink(missing_ok=True)
        raise AssertionError("unreachable")

    # -- Kafka -----------------------------------------------------------------------------

    def broker_pid(self, node_id: int) -> int | None:
        return kafka_pids(self.state).get(node_id)

    def leaders(self, settings: tenantq.Settings, topic: str) -> dict[int, int]:
        """The leader (node id) of each partition of ``topic``."""
        metadata = AdminClient(settings.kafka_client_config()).list_topics(topic, timeout=30)
        return {p: part.leader for p, part in metadata.topics[topic].partitions.items()}

    def coordinator(self, settings: tenantq.Settings, group: str) -> int | None:
        """The node coordinating ``group`` (None when no broker says)."""
        admin = AdminClient(settings.kafka_client_config())
        try:
            description = admin.describe_consumer_groups([group])[group].result(timeout=10)
        except Exception:
            return None
        return int(description.coordinator.id) if description.coordinator else None

    def kill_broker(self, node_id: int) -> float:
        """kill -9 of a broker; the time (epoch)."""
        return self._kill(self.broker_pid(node_id))

    def stop_broker(self, node_id: int) -> float:
        """SIGTERM (a controlled shutdown: its leaderships move first); the seconds until it
        exited."""
        pid = self.broker_pid(node_id)
        started = time.monotonic()
        if pid and pid_alive(pid):
            if pid in shared_pids():
                raise RuntimeError(f"pid {pid} belongs to the shared dev stack; not stopping it")
            os.kill(pid, signal.SIGTERM)
            if not wait_until(
                lambda: not pid_alive(pid), timeout=BROKER_STOP_SECONDS, interval=0.1
            ):
                raise RuntimeError(f"broker {node_id} did not stop in {BROKER_STOP_SECONDS}s")
        return time.monotonic() - started

    def start_missing(self, timeout: float = 180.0) -> float:
        """``dev up`` again: whatever process of the topology is missing starts, on its ports
        and storage; the seconds it took."""
        started = time.monotonic()
        state = self.state
        pids = kafka_pids(state)
        ports = [
            port
            for node in kafka_nodes(state)
            if not pid_alive(pids.get(node.node_id))
            for port in (node.client_port, node.controller_port)
        ]
        if not wait_until(lambda: all(port_free(p) for p in ports), timeout=60, interval=0.1):
            raise RuntimeError(f"the ports {ports} of the stopped brokers did not come free")
        self.stack.up(timeout=timeout)
        return time.monotonic() - started

    def wait_in_sync(self, settings: tenantq.Settings) -> float:
        """Until every replica of the scenario's topics and of the group offsets is in sync;
        the seconds it took."""
        names = [spec.name for spec in declared_topics(settings)] + ["__consumer_offsets"]
        admin = AdminClient(settings.kafka_client_config())
        started = time.monotonic()

        def in_sync() -> bool:
            try:
                metadata = admin.list_topics(timeout=10)
            except Exception:
                return False
            return all(
                len(partition.isrs) == len(partition.replicas) == BROKERS
                for name in names
                if name in metadata.topics
                for partition in metadata.topics[name].partitions.values()
            )

        if not wait_until(in_sync, timeout=IN_SYNC_TIMEOUT, interval=0.5):
            raise RuntimeError(f"replicas not back in sync within {IN_SYNC_TIMEOUT:.0f}s")
        return time.monotonic() - started

    # -- PostgreSQL ------------------------------------------------------------------------

    def node_url(self, role: str, database: str) -> str:
        """The URL of the node that is ``role`` now, alone (no two-host failover)."""
        return node_url(self.stack, role, database)

    def cut_replication(self) -> None:
        """The standby stops receiving WAL (``topology_stack.cut_replication``)."""
        cut_replication(self.stack)

    def keep_logs(self, directory: Path, lines: int = 5000) -> None:
        """The end of every server's log, copied to ``directory`` (the home goes at the
        end)."""
        state = self.state
        logs = {
            f"kafka-{node.node_id}.log": self.stack.kafka.paths(node.node_id).log
            for node in kafka_nodes(state)
        }
        logs.update(
            {
                f"postgres-{node.name}.log": self.stack.postgres.paths(node, state).log
                for node in postgres_nodes(state)
            }
        )
        for name, path in logs.items():
            with contextlib.suppress(OSError):
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                (directory / name).write_text("\n".join(tail) + "\n")

    def failover(self) -> float:
        """``tenantq dev failover --immediate``: the primary stopped as a crash, the standby
        promoted; the seconds until it took writes."""
        return fail_over_after_cut(self.stack)


@contextlib.contextmanager
def cluster_stack() -> Iterator[ClusterStack]:
    """A started ``ClusterStack``, with an executions directory the workers' handlers write
    to (``fault_app``); down and removed on exit."""
    with ClusterStack() as stack:
        executions = stack.home / "executions"
        executions.mkdir()
        previous = os.environ.get(EXECUTIONS_DIR)
        os.environ[EXECUTIONS_DIR] = str(executions)
        try:
            yield stack
        finally:
            if previous is None:
                os.environ.pop(EXECUTIONS_DIR, None)
            else:
                os.environ[EXECUTIONS_DIR] = previous


# -- what a run keeps --


@dataclass
class Failover:
    """One failover: when, and what the standby never had."""

    at: float
    promoted: float
    #: WAL the primary had written and the standby had not received (bytes).
    wal_bytes: int
    #: Commit time of the last transaction the new primary replayed (epoch).
    replayed_until: float | None
    #: Jobs whose row the old primary had and the new one has not.
    rows_lost: set[uuid.UUID] = field(default_factory=set)
    #: Jobs terminal on the old primary and not on the new one (their result lost).
    results_lost: set[uuid.UUID] = field(default_factory=set)
    #: Jobs leased on the old primary at another attempt than on the new one (a claim lost).
    claims_lost: set[uuid.UUID] = field(default_factory=set)
    #: Ledger rows (handler runs) the new primary has not.
    ledger_lost: int = 0
    #: When the last worker had read its partitions again (epoch; from their logs).
    rewound: float = 0.0


@dataclass
class ClusterNotes:
    """What a run of a cluster scenario keeps for its verdict."""

    failovers: list[Failover] = field(default_factory=list)
    lane_tenant: str | None = None
    #: The broker being started again after the last fault (it runs beside the flow).
    comeback: threading.Thread | None = None
    #: Faults the stack did not recover from as planned.
    problems: list[str] = field(default_factory=list)
    #: When the group had every main-topic partition assigned, before the flow (seconds).
    group_settled: float | None = None
    #: The machine's load average (1 min) at each fault.
    load: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Execution:
    run: str
    job_id: uuid.UUID
    attempt: int
    started: float
    at: float


# -- the scenarios --


@dataclass(frozen=True)
class ClusterScenario(Scenario):
    """A scenario on the cluster stack, with its injector and its verdict."""

    #: How long a killed broker stays down before it is started again.
    down_seconds: float = 10.0
    #: How long replication to the standby is cut before a failover.
    lag_seconds: float = 0.0
    #: Throughput back to 80% within this many seconds of each fault (None: not promised).
    recovery_budget: float | None = None
    #: The hot tenant is put in the hot lane before the flow starts.
    lane_tenant: bool = False
    #: Duplicate executions allowed: "none", or "failover" (only of runs a failover took back).
    duplicates_allowed: str = "none"

    open_stack = staticmethod(cluster_stack)

    def prepare(self, run: Run) -> None:
        notes = ClusterNotes()
        run.cluster = notes  # type: ignore[attr-defined]
        notes.group_settled = _wait_for_group(run)
        if self.lane_tenant:
            tenant = next(t for t, c in run.workload.tenant_classes.items() if c == "hot")
            with connect(run.settings, autocommit=True) as operator:
                placement_upsert(
                    operator,
                    queue="default",
                    tenant_id=tenant,
                    placement=Placement.lane(),
                    updated_by="faults",
                    reason="the fault suite's lane tenant",
                )
            notes.lane_tenant = tenant

    def inject(self, run: Run, index: int) -> FaultEvent:
        # The machine's load, for the timings: the stack's five servers and three workers
        # share it with whatever else runs.
        _notes(run).load.append(round(os.getloadavg()[0], 1))
        if self.fault == "leader-kill":
            return _leader_kill(self, run, index)
        if self.fault == "broker-restart":
            return _broker_restart(run, index)
        if self.fault == "postgres-failover":
            return _postgres_failover(self, run, index)
        raise ValueError(f"no injector for {self.fault}")

    def judge(self, run: Run, result: ScenarioResult) -> None:
        _judge(self, run, result)


def _stack(run: Run) -> ClusterStack:
    assert isinstance(run.stack, ClusterStack)
    return run.stack


def _notes(run: Run) -> ClusterNotes:
    notes: ClusterNotes = run.cluster  # type: ignore[attr-defined]
    return notes


def _main_topic(run: Run) -> str:
    return f"{run.settings.topic_prefix}.default"


def _lane_topic(run: Run) -> str:
    return f"{run.settings.topic_prefix}.default.lane"


# -- faults --


def _leader_kill(scenario: ClusterScenario, run: Run, index: int) -> FaultEvent:
    """kill -9 of the broker leading the most partitions of the main topic (of the lane with
    a lane tenant); it is started again ``down_seconds`` later, beside the flow."""
    stack = _stack(run)
    _wait_for_whole_cluster(run)
    topic = _lane_topic(run) if scenario.lane_tenant else _main_topic(run)
    leaders = stack.leaders(run.settings, topic)
    target, led = Counter(leaders.values()).most_common(1)[0]
    group = consumer_group(run.settings.topic_prefix, "default")
    role = (
        " and the group's coordinator" if stack.coordinator(run.settings, group) == target else ""
    )
    at = stack.kill_broker(target)
    event = FaultEvent(
        index,
        "leader-kill",
        at,
        f"kill -9 of broker {target} (leader of {led}/{len(leaders)} "
        f"{topic.rsplit('.', 1)[-1]} partitions{role})",
    )
    _come_back(run, event, at + scenario.down_seconds, f"down {scenario.down_seconds:.0f}s")
    return event


def _broker_restart(run: Run, index: int) -> FaultEvent:
    """One step of a rolling restart: broker ``index % 3 + 1`` stopped with SIGTERM (once the
    last step's broker is back and every replica in sync), then started again beside the
    flow."""
    stack = _stack(run)
    _wait_for_whole_cluster(run)
    node = index % BROKERS + 1
    leaders = stack.leaders(run.settings, _main_topic(run)).values()
    led = sum(1 for leader in leaders if leader == node)
    at = time.time()
    stopped = stack.stop_broker(node)
    event = FaultEvent(
        index,
        "broker-restart",
        at,
        f"broker {node} (leader of {led} main partitions): SIGTERM, exited in {stopped:.1f}s",
    )
    _come_back(run, event, time.time(), "")
    return event


def _come_back(run: Run, event: FaultEvent, due: float, note: str) -> None:
    """Start the stopped broker again at ``due`` in a thread of its own (a broker takes tens
    of seconds to start on a busy machine, and the flow goes on meanwhile); the event's
    ``back`` is when every replica is in sync again."""
    stack, notes = _stack(run), _notes(run)

    def bring_back() -> None:
        time.sleep(max(0.0, due - time.time()))
        try:
            started = stack.start_missing()
            in_sync = stack.wait_in_sync(run.settings)
        except Exception as error:
            notes.problems.append(f"fault {event.index + 1}: {error}")
            return
        event.detail += (
            f"; {note + ', ' if note else ''}started again in {started:.1f}s, every replica "
            f"in sync {in_sync:.1f}s later"
        )
        event.back = time.time() - event.at

    notes.comeback = threading.Thread(target=bring_back, name="broker-comeback", daemon=True)
    notes.comeback.start()


def _wait_for_whole_cluster(run: Run) -> None:
    """Until the last fault's broker is back and in sync: a second broker down would leave
    one replica of two in sync, and writes would stop (min.insync.replicas=2)."""
    comeback = _notes(run).comeback
    if comeback is not None:
        comeback.join(BROKER_STOP_SECONDS + IN_SYNC_TIMEOUT + 240)


def _wait_for_group(run: Run, timeout: float = 120.0) -> float | None:
    """Until the workers' group has every main-topic partition assigned and no member is
    still moving to its target assignment (so the first fault does not land in the group's
    first rebalance); the seconds it took, None if it did not settle."""
    admin = AdminClient(run.settings.kafka_client_config())
    group = consumer_group(run.settings.topic_prefix, "default")
    main = _main_topic(run)
    started = time.monotonic()

    def settled() -> bool:
        try:
            description = admin.describe_consumer_groups([group])[group].result(timeout=10)
        except Exception:
            return False
        members = description.members or []
        assigned = {
            tp.partition
            for member in members
            for tp in member.assignment.topic_partitions
            if tp.topic == main
        }
        converged = all(
            member.target_assignment is None
            or {(tp.topic, tp.partition) for tp in member.assignment.topic_partitions}
            == {(tp.topic, tp.partition) for tp in member.target_assignment.topic_partitions}
            for member in members
        )
        return len(members) >= run.worker_count and len(assigned) == faults.PARTITIONS and converged

    if not wait_until(settled, timeout=timeout, interval=0.5):
        return None
    return time.monotonic() - started


def _postgres_failover(scenario: ClusterScenario, run: Run, index: int) -> FaultEvent:
    """Replication cut for ``lag_seconds`` under load, then the primary stopped as a crash
    and the standby promoted; the old primary cloned back as the standby."""
    stack = _stack(run)
    database = make_url(run.settings.require_database_url()).database or "tenantq"
    stack.cut_replication()
    time.sleep(scenario.lag_seconds)
    with psycopg.connect(stack.node_url(PRIMARY, database), autocommit=True) as primary:
        before = _ledger_snapshot(primary)
        with psycopg.connect(stack.node_url(STANDBY, database), autocommit=True) as standby:
            received = standby.execute("SELECT pg_last_wal_receive_lsn()").fetchone()[0]  # type: ignore[index]
        row = primary.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", (received,))
        wal_bytes = int(row.fetchone()[0])  # type: ignore[index]
    at = time.time()
    promote = stack.failover()
    with psycopg.connect(stack.node_url(PRIMARY, database), autocommit=True) as new_primary:
        after = _ledger_snapshot(new_primary)
        stamp = new_primary.execute("SELECT pg_last_xact_replay_timestamp()").fetchone()[0]  # type: ignore[index]
    cloned = stack.start_missing()
    jobs_before, runs_before = before
    jobs_after, runs_after = after
    failover = Failover(
        at=at,
        promoted=at + promote,
        wal_bytes=wal_bytes,
        replayed_until=stamp.timestamp() if stamp else None,
        rows_lost={job for job in jobs_before if job not in jobs_after},
        results_lost={
            job
            for job, (state, _) in jobs_before.items()
            if state in TERMINAL and job in jobs_after and jobs_after[job][0] not in TERMINAL
        },
        claims_lost={
            job
            for job, (state, attempts) in jobs_before.items()
            if state == "leased" and job in jobs_after and jobs_after[job][1] != attempts
        },
        ledger_lost=len(runs_before - runs_after),
    )
    _notes(run).failovers.append(failover)
    return FaultEvent(
        index,
        "postgres-failover",
        at,
        f"replication cut {scenario.lag_seconds:.0f}s ({wal_bytes / 1024:.0f} KiB of WAL never "
        f"received); primary stopped, standby promoted in {promote:.1f}s; gone with the old "
        f"primary: {len(failover.rows_lost)} job rows, {len(failover.results_lost)} results, "
        f"{len(failover.claims_lost)} claims, {failover.ledger_lost} ledger rows; standby "
        f"cloned again in {cloned:.1f}s",
        back=promote,
    )


TERMINAL = ("succeeded", "dead", "canceled")


def _ledger_snapshot(
    conn: psycopg.Connection[Any],
) -> tuple[dict[uuid.UUID, tuple[str, int]], set[uuid.UUID]]:
    """(state, attempts) of every job, and the run ids of the handlers' ledger."""
    jobs = {
        row[0]: (row[1], row[2])
        for row in conn.execute("SELECT id, state::text, attempts FROM tenantq_jobs")
    }
    runs = {row[0] for row in conn.execute("SELECT run FROM fault_executions")}
    return jobs, runs


# -- the verdict --


def _judge(scenario: ClusterScenario, run: Run, result: ScenarioResult) -> None:
    notes = _notes(run)
    if notes.failovers:
        _note_rewinds(run, notes.failovers)
    # The next scenario starts on a whole cluster (creating topics right after a broker died
    # can time out waiting for the controller).
    _wait_for_whole_cluster(run)
    flow_end = run.started + run.flow_seconds - faults.TAIL_SECONDS
    late = [event.index + 1 for event in run.events if event.at > flow_end]
    result.checks.append(
        Check(
            "every fault injected under load and recovered from",
            not notes.problems and not late and len(run.events) == scenario.repeat,
            "; ".join(notes.problems)
            + (f"faults {late} came after the flow (the stack was slow to recover)" if late else "")
            or f"{len(run.events)} of {scenario.repeat}"
            + (
                f" (the group settled {notes.group_settled:.1f}s before the flow)"
                if notes.group_settled is not None
                else " (the group had not settled before the flow)"
            ),
        )
    )
    work = [e for e in run.enqueued if e.job_id]
    executions = _executions(run, {e.job_id for e in work if e.job_id})
    url = run.settings.require_database_url()
    with psycopg.connect(psycopg_url(url), autocommit=True) as db:
        states = dict(
            db.execute(
                "SELECT id, state::text FROM tenantq_jobs WHERE id = ANY(%s)",
                ([e.job_id for e in work],),
            ).fetchall()
        )
        recorded = {str(row[0]) for row in db.execute("SELECT run FROM fault_executions")}
        given_back = faults.given_back_attempts(db)
    lost = [e.job_id for e in work if states.get(e.job_id) != "succeeded"]
    result.checks.append(
        Check(
            "0 acknowledged jobs lost",
            not lost,
            f"{len(work) - len(lost)}/{len(work)} acknowledged jobs succeeded"
            + (f"; lost: {len(lost)}, e.g. {lost[:3]}" if lost else ""),
        )
    )
    result.checks.append(_duplicates_check(scenario, notes, executions, given_back))
    if scenario.recovery_budget is not None:
        backs = {event.index + 1: event.rate_back for event in run.events}
        slowest = max((v for v in backs.values() if v is not None), default=None)
        result.checks.append(
            Check(
                f"recovery within budget (throughput back to 80% <= "
                f"{scenario.recovery_budget:.0f}s)",
                bool(backs)
                and None not in backs.values()
                and slowest is not None
                and slowest <= scenario.recovery_budget,
                f"slowest {faults._seconds(slowest)}s; per fault {backs}",
            )
        )
    if notes.lane_tenant is not None:
        result.checks.extend(_lane_checks(scenario, run, notes.lane_tenant))
    if notes.failovers:
        result.checks.append(_failover_losses_check(notes, states))
    runs = [execution for runs in executions.values() for execution in runs]
    result.figures.update(
        lost=len(lost),
        executions=len(runs),
        duplicates=sum(len(runs) - 1 for runs in executions.values() if runs),
        duplicates_in_ledger_table=result.figures.get("duplicates"),
        runs_missing_from_ledger_table=sum(1 for e in runs if e.run not in recorded),
        worst_stall_seconds=result.worst_stall,
        recovery_seconds=result.slowest_rate_back,
        load_average_at_faults=notes.load,
    )
    if notes.failovers:
        result.figures["failovers"] = [
            {
                "wal_kib_never_received": round(f.wal_bytes / 1024),
                "promoted_in_seconds": round(f.promoted - f.at, 2),
                "workers_read_again_after_seconds": round(f.rewound - f.at, 2),
                "standby_behind_seconds": round(f.at - f.replayed_until, 2)
                if f.replayed_until
                else None,
                "job_rows_lost": len(f.rows_lost),
                "results_lost": len(f.results_lost),
                "claims_lost": len(f.claims_lost),
                "ledger_rows_lost": f.ledger_lost,
            }
            for f in notes.failovers
        ]
    _keep_executions(run, executions)
    _stack(run).keep_logs(run.log_dir)


#: What a worker logs when it reads its partitions again after a failover.
REWIND_LINE = "the database failed over: reading"


def _note_rewinds(run: Run, failovers: list[Failover]) -> None:
    """Each failover's ``rewound``: the last worker's rewind within a minute of it (and
    before the next failover), from the workers' logs (the promote when none says so)."""
    rewinds = []
    for path in run.log_dir.glob("worker*.log"):
        for line in path.read_text(errors="replace").splitlines():
            if REWIND_LINE not in line:
                continue
            with contextlib.suppress(ValueError, KeyError):
                rewinds.append(dt.datetime.fromisoformat(json.loads(line)["ts"]).timestamp())
    ends = [f.at for f in failovers[1:]] + [float("inf")]
    for failover, end in zip(failovers, ends, strict=False):
        within = [at for at in rewinds if failover.at <= at < min(end, failover.at + 60.0)]
        failover.rewound = max(within, default=failover.promoted)


def _executions(run: Run, job_ids: set[uuid.UUID]) -> dict[uuid.UUID, list[Execution]]:
    """The runs of ``job_ids`` that completed, from the handlers' executions files."""
    directory = os.environ.get(EXECUTIONS_DIR)
    found: dict[uuid.UUID, list[Execution]] = defaultdict(list)
    if not directory:
        return found
    for path in Path(directory).glob("executions-*.jsonl"):
        for line in path.read_text().splitlines():
            try:
                entry = json.loads(line)
                job_id = uuid.UUID(entry["job"])
            except (ValueError, KeyError):
                continue
            if job_id in job_ids and entry.get("note") == "done":
                found[job_id].append(
                    Execution(
                        entry["run"],
                        job_id,
                        int(entry["attempt"]),
                        float(entry.get("started") or entry["at"]),
                        float(entry["at"]),
                    )
                )
    for runs in found.values():
        runs.sort(key=lambda execution: execution.started)
    return found


def _keep_executions(run: Run, executions: dict[uuid.UUID, list[Execution]]) -> None:
    """The run's executions beside its workers' logs (the stack's home goes at the end)."""
    with (run.log_dir / "executions.jsonl").open("w") as out:
        for runs in executions.values():
            for execution in runs:
                out.write(
                    json.dumps({**execution.__dict__, "job_id": str(execution.job_id)}) + "\n"
                )


def _duplicates_check(
    scenario: ClusterScenario,
    notes: ClusterNotes,
    executions: dict[uuid.UUID, list[Execution]],
    given_back: dict[uuid.UUID, set[int]],
) -> Check:
    """No process dies and no lease expires by time in these scenarios. A job may run twice
    only where

    * a failover took its first run back (``postgres-failover``): that run began before the
      workers had read their partitions again after the failover (``rewound``: the last
      worker's log line saying so), under a claim the old primary took with it or one the
      rewind gave back; the next began after the old primary stopped;
    * its member lost its partitions (its group session expired while a dead broker's
      groups moved to another coordinator) and gave the running attempt's lease back
      (``given_back``: the job's attempts with a 'released' row saying 'partition lost').
    """
    doubled = {job: runs for job, runs in executions.items() if len(runs) > 1}
    if not doubled:
        return Check("duplicate executions (each accounted for)", True, "0 duplicate executions")
    reasons: Counter[str] = Counter()
    unexplained: list[uuid.UUID] = []
    for job, runs in doubled.items():
        for earlier, later in zip(runs, runs[1:], strict=False):
            failover = scenario.duplicates_allowed == "failover" and any(
                earlier.started < f.rewound and later.started > f.at for f in notes.failovers
            )
            if failover:
                reasons["ran again after the failover took its run back"] += 1
            elif earlier.attempt in given_back.get(job, set()):
                reasons["ran again after its member lost the partition and gave it back"] += 1
            else:
                unexplained.append(job)
                break
    count = sum(len(runs) - 1 for runs in doubled.values())
    return Check(
        "duplicate executions (each accounted for)",
        not unexplained,
        f"{count} duplicate executions of {len(doubled)} jobs: "
        + ", ".join(f"{n} {reason}" for reason, n in reasons.items())
        + (
            f"; unexplained: {len(unexplained)} jobs, e.g. "
            + "; ".join(
                f"{job} runs at "
                + ", ".join(
                    f"{e.started:.2f}-{e.at:.2f} (attempt {e.attempt})" for e in doubled[job]
                )
                for job in unexplained[:2]
            )
            if unexplained
            else ""
        ),
    )


def _failover_losses_check(notes: ClusterNotes, states: dict[uuid.UUID, str]) -> Check:
    """Every job whose row, claim or result a failover lost ended succeeded all the same."""
    touched: set[uuid.UUID] = set()
    for f in notes.failovers:
        touched |= f.rows_lost | f.results_lost | f.claims_lost
    not_done = sorted(str(job) for job in touched if states.get(job, "missing") not in TERMINAL)
    parts = [
        f"#{n}: {f.wal_bytes / 1024:.0f} KiB of WAL, {len(f.rows_lost)} rows, "
        f"{len(f.results_lost)} results, {len(f.claims_lost)} claims, {f.ledger_lost} ledger rows"
        for n, f in enumerate(notes.failovers, 1)
    ]
    return Check(
        "what the standby never had was done again",
        not not_done,
        "; ".join(parts)
        + f"; {len(touched) - len(not_done)}/{len(touched)} of those jobs ended"
        + (f"; not: {not_done[:3]}" if not_done else ""),
    )


def _lane_checks(scenario: ClusterScenario, run: Run, tenant: str) -> list[Check]:
    """The lane tenant's jobs went through the lane, its stall stayed in budget, and the lane
    was consumed to the end."""
    ids = [e.job_id for e in run.enqueued if e.job_id and e.tenant == tenant]
    with psycopg.connect(psycopg_url(run.settings.require_database_url()), autocommit=True) as db:
        rows = db.execute(
            "SELECT id, origin_topic, started_at FROM tenantq_jobs WHERE id = ANY(%s)", (ids,)
        ).fetchall()
    origin = {row[0]: row[1] for row in rows}
    started = {row[0]: row[2].timestamp() if row[2] else None for row in rows}
    in_lane = sum(1 for job in ids if origin.get(job) == _lane_topic(run))
    timings = [
        (e.partition, e.at, started.get(e.job_id))
        for e in run.enqueued
        if e.job_id and e.tenant == tenant
    ]
    stalls = {event.index + 1: round(faults._stall(event.at, timings), 2) for event in run.events}
    worst = max(stalls.values(), default=None)
    budget = scenario.stall_budget or 10.0
    group = consumer_group(run.settings.topic_prefix, "default")
    lane = _lane_topic(run)
    ends = faults.end_offsets(run.settings, lane)
    committed = faults.committed_offsets(run.settings, group, lane)
    behind = [
        f"{p}: {committed.get(p)}/{end}"
        for p, end in ends.items()
        if end and committed.get(p) != end
    ]
    return [
        Check(
            "the lane tenant's jobs went through the lane",
            bool(ids) and in_lane == len(ids),
            f"{in_lane}/{len(ids)} of {tenant}'s jobs read from the lane",
        ),
        Check(
            f"the lane tenant's stall <= {budget:.0f}s",
            worst is not None and worst <= budget,
            f"worst {faults._seconds(worst)}s; per fault {stalls}",
        ),
        Check(
            "the lane consumed to the end",
            not behind,
            "committed = end on every lane partition" if not behind else f"behind: {behind[:4]}",
        ),
    ]


#: A broker takes tens of seconds to start again on a busy machine, and the next fault waits
#: for it (and for every replica in sync): the broker faults are this far apart.
BROKER_FAULT_INTERVAL = 60.0

CLUSTER_SCENARIOS: dict[str, Scenario] = faults.scenarios_by_name(
    ClusterScenario(
        "leader-kill",
        "leader-kill",
        "kill -9 of the broker leading the most main-topic partitions (three brokers, "
        "replication 3, min ISR 2); down 10 s, then started again",
        repeat=3,
        interval=BROKER_FAULT_INTERVAL,
        jobs=5700,
        stall_budget=10.0,
    ),
    ClusterScenario(
        "rolling-restart",
        "broker-restart",
        "a rolling restart: each of the three brokers in turn stopped with SIGTERM, "
        "started again, every replica in sync before the next",
        repeat=3,
        interval=BROKER_FAULT_INTERVAL,
        jobs=5700,
        stall_budget=10.0,
    ),
    ClusterScenario(
        "postgres-failover",
        "postgres-failover",
        "replication to the standby cut for 2 s, then the primary stopped as a crash and "
        "the standby promoted (tenantq dev failover --immediate); the old primary cloned "
        "back as the standby",
        repeat=3,
        interval=30.0,
        jobs=3000,
        lag_seconds=2.0,
        stall_budget=15.0,
        recovery_budget=15.0,
        duplicates_allowed="failover",
        # The setting for an asynchronous standby: offsets behind what it holds, and
        # every partition read again from there after a failover.
        worker={"offsets_wait_for_standbys": 1},
    ),
    ClusterScenario(
        "hot-lane-leader-kill",
        "leader-kill",
        "the hot tenant in its queue's hot lane (an operator's placement); kill -9 of the "
        "broker leading the most lane partitions, down 10 s, then started again",
        repeat=2,
        interval=BROKER_FAULT_INTERVAL,
        jobs=3900,
        stall_budget=10.0,
        lane_tenant=True,
    ),
)

faults.SCENARIOS.update(CLUSTER_SCENARIOS)
