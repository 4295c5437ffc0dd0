"""The dev stack's PostgreSQL: a primary and, with ``--standby``, an asynchronous streaming
standby cloned from it with ``pg_basebackup``; ``failover`` stops the primary and promotes the
standby.

| node state | what ``up`` does |
| --- | --- |
| running and answering | nothing |
| primary, stopped | starts it (``initdb`` first when it has no data) |
| standby, stopped, its data a standby's | starts it; it catches up from the primary |
| standby to be cloned (new, or the old primary after a failover) | clones it, starts it |

Clients get both hosts in one URL with ``target_session_attrs=read-write``, in a fixed order,
so after a failover they land on the new primary without a new URL.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tenantq.devstack import postgres
from tenantq.devstack.processes import pick_port, pid_alive, stop_pid, wait_until
from tenantq.devstack.secrets import redact
from tenantq.devstack.state import (
    PRIMARY,
    STANDBY,
    PostgresNode,
    postgres_nodes,
    postgres_pids,
    record_postgres,
)
from tenantq.devstack.topology import Topology
from tenantq.errors import DevStackError

DEFAULT_PORT = 15432


@dataclass(frozen=True)
class PostgresSecurity:
    """A secure server's superuser password and the certificate it serves."""

    password: str
    server_tls: postgres.ServerTls
    #: The CA certificate clients check the server against.
    ca_cert: Path


@dataclass
class _Cluster:
    """What one ``up`` works on: the nodes and the pids of those running, as starting them
    changes both, and the state file they are recorded in."""

    nodes: list[PostgresNode]
    pids: dict[str, int]
    state: dict[str, Any]
    save: Callable[[], None]

    def record(self) -> None:
        """Write the nodes and pids to the state file now, so that a server already started
        is found (and stopped by ``dev down``) even when a later step fails."""
        record_postgres(self.state, self.nodes, self.pids)
        self.save()


class PostgresServers:
    """The PostgreSQL servers of the dev home ``home``, as its state file records them."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def paths(self, node: PostgresNode | str, state: dict[str, Any]) -> postgres.PostgresPaths:
        """The files of ``node`` and the binaries the home's servers run on."""
        name = node if isinstance(node, str) else node.name
        bin_dir = state.get("postgres_bin_dir")
        return postgres.PostgresPaths.under(self.home, name, Path(bin_dir) if bin_dir else None)

    # -- URLs ----------------------------------------------------------------------------------

    def client_url(
        self, nodes: list[PostgresNode], security: PostgresSecurity | None, database: str
    ) -> str:
        """The URL clients use: every node, in recorded order."""
        return postgres.url_for(
            [node.port for node in nodes],
            database,
            password=security.password if security else None,
            ca_cert=security.ca_cert if security else None,
        )

    def node_url(
        self, node: PostgresNode, security: PostgresSecurity | None, database: str = "postgres"
    ) -> str:
        """The URL of ``node`` alone."""
        return self.client_url([node], security, database)

    # -- up ------------------------------------------------------------------------------------

    def up(
        self,
        state: dict[str, Any],
        topology: Topology,
        recorded: Topology | None,
        security: PostgresSecurity | None,
        *,
        save: Callable[[], None],
    ) -> None:
        nodes = postgres_nodes(state)
        pids = {name: pid for name, pid in self._live_pids(state, nodes).items()}
        if recorded is not None and recorded.secure != topology.secure and nodes:
            if pids:
                raise DevStackError(
                    "PostgreSQL runs "
                    f"{'with' if recorded.secure else 'without'} TLS and passwords; "
                    "`tenantq dev down` before changing that"
                )
            self._wipe()
            nodes = [PostgresNode("a", nodes[0].port, PRIMARY)]
            state.pop("postgres_bin_dir", None)
        if not nodes:
            nodes = [PostgresNode("a", pick_port(DEFAULT_PORT), PRIMARY)]
        if "postgres_bin_dir" not in state:
            # A home made before binaries were recorded ran the wheel's.
            made = (self.paths(nodes[0], state).data / "PG_VERSION").exists()
            chosen = postgres.embedded_bin_dir() if made else None
            state["postgres_bin_dir"] = str(chosen or postgres.choose_bin_dir(topology.secure))
        elif not (Path(state["postgres_bin_dir"]) / "pg_ctl").exists():
            # The install that made the home is gone (its virtualenv removed or remade).
            data = self.paths(nodes[0], state).data
            state["postgres_bin_dir"] = str(
                postgres.replacement_bin_dir(data, state["postgres_bin_dir"], topology.secure)
            )
        nodes = self._shape(nodes, pids, topology.standby, state)
        cluster = _Cluster(nodes, pids, state, save)
        self._up_primary(next(node for node in nodes if node.role == PRIMARY), cluster, security)
        primary = next(node for node in cluster.nodes if node.role == PRIMARY)
        for standby in [node for node in cluster.nodes if node.role == STANDBY]:
            self._up_standby(standby, primary, cluster, security)
        record_postgres(state, cluster.nodes, cluster.pids)
        state["database_url"] = self.client_url(cluster.nodes, security, postgres.DATABASE)

    def _live_pids(self, state: dict[str, Any], nodes: list[PostgresNode]) -> dict[str, int]:
        """The pid of each node whose postmaster runs (its ``postmaster.pid`` first: the
        server may have been started by hand)."""
        recorded = postgres_pids(state)
        live = {}
        for node in nodes:
            pid = postgres.read_postmaster_pid(self.paths(node, state)) or recorded.get(node.name)
            if pid_alive(pid):
                live[node.name] = int(pid or 0)
        return live

    def _shape(
        self,
        nodes: list[PostgresNode],
        pids: dict[str, int],
        standby: bool,
        state: dict[str, Any],
    ) -> list[PostgresNode]:
        """Add a standby (to be cloned) or remove the one there is."""
        standbys = [node for node in nodes if node.role == STANDBY]
        if standby and not standbys:
            taken = {node.port for node in nodes}
            name = "b" if all(node.name != "b" for node in nodes) else "a"
            port = pick_port(DEFAULT_PORT + 1, taken=taken)
            return [*nodes, PostgresNode(name, port, STANDBY, needs_clone=True)]
        if not standby and standbys:
            for node in standbys:
                self._stop_node(node, pids, state)
                shutil.rmtree(self.paths(node, state).data, ignore_errors=True)
            return [node for node in nodes if node.role != STANDBY]
        return nodes

    def _up_primary(
        self, primary: PostgresNode, cluster: _Cluster, security: PostgresSecurity | None
    ) -> None:
        paths = self.paths(primary, cluster.state)
        url = self.node_url(primary, security)
        if primary.name in cluster.pids and postgres.server_healthy(url):
            postgres.ensure_database(url)
            return
        if primary.name in cluster.pids:
            self._stop_node(primary, cluster.pids, cluster.state)
        postgres.init_cluster(paths, security.password if security else None)
        port = pick_port(primary.port)
        if port != primary.port:
            cluster.nodes = [
                replace(node, port=port) if node == primary else node for node in cluster.nodes
            ]
            primary = replace(primary, port=port)
        cluster.pids[primary.name] = self._start(paths, primary.port, security)
        cluster.record()
        postgres.ensure_database(self.node_url(primary, security))

    def _up_standby(
        self,
        standby: PostgresNode,
        primary: PostgresNode,
        cluster: _Cluster,
        security: PostgresSecurity | None,
    ) -> None:
        paths = self.paths(standby, cluster.state)
        if standby.name in cluster.pids and postgres.server_healthy(
            self.node_url(standby, security)
        ):
            return
        self._stop_node(standby, cluster.pids, cluster.state)
        port = pick_port(standby.port, taken={primary.port})
        if standby.needs_clone or not postgres.is_standby(paths):
            conninfo = f"host=127.0.0.1 port={primary.port} user={postgres.SUPERUSER}"
            if security is not None:
                conninfo += f" sslmode=verify-full sslrootcert={security.server_tls.ca_cert}"
            postgres.clone_standby(
                paths,
                conninfo,
                security.password if security else None,
                application_name=f"tenantq-standby-{standby.name}",
            )
        updated = replace(standby, port=port, needs_clone=False)
        cluster.nodes = [updated if node.name == standby.name else node for node in cluster.nodes]
        cluster.pids[standby.name] = self._start(paths, port, security)
        cluster.record()

    def _start(
        self, paths: postgres.PostgresPaths, port: int, security: PostgresSecurity | None
    ) -> int:
        options = postgres.server_options(
            port, paths.socket_dir, security.server_tls if security else None
        )
        try:
            return postgres.start_server(paths, options)
        except DevStackError as error:
            if security is None:
                raise
            raise DevStackError(redact(str(error), [security.password])) from None

    # -- failover and down ---------------------------------------------------------------------

    def failover(
        self, state: dict[str, Any], security: PostgresSecurity | None, *, immediate: bool
    ) -> float:
        """Stop the primary (``immediate``: as a crash, losing what was not streamed yet),
        promote the standby; return the seconds from the stop to a writable new primary."""
        nodes = postgres_nodes(state)
        pids = self._live_pids(state, nodes)
        primary = next((node for node in nodes if node.role == PRIMARY), None)
        standby = next((node for node in nodes if node.role == STANDBY), None)
        if primary is None or standby is None:
            raise DevStackError("no standby to fail over to (`tenantq dev up --standby`)")
        if (
            standby.name not in pids
            or postgres.in_recovery(self.node_url(standby, security)) is not True
        ):
            raise DevStackError(f"the standby ({standby.name}) is not running as a standby")
        started = time.monotonic()
        self._stop_node(primary, pids, state, mode="immediate" if immediate else "fast")
        postgres.promote(self.paths(standby, state))
        standby_url = self.node_url(standby, security)
        if not wait_until(
            lambda: postgres.in_recovery(standby_url) is False, timeout=60, interval=0.05
        ):
            raise DevStackError(f"the promoted server ({standby.name}) did not accept writes")
        seconds = time.monotonic() - started
        nodes = [
            replace(standby, role=PRIMARY),
            replace(primary, role=STANDBY, needs_clone=True),
        ]
        nodes.sort(key=lambda node: node.name)
        record_postgres(state, nodes, pids)
        state["database_url"] = self.client_url(nodes, security, postgres.DATABASE)
        return seconds

    def stop(self, state: dict[str, Any]) -> list[str]:
        """Stop every node, standbys first; the names stopped."""
        nodes = postgres_nodes(state)
        pids = self._live_pids(state, nodes)
        stopped = []
        for node in sorted(nodes, key=lambda node: node.role != STANDBY):
            if node.name in pids:
                self._stop_node(node, pids, state)
                stopped.append(node.name)
        return stopped

    def _stop_node(
        self,
        node: PostgresNode,
        pids: dict[str, int],
        state: dict[str, Any],
        mode: str = "fast",
    ) -> None:
        pid = pids.pop(node.name, None)
        if pid is None:
            return
        postgres.stop_server(self.paths(node, state), mode)
        if pid_alive(pid) and not stop_pid(pid, timeout=30):
            raise DevStackError(f"PostgreSQL {node.name} (pid {pid}) did not stop")

    def _wipe(self) -> None:
        root = self.home / "postgres"
        if root.exists():
            shutil.rmtree(root)
