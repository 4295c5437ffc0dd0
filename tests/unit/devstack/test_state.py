"""The state file: owner-only, nodes recorded with the single-server keys beside them, and a
file written before nodes were recorded read as one node of each server."""

from __future__ import annotations

import stat
from pathlib import Path

from tenantq.devstack.kafka_config import KafkaNode
from tenantq.devstack.state import (
    PRIMARY,
    STANDBY,
    PostgresNode,
    kafka_nodes,
    kafka_pids,
    postgres_nodes,
    postgres_pids,
    read_state,
    record_kafka,
    record_postgres,
    write_state,
)


def test_the_state_file_is_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "home" / "state.json"
    write_state(path, {"secrets": {"postgres_password": "x"}})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_state(path) == {"secrets": {"postgres_password": "x"}}
    path.write_text("not json")
    assert read_state(path) == {}


def test_kafka_nodes_are_recorded_with_node_one_in_the_single_broker_keys() -> None:
    nodes = [KafkaNode(1, 21001, 21002), KafkaNode(2, 21003, 21004)]
    state: dict[str, object] = {}
    record_kafka(state, nodes, {1: 100, 2: 200})
    assert kafka_nodes(state) == nodes
    assert kafka_pids(state) == {1: 100, 2: 200}
    assert state["kafka_bootstrap_servers"] == "127.0.0.1:21001,127.0.0.1:21003"
    assert state["kafka_ports"] == [21001, 21002]
    assert state["kafka_pid"] == 100


def test_postgres_nodes_are_recorded_with_the_primary_in_the_single_server_keys() -> None:
    nodes = [PostgresNode("a", 25001, STANDBY, needs_clone=True), PostgresNode("b", 25002, PRIMARY)]
    state: dict[str, object] = {}
    record_postgres(state, nodes, {"b": 300})
    assert postgres_nodes(state) == nodes
    assert postgres_pids(state) == {"b": 300}
    assert (state["postgres_port"], state["postgres_pid"]) == (25002, 300)


def test_a_state_file_of_the_single_server_stack_reads_as_one_node_each() -> None:
    old = {
        "kafka_pid": 11,
        "kafka_ports": [19092, 19093],
        "postgres_pid": 22,
        "postgres_port": 15432,
    }
    assert kafka_nodes(old) == [KafkaNode(1, 19092, 19093)]
    assert kafka_pids(old) == {1: 11}
    assert postgres_nodes(old) == [PostgresNode("a", 15432, PRIMARY)]
    assert postgres_pids(old) == {"a": 22}
    assert kafka_nodes({}) == [] and postgres_nodes({}) == []
