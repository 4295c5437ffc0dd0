"""The brokers' ``server.properties``: one node, a three-node quorum, a secure listener, and
the keys a 3.9 broker does not know."""

from __future__ import annotations

from pathlib import Path

from tenantq.devstack.kafka_config import (
    BrokerTls,
    KafkaNode,
    bootstrap_servers,
    broker_properties,
    client_config,
    render_properties,
    scram_arguments,
)
from tenantq.devstack.topology import Topology

CLUSTER = [KafkaNode(1, 21001, 21002), KafkaNode(2, 21003, 21004), KafkaNode(3, 21005, 21006)]
DATA = Path("/data")


def test_a_single_node_replicates_nothing() -> None:
    node = CLUSTER[0]
    properties = broker_properties(node, [node], Topology(), DATA)
    assert properties["process.roles"] == "broker,controller"
    assert properties["controller.quorum.voters"] == "1@127.0.0.1:21002"
    assert properties["listeners"] == "PLAINTEXT://127.0.0.1:21001,CONTROLLER://127.0.0.1:21002"
    for key in (
        "default.replication.factor",
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "share.coordinator.state.topic.replication.factor",
    ):
        assert properties[key] == "1", key
    assert properties["min.insync.replicas"] == "1"
    assert properties["transaction.state.log.min.isr"] == "1"


def test_three_nodes_form_one_quorum_with_three_replicas_and_two_in_sync() -> None:
    topology = Topology(brokers=3)
    every = [broker_properties(node, CLUSTER, topology, DATA) for node in CLUSTER]
    voters = {properties["controller.quorum.voters"] for properties in every}
    assert voters == {"1@127.0.0.1:21002,2@127.0.0.1:21004,3@127.0.0.1:21006"}
    assert [properties["node.id"] for properties in every] == ["1", "2", "3"]
    assert every[1]["advertised.listeners"] == "PLAINTEXT://127.0.0.1:21003"
    for properties in every:
        assert properties["default.replication.factor"] == "3"
        assert properties["offsets.topic.replication.factor"] == "3"
        assert properties["min.insync.replicas"] == "2"
        assert properties["transaction.state.log.min.isr"] == "2"
        assert properties["share.coordinator.state.topic.min.isr"] == "2"
    assert bootstrap_servers(CLUSTER) == "127.0.0.1:21001,127.0.0.1:21003,127.0.0.1:21005"


def test_a_secure_node_serves_sasl_ssl_to_clients_and_peers() -> None:
    tls = BrokerTls(Path("/tls/keystore.pem"), Path("/tls/ca.pem"), "s3cret")
    node = CLUSTER[0]
    properties = broker_properties(node, [node], Topology(secure=True), DATA, tls)
    assert properties["listeners"] == "SASL_SSL://127.0.0.1:21001,CONTROLLER://127.0.0.1:21002"
    assert properties["advertised.listeners"] == "SASL_SSL://127.0.0.1:21001"
    assert properties["inter.broker.listener.name"] == "SASL_SSL"
    assert properties["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT"
    assert properties["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert properties["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    login = properties["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"]
    assert 'username="broker" password="s3cret";' in login
    assert properties["ssl.keystore.type"] == "PEM"
    assert properties["ssl.keystore.location"] == "/tls/keystore.pem"
    assert properties["ssl.truststore.location"] == "/tls/ca.pem"
    plain = broker_properties(node, [node], Topology(), DATA)
    assert not any(key.startswith(("sasl.", "ssl.", "listener.name.")) for key in plain)


def test_a_3_9_broker_gets_no_keys_of_kafka_4() -> None:
    node = CLUSTER[0]
    properties = broker_properties(node, [node], Topology(kafka_version="3.9.1"), DATA)
    assert not any(key.startswith(("share.", "group.consumer.")) for key in properties)
    assert properties["controller.quorum.voters"] == "1@127.0.0.1:21002"
    assert not any(key.startswith("group.share.") for key in properties)
    newer = broker_properties(node, [node], Topology(kafka_version="4.4.0"), DATA)
    assert newer["group.consumer.session.timeout.ms"] == "6000"
    assert newer["group.share.session.timeout.ms"] == "6000"
    # A group may ask for a lock of a second (the share-group tests do); the default stays.
    assert newer["group.share.min.record.lock.duration.ms"] == "1000"
    assert "group.share.record.lock.duration.ms" not in newer


def test_properties_are_rendered_as_java_reads_them() -> None:
    text = render_properties({"log.dirs": "C:\\data", "a": "b"})
    assert text == "log.dirs=C:\\\\data\na=b\n"


def test_clients_and_the_format_tool_get_both_scram_users() -> None:
    config = client_config(Path("/tls/ca.pem"), "pw-client")
    assert config == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "tenantq",
        "sasl.password": "pw-client",
        "ssl.ca.location": "/tls/ca.pem",
    }
    assert scram_arguments("pw-broker", "pw-client") == [
        "--add-scram",
        "SCRAM-SHA-512=[name=broker,password=pw-broker]",
        "--add-scram",
        "SCRAM-SHA-512=[name=tenantq,password=pw-client]",
    ]
