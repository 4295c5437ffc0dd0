"""A dev stack of one topology (a three-broker cluster, a PostgreSQL standby, a secure
stack) in a home of its own, for the tests that bring each topology up end to end.

Like ``private_stack``, nothing here touches the shared dev stack: the home is a fresh
temporary directory, processes are signalled by the pids of its own state file (never one of
the shared stack's), and ``down()`` runs whatever happens. The broker jars are borrowed from
the shared home when it has the version, else resolved once into a cache in the system's
temporary directory and linked from every home.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from private_stack import shared_home, shared_pids
from support import migrated_database

import tenantq
from tenantq.devstack import kafka
from tenantq.devstack.processes import pid_alive, wait_until
from tenantq.devstack.stack import DevStack
from tenantq.devstack.state import PRIMARY, STANDBY, postgres_nodes
from tenantq.devstack.topology import DEFAULT_KAFKA_VERSION
from tenantq.settings import QueueSettings

JAR_CACHE = Path(tempfile.gettempdir()) / "tenantq-test-kafka-jars"
TENANTQ = str(Path(sys.executable).with_name("tenantq"))


class TopologyStack:
    """A ``DevStack`` under a temporary home, started with ``topology`` options."""

    def __init__(self, home: Path | None = None, **topology: Any) -> None:
        #: A stack in a home it did not make (``home``) is someone else's to take down.
        self._owned = home is None
        self.home = home or Path(tempfile.mkdtemp(prefix="tenantq-topology-"))
        self.stack = DevStack(self.home)
        self.topology = topology
        self.timings: dict[str, float] = {}

    def up(self, timeout: float = 240.0, **changes: Any) -> float:
        """Start (or restart what is missing); the seconds it took."""
        self._link_jars(changes.get("kafka_version") or self.topology.get("kafka_version"))
        started = time.monotonic()
        self.timings = self.stack.up(timeout=timeout, **{**self.topology, **changes})
        return time.monotonic() - started

    def down(self) -> None:
        if not self._owned:
            return
        # A closed producer's client lingers in a reference cycle until the collector runs,
        # retrying the stopped brokers and writing a line to stderr every 50 ms meanwhile.
        gc.collect()
        try:
            self.stack.down()
        finally:
            shutil.rmtree(self.home, ignore_errors=True)

    def _link_jars(self, version: str | None) -> None:
        link_jars(self.home, version)

    # -- what the stack says --------------------------------------------------------------

    @property
    def state(self) -> dict[str, Any]:
        return self.stack.read_state()

    def cli(self, *arguments: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``tenantq ARGUMENTS`` against this home only (no other ``TENANTQ_*``)."""
        environment = {k: v for k, v in os.environ.items() if not k.startswith("TENANTQ_")}
        environment["TENANTQ_DEV_HOME"] = str(self.home)
        completed = subprocess.run(
            [TENANTQ, *arguments], env=environment, capture_output=True, text=True, timeout=300
        )
        if check:
            assert completed.returncode == 0, completed.stdout + completed.stderr
        return completed

    def processes(self) -> list[dict[str, Any]]:
        """``tenantq dev status --json``, as a fault script reads it."""
        completed = self.cli("dev", "status", "--json", check=False)
        processes: list[dict[str, Any]] = json.loads(completed.stdout)
        return processes

    def process(self, server: str, node: str) -> dict[str, Any]:
        return next(p for p in self.processes() if p["server"] == server and p["node"] == node)

    @contextlib.contextmanager
    def settings(self, prefix: str, **fields: Any) -> Iterator[tenantq.Settings]:
        """Settings on this stack: a fresh migrated database, a topic prefix of its own, the
        stack's client security (a secure stack's ``kafka_config``)."""
        state = self.state
        with migrated_database(state["database_url"], f"{prefix}_") as url:
            yield tenantq.Settings(
                kafka_bootstrap_servers=state["kafka_bootstrap_servers"],
                kafka_config=state.get("kafka_config", {}),
                database_url=url,
                topic_prefix=f"{prefix}{uuid.uuid4().hex[:10]}",
                queues={"default": QueueSettings(partitions=3, retry_delays_seconds=(1.0, 3.0))},
                metrics_port=0,
                dev_home=self.home,
                **fields,
            )

    # -- faults -----------------------------------------------------------------------------

    def kill(self, pid: int) -> None:
        """SIGKILL a process of this stack (refused for one of the shared stack's)."""
        if pid in shared_pids():
            raise RuntimeError(f"pid {pid} belongs to the shared dev stack; refusing to kill it")
        os.kill(pid, signal.SIGKILL)
        assert wait_until(lambda: not pid_alive(pid), timeout=15, interval=0.05)


def link_jars(home: Path, version: str | None) -> None:
    """Link ``home``'s jar cache of broker ``version`` (the default when None) to the shared
    home's, or to one resolved once in the system's temporary directory."""
    version = version or DEFAULT_KAFKA_VERSION
    own = kafka.jar_cache(home, version)
    if own.exists():
        return
    source = kafka.jar_cache(shared_home(), version)
    if not (source / ".resolved").exists():
        source = kafka.jar_cache(JAR_CACHE, version)
        kafka.resolve_jars(source, version, JAR_CACHE / "mvn.log")
    own.parent.mkdir(parents=True, exist_ok=True)
    own.symlink_to(source, target_is_directory=True)


def node_url(stack: DevStack, role: str, database: str = "postgres") -> str:
    """The URL of the PostgreSQL node of ``stack`` that is ``role`` (``primary`` or
    ``standby``) now, alone: no two-host failover."""
    state = stack.read_state()
    node = next(n for n in postgres_nodes(state) if n.role == role)
    return stack.postgres.node_url(node, None, database)


def cut_replication(stack: DevStack) -> None:
    """The standby of ``stack`` stops receiving WAL, as if the network between it and the
    primary had gone: its ``primary_conninfo`` is emptied and reloaded, so its WAL receiver
    ends (what the primary writes from now on is lost in a failover)."""
    import psycopg

    with psycopg.connect(node_url(stack, STANDBY), autocommit=True) as standby:
        standby.execute("ALTER SYSTEM SET primary_conninfo = ''")
        standby.execute("SELECT pg_reload_conf()")

        def receiving() -> bool:
            row = standby.execute("SELECT count(*) FROM pg_stat_wal_receiver").fetchone()
            return bool(row and row[0])

        if not wait_until(lambda: not receiving(), timeout=30, interval=0.05):
            raise RuntimeError("the standby's WAL receiver did not stop")


def fail_over_after_cut(stack: DevStack) -> float:
    """``tenantq dev failover --immediate`` (the primary stopped as a crash, the standby
    promoted), then the new primary forgets the cut (a standby cloned from it streams
    again); the seconds until the new primary took writes."""
    import psycopg

    seconds = stack.failover(immediate=True)
    with psycopg.connect(node_url(stack, PRIMARY), autocommit=True) as primary:
        primary.execute("ALTER SYSTEM RESET primary_conninfo")
        primary.execute("SELECT pg_reload_conf()")
    return seconds


@contextlib.contextmanager
def topology_stack(**topology: Any) -> Iterator[TopologyStack]:
    """A started ``TopologyStack``, down and removed on exit."""
    stack = TopologyStack(**topology)
    try:
        stack.up()
        yield stack
    finally:
        stack.down()


def run_jobs(settings: tenantq.Settings, count: int, *, timeout: float = 120.0) -> dict[str, int]:
    """Enqueue ``count`` jobs over a few tenants on ``settings`` (topics ensured), run them
    with a worker in this process until every one succeeded; how often each job ran."""
    import psycopg
    from support import all_in, counting_app, running_worker, wait_for

    from tenantq.store.engine import psycopg_url
    from tenantq.topic_admin import ensure_topics

    ensure_topics(settings)
    app, ran = counting_app(settings, "noop")
    with tenantq.Producer(settings, app) as producer:
        futures = [
            producer.enqueue("noop", tenant=f"tenant-{i % 5}", payload={"i": i})
            for i in range(count)
        ]
        job_ids = [future.result(timeout).job_id for future in futures]
    with (
        psycopg.connect(psycopg_url(settings.require_database_url()), autocommit=True) as db,
        running_worker(app, settings, concurrency=4),
    ):
        wait_for(lambda: all_in(db, job_ids, {"succeeded"}), timeout=timeout, what="all ran")
    assert set(ran) == set(job_ids)
    return {str(job_id): ran[job_id] for job_id in job_ids}
