"""The dev stack's Kafka brokers: formatted, started, restarted one by one, stopped.

``up`` is idempotent: a node whose process answers is left alone, a node that is missing is
started again on its recorded ports and storage (the voters of a cluster are in its storage,
so a node whose port another process took is an error, not a move). A cluster of another
shape (size, version, security) is formatted anew, and only while none of its nodes runs.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenantq.devstack import kafka
from tenantq.devstack.kafka_config import (
    BrokerTls,
    KafkaNode,
    broker_properties,
    client_config,
    scram_arguments,
)
from tenantq.devstack.processes import pick_port, pid_alive, port_free, stop_pid
from tenantq.devstack.secrets import Credentials
from tenantq.devstack.state import kafka_nodes, kafka_pids, record_kafka
from tenantq.devstack.tls import TlsFiles
from tenantq.devstack.topology import Topology
from tenantq.errors import DevStackError

DEFAULT_CLIENT_PORT = 19092
DEFAULT_CONTROLLER_PORT = 19093
#: JVM options of each broker: one broker gets more heap than each of a cluster's. The lone
#: broker (the dev stack the tests, the demo and the load tests use) runs ZGC: under the
#: hot-partition flood G1's young collections stopped it for 12-73 ms on a two-core machine, and
#: the jobs sent during those pauses were the cold tenants' worst waits; ZGC stops the broker for
#: well under a millisecond. A cluster's brokers keep G1: three JVMs' concurrent collectors on
#: a small machine were not measured.
SINGLE_BROKER_JVM = ("-Xms768m", "-Xmx768m", "-XX:+UseZGC")
CLUSTER_BROKER_JVM = ("-Xms512m", "-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20")


@dataclass(frozen=True)
class KafkaSecurity:
    """What a secure cluster's nodes and clients are given."""

    tls: TlsFiles
    credentials: Credentials

    def broker_tls(self) -> BrokerTls:
        return BrokerTls(
            keystore_pem=self.tls.server_keystore,
            ca_pem=self.tls.ca_cert,
            broker_password=self.credentials.kafka_broker_password,
        )

    def client_config(self) -> dict[str, str]:
        return client_config(self.tls.ca_cert, self.credentials.kafka_client_password)


class KafkaCluster:
    """The brokers of the dev home ``home``, as its state file records them."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def paths(self, node_id: int) -> kafka.KafkaNodePaths:
        return kafka.KafkaNodePaths.under(self.home, node_id)

    def up(
        self,
        state: dict[str, Any],
        topology: Topology,
        recorded: Topology | None,
        security: KafkaSecurity | None,
        *,
        timeout: float,
        save: Callable[[], None],
    ) -> None:
        """Start every node of ``topology`` that is not answering; ``save`` writes ``state``
        once the new pids are in it (before waiting, so ``down`` finds a node that hangs)."""
        client = security.client_config() if security is not None else None
        nodes = kafka_nodes(state)
        pids = kafka_pids(state)
        upgrade = (
            recorded is not None
            and recorded.upgrades_in_place(topology)
            and len(nodes) == topology.brokers
        )
        reshaped = recorded is None or recorded.kafka_differs(topology)
        if upgrade:
            # Every node restarts on the new jars over the storage it has.
            for running_pid in pids.values():
                if pid_alive(running_pid):
                    stop_pid(running_pid)
            pids = {}
        elif reshaped or len(nodes) != topology.brokers:
            running = [node_id for node_id, pid in pids.items() if pid_alive(pid)]
            if running and recorded is not None:
                raise DevStackError(
                    f"the dev stack runs {recorded.describe_kafka()}; `tenantq dev down` "
                    f"before changing to {topology.describe_kafka()}"
                )
            nodes = self._new_nodes(topology.brokers, nodes)
            pids = {}
            self._wipe_storage()
            state["kafka_cluster_id"] = kafka.new_cluster_id()
        cluster_id = str(state.setdefault("kafka_cluster_id", kafka.new_cluster_id()))
        missing = [
            node
            for node in nodes
            if not (
                pid_alive(pids.get(node.node_id))
                and kafka.broker_answers(node.endpoint, client, node_id=node.node_id)
            )
        ]
        if not missing:
            record_kafka(state, nodes, pids)
            return
        for node in missing:
            pid = pids.pop(node.node_id, None)
            if pid_alive(pid):
                stop_pid(int(pid or 0))
        if len(nodes) == 1 and not all(map(port_free, _ports(nodes[0]))):
            # A lone broker whose port another process took moves to free ports, on new
            # storage (its voter address is in the old one), as the single-broker stack did.
            self._wipe_storage()
            nodes = missing = self._new_nodes(1, [])
        java = kafka.find_java()
        libs = kafka.jar_cache(self.home, topology.kafka_version)
        kafka.resolve_jars(libs, topology.kafka_version, self.home / "mvn.log")
        jvm_options = SINGLE_BROKER_JVM if len(nodes) == 1 else CLUSTER_BROKER_JVM
        tls = security.broker_tls() if security is not None else None
        scram: list[str] = []
        secrets: tuple[str, ...] = ()
        if security is not None:
            credentials = security.credentials
            scram = scram_arguments(
                credentials.kafka_broker_password, credentials.kafka_client_password
            )
            secrets = credentials.all
        started: dict[int, tuple[str, int, kafka.KafkaNodePaths]] = {}
        for node in missing:
            self._check_ports_free(node)
            paths = self.paths(node.node_id)
            kafka.write_config(paths, broker_properties(node, nodes, topology, paths.data, tls))
            kafka.format_storage(java, libs, paths, cluster_id, scram, secrets)
            pids[node.node_id] = kafka.start_broker(java, libs, paths, jvm_options)
            started[node.node_id] = (node.endpoint, pids[node.node_id], paths)
        record_kafka(state, nodes, pids)
        save()
        kafka.wait_for_brokers(started, client, timeout)

    def _new_nodes(self, count: int, previous: list[KafkaNode]) -> list[KafkaNode]:
        """Ports for ``count`` nodes: the ones recorded where free, else the defaults (node
        ``i`` at 19092 + 2(i-1) and the port after it), else free ones below the ephemeral
        range."""
        nodes: list[KafkaNode] = []
        taken: set[int] = set()
        for index in range(count):
            node_id = index + 1
            earlier = next((n for n in previous if n.node_id == node_id), None)
            client = pick_port(
                earlier.client_port if earlier else DEFAULT_CLIENT_PORT + 2 * index, taken=taken
            )
            taken.add(client)
            controller = pick_port(
                earlier.controller_port if earlier else DEFAULT_CONTROLLER_PORT + 2 * index,
                taken=taken,
            )
            taken.add(controller)
            nodes.append(KafkaNode(node_id, client, controller))
        return nodes

    def _check_ports_free(self, node: KafkaNode) -> None:
        for port in _ports(node):
            if not port_free(port):
                raise DevStackError(
                    f"port {port} of Kafka node {node.node_id} is taken by another process; "
                    "the cluster's voters are formatted with it (`tenantq dev down` and "
                    "start again to move the cluster)"
                )

    def _wipe_storage(self) -> None:
        root = self.home / "kafka"
        if root.exists():
            shutil.rmtree(root)

    def stop(self, state: dict[str, Any], timeout: float = 30.0) -> list[int]:
        """SIGTERM every node at once (a node waiting for a quorum its peers already left
        would otherwise wait alone), then SIGKILL what is left; the node ids stopped."""
        import os
        import signal

        from tenantq.devstack.processes import wait_until

        alive = {node_id: pid for node_id, pid in kafka_pids(state).items() if pid_alive(pid)}
        for pid in alive.values():
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        wait_until(
            lambda: not any(pid_alive(pid) for pid in alive.values()), timeout=timeout, interval=0.2
        )
        for node_id, pid in alive.items():
            if not stop_pid(pid, timeout=1):
                raise DevStackError(f"Kafka node {node_id} (pid {pid}) did not stop")
        return sorted(alive)


def _ports(node: KafkaNode) -> tuple[int, int]:
    return node.client_port, node.controller_port
