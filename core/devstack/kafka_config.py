"""The ``server.properties`` of each dev broker, as a pure function of the topology.

Every node is a combined KRaft node (``process.roles=broker,controller``) with static voters,
bound to 127.0.0.1. What differs:

| topology | listeners | internal topics and defaults |
| --- | --- | --- |
| 1 broker | PLAINTEXT, CONTROLLER | replication 1, min ISR 1 |
| 3 (or 5) brokers | PLAINTEXT, CONTROLLER | replication 3, min ISR 2 |
| ``secure`` | SASL_SSL (SCRAM-SHA-512, PEM keystore), CONTROLLER | as above |
| Kafka 3.9 | as above | no share-group keys; the classic group protocol only |

The controller listener stays PLAINTEXT on the loopback address even on a secure stack:
SCRAM credentials live in the metadata log the controllers serve, so they cannot guard it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tenantq.devstack.topology import Topology

HOST = "127.0.0.1"
#: The SCRAM user the brokers talk to each other as, and the one clients are given.
BROKER_USER = "broker"
CLIENT_USER = "tenantq"
SCRAM_MECHANISM = "SCRAM-SHA-512"


@dataclass(frozen=True)
class KafkaNode:
    """One broker of the cluster: its KRaft node id and its two ports."""

    node_id: int
    client_port: int
    controller_port: int

    @property
    def endpoint(self) -> str:
        return f"{HOST}:{self.client_port}"

    @property
    def controller_endpoint(self) -> str:
        return f"{HOST}:{self.controller_port}"


@dataclass(frozen=True)
class BrokerTls:
    """What a secure broker needs: its key and certificate chain (one PEM file), the CA that
    signed it, and the password of the SCRAM user the brokers use between themselves."""

    keystore_pem: Path
    ca_pem: Path
    broker_password: str


def bootstrap_servers(nodes: Sequence[KafkaNode]) -> str:
    return ",".join(node.endpoint for node in nodes)


def broker_properties(
    node: KafkaNode,
    cluster: Sequence[KafkaNode],
    topology: Topology,
    data_dir: Path,
    tls: BrokerTls | None = None,
) -> dict[str, str]:
    """The properties of ``node`` in ``cluster`` (every node, ``node`` included)."""
    replication = str(topology.replication_factor)
    min_insync = str(topology.min_insync_replicas)
    client_listener = "SASL_SSL" if tls is not None else "PLAINTEXT"
    properties = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": ",".join(
            f"{voter.node_id}@{voter.controller_endpoint}" for voter in cluster
        ),
        "listeners": (
            f"{client_listener}://{node.endpoint},CONTROLLER://{node.controller_endpoint}"
        ),
        "advertised.listeners": f"{client_listener}://{node.endpoint}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": client_listener,
        "listener.security.protocol.map": f"{client_listener}:{client_listener},"
        "CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir),
        "num.partitions": "1",
        # Internal topics and topics created without a replication factor get one replica
        # per broker up to three; with three, a write waits for two of them.
        "default.replication.factor": replication,
        "min.insync.replicas": min_insync,
        "offsets.topic.replication.factor": replication,
        "offsets.topic.num.partitions": "12",
        "transaction.state.log.replication.factor": replication,
        "transaction.state.log.min.isr": min_insync,
        # Tests create many groups; the default 3 s delay per new group adds up.
        "group.initial.rebalance.delay.ms": "0",
        # A misspelt topic is an error, not a new topic.
        "auto.create.topics.enable": "false",
        "num.network.threads": "2",
        "num.io.threads": "4",
        # A removed topic's files go within a second, not a minute later (the default): the
        # cleanup after one test or load-test run must not land in the middle of the next.
        "file.delete.delay.ms": "1000",
        "log.segment.bytes": str(64 * 1024 * 1024),
        "log.retention.hours": "24",
    }
    if topology.kafka_major >= 4:
        properties.update(
            {
                "share.coordinator.state.topic.replication.factor": replication,
                "share.coordinator.state.topic.min.isr": min_insync,
                # The consumer group protocol (KIP-848): a member that dies is noticed after
                # 6 s (default 45 s) and assignments converge within a second, as a dev stack
                # should. A member that joins gets partitions another member gives up only in
                # a heartbeat's answer: at 500 ms (the floor set here), the members a
                # `tenantq worker --processes 2` starts together share the partitions half a
                # second after the first one has them all (a second at 1,000 ms, 5 s at a
                # broker's defaults).
                "group.consumer.min.session.timeout.ms": "6000",
                "group.consumer.session.timeout.ms": "6000",
                "group.consumer.min.heartbeat.interval.ms": "500",
                "group.consumer.heartbeat.interval.ms": "500",
                # Share groups (KIP-932; on by default from Kafka 4.2: the share.version feature
                # is finalized at format time, nothing to enable). The same 6 s to notice a
                # dead member (the broker's floor is 45 s), and a floor of 1 s for the record
                # lock a group may set (share.record.lock.duration.ms), so that a test sees a
                # lock expire in seconds; the default lock stays the broker's 30 s.
                "group.share.min.session.timeout.ms": "6000",
                "group.share.session.timeout.ms": "6000",
                "group.share.min.heartbeat.interval.ms": "500",
                "group.share.heartbeat.interval.ms": "500",
                "group.share.min.record.lock.duration.ms": "1000",
            }
        )
    if len(cluster) > 1:
        # A node killed with -9 keeps its leaderships, its groups, and its place in every ISR
        # (so acks=all writes to every partition wait) until the active controller fences it,
        # broker.session.timeout.ms after its last heartbeat: 9 s by default. The fault
        # suite's leader kill stalled partitions 15 s and more then; at 5 s, 9-13 s on a
        # loaded two-core machine. (A shorter controller.quorum.fetch.timeout.ms, to replace
        # a dead controller sooner, made the loaded controllers elect one another for nothing.)
        properties.update(
            {"broker.heartbeat.interval.ms": "1000", "broker.session.timeout.ms": "5000"}
        )
    if tls is not None:
        properties.update(_sasl_ssl_properties(tls))
    return properties


def _sasl_ssl_properties(tls: BrokerTls) -> dict[str, str]:
    login = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{BROKER_USER}" password="{tls.broker_password}";'
    )
    return {
        "sasl.enabled.mechanisms": SCRAM_MECHANISM,
        "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
        # The broker logs this key as [hidden] (a PASSWORD-typed config).
        f"listener.name.sasl_ssl.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": login,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tls.keystore_pem),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls.ca_pem),
        "ssl.client.auth": "none",
        "ssl.endpoint.identification.algorithm": "https",
    }


def render_properties(properties: dict[str, str]) -> str:
    """``key=value`` lines; ``\\`` escaped, as ``java.util.Properties`` reads them."""
    return "".join(
        f"{key}={value.replace(chr(92), chr(92) * 2)}\n" for key, value in properties.items()
    )


def client_config(ca_pem: Path, client_password: str) -> dict[str, str]:
    """The librdkafka settings a client of a secure stack needs (``TENANTQ_KAFKA_CONFIG``)."""
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": SCRAM_MECHANISM,
        "sasl.username": CLIENT_USER,
        "sasl.password": client_password,
        "ssl.ca.location": str(ca_pem),
    }


def scram_arguments(broker_password: str, client_password: str) -> list[str]:
    """``kafka-storage format`` arguments that create both SCRAM users in the metadata log, so
    brokers and clients can authenticate from the first start."""
    arguments = []
    for user, password in ((BROKER_USER, broker_password), (CLIENT_USER, client_password)):
        arguments += ["--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={password}]"]
    return arguments
