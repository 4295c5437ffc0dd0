"""A private Kafka broker + PostgreSQL for scenarios that kill or stop servers.

The shared dev stack (``~/.cache/tenantq``) serves every engineer's tests at once, so nothing
here may touch it: a private stack is a ``DevStack`` rooted in a directory of its own (it
picks free ports when the defaults are taken), its servers are killed by the pids of *its*
state file, and it is torn down with ``down()`` whatever happens. Only the Kafka jar cache is
borrowed from the shared home (read-only, through a symlink), so a private broker starts in
seconds instead of resolving its jars with Maven again.

Used by the fault regression tests (a module-scoped fixture, ``private_stack`` marker) and by
``loadtest/faults.py``.
"""

from __future__ import annotations

import gc
import json
import os
import random
import shutil
import signal
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from tenantq.devstack import kafka, postgres
from tenantq.devstack.processes import ephemeral_port_range, pid_alive, port_free, wait_until
from tenantq.devstack.stack import DevStack
from tenantq.devstack.state import kafka_pids, postgres_pids
from tenantq.devstack.topology import Topology
from tenantq.settings import default_dev_home

#: Where the recording handlers write each execution (one row per handler run that got far
#: enough to record; a crash-safe ledger, since it lives in the database, not in a process).
EXECUTIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS test_executions (job_id uuid, attempt int, pid int, note text, "
    "at timestamptz DEFAULT now())"
)


def shared_home() -> Path:
    """The shared dev stack's home (the same rule as the integration conftest)."""
    value = os.environ.get("TENANTQ_DEV_HOME")
    return Path(value) if value else default_dev_home()


def shared_pids() -> set[int]:
    """Pids of the shared dev stack, which this module must never signal."""
    stack = DevStack(shared_home())
    state = stack.read_state()
    pids: set[int | None] = {state.get("kafka_pid"), state.get("postgres_pid")}
    pids.update(kafka_pids(state).values())
    pids.update(postgres_pids(state).values())
    pids.add(postgres.read_postmaster_pid(stack.postgres_paths))
    return {int(pid) for pid in pids if pid}


class PrivateStack:
    """A ``DevStack`` of this process's own, under ``home`` (a fresh temporary directory when
    not given). ``up()`` starts it; ``kill_*`` / ``restart_*`` inject faults; ``down()`` stops
    it and removes the directory if this object created it."""

    def __init__(self, home: Path | None = None) -> None:
        self._owns_home = home is None
        self.home = home or Path(tempfile.mkdtemp(prefix="tenantq-private-stack-"))
        if self.home.resolve() == shared_home().resolve():
            raise ValueError("a private stack must not live in the shared dev stack's home")
        self.stack = DevStack(self.home)

    # -- life cycle ------------------------------------------------------------------------

    def up(self, timeout: float = 120.0) -> dict[str, float]:
        self._borrow_jar_cache()
        self._choose_ports()
        return self.stack.up(timeout=timeout)

    def _choose_ports(self) -> None:
        """Ports below the kernel's ephemeral range, written to the state file for ``up`` to
        use. A port the kernel could hand out as a client's local port is a trap for a server
        that is killed and started again: a client retrying ``127.0.0.1:<port>`` while
        nothing listens can be given that very port and connect to itself, and the dev stack,
        finding the port taken, would move the broker to new ports (and new storage)."""
        state = self.stack.read_state()
        if state.get("kafka_ports") and state.get("postgres_port"):
            return
        low, _ = ephemeral_port_range()
        rng = random.Random()
        chosen: list[int] = []
        while len(chosen) < 3:
            port = rng.randrange(20_000, min(low, 32_768))
            if port not in chosen and port_free(port):
                chosen.append(port)
        state.update(kafka_ports=chosen[:2], postgres_port=chosen[2])
        self.home.mkdir(parents=True, exist_ok=True)
        self.stack.state_path.write_text(json.dumps(state, indent=2, sort_keys=True))

    def down(self) -> None:
        """Stop both servers (SIGKILL stragglers) and remove the home we created."""
        # A closed tenantq.Producer stays in a reference cycle (its client's error_cb) until
        # the collector runs, and its librdkafka client would retry the stopped broker and
        # write a line to stderr every 50 ms for the rest of the session.
        gc.collect()
        try:
            self.stack.down()
        except Exception:
            for pid in (self.kafka_pid, self.postgres_pid):
                self._kill(pid)
        finally:
            if self._owns_home:
                shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> PrivateStack:
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.down()

    def _borrow_jar_cache(self) -> None:
        """Point this home's jar cache at the shared one when that is complete."""
        version = (self.stack.topology() or Topology()).kafka_version
        shared_libs = kafka.jar_cache(shared_home(), version)
        own_libs = kafka.jar_cache(self.home, version)
        if own_libs.exists() or not any(shared_libs.glob("kafka_2.13-*.jar")):
            return
        own_libs.parent.mkdir(parents=True, exist_ok=True)
        own_libs.symlink_to(shared_libs, target_is_directory=True)

    # -- endpoints -------------------------------------------------------------------------

    @property
    def state(self) -> dict[str, Any]:
        return self.stack.read_state()

    @property
    def bootstrap_servers(self) -> str:
        return str(self.state["kafka_bootstrap_servers"])

    @property
    def server_url(self) -> str:
        """The URL of the stack's own ``tenantq`` database."""
        return str(self.state["database_url"])

    def database_url(self, name: str) -> str:
        return make_url(self.server_url).set(database=name).render_as_string(hide_password=False)

    def create_database(self, prefix: str = "faults") -> str:
        """A fresh, migrated database with the ``test_executions`` ledger; returns its URL."""
        import tenantq
        from tenantq.store import migrate

        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        admin_url = self.database_url("postgres")
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        url = self.database_url(name)
        migrate.upgrade_database(tenantq.Settings(database_url=url))
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(EXECUTIONS_TABLE)
        return url

    def settings(self, prefix: str, **fields: Any) -> Any:
        """``tenantq.Settings`` for a test on this stack: a fresh database (``create_database``)
        and topic prefix of its own, metrics not served; ``fields`` set the rest."""
        import tenantq

        return tenantq.Settings(
            kafka_bootstrap_servers=self.bootstrap_servers,
            database_url=self.create_database(prefix),
            topic_prefix=f"{prefix}{uuid.uuid4().hex[:12]}",
            metrics_port=0,
            **fields,
        )

    # -- faults ----------------------------------------------------------------------------

    @property
    def kafka_pid(self) -> int | None:
        pid = self.state.get("kafka_pid")
        return int(pid) if pid else None

    @property
    def postgres_pid(self) -> int | None:
        pid = postgres.read_postmaster_pid(self.stack.postgres_paths) or self.state.get(
            "postgres_pid"
        )
        return int(pid) if pid else None

    def kill_postgres(self) -> float:
        """SIGKILL the postmaster (its backends notice and exit); returns the time (epoch)."""
        return self._kill(self.postgres_pid)

    def kill_kafka(self) -> float:
        """SIGKILL the broker; returns the time (epoch)."""
        return self._kill(self.kafka_pid)

    def restart(self, timeout: float = 180.0) -> float:
        """Start whatever is down again (``DevStack.up``, same ports and data); returns the
        seconds it took. A postmaster killed with -9 can leave backends that still hold its
        shared memory for a moment, so a refused start is tried again until ``timeout``."""
        started = time.monotonic()
        state = self.state
        ports: list[int] = []
        if not pid_alive(self.kafka_pid):
            ports += state.get("kafka_ports", [])
        if not pid_alive(self.postgres_pid):
            ports.append(state["postgres_port"])
        # Same ports or nothing: ``up`` would move a server whose port is busy, and the
        # clients (and the broker's storage) know only the old ones.
        if not wait_until(lambda: all(port_free(p) for p in ports), timeout=60, interval=0.1):
            raise RuntimeError(f"the private stack's ports {ports} did not come free")
        while True:
            try:
                self.stack.up(timeout=60)
                return time.monotonic() - started
            except Exception:
                if time.monotonic() - started > timeout:
                    raise
                time.sleep(0.25)

    def _kill(self, pid: int | None) -> float:
        now = time.time()
        if not pid or not pid_alive(pid):
            return now
        if pid in shared_pids():
            raise RuntimeError(f"pid {pid} belongs to the shared dev stack; refusing to kill it")
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return now
        wait_until(lambda: not pid_alive(pid), timeout=10, interval=0.02)
        return now
